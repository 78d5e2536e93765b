"""The asyncio guide's example (docs/asyncio.md, a FastAPI-style lifespan; it was the README's) runs as
plain asyncio on Tansu."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kaflux.devbrokers.brokers import Broker

from support.aio_helpers import create_topic

pytestmark = pytest.mark.integration

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "asyncio.md"


def test_the_asyncio_guide_lifespan_example_runs(kafka: Broker, tmp_path: Path) -> None:
    text = GUIDE.read_text()
    found = re.search(r"<!-- kaflux-aio-example -->\n```python\n(.*?)```", text, re.S)
    assert found, "docs/asyncio.md lost its lifespan example"
    script = tmp_path / "lifespan_example.py"
    script.write_text(found.group(1))
    topic = create_topic(kafka.bootstrap_servers, 1)
    env = {**os.environ, "KAFLUX_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "KAFLUX_TOPIC": topic}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["order written at offset 0", "consumed b'{\"id\": 1}'"]
