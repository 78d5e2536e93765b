"""Both Schema Registry clients over HTTPS: the CA trusted with ssl.ca.location, a server
signed by another CA refused, and mutual TLS with an encrypted client key. [test]"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflux.schema_registry import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)

from support.certs import TestCerts, generate_certs
from support.schema_fixtures import USER_V1
from support.schema_registry import SchemaRegistryDouble

pytest.importorskip("cryptography")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    return generate_certs(tmp_path_factory.mktemp("registry-certs"))


@pytest.fixture
def mtls_registry(certs: TestCerts) -> Iterator[SchemaRegistryDouble]:
    tls = (str(certs.server_cert), str(certs.server_key))
    with SchemaRegistryDouble(tls=tls, client_ca=str(certs.ca_cert)) as double:
        yield double


def _config(registry: SchemaRegistryDouble, certs: TestCerts, ca: Path | None = None) -> dict[str, object]:
    return {
        "url": registry.url,
        "ssl.ca.location": str(ca or certs.ca_cert),
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
        "ssl.key.password": certs.client_key_password,
        "timeout": 5,
        "max.retries": 0,
    }


def test_both_clients_speak_mutual_tls(mtls_registry: SchemaRegistryDouble, certs: TestCerts) -> None:
    assert mtls_registry.url.startswith("https://")
    with SchemaRegistryClient(_config(mtls_registry, certs)) as client:
        schema_id = client.register_schema("users-value", Schema(USER_V1))

    async def main() -> Schema:
        async with AsyncSchemaRegistryClient(_config(mtls_registry, certs)) as client:
            return await client.get_schema(schema_id)

    assert asyncio.run(main()) == Schema(USER_V1)


def test_a_server_signed_by_another_ca_is_refused_by_both(
    mtls_registry: SchemaRegistryDouble, certs: TestCerts
) -> None:
    config = _config(mtls_registry, certs, ca=certs.wrong_ca_cert)
    with SchemaRegistryClient(config) as client, pytest.raises(SchemaRegistryError) as sync_error:
        client.get_subjects()

    async def main() -> None:
        async with AsyncSchemaRegistryClient(config) as client:
            await client.get_subjects()

    with pytest.raises(SchemaRegistryError) as async_error:
        asyncio.run(main())
    for error in (sync_error.value, async_error.value):
        assert error.http_status == -1 and "did not answer" in str(error)
        assert certs.client_key_password not in str(error)
    assert mtls_registry.request_count == 0
