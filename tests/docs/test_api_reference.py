"""The documentation site documents every public name, and shows no reST or click sentinel (issue 32).

The site is built here (``mkdocs build --strict`` into a temporary directory, about 10 s) and its
HTML is read: mkdocstrings gives every rendered object an ``id`` that is its dotted path
(``kaflux.consumer.consumer.Consumer.poll``), or the alias's (``kaflux.admin.ConfigResource``)
when a module page renders its ``__all__``.

* Every public name has an entry: the names of each module of :data:`PUBLIC_MODULES` (its
  ``__all__``, or the classes and functions it defines when it has none), under the module's
  path or the defining one. mkdocstrings leaves out a member without a docstring, so a missing
  docstring fails here too.
* Every public method and property of the clients' classes (:data:`CLIENT_CLASSES`), inherited
  ones (AdminClient's mixins) included, has an entry.
* Every top-level kaflux module or package is in :data:`PUBLIC_MODULES` or, with a reason, in
  :data:`NOT_PUBLIC`: a new public module cannot be forgotten.
* No page shows a reST role (``:meth:``), a reST literal-block marker (``Example::``) or click's
  ``Sentinel.UNSET`` default (mkdocs-click with click 8.3).

A failure names each missing name and the page (and the ``:::`` line) to add.
"""

from __future__ import annotations

import html
import importlib
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflux.errors import BrokerError

ROOT = Path(__file__).resolve().parents[2]

#: public module -> the reference page that documents it
PUBLIC_MODULES: dict[str, str] = {
    "kaflux": "docs/reference/api.md",
    "kaflux.producer": "docs/reference/api.md",
    "kaflux.serialization": "docs/reference/api.md",
    "kaflux.devbrokers": "docs/reference/api.md",
    "kaflux.metrics.prometheus": "docs/reference/api.md",
    "kaflux.interceptors": "docs/reference/api.md",
    "kaflux.opentelemetry": "docs/reference/api.md",
    "kaflux.aio": "docs/reference/aio.md",
    "kaflux.admin": "docs/reference/admin.md",
    "kaflux.errors": "docs/reference/errors.md",
    "kaflux.schema_registry": "docs/reference/schema-registry.md",
    "kaflux.schema_registry.avro": "docs/reference/schema-registry.md",
    "kaflux.schema_registry.protobuf": "docs/reference/schema-registry.md",
    "kaflux.schema_registry.json_schema": "docs/reference/schema-registry.md",
    "pyspark_kaflux": "docs/reference/api.md",
}

#: kaflux's other top-level modules and packages: not public API, and why
NOT_PUBLIC: dict[str, str] = {
    "kaflux.records": "the record kernels; ConsumerRecord is documented as kaflux.ConsumerRecord",
    "kaflux.metrics": "the metrics machinery behind metrics(); its output is documented with metrics()",
    "kaflux.peer_settings": "the other clients' settings, documented as docs/reference/peer-settings.md",
    "kaflux.config": "the settings, documented as docs/reference/configuration.md",
    "kaflux.cli": "the kaflux command, documented as docs/reference/cli.md",
    "kaflux.demo": "the demo, run as `kaflux demo` / python -m kaflux.demo",
    "kaflux.consumer": "the consumer's internals; its public names are exported by kaflux",
    "kaflux.network": "the network layer (internal)",
    "kaflux.protocol": "the generated wire protocol (internal)",
    "kaflux.blocking": "how blocking calls are written (internal)",
    "kaflux.closeable": "the clients' context-manager base (internal)",
    "kaflux.state_machine": "state machines as data (internal)",
    "kaflux.structs": "its public names are exported by kaflux",
    "kaflux.timeouts": "timeout arithmetic (internal)",
    "kaflux.validation": "argument checks (internal)",
    "kaflux.testing": "the old home of the test doubles; importing it raises, naming the new places",
}

#: public names whose documented path is neither the module's nor the defining one
DOCUMENTED_AS: dict[str, str] = {
    # the compiled kernel's type; the pure twin, whose interface it has, is documented
    "kaflux.ConsumerRecord": "kaflux.records.consumer_record.ConsumerRecord",
}

