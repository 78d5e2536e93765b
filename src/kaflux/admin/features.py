"""The cluster's feature flags, as Java's ``Admin.describeFeatures`` reads them: an ApiVersions
request (v3+ carries the features) to any broker. [pure]

A broker reports the features it supports (each a version range) and the finalized ones the
cluster runs at (each a version level, with the epoch of that finalization, KIP-584); a broker
whose ApiVersions is older than v3 reports none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kaflux.admin.operation import AdminApi, Lookup, Outcome
from kaflux.errors import error_for_code
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kaflux.structs import Node

__all__ = ["DescribeFeaturesApi", "FeatureMetadata", "FinalizedVersionRange", "SupportedVersionRange"]

#: as the connection's own ApiVersions names the client (KIP-511)
_SOFTWARE_NAME = "kaflux"
_SOFTWARE_VERSION = "0.1.0"


@dataclass(frozen=True, slots=True)
class SupportedVersionRange:
    """The versions of a feature a broker supports (Java's ``SupportedVersionRange``)."""

    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class FinalizedVersionRange:
    """The version levels of a feature the cluster has finalized (Java's
    ``FinalizedVersionRange``)."""

    min_version_level: int
    max_version_level: int


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    """The features a broker reported (Java's ``FeatureMetadata``), by name, sorted.
    ``finalized_features_epoch`` is None when the broker reports no finalization."""

    finalized_features: dict[str, FinalizedVersionRange]
    finalized_features_epoch: int | None
    supported_features: dict[str, SupportedVersionRange]


class DescribeFeaturesApi(AdminApi[None, FeatureMetadata]):
    """ApiVersions to any broker; its features are the value."""

    lookup = Lookup.ANY

    def keys(self) -> list[None]:
        return [None]

    def describe(self, key: None) -> str:
        return "the cluster's features"

    def build(self, node: Node | None, keys: list[None]) -> list[tuple[RequestMessage[Any], list[None]]]:
        request = ApiVersionsRequest(
            client_software_name=_SOFTWARE_NAME, client_software_version=_SOFTWARE_VERSION
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[None], body: ApiVersionsResponse
    ) -> Outcome[None, FeatureMetadata]:
        if body.error_code:
            error = error_for_code(body.error_code)("ApiVersions, asked for the cluster's features")
            return Outcome(retry={None: error}) if error.retriable else Outcome(failed={None: error})
        features = FeatureMetadata(
            {
                f.name: FinalizedVersionRange(f.min_version_level, f.max_version_level)
                for f in sorted(body.finalized_features, key=lambda f: f.name)
            },
            body.finalized_features_epoch if body.finalized_features_epoch >= 0 else None,
            {
                f.name: SupportedVersionRange(f.min_version, f.max_version)
                for f in sorted(body.supported_features, key=lambda f: f.name)
            },
        )
        return Outcome(completed={None: features})
