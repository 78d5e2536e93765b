"""Fixtures of the Schema Registry unit tests: a kaflux registry client on the double. [test]"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflux.schema_registry import SchemaRegistryClient

from support.schema_registry import SchemaRegistryDouble


@pytest.fixture
def client(registry: SchemaRegistryDouble) -> Iterator[SchemaRegistryClient]:
    """A kaflux client of the test's registry double."""
    with SchemaRegistryClient({"url": registry.url}) as kaflux_client:
        yield kaflux_client
