"""StdoutSink (issue 32, point 1): records' bytes written whole or counted as not written; a stop
request ends the write at the next record boundary; EPIPE ends it with the count of whole
records. On a real pipe with a 4 kB buffer, no broker. [test]"""

from __future__ import annotations

import fcntl
import os
import struct
import termios
import threading
import time
from collections.abc import Iterator

import pytest

from kaflux.cli.output import StdoutSink

F_SETPIPE_SZ = 1031  # Linux
CHUNK = 3000


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, F_SETPIPE_SZ, 4096)  # the smallest: one page
    yield read_end, write_end
    for fd in (read_end, write_end):
        try:
            os.close(fd)
        except OSError:
            pass  # closed by the test


def queued(read_end: int) -> int:
    """How many bytes wait in the pipe (FIONREAD)."""
    return int(struct.unpack("i", fcntl.ioctl(read_end, termios.FIONREAD, b"\0\0\0\0"))[0])


def drain_later(read_end: int, got: bytearray, start_after: threading.Event) -> threading.Thread:
    def run() -> None:
        start_after.wait(10)
        while chunk := os.read(read_end, 65536):
            got.extend(chunk)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_stop_during_a_short_write_finishes_that_record_and_no_more(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    # A blocking pipe write returns short only when a signal lands; a non-blocking one returns
    # short when the pipe fills, which stands in for it here (and the sink then waits on it).
    os.set_blocking(write_end, False)
    chunks = [bytes([65 + i]) * CHUNK for i in range(3)]
    asked: list[bool] = []
    full = threading.Event()

    def stop() -> bool:
        # First asked before any byte: go on. Next asked after the first short write (the pipe
        # held 4096 bytes: record 1 and part of record 2): stop.
        asked.append(True)
        if len(asked) > 1:
            full.set()  # now let the reader drain
        return len(asked) > 1

    got = bytearray()
    reader = drain_later(read_end, got, full)
    written = StdoutSink(stop=stop, fd=write_end).write(chunks)
    os.close(write_end)
    reader.join(10)
    assert written == 2
    assert bytes(got) == chunks[0] + chunks[1]  # the second record whole, the third not begun


def test_without_a_stop_every_record_gets_through_a_slow_reader(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    chunks = [bytes([65 + i]) * CHUNK for i in range(5)]
    go = threading.Event()
    go.set()
    got = bytearray()
    reader = drain_later(read_end, got, go)
    assert StdoutSink(fd=write_end).write(chunks) == 5
    os.close(write_end)
    reader.join(10)
    assert bytes(got) == b"".join(chunks)


def test_a_closed_reader_ends_the_write_with_the_whole_records_counted(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    sink = StdoutSink(fd=write_end)
    assert not sink.reader_gone()
    os.close(read_end)
    assert sink.reader_gone()  # known without writing
    assert sink.write([b"x\n"]) == 0 and sink.closed


def test_epipe_mid_write_counts_only_what_went_in_whole(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    chunks = [bytes([65 + i]) * CHUNK for i in range(3)]

    def close_reader_when_full() -> None:
        # the writer is blocked on the full pipe once it holds a page (a fixed sleep was not
        # always enough on a loaded machine: a writer not yet started met EPIPE at once)
        deadline = time.monotonic() + 10
        while queued(read_end) < 4096 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.close(read_end)

    closer = threading.Thread(target=close_reader_when_full, daemon=True)
    closer.start()
    sink = StdoutSink(fd=write_end)
    assert sink.write(chunks) == 1  # 4096 bytes went in: the first record and part of the second
    assert sink.closed
    closer.join(10)
