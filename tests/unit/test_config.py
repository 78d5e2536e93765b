"""Configuration parsing: Java's defaults, key and type checks, cross-setting rules."""

from __future__ import annotations

import pytest

from kaflux.config import AdminConfig, ConsumerConfig, ProducerConfig, parse_host_port
from kaflux.errors import ConfigError

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


JAVA_CONSUMER_DEFAULTS = [
    ("max.poll.records", 500),
    ("fetch.max.wait.ms", 500),
    ("fetch.min.bytes", 1),
    ("fetch.max.bytes", 52428800),
    ("max.partition.fetch.bytes", 1048576),
    ("session.timeout.ms", 45000),
    ("heartbeat.interval.ms", 3000),
    ("max.poll.interval.ms", 300000),
    ("auto.offset.reset", "latest"),
    ("request.timeout.ms", 30000),
    ("default.api.timeout.ms", 60000),
    ("retry.backoff.ms", 100),
    ("retry.backoff.max.ms", 1000),
    ("reconnect.backoff.ms", 50),
    ("reconnect.backoff.max.ms", 1000),
    ("enable.auto.commit", True),
    ("auto.commit.interval.ms", 5000),
    ("isolation.level", "read_uncommitted"),
    ("check.crcs", True),
    ("allow.auto.create.topics", True),
    ("exclude.internal.topics", True),
    ("metadata.max.age.ms", 300000),
    ("connections.max.idle.ms", 540000),
    ("send.buffer.bytes", 131072),
    ("receive.buffer.bytes", 65536),
    ("socket.connection.setup.timeout.ms", 10000),
    ("socket.connection.setup.timeout.max.ms", 30000),
    ("group.protocol", "classic"),
    ("group.id", None),
]

JAVA_PRODUCER_DEFAULTS = [
    ("linger.ms", 5),
    ("batch.size", 16384),
    ("acks", "all"),
    ("buffer.memory", 33554432),
    ("max.block.ms", 60000),
    ("max.request.size", 1048576),
    ("delivery.timeout.ms", 120000),
    ("retries", 2147483647),
    ("compression.type", "none"),
    ("request.timeout.ms", 30000),
    ("max.in.flight.requests.per.connection", 5),
    ("send.buffer.bytes", 131072),
    ("receive.buffer.bytes", 32768),
]


@pytest.mark.parametrize(("key", "java_default"), JAVA_CONSUMER_DEFAULTS)
def test_consumer_default_equals_java(key: str, java_default: object) -> None:
    assert ConsumerConfig.from_dict(BOOT).to_dict()[key] == java_default


@pytest.mark.parametrize(("key", "java_default"), JAVA_PRODUCER_DEFAULTS)
def test_producer_default_equals_java(key: str, java_default: object) -> None:
    assert ProducerConfig.from_dict(BOOT).to_dict()[key] == java_default


def test_admin_default_api_timeout_equals_java() -> None:
    assert AdminConfig.from_dict(BOOT).default_api_timeout_ms == 60000


def test_unknown_key_is_rejected_naming_the_key_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_dict({**BOOT, "max.poll.record": 10})
    assert info.value.key == "max.poll.record"
    assert "max.poll.record" in str(info.value)
    assert "did you mean 'max.poll.records'" in str(info.value)


def test_unknown_key_far_from_any_known_key_gets_no_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_dict({**BOOT, "zzzzzz": 1})
    assert info.value.key == "zzzzzz"
    assert "did you mean" not in str(info.value)


def test_producer_key_is_unknown_to_the_consumer() -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_dict({**BOOT, "linger.ms": 5})
    assert info.value.key == "linger.ms"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max.poll.records", "many"),
        ("max.poll.records", 1.5),
        ("max.poll.records", True),
        ("enable.auto.commit", "yes"),
        ("enable.auto.commit", 1),
        ("group.id", 42),
        ("bootstrap.servers", 9092),
        ("bootstrap.servers", ["a:1", 2]),
        ("auto.offset.reset", None),
    ],
)
def test_value_of_the_wrong_type_is_rejected_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_dict({**BOOT, key: value})
    assert info.value.key == key


