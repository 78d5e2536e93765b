#!/usr/bin/env python3
"""Check that the thread tags in kaflux's module docstrings are true, and that no modules import
each other.

Every module's docstring names, in its first paragraph, the thread that runs it as a tag in
brackets: ``[pure]`` (no I/O, no clock, no threads: callers pass ``now_ms``), ``[app]`` (the
application thread), ``[bg]`` (the network thread), ``[shared]`` (both, behind one lock),
``[io]`` (processes and files: the test brokers), or ``[test]``; combinations such as
``[bg, pure: takes now_ms]`` are allowed, followed by free text.

Rules:

1. every module carries a tag whose first word is one of those;
2. a module tagged ``pure`` imports none of ``socket``, ``selectors``, ``ssl``, ``threading`` or
   ``time`` -- neither directly nor through the kaflux modules it imports (imports under
   ``if TYPE_CHECKING:`` do not count: they never run);
3. no import cycle: no module reaches itself through the kaflux modules it imports, counting
   every import -- module-level, inside a function and under ``if TYPE_CHECKING:`` alike (two
   modules that name each other know each other, whenever the import runs). An import names the
   deepest module its dotted name reaches (``from a.b import c`` names ``a.b.c`` if that is a
   module, else ``a.b``), not the packages above it. Collaborators meet through a third module
   of Protocols instead (``consumer/membership/contracts.py``). Cython sources are not read.
   :data:`ALLOWED_CYCLES` lists the cycles tolerated for now, each with why.

Usage: ``python tools/check_architecture.py [PACKAGE_DIR ...]`` (default: src/kaflux); prints
one line per problem and exits 1 if there is any.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

TAGS = frozenset({"pure", "app", "bg", "shared", "io", "test"})
FORBIDDEN_IN_PURE = frozenset({"socket", "selectors", "ssl", "threading", "time"})
_TAG = re.compile(r"\[([a-z]+)[^\]]*\]")
_DEFAULT_ROOTS = (Path(__file__).resolve().parent.parent / "src" / "kaflux",)

#: Import cycles tolerated, each exactly (all its modules, no more, no fewer): none.
ALLOWED_CYCLES: frozenset[frozenset[str]] = frozenset()


@dataclass
class Module:
    """What the checker knows of one module."""

    name: str
    path: Path
    tags: set[str] = field(default_factory=set)
    has_tag: bool = False
    stdlib: set[str] = field(default_factory=set)
    internal: set[str] = field(default_factory=set)
    #: kaflux modules named by any import, ``TYPE_CHECKING`` and function-level ones included
    named: set[str] = field(default_factory=set)


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


def _imports(
    tree: ast.Module, package: str, is_package: bool, *, type_checking: bool = False
) -> Iterator[str]:
    """Absolute names of every module imported where it runs (under TYPE_CHECKING too if
    ``type_checking``)."""

    def walk(nodes: Iterable[ast.AST]) -> Iterator[str]:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
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
            for imported in _imports(tree, name, path.name == "__init__.py", type_checking=True):
                if imported.split(".")[0] == top:
                    module.named.add(imported)
            modules[name] = module
    return modules


def _deepest_module(name: str, modules: dict[str, Module]) -> str | None:
    """The module a dotted import name reaches: itself, or the nearest enclosing module."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    """Module -> the modules it names in any import (itself left out)."""
    graph: dict[str, set[str]] = {}
    for name, module in modules.items():
        targets = {_deepest_module(imported, modules) for imported in module.named}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, with an
    explicit stack so that deep import chains cannot overflow Python's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(frozenset(component))
    return cycles


def _cycle_path(component: frozenset[str], graph: dict[str, set[str]]) -> list[str]:
    """One import path around ``component``, the shortest from its first module back to it."""
    start = min(component)
    previous: dict[str, str] = {}
    todo = deque([start])
    while todo:
        current = todo.popleft()
        for succ in sorted(graph[current] & component):
            if succ == start:
                path = [current]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if succ not in previous:
                previous[succ] = current
                todo.append(succ)
    return sorted(component)  # not reached: every module of a component reaches the others


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
    graph = import_graph(modules)
    for component in sorted(import_cycles(graph), key=sorted):
        if component in ALLOWED_CYCLES:
            continue
        path = _cycle_path(component, graph)
        problems.append(
            f"{modules[path[0]].path}: import cycle {' -> '.join(path)} "
            "(TYPE_CHECKING and function-level imports count: let the modules meet through a "
            "Protocol in a third module)"
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    problems = check([Path(a) for a in args] or _DEFAULT_ROOTS)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
