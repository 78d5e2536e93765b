"""``acks`` given as an int, as Java's and librdkafka's users write it (issue 18)."""

from __future__ import annotations

import pytest

from kaflux.config import ProducerConfig
from kaflux.errors import ConfigError


@pytest.mark.parametrize(("given", "wire"), [(1, 1), (0, 0), (-1, -1), ("1", 1), ("all", -1)])
def test_acks_as_an_int_or_a_string(given: object, wire: int) -> None:
    config = ProducerConfig.from_dict(
        {"bootstrap.servers": "b:9092", "acks": given, "enable.idempotence": False}
    )
    assert config.acks_value == wire


@pytest.mark.parametrize("bad", [2, True, 1.0])
def test_other_values_are_still_refused_by_name(bad: object) -> None:
    with pytest.raises(ConfigError, match="acks"):
        ProducerConfig.from_dict({"bootstrap.servers": "b:9092", "acks": bad, "enable.idempotence": False})
