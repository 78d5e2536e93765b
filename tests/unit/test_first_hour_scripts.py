"""The main job's installer installs only what it needs and shows what it does (issue 18); the
documentation site builds in strict mode."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def plan(*args: str) -> str:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "bootstrap.sh"), *args, "--dry-run"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def test_the_main_job_installs_only_what_it_runs() -> None:
    run = plan()
    assert "pip: -e .[spark,broker]\n" in run  # PySpark and the embedded broker
    assert "dev" not in run and "stunnel4" not in run and "docs" not in run
    assert "krb5" not in run and "faketime" not in run  # the KDC of the GSSAPI tests is for tests


def test_the_test_path_installs_the_test_tools() -> None:
    test = plan("--test")
    assert "pip: -e .[dev,spark,broker,docs,schema-registry]" in test and "stunnel4" in test
    # MIT Kerberos: the KDC and kinit of the GSSAPI tests, libkrb5-dev for python-gssapi (in dev)
    for package in ("krb5-kdc", "krb5-admin-server", "krb5-user", "libkrb5-dev", "faketime"):
        assert package in test


def test_the_scripts_choose_their_profiles_and_pip_is_not_silenced() -> None:
    assert "bootstrap.sh --test" in (ROOT / "scripts" / "test.sh").read_text()
    assert "bootstrap.sh --test" not in (ROOT / "scripts" / "demo.sh").read_text()
    installer = (ROOT / "scripts" / "bootstrap.sh").read_text()
    pip_lines = [line for line in installer.splitlines() if "pip install" in line]
    assert pip_lines and not any(" -q" in line for line in pip_lines)


def test_the_documentation_site_builds_in_strict_mode(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists() and shutil.which("mkdocs") is None:
        pytest.skip("the docs extra is not installed (pip install -e '.[docs]')")
    result = subprocess.run(
        [
            str(mkdocs if mkdocs.exists() else "mkdocs"),
            "build",
            "--strict",
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "reference" / "configuration" / "index.html").exists()
