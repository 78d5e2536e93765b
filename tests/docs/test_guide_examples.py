"""Every fenced ``python`` and ``bash`` block of the guides runs, so they cannot drift (issues 18
and 32). The guides (:data:`PAGES`) hold what the README held before it became a landing page;
their blocks ran as README blocks then and run here the same way. README.md's own blocks run as
pasted in tests/docs/test_readme_examples.py; docs/getting-started.md and docs/migrating.md have
their own tests.

How a block runs:

* ``bash``: in a fresh temporary directory, with this interpreter's ``bin`` first on PATH (so
  ``kaflux`` is the installed command) and no ``KAFLUX_BOOTSTRAP_SERVERS`` inherited; it must exit
  0. The CLI tour starts its own broker (``eval "$(kaflux broker start --env)"``).
* ``python``: in a child interpreter against the session's noida-db broker, whose address is in
  ``KAFLUX_BOOTSTRAP_SERVERS`` (the variable every example reads), with :data:`PLACEHOLDERS`
  replaced by it and :data:`PRELUDE` run first (``process``, ``enrich``, the topics ``orders``
  and ``orders-upper``, and a ``consumer`` when the block uses one it does not create). Blocks
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

ROOT = Path(__file__).resolve().parents[2]
#: the guide pages whose blocks this test runs
PAGES = (
    "docs/clients.md",
    "docs/asyncio.md",
    "docs/spark.md",
    "docs/security.md",
    "docs/schema-registry.md",
    "docs/command-line.md",
    "docs/installing.md",
    "docs/development.md",
)
#: the Schema Registry address and user of docs/schema-registry.md's example, which runs against
#: the tests' registry double
REGISTRY_PLACEHOLDER = "https://registry:8081"
REGISTRY_USER = "user:password"
#: addresses the guides use for "your broker"
PLACEHOLDERS = ("127.0.0.1:9092", "broker:9092", "host:9092")

PRELUDE = """
import os
os.environ.setdefault("KAFKA_PASSWORD", "not-a-secret")

def process(records):
    return len(records)

def enrich(value):
    return value

from kaflux import AdminClient as _AdminClient, NewTopic as _NewTopic
with _AdminClient({{"bootstrap.servers": {bootstrap!r}}}) as _admin:
    _admin.create_topics([_NewTopic("orders", 6), _NewTopic("orders-upper", 6)], exist_ok=True)
"""

CONSUMER = """
from kaflux import Consumer as _Consumer
consumer = _Consumer({"bootstrap.servers": os.environ["KAFLUX_BOOTSTRAP_SERVERS"], "group.id": "readme",
                      "auto.offset.reset": "earliest"})
consumer.subscribe(["orders"])
"""


BLOCKS = [b for page in PAGES for b in fenced_blocks((ROOT / page).read_text(encoding="utf-8"), page)]
PYTHON = [b for b in BLOCKS if b.language == "python" and b.mode != "skip"]
SPARK = [b for b in PYTHON if re.search(r"\bspark\b", b.code)]
PLAIN_PYTHON = [b for b in PYTHON if b not in SPARK]
BASH = [b for b in BLOCKS if b.language == "bash" and b.mode != "skip"]


def test_the_guides_have_runnable_examples_and_skip_only_with_a_reason() -> None:
    assert PLAIN_PYTHON and SPARK and BASH
    for block in BLOCKS:
        if block.mode == "skip":
            assert block.reason, f"{block.source}:{block.line}: a skip needs a reason"


@pytest.mark.parametrize("page", PAGES)
def test_markers_sit_right_above_a_fence(page: str) -> None:
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines[:-1], start=1):
        if line.lstrip().startswith("<!--") and "readme-test:" in line:
            assert MARKER.search(line), f"{page}:{number}: malformed marker {line!r}"
            assert FENCE.match(lines[number]), f"{page}:{number}: a marker must be right above a fence"


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


@pytest.mark.parametrize("block", PLAIN_PYTHON, ids=[f"{b.source}:{b.line}" for b in PLAIN_PYTHON])
def test_python_example(block: Block, noida: Broker, tmp_path: Path) -> None:
    program = python_program(block, noida.bootstrap_servers)
    env = child_env(KAFLUX_BOOTSTRAP_SERVERS=noida.bootstrap_servers)
    if REGISTRY_PLACEHOLDER not in program:
        run_child([sys.executable, "-c", program], block, tmp_path, env, timeout=120)
        return
    # the Schema Registry guide's example: against the registry double, with the example's user
    from support.schema_registry import SchemaRegistryDouble

    user, password = REGISTRY_USER.split(":")
    with SchemaRegistryDouble(users={user: password}) as double:
        program = program.replace(REGISTRY_PLACEHOLDER, double.url)
        out = run_child([sys.executable, "-c", program], block, tmp_path, env, timeout=120)
        assert double.requests and all(a is not None for a in double.authorizations), double.requests
    assert out.strip().endswith(repr([{"user": "ann", "page": "/"}])), out


@pytest.mark.parametrize("block", BASH, ids=[f"{b.source}:{b.line}" for b in BASH])
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
        print(f"== {line}", flush=True)
        exec(compile(program, line, "exec"), {"spark": spark, "__name__": "__guide__"})
    spark.stop()
    """
)


@pytest.mark.spark
def test_spark_examples(noida: Broker, tmp_path: Path) -> None:
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
    env["KAFLUX_BOOTSTRAP_SERVERS"] = noida.bootstrap_servers
    programs = [(f"{b.source}:{b.line}", python_program(b, noida.bootstrap_servers)) for b in SPARK]
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
