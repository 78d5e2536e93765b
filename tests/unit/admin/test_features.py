"""``AdminClient.describe_features``: what DescribeFeaturesApi reads from an ApiVersions answer
(supported and finalized features, the epoch; none before v3), and its errors. [test]"""

from __future__ import annotations

from kaflux.admin import FeatureMetadata, FinalizedVersionRange, SupportedVersionRange
from kaflux.admin.features import DescribeFeaturesApi
from kaflux.admin.operation import Lookup
from kaflux.errors import ClusterAuthorizationFailedError, CoordinatorLoadInProgressError
from kaflux.protocol.messages.api_versions import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

from support.fakes import roundtrip


def test_an_api_versions_request_naming_the_client_goes_to_any_broker() -> None:
    api = DescribeFeaturesApi()
    [(request, keys)] = api.build(None, [None])
    assert api.lookup is Lookup.ANY and keys == [None]
    assert isinstance(request, ApiVersionsRequest) and request.client_software_name == "kaflux"
    assert roundtrip(request, 3) == request, "valid at v3, the first version with features"


def test_the_features_are_read_by_name_with_the_finalization_epoch() -> None:
    answer = ApiVersionsResponse(
        supported_features=[
            SupportedFeatureKey("metadata.version", 1, 21),
            SupportedFeatureKey("kraft.version", 0, 1),
        ],
        finalized_features_epoch=42,
        finalized_features=[FinalizedFeatureKey("metadata.version", 21, 1)],
    )
    outcome = DescribeFeaturesApi().handle(None, [None], roundtrip(answer, 3))
    assert outcome.completed == {
        None: FeatureMetadata(
            {"metadata.version": FinalizedVersionRange(1, 21)},
            42,
            {"kraft.version": SupportedVersionRange(0, 1), "metadata.version": SupportedVersionRange(1, 21)},
        )
    }
    assert list(outcome.completed[None].supported_features) == ["kraft.version", "metadata.version"]


def test_a_broker_before_v3_reports_no_features() -> None:
    outcome = DescribeFeaturesApi().handle(None, [None], roundtrip(ApiVersionsResponse(), 2))
    assert outcome.completed == {None: FeatureMetadata({}, None, {})}


def test_an_error_fails_the_call_or_is_retried_when_retriable() -> None:
    refused = DescribeFeaturesApi().handle(None, [None], ApiVersionsResponse(error_code=31))
    assert isinstance(refused.failed[None], ClusterAuthorizationFailedError)
    loading = DescribeFeaturesApi().handle(None, [None], ApiVersionsResponse(error_code=14))
    assert isinstance(loading.retry[None], CoordinatorLoadInProgressError)
