"""No secret value appears in any configuration error, whatever the type it was given as
(issue 24, D3). Sweeps every ``secret`` setting of every client (consumer, producer, admin),
through the client constructors, with values of every wrong type that could carry the secret."""

from __future__ import annotations

import dataclasses
import traceback
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, Producer
from kaflux.config import AdminConfig, CommonConfig, ConsumerConfig, ProducerConfig
from kaflux.errors import ConfigError

SECRET = "s3cr3t-Pa55w0rd-do-not-show"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";'


class Opaque:
    """An object whose repr and str give the secret away."""

    def __repr__(self) -> str:
        return f"Opaque({SECRET})"

    __str__ = __repr__


def _wrong_types(secret: str) -> list[Any]:
    raw = secret.encode()
    return [
        raw,
        bytearray(raw),
        memoryview(raw),
        [secret],
        (secret,),
        {secret},
        {"password": secret},
        {secret: 1},
        Opaque(),
        12345678901234567,
        3.25,
        True,
    ]


def _secret_keys(config_class: type[CommonConfig]) -> list[str]:
    return [f.metadata["key"] for f in dataclasses.fields(config_class) if f.metadata.get("kind") == "secret"]


CLIENTS = {
    "consumer": (Consumer, ConsumerConfig, {"group.id": "g"}),
    "producer": (Producer, ProducerConfig, {}),
    "admin": (AdminClient, AdminConfig, {}),
}

CASES = [
    pytest.param(client, key, index, id=f"{client}-{key}-{type(value).__name__}")
    for client, (_, config_class, _) in CLIENTS.items()
    for key in _secret_keys(config_class)
    for index, value in enumerate(_wrong_types(SECRET))
]


def test_every_client_has_the_secret_keys_this_sweep_expects() -> None:
    for _, config_class, _ in CLIENTS.values():
        keys = set(_secret_keys(config_class))
        assert {"sasl.password", "sasl.jaas.config", "ssl.key.password"} <= keys, keys


def _leaks(text: str, value: object) -> bool:
    fragments = [SECRET, SECRET[:12], SECRET.encode().hex()[:16], "Pa55w0rd"]
    if isinstance(value, (int, float)):
        fragments.append(str(value))  # a numeric secret (a PIN) is a secret too
    return any(fragment in text for fragment in fragments)


@pytest.mark.parametrize(("client", "key", "index"), CASES)
def test_a_secret_of_a_wrong_type_is_not_echoed(client: str, key: str, index: int) -> None:
    make, _, extra = CLIENTS[client]
    secret = JAAS if key == "sasl.jaas.config" else SECRET
    value = _wrong_types(secret)[index]
    config = {"bootstrap.servers": "127.0.0.1:9", **extra, key: value}
    with pytest.raises(ConfigError) as caught:
        make(config)
    error = caught.value
    assert error.key == key
    assert "string" in str(error), "the error still says what was expected"
    texts = [str(error), repr(error), *map(str, error.args), "".join(traceback.format_exception(error))]
    assert not any(_leaks(text, value) for text in texts), texts[0]
