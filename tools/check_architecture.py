#!/usr/bin/env python3
"""Check that the thread tags in kaflux's module docstrings are true, not just written.

Every module's docstring names, in its first paragraph, the thread that runs it as a tag in
brackets: ``[pure]`` (no I/O, no clock, no threads: callers pass ``now_ms``), ``[app]`` (the
application thread), ``[bg]`` (the network thread), ``[shared]`` (both, behind one lock),
``[io]`` (processes and files: the test brokers), or ``[test]``; combinations such as
``[bg, pure: takes now_ms]`` are allowed, followed by free text.

Rules:

1. every module carries a tag whose first word is one of those;
2. a module tagged ``pure`` imports none of ``socket``, ``selectors``, ``ssl``, ``threading`` or
   ``time`` -- neither directly nor through the kaflux modules it imports (imports under
   ``if TYPE_CHECKING:`` do not count: they never run).

Usage: ``python tools/check_architecture.py [PACKAGE_DIR ...]`` (default: src/kaflux); prints
one line per problem and exits 1 if there is any.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

TAGS = frozenset({"pure", "app", "bg", "shared", "io", "test"})
FORBIDDEN_IN_PURE = frozenset({"socket", "selectors", "ssl", "threading", "time"})
_TAG = re.compile(r"\[([a-z]+)[^\]]*\]")
_DEFAULT_ROOTS = (Path(__file__).resolve().parent.parent / "src" / "kaflux",)


@dataclass
class Module:
    """What the checker knows of one module."""

    name: str
    path: Path
    tags: set[str] = field(default_factory=set)
    has_tag: bool = False
    stdlib: set[str] = field(default_factory=set)
    internal: set[str] = field(default_factory=set)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, package: str, is_package: bool) -> Iterator[str]:
    """Absolute names of every module imported where it runs (not under TYPE_CHECKING)."""

    def walk(nodes: Iterable[ast.AST]) -> Iterator[str]:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node):
                yield from walk(node.orelse)
                continue
            if isinstance(node, ast.Import):
                yield from (alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor if is_package else anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                yield base
                yield from (f"{base}.{alias.name}" for alias in node.names)
            yield from walk(ast.iter_child_nodes(node))

    yield from walk(tree.body)


def load(roots: Iterable[Path]) -> dict[str, Module]:
    """Parse every module under the package directories ``roots``."""
    modules: dict[str, Module] = {}
    for root in roots:
        top = root.name
        for path in sorted(root.rglob("*.py")):
            name = _module_name(path, root)
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            doc = ast.get_docstring(tree) or ""
            first = doc.split("\n\n", 1)[0]
            module = Module(name, path)
            match = _TAG.search(first)
            if match is not None:
                module.has_tag = True
                inside = first[match.start() + 1 : match.end() - 1]
                module.tags = {word for word in re.findall(r"[a-z]+", inside) if word in TAGS}
                module.has_tag = match.group(1) in TAGS
            for imported in _imports(tree, name, path.name == "__init__.py"):
                if imported.split(".")[0] == top:
                    module.internal.add(imported)
                else:
                    module.stdlib.add(imported.split(".")[0])
            modules[name] = module
    return modules


def _reachable(start: str, modules: dict[str, Module]) -> dict[str, list[str]]:
    """Every kaflux module ``start`` imports, directly or not, with one import path to it."""
    paths: dict[str, list[str]] = {start: [start]}
    todo = [start]
    while todo:
        current = todo.pop()
        for imported in sorted(modules[current].internal):
            target = imported if imported in modules else imported.rpartition(".")[0]
            if target in modules and target not in paths:
                paths[target] = [*paths[current], target]
                todo.append(target)
    return paths


def check(roots: Iterable[Path]) -> list[str]:
    """Every rule broken under ``roots``, one message each (empty when all hold)."""
    modules = load(roots)
    problems: list[str] = []
    for name, module in sorted(modules.items()):
        if not module.has_tag:
            problems.append(
                f"{module.path}: no thread tag in the first paragraph of its docstring "
                f"(one of {', '.join(f'[{t}]' for t in sorted(TAGS))})"
            )
            continue
        if "pure" not in module.tags:
            continue
        for reached, chain in _reachable(name, modules).items():
            bad = sorted(modules[reached].stdlib & FORBIDDEN_IN_PURE)
            if bad:
                via = " -> ".join(chain)
                problems.append(f"{module.path}: tagged [pure] but imports {', '.join(bad)} (via {via})")
                break
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    problems = check([Path(a) for a in args] or _DEFAULT_ROOTS)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
