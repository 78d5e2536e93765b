"""Choosing the record kernels: the decoder (consumer) and the encoder (producer). [pure]

Each kernel has a compiled twin (Cython: ``_kernel`` for decoding, ``_encode`` for encoding)
and a pure-Python one (``_pure`` -- :mod:`~kaflux.records.batch_decoder`,
:mod:`~kaflux.records.columns`, :mod:`~kaflux.records.consumer_record` -- and
:mod:`~kaflux.records.encode`). The compiled one is used when it was built from the sources
next to it (``setup.py`` stamps each build with :func:`~kaflux.records.definitions.source_sha256`
of its sources, and this module recomputes it) and ``KAFLUX_PURE`` is not ``"1"``. Otherwise
the pure one, and when that is not by choice the ``kaflux.records`` logger says why, once per
kernel: for the decoder when :mod:`kaflux.records` is imported, for the encoder when the first
producer asks for it (:func:`encoder`).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Final

from kaflux.records.definitions import ENCODER_SOURCES, KERNEL_SOURCES, source_sha256

__all__ = [
    "ENCODER_SOURCES",
    "KERNEL_SOURCES",
    "decoder",
    "decoder_kind",
    "encoder",
    "kernel_source_sha256",
    "load_compiled_encoder",
    "load_compiled_kernel",
    "pure_decoder",
    "pure_encoder",
]

_log = logging.getLogger("kaflux.records")
_HERE: Final = Path(__file__).resolve().parent


def kernel_source_sha256(directory: Path) -> str | None:
    """SHA-256 of the decoder's sources in ``directory`` (as setup.py computes it), or None
    when they are not there (an installed wheel)."""
    return source_sha256(directory, KERNEL_SOURCES)


def _load_compiled(name: str, sources: tuple[str, ...]) -> ModuleType:
    """``kaflux.records.<name>``; ImportError saying why when it is missing or was built from
    other sources than those next to it (a stale build in a source checkout)."""
    try:
        module = importlib.import_module(f"kaflux.records.{name}")
    except ImportError as exc:
        what = "was not built" if isinstance(exc, ModuleNotFoundError) else "could not be imported"
        raise ImportError(f"it {what} ({exc}); reinstall kaflux with a C compiler available") from exc
    built_from = module.SOURCE_SHA256
    current = source_sha256(_HERE, sources)
    if built_from and current is not None and built_from != current:
        raise ImportError(
            f"{Path(module.__file__ or name).name} was built from other sources than "
            f"{'/'.join(s for s in sources if not s.endswith('.pxi'))} (rebuild it: pip install -e . "
            "or python setup.py build_ext --inplace)"
        )
    return module


def load_compiled_kernel() -> ModuleType:
    """The compiled decoder module; ImportError saying why when it is missing or stale."""
    return _load_compiled("_kernel", KERNEL_SOURCES)


def load_compiled_encoder() -> ModuleType:
    """The compiled encoder module; ImportError saying why when it is missing or stale."""
    return _load_compiled("_encode", ENCODER_SOURCES)


def pure_decoder() -> ModuleType:
    """The pure-Python decoder (``kaflux.records._pure``; imported on first use, as a process
    with the compiled decoder never needs it)."""
    return importlib.import_module("kaflux.records._pure")


def pure_encoder() -> ModuleType:
    """The pure-Python encoder (:mod:`kaflux.records.encode`; imported on first use)."""
    return importlib.import_module("kaflux.records.encode")


def _choose(
    what: str, compiled: str, sources: tuple[str, ...], pure: Callable[[], ModuleType]
) -> tuple[ModuleType, str]:
    if os.environ.get("KAFLUX_PURE") == "1":
        return pure(), "pure"
    try:
        return _load_compiled(compiled, sources), "compiled"
    except ImportError as exc:
        _log.warning(
            "kaflux.records: the compiled record %s is unavailable: %s. Using the pure-Python "
            "record %s, which is several times slower.",
            what,
            exc,
            what if what == "encoder" else "decoder",
        )
        return pure(), "pure"


_chosen: dict[str, tuple[ModuleType, str]] = {}


def _decoder() -> tuple[ModuleType, str]:
    if "decoder" not in _chosen:
        _chosen["decoder"] = _choose("kernel", "_kernel", KERNEL_SOURCES, pure_decoder)
    return _chosen["decoder"]


def decoder() -> ModuleType:
    """The record decoder this process uses (chosen once; see the module docstring)."""
    return _decoder()[0]


def decoder_kind() -> str:
    """``"compiled"`` or ``"pure"``: which decoder :func:`decoder` returns."""
    return _decoder()[1]


def encoder() -> ModuleType:
    """The record encoder this process's producers use (chosen once, when first asked for)."""
    if "encoder" not in _chosen:
        _chosen["encoder"] = _choose("encoder", "_encode", ENCODER_SOURCES, pure_encoder)
    return _chosen["encoder"][0]
