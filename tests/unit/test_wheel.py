"""The wheel ships what users run and no test double.

The wheel is built from a copy of the sources (``pip wheel --no-deps --no-build-isolation``, the
pure-Python build: the compiled kernel does not change which modules ship). It must hold the
development brokers (:mod:`kaflux.devbrokers`) and no module of the tests' support package, no
``kaflux/testing/`` package, and the old name ``kaflux.testing`` must say where things went.
"""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUPPORT = REPO / "tests" / "support"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    tree = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, tree / name)
    shutil.copytree(
        REPO / "src",
        tree / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so", "*.c", "build"),
    )
    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "KAFLUX_PURE_BUILD": "1"}
    pip_wheel = ["pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), "."]
    result = subprocess.run(
        [sys.executable, "-m", *pip_wheel],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = out.glob("kaflux-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_holds_the_development_brokers(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert {
        "kaflux/devbrokers/__init__.py",
        "kaflux/devbrokers/brokers.py",
        "kaflux/devbrokers/mock_cluster.py",
    } <= names


def test_the_wheel_holds_no_test_double(wheel: zipfile.ZipFile) -> None:
    modules = [name for name in wheel.namelist() if name.endswith(".py")]
    assert not [name for name in wheel.namelist() if name.startswith("kaflux/testing/")]
    assert not [name for name in modules if name.startswith(("support/", "tests/"))]
    # No support module is shipped under another name: compare contents, not only paths.
    support_sources = {path.read_bytes() for path in SUPPORT.glob("*.py") if path.name != "__init__.py"}
    shipped_copies = [name for name in modules if wheel.read(name) in support_sources]
    assert shipped_copies == []
    for path in SUPPORT.glob("*.py"):
        if path.name == "__init__.py" or path.name.startswith("test_"):
            continue
        assert not [name for name in modules if name.endswith(f"/{path.name}")], path.name


def test_the_old_name_is_only_a_pointer(wheel: zipfile.ZipFile) -> None:
    """``kaflux/testing.py`` is shipped only to raise; it defines no function or class."""
    tree = ast.parse(wheel.read("kaflux/testing.py"))
    defined = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.ClassDef)]
    assert defined == []
    assert isinstance(tree.body[-1], ast.Raise)


@pytest.mark.parametrize(
    "name",
    ["kaflux.testing", "kaflux.testing.brokers", "kaflux.testing.mock_cluster", "kaflux.testing.fault_proxy"],
)
def test_importing_kaflux_testing_says_where_things_went(name: str) -> None:
    sys.modules.pop("kaflux.testing", None)
    with pytest.raises(ImportError) as raised:
        importlib.import_module(name)
    message = str(raised.value)
    assert "kaflux.devbrokers" in message
    for old in ("brokers", "mock_cluster", "fault_proxy", "scenarios", "group_member", "sasl_front_door"):
        assert f"kaflux.testing.{old}" in message
    assert "tests/support/fault_proxy.py" in message
