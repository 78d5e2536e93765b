"""The ``kernel`` fixture: runs a record test against both record kernels.

``pure`` is :mod:`kaflux.records._pure` (batch_decoder + columns), ``compiled`` the Cython
kernel ``kaflux.records._kernel``. When the compiled kernel was not built (no C compiler)
its tests are skipped -- unless ``KAFLUX_REQUIRE_COMPILED=1`` (CI), which makes that a
failure. A compiled kernel that is out of date with its sources fails the tests.
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

import pytest

from kaflux.records import _pure, load_compiled_kernel
from kaflux.records._protocols import RecordDecoder

KERNELS = ["pure", "compiled"]


def compiled_kernel() -> RecordDecoder:
    if importlib.util.find_spec("kaflux.records._kernel") is None:
        message = "the compiled record kernel was not built"
        if os.environ.get("KAFLUX_REQUIRE_COMPILED") == "1":
            pytest.fail(f"{message} (KAFLUX_REQUIRE_COMPILED=1)")
        pytest.skip(message)
    return load_compiled_kernel()  # type: ignore[return-value]  # a module conforms structurally


@pytest.fixture(scope="session", params=KERNELS)
def kernel(request: pytest.FixtureRequest) -> RecordDecoder:
    """The record kernel under test (session-scoped so hypothesis tests can use it)."""
    if request.param == "pure":
        return _pure  # type: ignore[return-value]
    return compiled_kernel()


@pytest.fixture(scope="session")
def compiled() -> ModuleType:
    """The compiled kernel module itself (skipped when it was not built)."""
    return compiled_kernel()  # type: ignore[return-value]
