"""Fenced code blocks of the project's Markdown (README.md, docs/*.md) as runnable examples: their
parsing, with the ``<!-- readme-test: ... -->`` marker above a fence, and running one in a child
process. [test]"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"<!--\s*readme-test:\s*(skip|interrupt-after\s+(\d+(?:\.\d+)?))\s*:\s*(.+?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file (``source``: its name, for messages)."""

    line: int
    language: str
    code: str
    mode: str  # "run", "skip" or "interrupt"
    interrupt_after_s: float = 0.0
    reason: str = ""
    source: str = "README.md"

    @property
    def id(self) -> str:
        return f"{self.language}-line-{self.line}"


def fenced_blocks(text: str, source: str = "README.md") -> list[Block]:
    """The fenced blocks with a language (python, bash, sh) of ``text``, each with the marker
    above it (if any)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        language = match[1]
        if language in ("python", "bash", "sh"):
            above = lines[index - 1] if index > 0 else ""
            marker = MARKER.search(above)
            mode, after, reason = "run", 0.0, ""
            if marker is not None:
                mode = "skip" if marker[1] == "skip" else "interrupt"
                after = float(marker[2]) if marker[2] else 0.0
                reason = marker[3]
            code = "\n".join(lines[index + 1 : end]) + "\n"
            blocks.append(
                Block(index + 1, "bash" if language == "sh" else language, code, mode, after, reason, source)
            )
        index = end + 1
    return blocks


def run_child(command: list[str], block: Block, cwd: Path, env: dict[str, str], timeout: float) -> str:
    """Run ``block`` as ``command``; fails the test unless it exits 0 (or, an ``interrupt`` block,
    ends in KeyboardInterrupt). Returns what it printed to stdout."""
    child = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if block.mode == "interrupt":
            try:
                out, err = child.communicate(timeout=block.interrupt_after_s)
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGINT)
                out, err = child.communicate(timeout=60)
                text = err.decode(errors="replace").strip()
                assert text.endswith("KeyboardInterrupt"), f"{block.source}:{block.line} failed:\n{text}"
                return out.decode(errors="replace")
        else:
            out, err = child.communicate(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, (
        f"{block.source}:{block.line} exited {child.returncode}:\n{out.decode(errors='replace')}\n"
        f"{err.decode(errors='replace')}"
    )
    return out.decode(errors="replace")


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFLUX_BOOTSTRAP_SERVERS", "KAFLUX_BROKER_PID")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update({"NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}, **extra)
    return env