#: the public names of pyspark_kaflux (it has no __all__: the data source is what users name)
PYSPARK_NAMES = ("KafluxDataSource",)


def public_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    if module_name == "pyspark_kaflux":
        return list(PYSPARK_NAMES)
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == module_name
    ]


def candidate_paths(module_name: str, name: str) -> set[str]:
    """The ids an entry for ``module_name.name`` may have."""
    value = getattr(importlib.import_module(module_name), name)
    paths = {f"{module_name}.{name}"}
    defined_in = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if (
        isinstance(defined_in, str)
        and isinstance(qualname, str)
        and (inspect.isclass(value) or callable(value))
    ):
        paths.add(f"{defined_in}.{qualname}")
    if f"{module_name}.{name}" in DOCUMENTED_AS:
        paths.add(DOCUMENTED_AS[f"{module_name}.{name}"])
    return paths


def client_classes() -> Iterator[tuple[str, str, type]]:
    """(module, name, class) of the classes whose every public method must be documented: the
    non-error classes of kaflux, kaflux.aio and kaflux.schema_registry."""
    for module_name in ("kaflux", "kaflux.aio", "kaflux.schema_registry"):
        for name in public_names(module_name):
            value = getattr(importlib.import_module(module_name), name)
            if inspect.isclass(value) and not issubclass(value, BaseException):
                yield module_name, name, value


def public_members(cls: type) -> list[str]:
    """Methods and properties of ``cls`` and its kaflux bases (not object's, Enum's, tuple's...)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith(("kaflux", "pyspark_kaflux")):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, property) or inspect.isfunction(value) or callable(value):
                if inspect.isclass(value):
                    continue
                names.add(name)
    return sorted(names)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, str]:
    """Every HTML page of the site, built from this tree."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert built.returncode == 0, (
        "mkdocs build --strict failed (pip install -e '.[docs]' if mkdocs is missing):\n"
        + built.stdout
        + built.stderr
    )
    return {path: path.read_text(encoding="utf-8") for path in out.rglob("*.html")}


@pytest.fixture(scope="module")
def anchors(site: dict[Path, str]) -> set[str]:
    return {html.unescape(a) for text in site.values() for a in re.findall(r'\bid="([^"]+)"', text)}


def has_docstring(module_name: str, name: str) -> bool:
    """Whether the public name has a docstring of its own (not only its base class's, nor a
    NamedTuple's generated one); a broker error's ``description`` serves as one (the site's
    extension, tools/docstrings_to_markdown.py, renders it as the docstring)."""
    if f"{module_name}.{name}" in DOCUMENTED_AS:
        return True  # checked through the documented twin's entry
    value = getattr(importlib.import_module(module_name), name)
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        return True  # data (__version__, SubjectNameStrategy): the page describes it
    if inspect.isclass(value):
        if issubclass(value, BrokerError) and "description" in vars(value):
            return True
        doc = vars(value).get("__doc__")
        return isinstance(doc, str) and bool(doc) and not doc.startswith(f"{value.__name__}(")
    return bool(value.__doc__)


def test_every_public_name_has_an_entry(anchors: set[str]) -> None:
    missing: list[str] = []
    total = 0
    for module_name, page in PUBLIC_MODULES.items():
        for name in public_names(module_name):
            total += 1
            paths = candidate_paths(module_name, name)
            if not has_docstring(module_name, name):
                where = sorted(paths, key=len)[-1]
                missing.append(f"  {module_name}.{name}: write its docstring (where {where} is defined)")
            elif not paths & anchors:
                where = sorted(paths, key=len)[-1]
                missing.append(f"  {module_name}.{name}: add `::: {where}` to {page}")
    assert not missing, (
        f"{len(missing)} of {total} public names are not documented in the API reference:\n"
        + "\n".join(missing)
    )


