"""ChurnSchedule: the actions a churn round takes (support.scenarios)."""

from __future__ import annotations

import random
import time

import pytest

from support.scenarios import ChurnSchedule


def test_given_actions_come_in_order_then_the_round_ends() -> None:
    schedule = ChurnSchedule(
        ["kill", "outage", "join"], None, random.Random(1), started=0.0, outage=True, max_members=4
    )
    assert [schedule.next(3) for _ in range(4)] == ["kill", "outage", "join", None]


def test_random_actions_hold_a_join_a_leave_and_a_kill_in_every_run_of_three() -> None:
    now = time.monotonic()
    for seed in range(20):
        schedule = ChurnSchedule(None, 60.0, random.Random(seed), started=now, outage=False, max_members=5)
        assert sorted(schedule.next(3) or "" for _ in range(3)) == ["join", "kill", "leave"]


def test_random_actions_respect_the_member_count() -> None:
    now = time.monotonic()
    for seed in range(20):
        few = ChurnSchedule(None, 60.0, random.Random(seed), started=now, outage=False, max_members=5)
        assert few.next(1) == "join"  # one member left: never leave or kill it
        full = ChurnSchedule(None, 60.0, random.Random(seed), started=now, outage=False, max_members=3)
        assert full.next(3) in ("leave", "kill")  # at max_members: no join


def test_random_actions_end_when_the_duration_has_passed() -> None:
    schedule = ChurnSchedule(
        None, 5.0, random.Random(1), started=time.monotonic() - 5.0, outage=True, max_members=4
    )
    assert schedule.next(3) is None


def test_a_schedule_needs_actions_or_a_duration() -> None:
    with pytest.raises(ValueError, match="actions or duration"):
        ChurnSchedule(None, None, random.Random(1), started=0.0, outage=False, max_members=4)
