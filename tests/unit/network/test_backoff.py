"""ExponentialBackoff and RequestState: growth, cap, jitter, and retry timing."""

from __future__ import annotations

import random

import pytest

from kaflux.network.backoff import ExponentialBackoff, RequestState


def exact(initial: int = 100, maximum: int = 1000) -> ExponentialBackoff:
    return ExponentialBackoff(initial, maximum, jitter=0.0)


def test_backoff_doubles_with_each_attempt() -> None:
    assert [exact().backoff_ms(n) for n in range(4)] == [100, 200, 400, 800]


def test_backoff_stops_growing_at_the_maximum() -> None:
    assert [exact().backoff_ms(n) for n in (4, 5, 10, 1000)] == [1000, 1000, 1000, 1000]


def test_custom_multiplier() -> None:
    backoff = ExponentialBackoff(10, 10_000, multiplier=3.0, jitter=0.0)
    assert [backoff.backoff_ms(n) for n in range(4)] == [10, 30, 90, 270]


@pytest.mark.parametrize(("initial", "maximum"), [(0, 1000), (100, 0)])
def test_zero_initial_or_maximum_means_no_backoff(initial: int, maximum: int) -> None:
    assert ExponentialBackoff(initial, maximum, rng=random.Random(1)).backoff_ms(3) == 0


def test_jitter_stays_within_twenty_percent_of_the_exponential_term() -> None:
    backoff = ExponentialBackoff(100, 100_000, jitter=0.2, rng=random.Random(42))
    for attempts in range(8):
        term = 100 * 2**attempts
        samples = [backoff.backoff_ms(attempts) for _ in range(200)]
        assert min(samples) >= int(term * 0.8)
        assert max(samples) <= int(term * 1.2)
        assert len(set(samples)) > 10, "jitter must actually randomize"


def test_seeded_rng_makes_backoff_reproducible() -> None:
    first = ExponentialBackoff(100, 1000, rng=random.Random(7))
    second = ExponentialBackoff(100, 1000, rng=random.Random(7))
    assert [first.backoff_ms(n) for n in range(10)] == [second.backoff_ms(n) for n in range(10)]


def test_jittered_backoff_never_exceeds_the_maximum() -> None:
    backoff = ExponentialBackoff(100, 1000, jitter=0.2, rng=random.Random(3))
    assert max(backoff.backoff_ms(attempts) for attempts in range(4, 40)) <= 1000


def test_request_state_may_send_at_first() -> None:
    state = RequestState(exact())
    assert state.can_send(0)
    assert state.remaining_backoff_ms(0) == 0


def test_request_state_allows_one_request_in_flight() -> None:
    state = RequestState(exact())
    state.on_send(0)
    assert state.in_flight
    assert not state.can_send(10_000)


def test_retry_waits_the_backoff_counted_from_the_failure() -> None:
    state = RequestState(exact())
    state.on_send(0)
    state.on_failure(500)
    assert not state.can_send(599)
    assert state.remaining_backoff_ms(550) == 50
    assert state.can_send(600)


def test_consecutive_failures_grow_the_backoff() -> None:
    state = RequestState(exact())
    waits = []
    now = 0
    for _ in range(5):
        state.on_send(now)
        state.on_failure(now)
        waits.append(state.remaining_backoff_ms(now))
        now += waits[-1]
    assert waits == [100, 200, 400, 800, 1000]


def test_success_resets_the_backoff() -> None:
    state = RequestState(exact())
    for now in (0, 100, 300):
        state.on_send(now)
        state.on_failure(now)
    state.on_send(700)
    state.on_success()
    assert state.attempts == 0
    assert state.can_send(700)
    state.on_send(700)
    state.on_failure(700)
    assert state.remaining_backoff_ms(700) == 100


def test_reset_forgets_in_flight_and_failures() -> None:
    state = RequestState(exact())
    state.on_send(0)
    state.on_failure(0)
    state.on_send(100)
    state.reset()
    assert state.can_send(100)


def test_the_jittered_backoff_is_drawn_once_at_the_failure() -> None:
    state = RequestState(ExponentialBackoff(100, 1000, jitter=0.5))
    state.on_failure(1_000)
    first = state.remaining_backoff_ms(1_000)
    assert all(state.remaining_backoff_ms(1_000) == first for _ in range(50))
    assert not state.can_send(1_000 + first - 1)
    assert state.can_send(1_000 + first)


def test_postpone_waits_without_counting_a_failure() -> None:
    state = RequestState(exact())
    state.postpone(0, 50)
    assert not state.can_send(49) and state.can_send(50)
    assert state.attempts == 0
