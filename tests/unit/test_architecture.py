"""The thread tags in module docstrings are checked, not just written (tools/check_architecture.py):
every module has one, and no [pure] module reaches socket, selectors, ssl, threading or time. No
modules import each other, TYPE_CHECKING and function-level imports included."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _checker() -> ModuleType:
    path = REPO / "tools" / "check_architecture.py"
    spec = importlib.util.spec_from_file_location("check_architecture", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


GOOD = {
    "__init__.py": '"""A package. [app]"""\n',
    "values.py": '"""Plain data. [pure]"""\nimport enum\n',
    "loop.py": '"""The loop. [bg]"""\nimport selectors\nimport time\n',
    "manager.py": (
        '"""A manager. [bg, pure: takes now_ms]"""\nfrom typing import TYPE_CHECKING\n'
        "from pkg.values import enum\nif TYPE_CHECKING:\n    from pkg.loop import selectors\n"
    ),
}


def test_the_kaflux_package_keeps_its_tags() -> None:
    problems = _checker().check([REPO / "src" / "kaflux"])
    assert problems == []


def test_src_has_no_import_cycle_but_the_allowed_ones() -> None:
    checker = _checker()
    for package in ("kaflux", "pyspark_kaflux"):
        modules = checker.load([REPO / "src" / package])
        cycles = set(checker.import_cycles(checker.import_graph(modules)))
        # An allowed cycle that is gone must be deleted from ALLOWED_CYCLES (and one that is
        # still there is the only kind tolerated).
        assert cycles == (checker.ALLOWED_CYCLES if package == "kaflux" else set())


def test_a_well_tagged_package_passes(tmp_path: Path) -> None:
    assert _checker().check([_package(tmp_path, GOOD)]) == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"bad.py": '"""Pure, it says. [pure]"""\nimport socket\n'},
            "bad.py: tagged [pure] but imports socket",
        ),
        (
            {"bad.py": '"""Pure, it says. [pure]"""\nfrom pkg import loop\n'},
            "bad.py: tagged [pure] but imports selectors, time (via pkg.bad -> pkg.loop)",
        ),
        (
            {"bad.py": '"""Pure, it says. [bg, pure]"""\ndef f():\n    import threading\n'},
            "bad.py: tagged [pure] but imports threading",
        ),
        ({"bad.py": '"""No tag here."""\n'}, "bad.py: no thread tag"),
        ({"bad.py": '"""A made-up tag. [everywhere]"""\n'}, "bad.py: no thread tag"),
        (
            {
                "a.py": '"""A. [bg]"""\nfrom pkg import b\n',
                "b.py": '"""B. [bg]"""\nfrom pkg.a import thing\n',
            },
            "a.py: import cycle pkg.a -> pkg.b -> pkg.a",
        ),
        (
            {
                "a.py": '"""A. [bg]"""\nfrom pkg.b import B\n',
                "b.py": (
                    '"""B. [bg]"""\nfrom typing import TYPE_CHECKING\n'
                    "if TYPE_CHECKING:\n    from pkg.a import A\n"
                ),
            },
            "a.py: import cycle pkg.a -> pkg.b -> pkg.a",
        ),
        (
            {
                "a.py": '"""A. [bg]"""\nimport pkg.b\n',
                "b.py": '"""B. [bg]"""\ndef f():\n    from . import c\n',
                "c.py": '"""C. [pure]"""\nfrom .a import x\n',
            },
            "a.py: import cycle pkg.a -> pkg.b -> pkg.c -> pkg.a",
        ),
    ],
    ids=[
        "direct-import",
        "through-a-kaflux-module",
        "inside-a-function",
        "untagged",
        "unknown-tag",
        "import-cycle",
        "import-cycle-through-type-checking",
        "import-cycle-of-three-through-a-function",
    ],
)
def test_the_checker_catches_a_bad_module(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    problems = _checker().check([_package(tmp_path, {**GOOD, **files})])
    assert len(problems) == 1
    assert expected in problems[0]
