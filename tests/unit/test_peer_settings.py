"""The settings of other clients (kaflux.peer_settings): every row is true of the client it names
(librdkafka knows the key, kafka-python's or aiokafka's constructor takes the argument), names a
kaflux key that exists, and passing the key to kaflux raises a ConfigError that gives its advice."""

from __future__ import annotations

import inspect

import pytest

from kaflux.config import AdminConfig, CommonConfig, ConsumerConfig, ProducerConfig, ShareConsumerConfig
from kaflux.errors import ConfigError
from kaflux.peer_settings import (
    AIOKAFKA,
    KAFKA_PYTHON,
    LIBRDKAFKA,
    PEER_SETTINGS,
    PEER_VALUES,
    PeerSetting,
    advice_for,
    value_advice_for,
)

CONFIGS = (ConsumerConfig, ProducerConfig, AdminConfig, ShareConsumerConfig)
ALL_KEYS = {key for cls in CONFIGS for key in set(cls.keys())}
ROWS = list(PEER_SETTINGS.values())


def refusal(cls: type[CommonConfig], key: str, value: object = "1") -> str:
    with pytest.raises(ConfigError) as caught:
        required = {"group.id": "g"} if cls is ShareConsumerConfig else {}
        cls.from_dict({"bootstrap.servers": "127.0.0.1:9092", **required, key: value})
    assert caught.value.key == key
    return str(caught.value)


@pytest.mark.parametrize("row", ROWS, ids=[r.key for r in ROWS])
def test_no_row_shadows_a_kaflux_key_and_each_names_one_that_exists(row: PeerSetting) -> None:
    assert row.key not in ALL_KEYS
    assert row.kaflux_key is None or row.kaflux_key in ALL_KEYS
    assert row.advice


@pytest.mark.parametrize("row", ROWS, ids=[r.key for r in ROWS])
def test_each_client_refuses_the_key_with_the_rows_advice(row: PeerSetting) -> None:
    for cls in CONFIGS:
        message = refusal(cls, row.key)
        assert row.advice in message and row.clients in message, message
        kaflux_key = row.kaflux_key
        if kaflux_key is None:
            assert "no kaflux equivalent" in message
        elif kaflux_key in set(cls.keys()):
            assert f"use {kaflux_key!r}" in message
        else:
            assert f"not for a {cls.CLIENT_KIND}" in message


def test_the_look_alike_guess_is_gone_where_the_table_knows_better() -> None:
    message = refusal(ConsumerConfig, "queued.max.messages.kbytes")
    assert "fetch.buffer.max.bytes" in message and "receive.message.max.bytes" not in message
    message = refusal(ProducerConfig, "message.timeout.ms")
    assert "use 'delivery.timeout.ms'" in message and "session.timeout.ms" not in message


@pytest.mark.parametrize(
    ("key", "dotted"),
    [
        ("group_id", "group.id"),
        ("bootstrap_servers", "bootstrap.servers"),
        ("max_poll_records", "max.poll.records"),
    ],
)
def test_a_keyword_argument_spelling_names_the_dotted_key(key: str, dotted: str) -> None:
    message = refusal(ConsumerConfig, key)
    assert f"use {dotted!r}" in message and "keyword argument" in message


def test_an_unknown_key_nobody_spells_still_gets_the_nearest_guess() -> None:
    assert advice_for("sesion.timeout.ms", "consumer", ConsumerConfig.keys()) is None
    assert "did you mean 'session.timeout.ms'?" in refusal(ConsumerConfig, "sesion.timeout.ms")
    assert refusal(ConsumerConfig, "made.up.setting").endswith("unknown consumer setting")


@pytest.mark.parametrize("pair", list(PEER_VALUES), ids=[f"{k}={v}" for k, v in PEER_VALUES])
def test_librdkafka_value_aliases_name_javas_value(pair: tuple[str, str]) -> None:
    key, value = pair
    message = refusal(ConsumerConfig, key, value)
    assert f"use {PEER_VALUES[pair].kaflux_value!r}" in message
    ConsumerConfig.from_dict({"bootstrap.servers": "h:1", key: PEER_VALUES[pair].kaflux_value})
    assert value_advice_for(key, "earliest") is None and value_advice_for(key, 1) is None


