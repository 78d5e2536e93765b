"""Pure offset arithmetic of the kaflux source: JSON shape, admission control, range planning, splitting,
and the Arrow schema ``read()`` must produce."""

from __future__ import annotations

import itertools
import json

from hypothesis import given
from hypothesis import strategies as st

from kaflux import TopicPartition
from pyspark_kaflux.offsets import OffsetRange, from_json, plan_ranges, rate_limit, split_ranges, to_json
from pyspark_kaflux.schema import arrow_schema, kafka_schema

A0, A1, A2, B0 = (
    TopicPartition("a", 0),
    TopicPartition("a", 1),
    TopicPartition("a", 2),
    TopicPartition("b", 0),
)


def test_json_is_sparks_checkpoint_shape_and_deterministic() -> None:
    offsets = {B0: 5, TopicPartition("a", 10): 7, A2: 3, A0: 1}
    assert json.dumps(to_json(offsets)) == '{"a": {"0": 1, "2": 3, "10": 7}, "b": {"0": 5}}'
    assert json.dumps(to_json(dict(reversed(list(offsets.items()))))) == json.dumps(to_json(offsets))
    assert from_json(json.loads(json.dumps(to_json(offsets)))) == offsets
    assert from_json({}) == {} and from_json(None) == {}


def test_rate_limit_is_proportional_to_backlog() -> None:
    start = {A0: 0, A1: 100, A2: 50}
    latest = {A0: 1000, A1: 200, A2: 50}  # backlogs 1000, 100, 0
    end = rate_limit(110, start, latest)
    assert end[A2] == 50
    assert end[A0] - start[A0] == 100 and end[A1] - start[A1] == 10
    assert rate_limit(5000, start, latest) == latest


def test_rate_limit_does_not_starve_small_partitions_and_never_exceeds() -> None:
    start = {A0: 0, A1: 0, A2: 0}
    latest = {A0: 1_000_000, A1: 3, A2: 1}
    end = rate_limit(100, start, latest)
    assert end[A1] >= 1 and end[A2] == 1
    assert sum(end[tp] - start[tp] for tp in start) == 100


def test_rate_limit_counts_new_partitions_from_their_earliest_offset() -> None:
    end = rate_limit(10, {A0: 0}, {A0: 100, B0: 120}, new_start={B0: 100})
    assert end == {A0: 8, B0: 102}  # backlogs 100 and 20


@given(
    limit=st.integers(1, 500),
    sizes=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 2000)), min_size=1, max_size=8),
)
def test_rate_limit_properties(limit: int, sizes: list[tuple[int, int]]) -> None:
    start = {TopicPartition("t", i): s for i, (s, _) in enumerate(sizes)}
    latest = {TopicPartition("t", i): s + n for i, (s, n) in enumerate(sizes)}
    end = rate_limit(limit, start, latest)
    taken = [end[tp] - start[tp] for tp in start]
    assert all(0 <= t <= latest[tp] - start[tp] for t, tp in zip(taken, start, strict=True))
    assert sum(taken) == min(limit, sum(latest[tp] - start[tp] for tp in start))
    assert json.dumps(to_json(end)) == json.dumps(to_json(rate_limit(limit, dict(start), dict(latest))))


def test_plan_ranges_reports_data_loss() -> None:
    plan = plan_ranges({A0: 5, A1: 10, B0: 3}, {A0: 9, A1: 4, A2: 7, TopicPartition("c", 0): 2}, {A2: 2})
    assert plan.ranges == [OffsetRange("a", 0, 5, 9), OffsetRange("a", 2, 2, 7)]
    text = " | ".join(plan.data_loss)
    assert "[b-0] are gone" in text
    assert "a-1's offset was changed from 10 to 4" in text
    assert "Added partition a-2 starts from 2 instead of 0" in text
    assert "Cannot find earliest offsets of c-0" in text
    clean = plan_ranges({A0: 5}, {A0: 5, A1: 3}, {A1: 0})
    assert clean.ranges == [OffsetRange("a", 1, 0, 3)] and clean.data_loss == []


def test_split_ranges_like_spark() -> None:
    ranges = [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 0, 10), OffsetRange("a", 2, 5, 5)]
    assert split_ranges(ranges) == ranges[:2]
    assert split_ranges(ranges, min_partitions=2) == ranges[:2]
    pieces = split_ranges(ranges, min_partitions=5)
    assert len(pieces) == 6  # ceil(10 / 20 * 5) = 3 pieces each, as Spark computes it
    assert pieces[:3] == [OffsetRange("a", 0, 0, 3), OffsetRange("a", 0, 3, 6), OffsetRange("a", 0, 6, 10)]
    big_and_small = split_ranges([OffsetRange("a", 0, 0, 1000), OffsetRange("a", 1, 0, 1)], min_partitions=4)
    assert [(r.partition, r.size) for r in big_and_small] == [(0, 333), (0, 333), (0, 334), (1, 1)]
    capped = split_ranges([OffsetRange("a", 0, 10, 35)], max_records_per_partition=10)
    assert [(r.start, r.end) for r in capped] == [(10, 18), (18, 26), (26, 35)]


@given(
    sizes=st.lists(st.integers(0, 5000), min_size=1, max_size=6),
    min_partitions=st.none() | st.integers(1, 40),
    max_records=st.none() | st.integers(1, 3000),
)
def test_split_ranges_covers_every_offset_once(
    sizes: list[int], min_partitions: int | None, max_records: int | None
) -> None:
    ranges = [OffsetRange("t", i, 100, 100 + n) for i, n in enumerate(sizes)]
    pieces = split_ranges(ranges, min_partitions, max_records)
    for r in ranges:
        mine = [p for p in pieces if p.partition == r.partition]
        assert sum(p.size for p in mine) == r.size
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
        if mine:
            assert (mine[0].start, mine[-1].end) == (r.start, r.end)
    if max_records is not None:
        assert all(p.size <= max_records for p in pieces)
    if min_partitions is not None and sum(sizes) >= min_partitions:
        assert len(pieces) >= min_partitions


def test_arrow_schema_is_what_spark_expects() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    for include_headers in (False, True):
        expected = to_arrow_schema(kafka_schema(include_headers), timezone="UTC")
        assert arrow_schema(include_headers).equals(expected)
    assert kafka_schema(True).simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
