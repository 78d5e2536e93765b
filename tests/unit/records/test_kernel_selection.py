"""Which record kernel ``kaflux.records`` picks, and the one warning when it has to fall back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import kaflux.records
from kaflux.records import kernel_source_sha256, load_compiled_kernel
from kaflux.records.definitions import ENCODER_SOURCES, KERNEL_SOURCES

REPORT = (
    "import kaflux.records as r; print(r.KERNEL, type(r.RecordBatch).__module__, r.RecordBatch.__module__)"
)
#: Makes ``import kaflux.records._kernel`` fail, as when the extension was not built.
BLOCK_COMPILED = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "kaflux.records._kernel":
            raise ModuleNotFoundError("No module named 'kaflux.records._kernel'")
        return None
sys.meta_path.insert(0, Block())
"""


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "KAFLUX_PURE"} | env
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=60, check=True
    )


def test_compiled_kernel_is_the_default(compiled: ModuleType) -> None:
    result = run(REPORT)
    assert result.stdout.split() == ["compiled", "builtins", "kaflux.records._kernel"]
    assert result.stderr == ""


def test_kaflux_pure_selects_the_pure_kernel_silently() -> None:
    result = run(REPORT, KAFLUX_PURE="1")
    assert result.stdout.split() == ["pure", "builtins", "kaflux.records.batch_decoder"]
    assert result.stderr == ""


def test_missing_compiled_kernel_falls_back_with_one_warning() -> None:
    result = run(BLOCK_COMPILED + REPORT + "\nimport kaflux.records.columns, kaflux.consumer")
    assert result.stdout.split() == ["pure", "builtins", "kaflux.records.batch_decoder"]
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kaflux.records: the compiled record kernel is unavailable: it was not built")
    assert "pure-Python record decoder" in lines[0]


def test_the_warning_goes_to_the_kaflux_records_logger() -> None:
    code = (
        "import logging\n"
        "records = []\n"
        "class Keep(logging.Handler):\n"
        "    def emit(self, record): records.append((record.name, record.levelname))\n"
        "logging.getLogger('kaflux.records').addHandler(Keep())\n"
        + BLOCK_COMPILED
        + "import kaflux.records\nprint(records)"
    )
    assert run(code).stdout.strip() == "[('kaflux.records', 'WARNING')]"


#: Installed from a wheel, kaflux has no kernel sources beside it (and checks no stamp).
from_wheel = pytest.mark.skipif(
    not (Path(kaflux.records.__file__).parent / "_kernel.pyx").exists(),
    reason="an installed wheel ships no kernel sources",
)


@from_wheel
def test_stale_build_is_refused(compiled: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = Path(kaflux.records.__file__).parent
    assert kernel_source_sha256(sources) == compiled.SOURCE_SHA256, "the compiled kernel is out of date"
    monkeypatch.setattr(compiled, "SOURCE_SHA256", "0" * 64)
    with pytest.raises(ImportError, match="built from other sources"):
        load_compiled_kernel()


def test_active_kernel_is_exposed() -> None:
    assert kaflux.records.KERNEL in ("compiled", "pure")
    expected = (
        "kaflux.records._kernel" if kaflux.records.KERNEL == "compiled" else "kaflux.records.batch_decoder"
    )
    assert kaflux.records.RecordBatch.__module__ == expected
    assert kaflux.records.iter_batches.__module__ == expected


@from_wheel
def test_every_kernel_source_file_is_stamped() -> None:
    """A new .pxi section (or C helper) must be in the source hash, else a stale build of it
    would go unnoticed; setup.py and the loader read the same list."""
    sources = Path(kaflux.records.__file__).parent
    on_disk = {
        p.name
        for p in sources.iterdir()
        if p.name.startswith("_kernel") and p.suffix in (".pyx", ".pxi", ".h")
    }
    assert on_disk == set(KERNEL_SOURCES)
    assert {p.name for p in sources.glob("_encode*.pyx")} == set(ENCODER_SOURCES)


def test_one_loader_chooses_both_kernels(compiled: ModuleType) -> None:
    code = "from kaflux.records import kernels; print(kernels.decoder_kind(), kernels.encoder().KIND)"
    assert run(code).stdout.split() == ["compiled", "compiled"]
    assert run(code, KAFLUX_PURE="1").stdout.split() == ["pure", "pure"]


def test_the_shared_definitions_are_a_leaf() -> None:
    """setup.py loads definitions.py by its path, before kaflux can be imported: it must import
    nothing from kaflux (and both twins import their shared bounds and messages from it)."""
    import ast

    import kaflux.records.definitions as definitions

    tree = ast.parse(Path(definitions.__file__).read_text())
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert imported and not [name for name in imported if name and name.split(".")[0] == "kaflux"]
