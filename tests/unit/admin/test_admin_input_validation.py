"""create_topics() refuses a topic name every broker refuses before sending anything (issue 24,
D4). No broker runs here: a request would wait for a connection instead."""

from __future__ import annotations

import time

import pytest

from kaflux import AdminClient
from kaflux.admin.client import NewTopic
from kaflux.errors import InvalidTopicError


@pytest.mark.parametrize("name", ["", "bad topic!", "..", "y" * 250])
def test_create_topics_refuses_an_illegal_name_before_any_request(name: str) -> None:
    with AdminClient({"bootstrap.servers": "127.0.0.1:9"}) as admin:
        start = time.monotonic()
        with pytest.raises(InvalidTopicError, match="topic name"):
            admin.create_topics([NewTopic(name)], timeout=30)
        with pytest.raises(InvalidTopicError, match="topic name"):
            admin.create_topics(["fine", name], timeout=30)
        assert time.monotonic() - start < 5


def test_create_topics_refuses_what_is_not_a_topic() -> None:
    with (
        AdminClient({"bootstrap.servers": "127.0.0.1:9"}) as admin,
        pytest.raises(TypeError, match="NewTopic"),
    ):
        admin.create_topics([5], timeout=30)  # type: ignore[list-item]
