"""README.md's blocks run as pasted (issues 18 and 32).

The README is a landing page: an install block, the Quick start's two commands, and a tour whose
blocks a newcomer pastes in order into one shell (``python`` blocks into ``python`` started from
that shell). This test does exactly that: every block not marked ``skip`` becomes one bash
script, ``bash`` blocks as they are and each ``python`` block fed to a fresh ``python`` (so a
block that uses a name it does not define fails, as it would when pasted). Nothing is
substituted: the tour's first block starts its own broker (``kaflux broker start --env``) and
every example reads ``KAFLUX_BOOTSTRAP_SERVERS``, the one variable that command exports.

A block may be skipped only with a reason naming the test that runs it instead
(``<!-- readme-test: skip: ... (tests/x/test_y.py) -->``); blocks moved to docs/ pages run in
tests/docs/test_guide_examples.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from support.doc_blocks import FENCE, MARKER, Block, child_env, fenced_blocks, run_child

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = fenced_blocks(TEXT)
TOUR = [b for b in BLOCKS if b.mode != "skip"]
SKIPPED = [b for b in BLOCKS if b.mode == "skip"]
#: what a skip reason must name: the test (or CI entry point) that runs the block instead
COVERED_BY = re.compile(r"(tests/\S+\.py|\.ci/run)")


def test_every_skipped_block_says_which_test_runs_it() -> None:
    assert TOUR, "the README has no runnable block"
    for block in SKIPPED:
        assert COVERED_BY.search(block.reason), (
            f"README.md:{block.line}: a skipped block must name the test that runs it: {block.reason!r}"
        )
        for path in COVERED_BY.findall(block.reason):
            assert (README.parent / path).exists(), f"README.md:{block.line}: {path} does not exist"


def test_markers_sit_right_above_a_fence() -> None:
    lines = TEXT.splitlines()
    for number, line in enumerate(lines[:-1], start=1):
        if line.lstrip().startswith("<!--") and "readme-test:" in line:
            assert MARKER.search(line), f"README.md:{number}: malformed marker {line!r}"
            assert FENCE.match(lines[number]), f"README.md:{number}: a marker must be right above a fence"


def test_the_tour_uses_one_environment_variable_and_no_fixed_address() -> None:
    for block in TOUR:
        variables = set(re.findall(r"environ(?:\.get\(|\[)\s*[\"'](\w+)", block.code))
        variables |= set(re.findall(r"\$\{?(\w+)", block.code))
        assert variables <= {"KAFLUX_BOOTSTRAP_SERVERS"}, f"README.md:{block.line}: {variables}"
        assert not re.search(r"\b\d+\.\d+\.\d+\.\d+:\d+\b", block.code), f"README.md:{block.line}"
    assert TOUR[0].language == "bash" and "kaflux broker start --env" in TOUR[0].code
    assert "kaflux broker stop" in TOUR[-1].code


def tour_script(blocks: list[Block]) -> str:
    """One bash script: the blocks in order, each python block fed to a fresh ``python``."""
    # Whatever happens, a broker the tour started is stopped.
    parts = ["trap 'kaflux broker stop >/dev/null 2>&1 || true' EXIT", "set -euo pipefail"]
    for block in blocks:
        parts.append(f"echo '== README.md:{block.line}'")
        if block.language == "python":
            assert "KAFLUX_EOF" not in block.code
            parts.append(f"python - <<'KAFLUX_EOF'\n{block.code}KAFLUX_EOF")
        else:
            parts.append(block.code)
    return "\n".join(parts) + "\n"


def test_the_tour_runs_as_pasted(tmp_path: Path) -> None:
    env = child_env()  # this interpreter's bin first on PATH: `kaflux` and `python` are this venv's
    assert Path(sys.executable).parent.joinpath("kaflux").exists()
    whole = Block(TOUR[0].line, "bash", tour_script(TOUR), "run")
    out = run_child(["bash", "-c", whole.code], whole, tmp_path, env, timeout=300)
    # what the tour's comments promise
    assert out.count('{"topic":"orders"') == 11, out  # kaflux consume ... -n 11: JSON lines
    assert "read back b'{\"id\": 10}'" in out, out
    assert "['orders']" in out, out
    assert re.search(r"^orders \d 10$", out, re.MULTILINE), out  # billing committed all ten
    assert '"total_lag": 1' in out, out  # kaflux groups lag billing: the asyncio record
