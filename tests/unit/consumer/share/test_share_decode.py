"""Acquired records out of ShareFetch data, on both record kernels: delivery counts, ranges
inside and across batches, gaps, control batches, and data past the acquired ranges."""

from __future__ import annotations

import pytest

from kaflux.consumer.share.decode import acquired_records
from kaflux.records import CONTROL_COMMIT, BatchBuilder, build_control_batch
from kaflux.records.interface import RecordDecoder

from support.record_kernels import KERNELS, kernel_named


@pytest.fixture(params=KERNELS)
def kernel(request: pytest.FixtureRequest) -> RecordDecoder:
    return kernel_named(request.param)


def _batch(base: int, count: int) -> bytes:
    builder = BatchBuilder(base_offset=base)
    for i in range(count):
        builder.append(1_700_000_000_000, None, b"v%d" % (base + i))
    return builder.build()


def _got(
    kernel: RecordDecoder, data: bytes, acquired: list[tuple[int, int, int]]
) -> list[tuple[int, int | None]]:
    records = acquired_records(kernel, memoryview(data), "jobs", 0, acquired)
    assert all(r.value == b"v%d" % r.offset for r in records)
    return [(r.offset, r.delivery_count) for r in records]


def test_one_range_over_the_whole_batch(kernel: RecordDecoder) -> None:
    assert _got(kernel, _batch(0, 4), [(0, 3, 1)]) == [(0, 1), (1, 1), (2, 1), (3, 1)]


def test_a_range_inside_a_longer_batch_takes_only_its_records(kernel: RecordDecoder) -> None:
    assert _got(kernel, _batch(0, 10), [(3, 5, 2)]) == [(3, 2), (4, 2), (5, 2)]


def test_two_ranges_in_one_batch_with_their_own_counts(kernel: RecordDecoder) -> None:
    data = _batch(0, 10)
    assert _got(kernel, data, [(5, 7, 1), (0, 2, 3)]) == [(0, 3), (1, 3), (2, 3), (5, 1), (6, 1), (7, 1)]


def test_ranges_across_batches_and_data_past_the_last_range(kernel: RecordDecoder) -> None:
    data = _batch(0, 3) + _batch(3, 3) + _batch(6, 3)
    assert _got(kernel, data, [(1, 4, 1), (5, 5, 4)]) == [(1, 1), (2, 1), (3, 1), (4, 1), (5, 4)]


def test_control_batches_are_skipped_and_their_offsets_left_as_gaps(kernel: RecordDecoder) -> None:
    control = build_control_batch(
        CONTROL_COMMIT, producer_id=7, producer_epoch=0, base_offset=2, timestamp_ms=1
    )
    data = _batch(0, 2) + control + _batch(3, 2)
    assert _got(kernel, data, [(0, 4, 1)]) == [(0, 1), (1, 1), (3, 1), (4, 1)]


def test_no_data_or_no_ranges(kernel: RecordDecoder) -> None:
    assert acquired_records(kernel, None, "jobs", 0, [(0, 1, 1)]) == []
    assert acquired_records(kernel, memoryview(_batch(0, 2)), "jobs", 0, []) == []
