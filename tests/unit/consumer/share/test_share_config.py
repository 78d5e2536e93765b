"""``kaflux.ShareConsumer``'s configuration: group.id required, the two acknowledgement modes,
consumer-group settings refused by name. No broker: the constructor checks before connecting."""

from __future__ import annotations

import pytest

from kaflux import ShareConsumer
from kaflux.config import ShareConsumerConfig
from kaflux.errors import ConfigError

BASE = {"bootstrap.servers": "127.0.0.1:9", "group.id": "jobs"}


def test_defaults() -> None:
    config = ShareConsumerConfig.from_dict(BASE)
    assert (config.share_acknowledgement_mode, config.max_poll_records, config.fetch_max_wait_ms) == (
        "implicit",
        500,
        500,
    )


@pytest.mark.parametrize("missing", [{}, {"group.id": ""}, {"group.id": "  "}])
def test_group_id_is_required(missing: dict[str, str]) -> None:
    config = {"bootstrap.servers": "127.0.0.1:9", **missing}
    with pytest.raises(ConfigError, match="is required for a share consumer") as caught:
        ShareConsumer(config)
    assert caught.value.key == "group.id"


@pytest.mark.parametrize(
    "key",
    [
        "group.protocol",
        "partition.assignment.strategy",
        "enable.auto.commit",
        "auto.offset.reset",
        "group.instance.id",
        "session.timeout.ms",
        "isolation.level",
    ],
)
def test_consumer_group_settings_are_refused_by_name(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"'{key}'.*belongs to consumer groups") as caught:
        ShareConsumer({**BASE, key: "x"})
    assert caught.value.key == key
    assert "kaflux.Consumer" in str(caught.value)


def test_an_unknown_key_is_refused_with_the_nearest_known_one() -> None:
    with pytest.raises(
        ConfigError, match=r"'share.acknowledgment.mode'.*did you mean 'share.acknowledgement.mode'"
    ):
        ShareConsumer({**BASE, "share.acknowledgment.mode": "explicit"})


def test_the_acknowledgement_mode_is_implicit_or_explicit() -> None:
    assert (
        ShareConsumerConfig.from_dict(
            {**BASE, "share.acknowledgement.mode": "explicit"}
        ).share_acknowledgement_mode
        == "explicit"
    )
    with pytest.raises(ConfigError, match=r"'share.acknowledgement.mode'.*implicit, explicit"):
        ShareConsumer({**BASE, "share.acknowledgement.mode": "manual"})


def test_the_acquire_mode_is_batch_optimized_or_record_limit() -> None:
    assert ShareConsumerConfig.from_dict(BASE).share_acquire_mode == "batch_optimized"  # Java's default
    config = ShareConsumerConfig.from_dict({**BASE, "share.acquire.mode": "record_limit"})
    assert config.share_acquire_mode == "record_limit"
    with pytest.raises(ConfigError) as caught:
        ShareConsumerConfig.from_dict({**BASE, "share.acquire.mode": "strict"})
    assert caught.value.key == "share.acquire.mode"