@pytest.mark.parametrize(
    ("key", "text", "parsed"),
    [
        ("max.poll.records", "42", 42),
        ("max.poll.records", " 7 ", 7),
        ("enable.auto.commit", "false", False),
        ("enable.auto.commit", "TRUE", True),
        ("auto.offset.reset", "EARLIEST", "earliest"),
        ("isolation.level", "read_committed", "read_committed"),
        ("bootstrap.servers", "a:1, b:2,", ["a:1", "b:2"]),
    ],
)
def test_values_given_as_strings_are_parsed(key: str, text: str, parsed: object) -> None:
    config = ConsumerConfig.from_dict({**BOOT, "group.id": "g", key: text})
    assert config.to_dict()[key] == parsed


def test_value_outside_its_range_is_rejected() -> None:
    with pytest.raises(ConfigError, match="at least 1") as info:
        ConsumerConfig.from_dict({**BOOT, "max.poll.records": 0})
    assert info.value.key == "max.poll.records"


def test_value_not_among_the_choices_is_rejected() -> None:
    with pytest.raises(ConfigError, match="earliest, latest, none") as info:
        ConsumerConfig.from_dict({**BOOT, "auto.offset.reset": "smallest"})
    assert info.value.key == "auto.offset.reset"


def test_group_protocol_consumer_is_accepted_with_its_remote_assignor() -> None:
    config = ConsumerConfig.from_dict(
        {**BOOT, "group.id": "g", "group.protocol": "CONSUMER", "group.remote.assignor": "uniform"}
    )
    assert (config.group_protocol, config.group_remote_assignor) == ("consumer", "uniform")


@pytest.mark.parametrize(
    "classic_only",
    [
        {"partition.assignment.strategy": "range"},
        {"session.timeout.ms": 10_000},
        {"heartbeat.interval.ms": 1_000},
        {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000},
    ],
    ids=["assignment-strategy", "session-timeout", "heartbeat-interval", "two-of-them"],
)
def test_classic_only_settings_with_group_protocol_consumer_are_named_in_the_error(
    classic_only: dict[str, object],
) -> None:
    with pytest.raises(ConfigError, match=r"cannot be set when group\.protocol=consumer") as info:
        ConsumerConfig.from_dict({**BOOT, "group.id": "g", "group.protocol": "consumer", **classic_only})
    for key in classic_only:
        assert key in str(info.value)
    assert info.value.key == sorted(classic_only)[0]


def test_group_remote_assignor_with_the_classic_protocol_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"group\.protocol=classic") as info:
        ConsumerConfig.from_dict({**BOOT, "group.id": "g", "group.remote.assignor": "uniform"})
    assert info.value.key == "group.remote.assignor"


def test_explicit_auto_commit_without_group_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_dict({**BOOT, "enable.auto.commit": True})
    assert info.value.key == "enable.auto.commit"


def test_default_auto_commit_without_group_is_silently_off() -> None:
    config = ConsumerConfig.from_dict(BOOT)
    assert config.enable_auto_commit is True
    assert config.auto_commit is False


def test_auto_commit_is_on_with_a_group() -> None:
    assert ConsumerConfig.from_dict({**BOOT, "group.id": "g"}).auto_commit is True


def test_blank_group_id_is_rejected() -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_dict({**BOOT, "group.id": "  "})
    assert info.value.key == "group.id"


def test_heartbeat_interval_must_be_below_session_timeout() -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_dict({**BOOT, "session.timeout.ms": 3000, "heartbeat.interval.ms": 3000})
    assert info.value.key == "heartbeat.interval.ms"


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_dict({})
    assert info.value.key == "bootstrap.servers"


@pytest.mark.parametrize("server", ["localhost", "host:0", "host:70000", ":9092", "a b:1"])
def test_malformed_bootstrap_server_is_rejected(server: str) -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_dict({"bootstrap.servers": server})
    assert info.value.key == "bootstrap.servers"


@pytest.mark.parametrize(
    ("server", "parsed"),
    [("kafka:9092", ("kafka", 9092)), ("[::1]:9093", ("::1", 9093)), (" h:1 ", ("h", 1))],
)
def test_parse_host_port(server: str, parsed: tuple[str, int]) -> None:
    assert parse_host_port(server) == parsed


@pytest.mark.parametrize(
    ("low_key", "high_key"),
    [("retry.backoff.ms", "retry.backoff.max.ms"), ("reconnect.backoff.ms", "reconnect.backoff.max.ms")],
)
def test_backoff_max_below_initial_is_rejected(low_key: str, high_key: str) -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_dict({**BOOT, low_key: 500, high_key: 100})
    assert info.value.key == high_key


def test_config_is_frozen() -> None:
    config = ConsumerConfig.from_dict(BOOT)
    with pytest.raises(AttributeError):
        config.max_poll_records = 1  # type: ignore[misc]


