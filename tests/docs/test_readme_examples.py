"""Every fenced ``python`` and ``bash`` block of README.md runs, so the README cannot drift (issue 18).

How a block runs:

* ``bash``: in a fresh temporary directory, with this interpreter's ``bin`` first on PATH (so
  ``kaflux`` is the installed command) and no ``KAFLUX_BOOTSTRAP_SERVERS`` inherited; it must exit
  0. The CLI tour starts its own broker (``eval "$(kaflux broker start --env)"``).
* ``python``: in a child interpreter against the session's Apache Kafka broker, with
  :data:`PLACEHOLDERS` replaced by its address and :data:`PRELUDE` run first (``BOOTSTRAP``,
  ``process``, ``enrich``, the imports of the README's first example, and a ``consumer`` when
  the block uses one it does not create). Blocks
  that use ``spark`` run together in one child with a local SparkSession. Each must finish
  without an exception.

A block that cannot run here is marked on the line right above its fence, with a reason::

    <!-- readme-test: skip: needs a SASL_SSL cluster -->
    <!-- readme-test: interrupt-after 5: polls until Ctrl-C -->

``skip`` leaves it out; ``interrupt-after N`` runs it for N seconds, sends SIGINT and passes if
the only error is the KeyboardInterrupt. Blocks without a language (diagrams) are not code.
Sections added by others need nothing else: a new block runs unless marked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kaflux.devbrokers import Broker

from support.doc_blocks import FENCE, MARKER, Block, child_env, fenced_blocks, run_child

README = Path(__file__).resolve().parents[2] / "README.md"
#: addresses the README uses for "your broker"
PLACEHOLDERS = ("127.0.0.1:9092", "broker:9092", "host:9092")

PRELUDE = """
import os
BOOTSTRAP = {bootstrap!r}
os.environ.setdefault("KAFKA_PASSWORD", "not-a-secret")

def process(records):
    return len(records)

def enrich(value):
    return value

# the names of the README's first example, which later snippets use without importing them
from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
with AdminClient({{"bootstrap.servers": BOOTSTRAP}}) as _admin:
    _admin.create_topics([NewTopic("orders", 6), NewTopic("orders-upper", 6)], exist_ok=True)
"""

CONSUMER = """
from kaflux import Consumer as _Consumer
consumer = _Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "readme", "auto.offset.reset": "earliest"})
consumer.subscribe(["orders"])
"""


BLOCKS = fenced_blocks(README.read_text(encoding="utf-8"))
PYTHON = [b for b in BLOCKS if b.language == "python" and b.mode != "skip"]
SPARK = [b for b in PYTHON if re.search(r"\bspark\b", b.code)]
PLAIN_PYTHON = [b for b in PYTHON if b not in SPARK]
BASH = [b for b in BLOCKS if b.language == "bash" and b.mode != "skip"]


def test_the_readme_has_runnable_examples_and_few_skipped_ones() -> None:
    skipped = [b for b in BLOCKS if b.mode == "skip"]
    assert PLAIN_PYTHON and SPARK and BASH
    assert all(b.reason for b in skipped)
    assert len(skipped) <= len(BLOCKS) // 2, [(b.line, b.reason) for b in skipped]


def test_markers_sit_right_above_a_fence() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines[:-1], start=1):
        if line.lstrip().startswith("<!--") and "readme-test:" in line:
            assert MARKER.search(line), f"README.md:{number}: malformed marker {line!r}"
            assert FENCE.match(lines[number]), f"README.md:{number}: a marker must be right above a fence"


def substitute(code: str, bootstrap: str) -> str:
    for placeholder in PLACEHOLDERS:
        code = code.replace(placeholder, bootstrap)
    return code


def python_program(block: Block, bootstrap: str) -> str:
    code = substitute(block.code, bootstrap)
    prelude = PRELUDE.format(bootstrap=bootstrap)
    if re.search(r"\bconsumer\b", code) and not re.search(r"^consumer\s*=", code, re.MULTILINE):
        prelude += CONSUMER
    return prelude + "\n" + code


@pytest.mark.parametrize("block", PLAIN_PYTHON, ids=[b.id for b in PLAIN_PYTHON])
def test_python_example(block: Block, kafka: Broker, tmp_path: Path) -> None:
    program = python_program(block, kafka.bootstrap_servers)
    run_child([sys.executable, "-c", program], block, tmp_path, child_env(), timeout=120)


@pytest.mark.parametrize("block", BASH, ids=[b.id for b in BASH])
def test_bash_example(block: Block, tmp_path: Path) -> None:
    # Whatever happens, a broker the block started is stopped.
    script = "trap 'kaflux broker stop >/dev/null 2>&1 || true' EXIT\nset -euo pipefail\n" + block.code
    run_child(["bash", "-c", script], block, tmp_path, child_env(), timeout=300)


SPARK_RUNNER = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for line, program in json.loads(sys.stdin.read()):
        print(f"== README.md:{line}", flush=True)
        exec(compile(program, f"README.md:{line}", "exec"), {"spark": spark, "__name__": "__readme__"})
    spark.stop()
    """
)


@pytest.mark.spark
def test_spark_examples(kafka: Broker, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    java = shutil.which("java")
    if java is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    java_home = os.environ.get("JAVA_HOME") or str(Path(os.path.realpath(str(java))).parent.parent)
    env = child_env(
        JAVA_HOME=java_home,
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    programs = [(b.line, python_program(b, kafka.bootstrap_servers)) for b in SPARK]
    result = subprocess.run(
        [sys.executable, "-c", SPARK_RUNNER],
        input=json.dumps(programs).encode(),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout.decode(errors="replace") + result.stderr.decode(
        errors="replace"
    )
