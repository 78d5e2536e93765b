"""kaflux's SchemaRegistryClient on the test registry: calls, auth, retries, caching, and no
credential in errors, logs or repr. [test]"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator

import pytest

from kaflux.errors import ConfigError, KafkaError
from kaflux.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError

from support.schema_fixtures import USER_V1, USER_V2
from support.schema_registry import SchemaRegistryDouble

USERS = {"alice": "pa55-w0rd-xyz"}


@pytest.fixture
def registry() -> Iterator[SchemaRegistryDouble]:
    with SchemaRegistryDouble(users=USERS) as double:
        yield double


def _client(registry: SchemaRegistryDouble, **extra: object) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": "alice:pa55-w0rd-xyz", **extra})


def test_every_call(registry: SchemaRegistryDouble) -> None:
    with _client(registry) as client:
        schema_id = client.register_schema("users-value", Schema(USER_V1))
        assert client.get_schema(schema_id) == Schema(USER_V1)
        assert client.lookup_schema("users-value", Schema(USER_V1)).version == 1
        assert client.get_subjects() == ["users-value"]
        assert client.get_compatibility() == "BACKWARD"
        assert client.set_compatibility("users-value", "full") == "FULL"
        assert client.get_compatibility("users-value") == "FULL"
        assert client.test_compatibility("users-value", Schema(USER_V2))
        v2 = client.register_schema("users-value", Schema(USER_V2))
        assert client.get_versions("users-value") == [1, 2]
        latest = client.get_latest_version("users-value")
        assert (latest.schema_id, latest.version, latest.schema) == (v2, 2, Schema(USER_V2))
        assert client.get_version("users-value", 1).schema_id == schema_id
        assert client.delete_subject("users-value") == [1, 2]
        with pytest.raises(SchemaRegistryError) as info:
            client.get_versions("users-value")
        assert (info.value.http_status, info.value.error_code) == (404, 40401)
        assert isinstance(info.value, KafkaError)


def test_a_wrong_password_is_a_clear_401_within_seconds_without_the_password(
    registry: SchemaRegistryDouble, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = {"url": registry.url, "basic.auth.user.info": "alice:not-the-Pa55word"}
    with SchemaRegistryClient(config) as client:
        start = time.monotonic()
        with pytest.raises(SchemaRegistryError) as info:
            client.get_subjects()
        assert time.monotonic() - start < 3
        assert info.value.http_status == 401
        assert "basic.auth.user.info" in str(info.value)
        for text in (str(info.value), repr(info.value), repr(client), caplog.text):
            assert "not-the-Pa55word" not in text
    assert registry.requests == [("GET", "/subjects")]  # a 401 is not retried


def test_user_info_in_the_url_is_used_and_never_shown(registry: SchemaRegistryDouble) -> None:
    url = registry.url.replace("http://", "http://alice:pa55-w0rd-xyz@")
    with SchemaRegistryClient({"url": url}) as client:
        assert client.get_subjects() == []
        assert "pa55" not in repr(client)
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient({"url": "ftp://alice:pa55-w0rd-xyz@host"})
    assert "pa55" not in str(info.value)


def test_transient_errors_are_retried_with_backoff(registry: SchemaRegistryDouble) -> None:
    registry.fail_next(2, status=503)
    with _client(registry, **{"retries.wait.ms": 10, "max.retries": 3}) as client:
        assert client.get_subjects() == []
    assert len(registry.requests) == 3


def test_retries_stop_at_the_deadline(registry: SchemaRegistryDouble) -> None:
    registry.fail_next(1000, status=503)
    with _client(registry, **{"retries.wait.ms": 400, "max.retries": 100, "timeout": 1.0}) as client:
        start = time.monotonic()
        with pytest.raises(SchemaRegistryError) as info:
            client.get_subjects()
        assert time.monotonic() - start < 2.5
    assert info.value.http_status == 503 and info.value.retriable


def test_a_hanging_registry_is_given_up_on_at_the_timeout_as_a_retriable_outage(
    registry: SchemaRegistryDouble,
) -> None:
    registry.hang()
    with _client(registry, timeout=1.0) as client:
        start = time.monotonic()
        with pytest.raises(SchemaRegistryError) as info:
            client.get_schema(1)
        assert time.monotonic() - start < 2.5
    assert info.value.retriable and info.value.http_status == -1
    assert f"the Schema Registry at {registry.url} did not answer GET /schemas/ids/1" in str(info.value)
    assert "timeout=1s" in str(info.value)


def test_urls_are_tried_in_turn(registry: SchemaRegistryDouble) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}"
    config = {
        "url": f"{dead},{registry.url}",
        "basic.auth.user.info": "alice:pa55-w0rd-xyz",
        "max.retries": 0,
    }
    with SchemaRegistryClient(config) as client:
        assert client.get_subjects() == []


def test_ids_and_schemas_are_cached(registry: SchemaRegistryDouble) -> None:
    with _client(registry) as client:
        schema_id = client.register_schema("users-value", Schema(USER_V1))
        client.get_latest_version("users-value")
        before = registry.request_count
        for _ in range(10):
            assert client.register_schema("users-value", Schema(USER_V1)) == schema_id
            assert client.get_schema(schema_id) == Schema(USER_V1)
            client.get_latest_version("users-value")
        assert registry.request_count == before


def test_config_is_validated() -> None:
    with pytest.raises(ConfigError, match="url"):
        SchemaRegistryClient({})
    with pytest.raises(ConfigError, match=r"schema\.registry\.urll"):
        SchemaRegistryClient({"url": "http://x", "schema.registry.urll": "y"})
    with pytest.raises(ConfigError, match=r"username:password") as info:
        SchemaRegistryClient({"url": "http://x", "basic.auth.user.info": "secretvalue"})
    assert "secretvalue" not in str(info.value)
    with pytest.raises(ConfigError, match="not both"):
        SchemaRegistryClient({"url": "http://x", "bearer.auth.token": "t", "basic.auth.user.info": "a:b"})


def test_a_bearer_token_callback_is_sent(registry: SchemaRegistryDouble) -> None:
    registry.users = None
    with SchemaRegistryClient(
        {"url": registry.url, "bearer.auth.custom.provider.function": lambda: "tok-1"}
    ) as c:
        c.get_subjects()
    assert registry.authorizations == ["Bearer tok-1"]
