"""The configuration reference is generated from config.py's declarations: every key says what it
means, and the page is current (issue 18)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from kaflux.config import AdminConfig, ConsumerConfig, ProducerConfig

ROOT = Path(__file__).resolve().parents[2]


def test_every_setting_declares_its_meaning() -> None:
    missing = [
        f.metadata["key"]
        for cls in (ConsumerConfig, ProducerConfig, AdminConfig)
        for f in dataclasses.fields(cls)
        if not f.metadata["doc"]
    ]
    assert missing == [], f"add doc= to the _setting(...) declarations of {sorted(set(missing))}"


def test_the_generated_reference_pages_are_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "generate_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_the_configuration_page_has_one_row_per_key() -> None:
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    for cls in (ConsumerConfig, ProducerConfig, AdminConfig):
        for key in cls.keys():  # noqa: SIM118 - a classmethod, not a dict
            assert f"| `{key}` |" in page, key
