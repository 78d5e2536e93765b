"""Builds kaflux's optional compiled record kernel, ``kaflux.records._kernel``.

Project metadata lives in pyproject.toml; this file only declares the extension. It is
optional: when it cannot be built (no C compiler, no Cython, or ``KAFLUX_PURE_BUILD=1``)
the build prints one warning and installs the package without it, and ``kaflux.records``
then uses the pure-Python decoder (logging one warning when imported).

Cython is a build requirement (pyproject.toml ``[build-system]``), so pip provides it; the
generated C file is not kept in the repository. The build stamps the extension with the
SHA-256 of its sources, so that an out-of-date build in a source checkout is noticed at
import time (``kaflux.records`` then falls back to pure Python and says so).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
KERNEL_DIR = Path("src", "kaflux", "records")


def _definitions() -> ModuleType:
    """kaflux.records.definitions, loaded by its path (kaflux is not importable yet): the source
    lists and the one source-hash function, which kaflux.records.kernels recomputes at import."""
    spec = importlib.util.spec_from_file_location("_kaflux_definitions", HERE / KERNEL_DIR / "definitions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would register it
    spec.loader.exec_module(module)
    return module


DEFINITIONS = _definitions()


_warned = False


def warn(reason: str) -> None:
    """One warning per build, however many steps fail."""
    global _warned
    if _warned:
        return
    _warned = True
    print(
        f"WARNING: kaflux: the compiled record kernel was not built ({reason}); "
        "kaflux will use its pure-Python record decoder, which is several times slower.",
        file=sys.stderr,
    )


class OptionalBuildExt(build_ext):
    """build_ext that warns and carries on when the extension cannot be compiled."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # e.g. no compiler found at all
            warn(f"{type(exc).__name__}: {exc}")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # compiler or linker errors
            warn(f"{type(exc).__name__}: {exc}")

    def copy_file(self, infile: Any, outfile: Any, *args: Any, **kwargs: Any) -> Any:
        """Puts in-place (editable) builds of the extension in place atomically: processes
        that have the old file loaded keep it instead of seeing it rewritten under them."""
        if not str(outfile).endswith((".so", ".pyd")) or not os.path.exists(outfile):
            return super().copy_file(infile, outfile, *args, **kwargs)
        temporary = f"{outfile}.{os.getpid()}.tmp"
        try:
            super().copy_file(infile, temporary, *args, **kwargs)
            os.replace(temporary, outfile)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        return outfile, True


def extensions() -> list[Extension]:
    if os.environ.get("KAFLUX_PURE_BUILD") == "1":
        warn("KAFLUX_PURE_BUILD=1")
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        warn("Cython is not installed")
        return []
    sha = DEFINITIONS.source_sha256(HERE / KERNEL_DIR, DEFINITIONS.KERNEL_SOURCES)
    extension = Extension(
        "kaflux.records._kernel",
        sources=[str(KERNEL_DIR / "_kernel.pyx")],
        # the .pxi sections it includes and its C helpers
        depends=[str(KERNEL_DIR / name) for name in DEFINITIONS.KERNEL_SOURCES[1:]],
        include_dirs=[str(KERNEL_DIR)],
        define_macros=[("KAFLUX_KERNEL_SOURCE_SHA256", f'"{sha}"')],
        optional=True,
    )
    # The producer's record encoder (kaflux.records.encode has its pure-Python twin).
    encode_sha = DEFINITIONS.source_sha256(HERE / KERNEL_DIR, DEFINITIONS.ENCODER_SOURCES)
    encoder = Extension(
        "kaflux.records._encode",
        sources=[str(KERNEL_DIR / "_encode.pyx")],
        define_macros=[("KAFLUX_ENCODE_SOURCE_SHA256", f'"{encode_sha}"')],
        optional=True,
    )
    try:
        return list(cythonize([extension, encoder], build_dir="build/cython", quiet=True))
    except Exception as exc:
        warn(f"Cython failed: {exc}")
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