def test_every_public_method_of_the_clients_has_an_entry(anchors: set[str]) -> None:
    missing: list[str] = []
    for module_name, name, cls in client_classes():
        documented = candidate_paths(module_name, name) & anchors
        if not documented:
            continue  # test_every_public_name_has_an_entry reports it
        for member in public_members(cls):
            if any(f"{path}.{member}" in anchors for path in documented):
                continue
            source = inspect.getsourcefile(cls) or cls.__module__
            missing.append(
                f"  {module_name}.{name}.{member} ({Path(source).relative_to(ROOT)}): no entry on the page "
                "of its class"
                + (
                    "; an inherited one also needs `inherited_members: true` on its `:::` entry"
                    if member not in vars(cls)
                    else ""
                )
            )
    assert not missing, "public methods without an entry in the API reference:\n" + "\n".join(missing)


def test_every_top_level_module_is_public_or_says_why_not() -> None:
    """A new module or package of kaflux (``kaflux.opentelemetry``) is either documented or
    declared internal: it cannot be forgotten."""
    package = ROOT / "src" / "kaflux"
    found = sorted(
        f"kaflux.{path.stem if path.suffix == '.py' else path.name}"
        for path in [*package.glob("*.py"), *(p for p in package.iterdir() if (p / "__init__.py").exists())]
        if not path.name.startswith("_")
    )
    unlisted = [m for m in found if m not in PUBLIC_MODULES and m not in NOT_PUBLIC]
    assert not unlisted, (
        "modules the API reference neither covers nor calls internal: "
        + ", ".join(unlisted)
        + ". Add each to PUBLIC_MODULES in tests/docs/test_api_reference.py with its page under "
        "docs/reference/ (a `::: module` entry, and the page in mkdocs.yml's nav), or to NOT_PUBLIC with why."
    )
    stale = [m for m in [*PUBLIC_MODULES, *NOT_PUBLIC] if m.count(".") == 1 and m not in found]
    assert not stale, f"listed here but gone from src/kaflux: {stale}"


CODE = re.compile(r"<(pre|code)\b.*?</\1>", re.DOTALL)
TAGS = re.compile(r"<[^>]+>")
REST_ROLE = re.compile(r":(?:py:)?(?:meth|class|func|mod|data|attr|exc|obj|const|ref|term):")
REST_LITERAL = re.compile(r"\w::(?:\s|$)")


def test_no_page_shows_rest_or_click_sentinels(site: dict[Path, str]) -> None:
    leaks: list[str] = []
    for path, text in sorted(site.items()):
        body = text.split('<div class="md-content"', 1)[-1]
        if "Sentinel.UNSET" in body:
            leaks.append(
                f"{path.name} in {path.parent.name}: Sentinel.UNSET ({body.count('Sentinel.UNSET')} times)"
            )
        if "<autoref" in body:
            leaks.append(f"{path.parent.name}: an unprocessed <autoref> tag")
        prose = html.unescape(TAGS.sub(" ", CODE.sub(" ", body)))
        for pattern in (REST_ROLE, REST_LITERAL):
            for match in pattern.finditer(prose):
                context = prose[max(0, match.start() - 60) : match.end() + 40].replace("\n", " ")
                leaks.append(f"{path.parent.name}: {match.group(0)!r} in ...{context}...")
    assert not leaks, "reST or click's UNSET sentinel on the site:\n" + "\n".join(leaks)


def test_the_site_documents_every_setting_of_the_four_clients(site: dict[Path, str]) -> None:
    from kaflux.config import AdminConfig, ConsumerConfig, ProducerConfig, ShareConsumerConfig

    page = next(text for path, text in site.items() if path.parent.name == "configuration")
    missing = [
        f"{cls.__name__}: {key}"
        for cls in (ConsumerConfig, ShareConsumerConfig, ProducerConfig, AdminConfig)
        for key in cls.keys()  # noqa: SIM118 (a classmethod, not a dict)
        if f"<code>{html.escape(key)}</code>" not in page
    ]
    assert not missing, (
        "settings missing from docs/reference/configuration.md (python tools/generate_docs.py):\n"
        + "\n".join(missing)
    )
    assert '<h2 id="shareconsumer">' in page
