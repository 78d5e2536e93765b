"""The ``kernel`` fixture: runs a record test against both record kernels (see
``tests/record_kernels.py``)."""

from __future__ import annotations

from types import ModuleType

import pytest

from kaflux.records.interface import RecordDecoder

from support.record_kernels import KERNELS, compiled_kernel, kernel_named


@pytest.fixture(scope="session", params=KERNELS)
def kernel(request: pytest.FixtureRequest) -> RecordDecoder:
    """The record kernel under test (session-scoped so hypothesis tests can use it)."""
    return kernel_named(request.param)


@pytest.fixture(scope="session")
def compiled() -> ModuleType:
    """The compiled kernel module itself (skipped when it was not built)."""
    return compiled_kernel()  # type: ignore[return-value]
