"""Range and round-robin: Java's documented results and member ordering rules."""

from __future__ import annotations

from kaflux.consumer.assignors import Assignment, RangeAssignor, RebalanceProtocol, RoundRobinAssignor
from kaflux.structs import TopicPartition

from support.assignors_testutil import as_sets, check_valid, member, tps

# --- range ----------------------------------------------------------------------------------------------


def test_range_java_documented_example() -> None:
    # RangeAssignor javadoc: two consumers, two topics with three partitions each.
    members = {"C0": member("C0", ["t0", "t1"]), "C1": member("C1", ["t0", "t1"])}
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, members)
    assert as_sets(result) == {"C0": tps("t0p0", "t0p1", "t1p0", "t1p1"), "C1": tps("t0p2", "t1p2")}
    assert result["C0"].partitions == tuple(sorted(tps("t0p0", "t0p1", "t1p0", "t1p1")))


def test_range_name_and_protocol() -> None:
    assert RangeAssignor.name == "range"
    assert RangeAssignor.supported_protocols == (RebalanceProtocol.EAGER,)


def test_range_contiguous_ranges_with_extra_partitions_first() -> None:
    members = {m: member(m, ["t"]) for m in ("c", "a", "b")}
    assert as_sets(RangeAssignor().assign({"t": 8}, members)) == {
        "a": tps("tp0", "tp1", "tp2"),
        "b": tps("tp3", "tp4", "tp5"),
        "c": tps("tp6", "tp7"),
    }


def test_range_per_topic_only_subscribed_members() -> None:
    members = {"a": member("a", ["x"]), "b": member("b", ["x", "y"]), "c": member("c", ["y"])}
    result = RangeAssignor().assign({"x": 3, "y": 3}, members)
    check_valid({"x": 3, "y": 3}, members, result)
    assert as_sets(result) == {
        "a": tps("xp0", "xp1"),
        "b": tps("xp2", "yp0", "yp1"),
        "c": tps("yp2"),
    }


def test_range_more_members_than_partitions_and_missing_topics() -> None:
    members = {m: member(m, ["t", "gone"]) for m in ("m1", "m2", "m3")}
    result = RangeAssignor().assign({"t": 2}, members)
    assert result == {
        "m1": Assignment((TopicPartition("t", 0),)),
        "m2": Assignment((TopicPartition("t", 1),)),
        "m3": Assignment(()),
    }


def test_range_empty_topic_and_unsubscribed_member() -> None:
    members = {"a": member("a", ["t"]), "b": member("b", [])}
    assert RangeAssignor().assign({"t": 0}, members) == {"a": Assignment(()), "b": Assignment(())}


def test_range_static_members_sort_by_instance_id_first() -> None:
    # KIP-345: static members come first, ordered by group.instance.id; then dynamic ones by member id.
    members = {
        "aaa": member("aaa", ["t"]),
        "zzz-1": member("zzz-1", ["t"], instance_id="instance-b"),
        "yyy-2": member("yyy-2", ["t"], instance_id="instance-a"),
    }
    result = RangeAssignor().assign({"t": 5}, members)
    assert as_sets(result) == {
        "yyy-2": tps("tp0", "tp1"),
        "zzz-1": tps("tp2", "tp3"),
        "aaa": tps("tp4"),
    }


def test_range_orders_member_ids_like_java_strings() -> None:
    # Java compares UTF-16 code units: U+1F600 (a surrogate pair, D83D DE00) sorts before U+FFFD.
    emoji, replacement = "\U0001f600", "\ufffd"
    members = {emoji: member(emoji, ["t"]), replacement: member(replacement, ["t"])}
    result = RangeAssignor().assign({"t": 2}, members)
    assert result[emoji].partitions == (TopicPartition("t", 0),)
    assert result[replacement].partitions == (TopicPartition("t", 1),)


def test_range_duplicate_topics_in_subscription_count_once() -> None:
    members = {"a": member("a", ["t", "t"]), "b": member("b", ["t"])}
    assert as_sets(RangeAssignor().assign({"t": 2}, members)) == {"a": tps("tp0"), "b": tps("tp1")}


# --- round robin ----------------------------------------------------------------------------------------


def test_roundrobin_java_documented_example() -> None:
    members = {"C0": member("C0", ["t0", "t1"]), "C1": member("C1", ["t0", "t1"])}
    result = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, members)
    assert as_sets(result) == {"C0": tps("t0p0", "t0p2", "t1p1"), "C1": tps("t0p1", "t1p0", "t1p2")}


def test_roundrobin_java_documented_example_with_different_subscriptions() -> None:
    # RoundRobinAssignor javadoc: C0 [t0], C1 [t0, t1], C2 [t0, t1, t2]; t0, t1, t2 have 1, 2, 3 partitions.
    members = {
        "C0": member("C0", ["t0"]),
        "C1": member("C1", ["t0", "t1"]),
        "C2": member("C2", ["t0", "t1", "t2"]),
    }
    result = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, members)
    assert as_sets(result) == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0"),
        "C2": tps("t1p1", "t2p0", "t2p1", "t2p2"),
    }


def test_roundrobin_name_and_protocol() -> None:
    assert RoundRobinAssignor.name == "roundrobin"
    assert RoundRobinAssignor.supported_protocols == (RebalanceProtocol.EAGER,)


def test_roundrobin_deals_across_topics_continuing_the_ring() -> None:
    members = {m: member(m, ["a", "b"]) for m in ("m0", "m1", "m2")}
    result = RoundRobinAssignor().assign({"a": 2, "b": 4}, members)
    assert as_sets(result) == {
        "m0": tps("ap0", "bp1"),
        "m1": tps("ap1", "bp2"),
        "m2": tps("bp0", "bp3"),
    }


def test_roundrobin_static_members_first_and_missing_topics_skipped() -> None:
    members = {
        "a": member("a", ["t", "unknown"]),
        "b": member("b", ["t"], instance_id="static-1"),
        "c": member("c", ["unknown"]),
    }
    result = RoundRobinAssignor().assign({"t": 3}, members)
    assert as_sets(result) == {"b": tps("tp0", "tp2"), "a": tps("tp1"), "c": set()}


def test_roundrobin_topics_in_java_string_order() -> None:
    # Sorting topics by Python code points would put "\ufffd" first; Java puts the emoji first.
    t_emoji, t_repl = "\U0001f600", "\ufffd"
    members = {m: member(m, [t_emoji, t_repl]) for m in ("m0", "m1")}
    result = RoundRobinAssignor().assign({t_emoji: 1, t_repl: 1}, members)
    assert result["m0"].partitions == (TopicPartition(t_emoji, 0),)
    assert result["m1"].partitions == (TopicPartition(t_repl, 0),)


def test_no_members_gives_an_empty_result() -> None:
    assert RangeAssignor().assign({"t": 3}, {}) == {}
    assert RoundRobinAssignor().assign({"t": 3}, {}) == {}


def test_results_do_not_depend_on_member_mapping_order() -> None:
    members = {m: member(m, ["a", "b"] if m != "m2" else ["b"]) for m in ("m3", "m0", "m2", "m1")}
    reordered = dict(sorted(members.items()))
    for assignor in (RangeAssignor(), RoundRobinAssignor()):
        assert assignor.assign({"a": 5, "b": 7}, members) == assignor.assign({"a": 5, "b": 7}, reordered)
