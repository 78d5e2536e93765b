"""Consumer.close() with a bad timeout is refused and leaves the consumer open and running."""

from __future__ import annotations

import socket
import threading

import pytest

from kaflux import Consumer
from kaflux.errors import InvalidArgumentError


def test_a_close_refused_for_its_timeout_leaves_the_consumer_open() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        servers = f"127.0.0.1:{unused.getsockname()[1]}"  # nothing listens there
    consumer = Consumer({"bootstrap.servers": servers, "client.id": "kx-close-refused"})
    network = [t for t in threading.enumerate() if t.name == "kaflux-consumer-network-kx-close-refused"]
    with pytest.raises(InvalidArgumentError):
        consumer.close(timeout=-1)
    assert consumer.assignment() == set()  # still open: no IllegalStateError
    assert network[0].is_alive()
    consumer.close(timeout=1)  # the real close stops the network thread
    network[0].join(5)
    assert not network[0].is_alive()
