"""``kaflux.CloseOptions`` and the arguments of ``Consumer.close()`` (KIP-1092): what is taken,
what is refused (with a clear error, the consumer left open), sync and asyncio alike."""

from __future__ import annotations

import asyncio
import math
import socket
import threading

import pytest

import kaflux
from kaflux import CloseOptions, Consumer, GroupMembershipOperation
from kaflux.aio import AsyncConsumer
from kaflux.consumer.close_options import resolve_close_arguments
from kaflux.errors import InvalidArgumentError

LEAVE = GroupMembershipOperation.LEAVE_GROUP
REMAIN = GroupMembershipOperation.REMAIN_IN_GROUP
DEFAULT = GroupMembershipOperation.DEFAULT


def test_close_options_are_exported_from_kaflux() -> None:
    assert kaflux.CloseOptions is CloseOptions and "CloseOptions" in kaflux.__all__
    assert kaflux.GroupMembershipOperation is GroupMembershipOperation
    assert "GroupMembershipOperation" in kaflux.__all__
    assert CloseOptions() == CloseOptions(None, DEFAULT)


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((), {}, (30.0, DEFAULT)),
        ((5,), {}, (5.0, DEFAULT)),
        ((2.5,), {}, (2.5, DEFAULT)),
        ((), {"timeout": 7}, (7.0, DEFAULT)),
        ((), {"group_membership": LEAVE}, (30.0, LEAVE)),
        ((), {"timeout": 1, "group_membership": REMAIN}, (1.0, REMAIN)),
        ((3,), {"group_membership": REMAIN}, (3.0, REMAIN)),
        ((CloseOptions(),), {}, (30.0, DEFAULT)),
        ((CloseOptions(timeout=4, group_membership=LEAVE),), {}, (4.0, LEAVE)),
        ((CloseOptions(group_membership=REMAIN),), {}, (30.0, REMAIN)),
    ],
)
def test_close_takes_options_a_timeout_or_keywords(
    args: tuple[object, ...], kwargs: dict[str, object], expected: tuple[float, GroupMembershipOperation]
) -> None:
    options = args[0] if args else None
    assert resolve_close_arguments(options, kwargs.get("timeout"), kwargs.get("group_membership")) == expected


@pytest.mark.parametrize(
    ("options", "timeout", "membership", "message"),
    [
        ("LEAVE_GROUP", None, None, "takes a kaflux.CloseOptions or a timeout in seconds, got str"),
        (True, None, None, "got bool"),
        ({"timeout": 1}, None, None, "got dict"),
        (LEAVE, None, None, "close(group_membership=GroupMembershipOperation.LEAVE_GROUP)"),
        (None, None, "leave_group", "group_membership must be a kaflux.GroupMembershipOperation"),
        (None, "5", None, "timeout must be a number of seconds"),
        (None, -1, None, "must not be negative"),
        (CloseOptions(), 5, None, "either a CloseOptions or the timeout= and group_membership= keywords"),
        (CloseOptions(), None, LEAVE, "not both"),
        (5, 6, None, "the timeout twice"),
    ],
)
def test_close_refuses_wrong_arguments_with_a_clear_error(
    options: object, timeout: object, membership: object, message: str
) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        resolve_close_arguments(options, timeout, membership)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"group_membership": "LEAVE_GROUP"}, "group_membership must be a kaflux.GroupMembershipOperation"),
        ({"group_membership": None}, "group_membership must be"),
        ({"timeout": -1.0}, "CloseOptions.timeout must not be negative"),
        ({"timeout": math.nan}, "CloseOptions.timeout must be a number of seconds, got NaN"),
        ({"timeout": "10"}, "CloseOptions.timeout must be a number of seconds"),
    ],
)
def test_close_options_are_checked_when_made(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        CloseOptions(**kwargs)  # type: ignore[arg-type]


def _unreachable() -> str:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{unused.getsockname()[1]}"  # nothing listens there


def test_a_close_refused_for_its_options_leaves_the_consumer_open() -> None:
    consumer = Consumer({"bootstrap.servers": _unreachable(), "client.id": "kx-closeopt-bad"})
    network = [t for t in threading.enumerate() if t.name == "kaflux-consumer-network-kx-closeopt-bad"]
    with pytest.raises(InvalidArgumentError, match="got str"):
        consumer.close("LEAVE_GROUP")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="not both"):
        consumer.close(CloseOptions(), group_membership=LEAVE)
    assert consumer.assignment() == set()  # still open: no IllegalStateError
    assert network[0].is_alive()
    consumer.close(CloseOptions(timeout=1, group_membership=LEAVE))  # without a group: just closes
    network[0].join(5)
    assert not network[0].is_alive()
    consumer.close(CloseOptions(group_membership=REMAIN))  # idempotent


def test_an_async_close_refused_for_its_options_leaves_the_consumer_open() -> None:
    async def main() -> None:
        consumer = AsyncConsumer({"bootstrap.servers": _unreachable(), "client.id": "kx-aclose-refused"})
        with pytest.raises(InvalidArgumentError, match="group_membership must be"):
            await consumer.close(group_membership="REMAIN_IN_GROUP")  # type: ignore[arg-type]
        assert consumer.assignment() == set()  # still open: no IllegalStateError
        await consumer.close(CloseOptions(timeout=1, group_membership=REMAIN))

    asyncio.run(main())
