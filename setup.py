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

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
KERNEL_DIR = Path("src", "kaflux", "records")
KERNEL_SOURCES = ("_kernel.pyx", "_kernel_impl.h")


def kernel_source_sha256(directory: Path) -> str:
    """SHA-256 over the kernel's sources (kaflux.records recomputes it the same way)."""
    digest = hashlib.sha256()
    for name in KERNEL_SOURCES:
        digest.update(name.encode() + b"\0" + (directory / name).read_bytes() + b"\0")
    return digest.hexdigest()


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
    sha = kernel_source_sha256(HERE / KERNEL_DIR)
    extension = Extension(
        "kaflux.records._kernel",
        sources=[str(KERNEL_DIR / "_kernel.pyx")],
        depends=[str(KERNEL_DIR / "_kernel_impl.h")],
        include_dirs=[str(KERNEL_DIR)],
        define_macros=[("KAFLUX_KERNEL_SOURCE_SHA256", f'"{sha}"')],
        optional=True,
    )
    # The producer's record encoder (kaflux.records.encode has its pure-Python twin).
    encode_sha = hashlib.sha256(b"_encode.pyx\0" + (HERE / KERNEL_DIR / "_encode.pyx").read_bytes() + b"\0")
    encoder = Extension(
        "kaflux.records._encode",
        sources=[str(KERNEL_DIR / "_encode.pyx")],
        define_macros=[("KAFLUX_ENCODE_SOURCE_SHA256", f'"{encode_sha.hexdigest()}"')],
        optional=True,
    )
    try:
        return list(cythonize([extension, encoder], build_dir="build/cython", quiet=True))
    except Exception as exc:
        warn(f"Cython failed: {exc}")
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