# -- the rows are true of the clients they name ------------------------------------------------

LIBRDKAFKA_ROWS = [r for r in ROWS if r.clients == LIBRDKAFKA]
PYTHON_ROWS = [r for r in ROWS if r.clients != LIBRDKAFKA]
#: values librdkafka takes for keys whose value "1" it refuses
LIBRDKAFKA_VALUES: dict[str, object] = {
    "enable.partition.eof": "true",
    "enable.auto.offset.store": "true",
    "auto.commit.enable": "true",
    "compression.codec": "lz4",
    "request.required.acks": "all",
    "partitioner": "murmur2_random",
    "sasl.mechanisms": "PLAIN",
    "api.version.request": "true",
    "broker.version.fallback": "2.0.0",
    "debug": "broker",
    "on_delivery": lambda err, msg: None,
    "stats_cb": lambda stats: None,
    "error_cb": lambda err: None,
    "logger": __import__("logging").getLogger("peer-settings-test"),
    "log_level": 6,
    "delivery.report.only.error": True,
    "message.max.bytes": 1000000,
    "socket.timeout.ms": 60000,
}


def librdkafka_refusal(key: str) -> str | None:
    """Why confluent-kafka refuses a producer with ``key`` set, or None if it takes it."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    config = {"bootstrap.servers": "127.0.0.1:1", key: LIBRDKAFKA_VALUES.get(key, "1")}
    try:
        confluent_kafka.Producer(config)
    except (confluent_kafka.KafkaException, ValueError, TypeError) as error:
        return str(error)
    return None


def test_the_librdkafka_check_tells_an_unknown_key() -> None:
    assert "No such configuration property" in str(librdkafka_refusal("made.up.setting"))


@pytest.mark.parametrize("row", LIBRDKAFKA_ROWS, ids=[r.key for r in LIBRDKAFKA_ROWS])
def test_librdkafka_knows_the_key(row: PeerSetting) -> None:
    # a value it finds out of range still proves it knows the key
    assert "No such configuration property" not in str(librdkafka_refusal(row.key))


def _constructor_arguments(client: str) -> set[str]:
    if client == KAFKA_PYTHON:
        kafka = pytest.importorskip("kafka")
        return set(kafka.KafkaConsumer.DEFAULT_CONFIG) | set(kafka.KafkaProducer.DEFAULT_CONFIG)
    aiokafka = pytest.importorskip("aiokafka")
    return set(inspect.signature(aiokafka.AIOKafkaConsumer).parameters) | set(
        inspect.signature(aiokafka.AIOKafkaProducer).parameters
    )


@pytest.mark.parametrize("row", PYTHON_ROWS, ids=[r.key for r in PYTHON_ROWS])
def test_the_named_python_clients_take_the_argument(row: PeerSetting) -> None:
    for client in (KAFKA_PYTHON, AIOKAFKA):
        if client in row.clients:
            assert row.key in _constructor_arguments(client), (client, row.key)


@pytest.mark.parametrize(
    ("cls", "key", "says"),
    [
        (ProducerConfig, "group.id", "is a consumer and share consumer setting; a producer does not take it"),
        (AdminConfig, "linger.ms", "is a producer setting; an admin does not take it"),
        (ConsumerConfig, "transactional.id", "is a producer setting; a consumer does not take it"),
        (
            ProducerConfig,
            "group_id",
            "is the keyword-argument spelling of 'group.id', a consumer and share consumer setting; "
            "a producer does not take it",
        ),
    ],
)
def test_another_clients_setting_is_named_as_such(cls: type[CommonConfig], key: str, says: str) -> None:
    assert refusal(cls, key).endswith(says)
