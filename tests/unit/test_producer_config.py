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


# -- KIP-390: compression levels ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("compression.gzip.level", 0),
        ("compression.gzip.level", 10),
        ("compression.gzip.level", -2),
        ("compression.lz4.level", 0),
        ("compression.lz4.level", 18),
        ("compression.zstd.level", 23),
        ("compression.zstd.level", -131073),
    ],
)
def test_compression_levels_outside_javas_ranges_are_refused(key: str, value: int) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ProducerConfig.from_dict({"bootstrap.servers": "x:1", key: value})


def test_the_level_of_the_chosen_codec_is_used_and_the_defaults_are_javas() -> None:
    def level(**settings: object) -> int | None:
        config = {"bootstrap.servers": "x:1", **{k.replace("_", "."): v for k, v in settings.items()}}
        return ProducerConfig.from_dict(config).compression_level

    assert level(compression_type="zstd") == 3
    assert level(compression_type="zstd", compression_zstd_level=-5) == -5
    assert level(compression_type="gzip") is None  # -1: zlib's default
    assert level(compression_type="gzip", compression_gzip_level=1) == 1
    assert level(compression_type="lz4") is None  # 9: the fast compressor, as Java
    assert level(compression_type="lz4", compression_lz4_level=12) == 12
    assert level(compression_type="snappy", compression_zstd_level=7) is None
    assert level(compression_type="none", compression_gzip_level=9) is None


@pytest.mark.parametrize(("codec", "levels"), [(1, (1, 9)), (3, (1, 17)), (4, (-50, 19))])
def test_a_higher_level_compresses_repetitive_data_smaller_and_both_decompress(
    codec: int, levels: tuple[int, int]
) -> None:
    from kaflux.records.compression import compress, decompress

    data = b"".join(b"record %d of a repetitive stream; " % (i % 97) for i in range(5000))
    fast, small = (compress(codec, data, level) for level in levels)
    assert len(small) < len(fast)
    assert decompress(codec, fast) == decompress(codec, small) == data
