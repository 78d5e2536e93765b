"""ApiKey / REQUESTS / CLIENT_VERSIONS, header versions and version negotiation."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kaflux.errors import UnsupportedVersionError
from kaflux.protocol.api import (
    CLIENT_VERSIONS,
    REQUESTS,
    ApiKey,
    negotiate,
    request_header_version,
    response_header_version,
    version_for,
)
from kaflux.protocol.messages.api_versions import ApiVersionsRequest
from kaflux.protocol.messages.fetch import FetchRequest
from kaflux.protocol.messages.sasl_handshake import SaslHandshakeRequest

from support.protocol_testutil import top_level_classes


def test_api_keys_match_the_generated_requests() -> None:
    generated = {cls.API_KEY: cls for cls in top_level_classes() if cls.__name__.endswith("Request")}
    assert {int(k) for k in ApiKey} == set(generated)
    for key, cls in REQUESTS.items():
        assert cls is generated[int(key)]
        assert key == cls.API_KEY
        assert key == cls.RESPONSE.API_KEY
    assert set(REQUESTS) == set(ApiKey)


def test_client_versions_default_to_the_spec_ranges() -> None:
    assert CLIENT_VERSIONS[ApiKey.FETCH] == (0, 17)
    assert CLIENT_VERSIONS[ApiKey.METADATA] == (0, 13)  # v13: REBOOTSTRAP_REQUIRED (KIP-1102)
    assert CLIENT_VERSIONS[ApiKey.API_VERSIONS] == (0, 4)
    for key, cls in REQUESTS.items():
        assert CLIENT_VERSIONS[key] == (cls.MIN_VERSION, cls.MAX_VERSION)


@pytest.mark.parametrize(
    ("key", "version", "expected"),
    [
        (ApiKey.FETCH, 11, 1),
        (ApiKey.FETCH, 12, 2),
        (ApiKey.METADATA, 8, 1),
        (ApiKey.METADATA, 9, 2),
        (ApiKey.API_VERSIONS, 2, 1),
        (ApiKey.API_VERSIONS, 3, 2),
        (ApiKey.SASL_HANDSHAKE, 1, 1),  # never flexible
        (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 2),  # always flexible
    ],
)
def test_request_header_version(key: ApiKey, version: int, expected: int) -> None:
    assert request_header_version(key, version) == expected
    assert request_header_version(int(key), version) == expected


@pytest.mark.parametrize(
    ("key", "version", "expected"),
    [
        (ApiKey.FETCH, 11, 0),
        (ApiKey.FETCH, 12, 1),
        (ApiKey.OFFSET_COMMIT, 8, 1),
        (ApiKey.SASL_HANDSHAKE, 1, 0),
        (ApiKey.API_VERSIONS, 0, 0),
        (ApiKey.API_VERSIONS, 3, 0),  # ApiVersions responses always use header v0
        (ApiKey.API_VERSIONS, 4, 0),
    ],
)
def test_response_header_version(key: ApiKey, version: int, expected: int) -> None:
    assert response_header_version(key, version) == expected


def test_header_version_of_an_unknown_api() -> None:
    with pytest.raises(UnsupportedVersionError, match="API key 999"):
        request_header_version(999, 0)


def test_negotiate_picks_the_highest_common_version() -> None:
    broker = {
        int(ApiKey.FETCH): (0, 13),  # older broker
        int(ApiKey.METADATA): (0, 20),  # newer broker
        int(ApiKey.PRODUCE): (3, 9),
        int(ApiKey.API_VERSIONS): (5, 9),  # no overlap with our 0-4
        9999: (0, 3),  # an API kaflux does not know
    }
    chosen = negotiate(broker)
    assert chosen == {ApiKey.FETCH: 13, ApiKey.METADATA: 13, ApiKey.PRODUCE: 9}
    assert all(isinstance(k, ApiKey) for k in chosen)
    assert version_for(chosen, ApiKey.FETCH) == 13
    with pytest.raises(UnsupportedVersionError, match=r"API_VERSIONS \(API key 18\).*versions 0-4"):
        version_for(chosen, ApiKey.API_VERSIONS)
    with pytest.raises(UnsupportedVersionError, match="JOIN_GROUP"):
        version_for(chosen, ApiKey.JOIN_GROUP)


def test_negotiate_edge_overlaps() -> None:
    assert negotiate({1: (17, 30)}) == {ApiKey.FETCH: 17}
    assert negotiate({1: (18, 30)}) == {}
    assert negotiate({}) == {}


def test_request_classes_are_usable_through_the_table() -> None:
    assert REQUESTS[ApiKey.FETCH] is FetchRequest
    assert REQUESTS[ApiKey.API_VERSIONS] is ApiVersionsRequest
    assert REQUESTS[ApiKey.SASL_HANDSHAKE].FLEXIBLE_VERSION is None is SaslHandshakeRequest.FLEXIBLE_VERSION


def test_the_generated_table_agrees_with_the_request_classes() -> None:
    """Header versions and version ranges come from ``messages.REQUESTS``, not the classes: for
    every API and version they must say what the classes say."""
    for key, cls in REQUESTS.items():
        for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
            flexible = cls.FLEXIBLE_VERSION is not None and version >= cls.FLEXIBLE_VERSION
            assert request_header_version(key, version) == (2 if flexible else 1), (key, version)
            response_flexible = (
                cls.RESPONSE.FLEXIBLE_VERSION is not None and version >= cls.RESPONSE.FLEXIBLE_VERSION
            )
            expected = 0 if key is ApiKey.API_VERSIONS else (1 if response_flexible else 0)
            assert response_header_version(key, version) == expected, (key, version)


def test_importing_the_api_imports_no_message_module() -> None:
    """A client imports the message modules it uses, not all 50 (issue 23: they were 0.07 s of
    every Spark streaming query's start)."""
    code = (
        "import sys, kaflux.protocol.api as api; api.negotiate({1: (0, 17)}); "
        "api.request_header_version(1, 12); api.response_header_version(3, 9); "
        "print(sorted(m for m in sys.modules if m.startswith('kaflux.protocol.messages.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
    assert REQUESTS[ApiKey.FETCH] is FetchRequest  # looked up: imported then