def test_non_mapping_config_is_rejected() -> None:
    with pytest.raises(ConfigError):
        ConsumerConfig.from_dict([("bootstrap.servers", "a:1")])  # type: ignore[arg-type]


def test_keys_lists_every_kafka_key_once() -> None:
    keys = ConsumerConfig.keys()
    assert len(keys) == len(set(keys))
    assert {"bootstrap.servers", "group.id", "max.poll.records"} <= set(keys)


@pytest.mark.parametrize(("acks", "wire"), [("all", -1), ("-1", -1), ("0", 0), ("1", 1)])
def test_producer_acks_wire_value(acks: str, wire: int) -> None:
    assert ProducerConfig.from_dict({**BOOT, "acks": acks}).acks_value == wire


def test_list_default_is_not_shared_between_instances() -> None:
    first = ConsumerConfig.from_dict(BOOT)
    first.partition_assignment_strategy.append("mutated")
    assert "mutated" not in ConsumerConfig.from_dict(BOOT).partition_assignment_strategy


@pytest.mark.parametrize("group", [None, "g"], ids=["without-group", "with-group"])
@pytest.mark.parametrize("strategy", ["bogus", "range,bogus", ""])
def test_consumer_rejects_an_unknown_or_empty_assignment_strategy_with_or_without_a_group(
    group: str | None, strategy: str
) -> None:
    from kaflux import Consumer

    config: dict[str, object] = {**BOOT, "partition.assignment.strategy": strategy}
    if group is not None:
        config["group.id"] = group
    with pytest.raises(ConfigError, match=r"partition\.assignment\.strategy"):
        Consumer(config)


def test_a_delivery_timeout_below_linger_plus_request_timeout_is_refused_naming_both() -> None:
    # (issue 33, defect 7: delivery.timeout.ms=1 was accepted; Java refuses it)
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_dict({**BOOT, "delivery.timeout.ms": 1})
    message = str(info.value)
    assert "delivery.timeout.ms" in message and "linger.ms" in message and "request.timeout.ms" in message
    assert "5 + 30000 = 30005" in message and "got 1" in message
    with pytest.raises(ConfigError, match="1000 \\+ 2000 = 3000"):
        ProducerConfig.from_dict(
            {**BOOT, "linger.ms": 1000, "request.timeout.ms": 2000, "delivery.timeout.ms": 2999}
        )


def test_a_delivery_timeout_equal_to_linger_plus_request_timeout_is_accepted() -> None:
    config = ProducerConfig.from_dict(
        {**BOOT, "linger.ms": 1000, "request.timeout.ms": 2000, "delivery.timeout.ms": 3000}
    )
    assert config.delivery_timeout_ms == 3000


def test_the_default_delivery_timeout_is_raised_to_linger_plus_request_timeout() -> None:
    # as Java: only an explicit value is refused; the default gives way, so a long
    # request.timeout.ms alone is not an error
    config = ProducerConfig.from_dict({**BOOT, "request.timeout.ms": 200_000})
    assert config.delivery_timeout_ms == 200_005


# -- KIP-1106: auto.offset.reset=by_duration ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H", 3_600_000),
        ("P2D", 172_800_000),
        ("PT30M", 1_800_000),
        ("PT1.5S", 1_500),
        ("P1DT2H3M4S", 93_784_000),
    ],
)
def test_by_duration_takes_javas_iso_8601_durations(text: str, ms: int) -> None:
    from kaflux.config import ConsumerConfig

    config = ConsumerConfig.from_dict(
        {"bootstrap.servers": "x:1", "auto.offset.reset": f"by_duration:{text}"}
    )
    assert config.reset_duration_ms == ms
    assert config.auto_offset_reset == f"by_duration:{text.upper()}"


@pytest.mark.parametrize(
    "value", ["by_duration:", "by_duration:1H", "by_duration:-PT1H", "by_duration:PT", "oldest"]
)
def test_a_bad_auto_offset_reset_is_refused_naming_the_key(value: str) -> None:
    from kaflux.config import ConsumerConfig

    with pytest.raises(ConfigError, match=r"auto\.offset\.reset"):
        ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "auto.offset.reset": value})


def test_the_plain_reset_strategies_stay_and_are_case_insensitive() -> None:
    from kaflux.config import ConsumerConfig

    config = ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "auto.offset.reset": "Earliest"})
    assert config.auto_offset_reset == "earliest" and config.reset_duration_ms is None
