"""Producer configuration: idempotence on by default, Java's rules when settings conflict with it,
transactions needing it, and transaction.timeout.ms."""

from __future__ import annotations

import pytest

from kaflux.config import ProducerConfig
from kaflux.errors import ConfigError

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def test_idempotence_is_on_by_default_with_javas_transaction_timeout() -> None:
    config = ProducerConfig.from_dict(BOOT)
    assert config.enable_idempotence is True
    assert config.transactional_id is None
    assert config.transaction_timeout_ms == 60_000
    assert config.acks_value == -1


@pytest.mark.parametrize(
    ("key", "value"),
    [("acks", "1"), ("acks", "0"), ("max.in.flight.requests.per.connection", 6), ("retries", 0)],
)
def test_a_conflicting_setting_turns_default_idempotence_off(key: str, value: object) -> None:
    assert ProducerConfig.from_dict({**BOOT, key: value}).enable_idempotence is False


@pytest.mark.parametrize(
    ("key", "value"),
    [("acks", "1"), ("max.in.flight.requests.per.connection", 6), ("retries", 0)],
)
def test_a_conflicting_setting_with_explicit_idempotence_is_a_config_error(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match="idempotence") as info:
        ProducerConfig.from_dict({**BOOT, key: value, "enable.idempotence": "true"})
    assert info.value.key == key


def test_five_in_flight_requests_keep_idempotence() -> None:
    config = ProducerConfig.from_dict({**BOOT, "max.in.flight.requests.per.connection": 5})
    assert config.enable_idempotence is True


def test_transactions_need_idempotence() -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_dict({**BOOT, "transactional.id": "t", "enable.idempotence": False})
    assert info.value.key == "enable.idempotence"
    with pytest.raises(ConfigError, match=r"transactional\.id is set") as conflict:
        ProducerConfig.from_dict({**BOOT, "transactional.id": "t", "acks": "1"})
    assert conflict.value.key == "acks"


def test_transactional_id_and_timeout_are_read() -> None:
    config = ProducerConfig.from_dict(
        {**BOOT, "transactional.id": "billing-1", "transaction.timeout.ms": "15000"}
    )
    assert (config.transactional_id, config.transaction_timeout_ms, config.enable_idempotence) == (
        "billing-1",
        15_000,
        True,
    )


@pytest.mark.parametrize(("key", "value"), [("transactional.id", " "), ("transaction.timeout.ms", 0)])
def test_bad_transaction_settings_are_refused(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_dict({**BOOT, key: value})
    assert info.value.key == key
