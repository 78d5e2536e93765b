"""A griffe extension (mkdocs.yml loads it for mkdocstrings): kaflux's docstrings are written
with reST roles and literal blocks, which Markdown would show raw; this turns them into Markdown
as the API reference is built, so the sources keep one style and the site shows no reST.

* ``:class:`~kaflux.x.Y```, ``:meth:`poll```, ``:mod:`kaflux.config``` (any role) become an
  optional cross-reference: a link when the target is documented on the site, code otherwise.
  ``~`` shows the last dotted part only, as Sphinx does; ``title <target>`` shows the title.
* A paragraph ending in ``::`` (``Example::``) ends in ``:`` and the indented block after it
  becomes a fenced code block.
* A broker error class of :mod:`kaflux.errors` declared with its ``code`` and ``description``
  only gets those as its docstring (``Error code 3, UNKNOWN_TOPIC_OR_PARTITION: ...``).
* A method of a :mod:`kaflux.aio` client without a docstring gets its sync twin's (the aio
  clients have the sync clients' API), saying that it is awaited.

tests/docs/test_api_reference.py builds the site and fails on any reST left in it.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
import textwrap
from typing import Any

import griffe

import kaflux.errors

#: aio class path -> its sync twin (module, class)
TWINS: dict[str, tuple[str, str]] = {
    "kaflux.aio.consumer.AsyncConsumer": ("kaflux.consumer.consumer", "Consumer"),
    "kaflux.aio.producer.AsyncProducer": ("kaflux.producer.producer", "Producer"),
    "kaflux.aio.share.AsyncShareConsumer": ("kaflux.consumer.share.consumer", "ShareConsumer"),
}

ROLE = re.compile(r":(?:py:)?(?P<role>[a-z]+):`(?P<body>[^`]+)`")


def _role(match: re.Match[str]) -> str:
    body = match["body"].strip()
    titled = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^>]+)>", body)
    if titled:
        title, target = titled["title"], titled["target"]
    else:
        target = body.lstrip("~!")
        title = target.rsplit(".", 1)[-1] if body.startswith("~") else target
    target = target.lstrip("~!").rstrip("()")
    if match["role"] in ("meth", "func") and not title.endswith(")"):
        title += "()"
    code = f"<code>{html.escape(title)}</code>"
    return f'<autoref identifier="{html.escape(target)}" optional>{code}</autoref>'


def roles_to_markdown(text: str) -> str:
    """Every reST role of ``text`` as an optional mkdocs-autorefs cross-reference."""
    return ROLE.sub(_role, text)


def literal_blocks_to_markdown(text: str) -> str:
    """``paragraph::`` + an indented block -> ``paragraph:`` + a fenced block."""
    lines = text.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.rstrip()
        if not stripped.endswith("::") or stripped.lstrip().startswith(("```", ">>>")):
            out.append(line)
            index += 1
            continue
        indent = len(line) - len(line.lstrip())
        head = stripped[:-2].rstrip()
        if head.strip() in ("Example", "Examples"):  # not Google's "Examples:" section
            head = head.replace("Example", "For example", 1)
        out.append(head + ":" if head.strip() else "")
        end = index + 1
        block: list[str] = []
        while end < len(lines) and not lines[end].strip():
            end += 1
        while end < len(lines):
            candidate = lines[end]
            if candidate.strip() and len(candidate) - len(candidate.lstrip()) <= indent:
                break
            block.append(candidate)
            end += 1
        while block and not block[-1].strip():
            block.pop()
        if block:
            body = textwrap.dedent("\n".join(block))
            fence = " " * indent + "```"
            out += ["", fence, *(" " * indent + b if b else "" for b in body.split("\n")), fence, ""]
        index = end
    return "\n".join(out)


def to_markdown(text: str) -> str:
    return roles_to_markdown(literal_blocks_to_markdown(text))


def broker_error_docstring(path: str) -> str | None:
    """What a broker error class of :mod:`kaflux.errors` without a docstring says: its code,
    Kafka's name for it, whether it is retriable and its description."""
    module, _, name = path.rpartition(".")
    cls = getattr(kaflux.errors, name, None) if module == "kaflux.errors" else None
    if not (isinstance(cls, type) and issubclass(cls, kaflux.errors.BrokerError)):
        return None
    retriable = "retriable" if cls.retriable else "not retriable"
    name = kaflux.errors.kafka_error_name(cls.code)
    return f"Error code {cls.code}, `{name}` ({retriable}): {cls.description}."


def twin_docstring(path: str) -> str | None:
    """The docstring of an aio client's member: its sync twin's, saying whether it is awaited."""
    owner, _, member = path.rpartition(".")
    if owner not in TWINS or member.startswith("_"):
        return None
    module, name = TWINS[owner]
    twin = getattr(importlib.import_module(module), name)
    doc = inspect.getdoc(getattr(twin, member, None))
    if not doc:
        return None
    aio_module, _, aio_name = owner.rpartition(".")
    aio = getattr(importlib.import_module(aio_module), aio_name)
    value = inspect.getattr_static(aio, member, None)
    if inspect.iscoroutinefunction(value):
        how = f"`{name}.{member}()` as a coroutine (awaited on the event loop)"
    elif isinstance(value, property):
        how = f"`{name}.{member}`"
    else:
        how = f"`{name}.{member}()` (a plain method: it only changes or reads local state)"
    return f"{how}: {doc}"


class DocstringsToMarkdown(griffe.Extension):
    """Rewrites every docstring griffe loads (see the module's docstring)."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is None:
            text = broker_error_docstring(obj.path) if obj.is_class else twin_docstring(obj.path)
            if text is not None:
                obj.docstring = griffe.Docstring(text, parent=obj)
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
