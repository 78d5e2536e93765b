"""tools/generate_messages.py: drift check, spec parsing helpers, determinism."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.protocol_testutil import GENERATOR_PATH, REPO_ROOT, generator, specs_available, specs_dir

# Outside CI a checkout without ../shared may skip; in CI (CI=true) the specs must be there,
# so the drift check can never be skipped silently.
needs_specs = pytest.mark.skipif(
    not specs_available() and not os.environ.get("CI"), reason="Kafka message specs not found"
)


@needs_specs
def test_committed_output_matches_the_generator() -> None:
    """Fails when someone edited generated code or changed the generator without re-running it."""
    proc = subprocess.run(
        [sys.executable, str(GENERATOR_PATH), "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"generated protocol code is stale:\n{proc.stdout}{proc.stderr}"


@needs_specs
def test_check_mode_names_changed_and_stale_files(tmp_path: Path) -> None:
    gen = generator()
    assert gen.main(["--output", str(tmp_path)]) == 0
    assert gen.main(["--check", "--output", str(tmp_path)]) == 0
    (tmp_path / "fetch.py").write_text("# edited by hand\n", encoding="utf-8")
    (tmp_path / "old_api.py").write_text(gen.HEADER_MARK + " long ago\n", encoding="utf-8")
    (tmp_path / "handwritten.py").write_text("x = 1\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(GENERATOR_PATH), "--check", "--output", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert "fetch.py" in proc.stdout
    assert "old_api.py" in proc.stdout
    assert "handwritten.py" not in proc.stdout
    assert "metadata.py" not in proc.stdout
    # Regenerating repairs the edit and removes the stale generated module only.
    assert gen.main(["--output", str(tmp_path)]) == 0
    assert not (tmp_path / "old_api.py").exists()
    assert (tmp_path / "handwritten.py").exists()
    assert gen.main(["--check", "--output", str(tmp_path)]) == 0


def _fresh_clone(tmp_path: Path) -> Path:
    """A clone of this repository with no ../shared beside it (and the generator as it is in
    the working tree, so that an uncommitted change is what gets tested)."""
    clone = tmp_path / "nested" / "kaflux"
    subprocess.run(
        ["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True, timeout=120, capture_output=True
    )
    shutil.copyfile(GENERATOR_PATH, clone / "tools" / "generate_messages.py")
    return clone


def _check_in(clone: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "KAFLUX_MESSAGE_SPECS")}
    return subprocess.run(
        [sys.executable, "tools/generate_messages.py", "--check"],
        cwd=clone,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_fresh_clone_without_the_specs_skips_the_drift_check_and_says_why(tmp_path: Path) -> None:
    proc = _check_in(_fresh_clone(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "drift check skipped" in proc.stdout
    assert "kafka-message-specs" in proc.stdout


def test_a_fresh_clone_without_the_specs_fails_the_drift_check_in_ci(tmp_path: Path) -> None:
    proc = _check_in(_fresh_clone(tmp_path), CI="true")
    assert proc.returncode == 1
    assert "drift check FAILED" in proc.stdout


@needs_specs
def test_output_is_deterministic() -> None:
    gen = generator()
    assert gen.render_all(specs_dir()) == gen.render_all(specs_dir())


def test_snake_case() -> None:
    snake = generator().snake_case
    assert snake("PartitionIndex") == "partition_index"
    assert snake("ThrottleTimeMs") == "throttle_time_ms"
    assert snake("TopicId") == "topic_id"
    assert snake("IsrNodes") == "isr_nodes"
    assert snake("ZkMigrationReady") == "zk_migration_ready"
    assert snake("SASLMechanism") == "sasl_mechanism"
    assert snake("Global") == "global_"
    assert snake("ApiVersions") == "api_versions"


def test_versions_parsing() -> None:
    versions = generator().Versions
    assert str(versions.parse("3+")) == "3+"
    assert 3 in versions.parse("3+") and 2 not in versions.parse("3+")
    assert 5 in versions.parse("0-5") and 6 not in versions.parse("0-5")
    assert versions.parse("none").empty
    assert versions.parse(None).empty
    assert str(versions.parse("7")) == "7"


def test_comment_stripping_keeps_slashes_inside_strings() -> None:
    strip = generator().strip_comments
    text = '// licence\n{ "a": "http://x", // trailing\n  "b": 1 }\n'
    assert strip(text).split() == ["{", '"a":', '"http://x",', '"b":', "1", "}"]


def test_api_list_is_one_constant() -> None:
    gen = generator()
    assert "Fetch" in gen.APIS
    assert gen.MODULES["fetch"] == ("FetchRequest", "FetchResponse")
    assert gen.MODULES["headers"] == ("RequestHeader", "ResponseHeader")
    assert list(gen.MODULES) == sorted(gen.MODULES)
