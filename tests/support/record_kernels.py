"""The two record kernels, for tests that run against both. Not a test module.

``pure`` is :mod:`kaflux.records._pure` (batch_decoder + columns + consumer_record),
``compiled`` the Cython kernel ``kaflux.records._kernel``. When the compiled kernel was not
built (no C compiler) its tests are skipped -- unless ``KAFLUX_REQUIRE_COMPILED=1`` (CI),
which makes that a failure. A compiled kernel that is out of date with its sources fails
the tests.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from kaflux.records.interface import RecordDecoder
from kaflux.records.kernels import load_compiled_kernel, pure_decoder

KERNELS = ["pure", "compiled"]


def compiled_kernel() -> RecordDecoder:
    """The compiled kernel, or a skip (a failure with KAFLUX_REQUIRE_COMPILED=1)."""
    if importlib.util.find_spec("kaflux.records._kernel") is None:
        message = "the compiled record kernel was not built"
        if os.environ.get("KAFLUX_REQUIRE_COMPILED") == "1":
            pytest.fail(f"{message} (KAFLUX_REQUIRE_COMPILED=1)")
        pytest.skip(message)
    return load_compiled_kernel()  # type: ignore[return-value]  # a module conforms structurally


def kernel_named(name: str) -> RecordDecoder:
    """``"pure"`` or ``"compiled"`` as the kernel module."""
    if name == "pure":
        return pure_decoder()  # type: ignore[no-any-return]  # a module conforms structurally
    return compiled_kernel()
