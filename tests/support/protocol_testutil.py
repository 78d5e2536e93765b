"""Helpers shared by the protocol tests (not a test module).

* :func:`generator` loads ``tools/generate_messages.py`` so tests can reuse its spec model.
* :func:`spec_messages` / :func:`message_strategy` build hypothesis strategies from the
  Kafka JSON specs, producing only values that are valid for the version being encoded.
* :func:`to_kafka_python` / :func:`to_kio` convert our dataclasses into the oracle
  libraries' message objects, field by field and by name.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import importlib.util
import sys
import typing
import uuid
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

REPO_ROOT = Path(__file__).resolve().parents[2]
GENERATOR_PATH = REPO_ROOT / "tools" / "generate_messages.py"
MESSAGES_PACKAGE = "kaflux.protocol.messages"


@cache
def generator() -> ModuleType:
    name = "kaflux_tools_generate_messages"
    spec = importlib.util.spec_from_file_location(name, GENERATOR_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def specs_dir() -> Path:
    gen = generator()
    path: Path = gen.specs_dir_from(None)
    return path


def specs_available() -> bool:
    return specs_dir().is_dir()


def generated_modules() -> list[ModuleType]:
    from kaflux.protocol.messages import MODULES

    return [importlib.import_module(f"{MESSAGES_PACKAGE}.{name}") for name in MODULES]


def top_level_classes() -> list[type[Any]]:
    """Every generated request/response/header/data class (those with MIN_VERSION)."""
    out = []
    for module in generated_modules():
        for name in module.__all__:
            cls = getattr(module, name)
            if "MIN_VERSION" in vars(cls):
                out.append(cls)
    return out


@cache
def spec_messages() -> dict[str, tuple[str, Any]]:
    """Message name -> (generated module name, parsed spec Message with class names)."""
    gen = generator()
    out: dict[str, tuple[str, Any]] = {}
    for module, names in gen.MODULES.items():
        messages = [gen.parse_message(specs_dir(), n) for n in names]
        gen.assign_class_names(messages)
        for m in messages:
            out[m.name] = (module, m)
    return out


INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def _elem_strategy(t: str, struct: Any, module: ModuleType, version: int) -> st.SearchStrategy[Any]:
    if struct is not None:
        return struct_strategy(struct, module, version)
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return st.one_of(
            st.integers(lo, hi), st.sampled_from([lo, hi, -1, 0]).filter(lambda x: lo <= x <= hi)
        )
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "uuid":
        return st.one_of(st.just(uuid.UUID(int=0)), st.uuids())
    if t == "string":
        return st.text(max_size=12)
    if t == "bytes":
        return st.binary(max_size=24)
    if t == "records":
        return st.binary(max_size=48).map(memoryview)
    raise AssertionError(t)


def field_strategy(f: Any, module: ModuleType, version: int) -> st.SearchStrategy[Any]:
    """Values of spec field ``f`` that are encodable at ``version``."""
    if version not in f.versions:
        # Absent fields keep their default; build it fresh for mutable defaults.
        cls = getattr(module, f.owner.cls)
        dc_field = next(x for x in dataclasses.fields(cls) if x.name == f.attr)
        if dc_field.default_factory is not dataclasses.MISSING:
            return st.builds(dc_field.default_factory)
        return st.just(dc_field.default)
    elem = _elem_strategy(f.elem_type, f.struct, module, version)
    value = st.lists(elem, max_size=3) if f.is_array else elem
    if version in f.nullable:
        value = st.one_of(st.none(), value)
    return value


def struct_strategy(s: Any, module: ModuleType, version: int) -> st.SearchStrategy[Any]:
    cls = getattr(module, s.cls)
    return st.builds(
        cls,
        **{f.attr: st.deferred(lambda f=f: field_strategy(f, module, version)) for f in s.fields},  # type: ignore[misc]
    )


@cache
def message_strategy(message_name: str, version: int) -> st.SearchStrategy[Any]:
    module_name, msg = spec_messages()[message_name]
    module = importlib.import_module(f"{MESSAGES_PACKAGE}.{module_name}")
    return struct_strategy(msg.root, module, version)


# --------------------------------------------------------------------------- oracles


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    assert f.default_factory is not dataclasses.MISSING
    return f.default_factory()


def to_kafka_python(obj: Any, kp_cls: Any) -> Any:
    """Build the kafka-python object for one of our dataclasses.

    Tagged fields equal to our default are left out: kafka-python writes a tagged field
    whenever one is passed explicitly, even with the default value. kafka-python renames
    ``*_authorized_operations`` to ``authorized_operations`` and represents it as a set of
    bit positions.
    Nested kafka-python classes hang off their parent under the spec struct name.
    """
    kwargs = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        name = f.name
        if name not in kp_cls.fields and name.endswith("authorized_operations"):
            name = "authorized_operations"
        kp_field = kp_cls.fields[name]
        if kp_field._tag is not None and value == _default_of(f):
            continue
        if isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            sub = _nested(kp_cls, type(value[0]))
            value = [to_kafka_python(x, sub) for x in value]
        elif dataclasses.is_dataclass(value):
            value = to_kafka_python(value, _nested(kp_cls, type(value)))
        elif isinstance(value, memoryview):
            value = bytes(value)
        elif kp_field._type_str == "bitfield":
            value = {bit for bit in range(32) if value & (1 << bit)}
        kwargs[name] = value
    return kp_cls(**kwargs)


@cache
def kafka_python_classes() -> dict[str, Any]:
    """kafka-python's JSON-driven message classes by name (first definition wins)."""
    import pkgutil

    import kafka.protocol

    found: dict[str, Any] = {}
    for info in sorted(
        pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."), key=lambda i: i.name
    ):
        if ".old" in info.name:
            continue
        module = importlib.import_module(info.name)
        for name, obj in sorted(vars(module).items()):
            if isinstance(obj, type) and getattr(obj, "_json", None) is not None:
                found.setdefault(name, obj)
    return found


def _nested(kp_cls: Any, cls: type[Any]) -> Any:
    """kafka-python's nested class for our struct class ``cls``."""
    name = cls.__name__
    if hasattr(kp_cls, name):
        return getattr(kp_cls, name)
    # Structs renamed because of a clash within a module carry their message's name first.
    module = sys.modules[cls.__module__]
    for other in module.__all__:
        if "MIN_VERSION" in vars(getattr(module, other)) and name.startswith(other):
            return getattr(kp_cls, name[len(other) :])
    raise AttributeError(f"{kp_cls.__name__} has no nested class for {name}")


def _unwrap_optional(t: Any) -> Any:
    args = typing.get_args(t)
    if type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0]
    return t


def to_kio(obj: Any, kio_cls: Any) -> Any:
    """Build the kio (frozen, per-version) entity for one of our dataclasses.

    kio names duration/time fields without their ``_ms`` suffix and types them as
    ``timedelta``/``datetime``, and error codes as its ``ErrorCode`` enum. It spells an
    unset tagged UUID as None (it would write the zero UUID out; Java and we do not).
    """
    from kio.schema.errors import ErrorCode

    hints = typing.get_type_hints(kio_cls)
    kwargs = {}
    for f in dataclasses.fields(kio_cls):
        kafka_type = f.metadata.get("kafka_type")
        ours = f.name if hasattr(obj, f.name) else f"{f.name}_ms"
        value = getattr(obj, ours)
        t = _unwrap_optional(hints[f.name])
        if "tag" in f.metadata and isinstance(value, uuid.UUID) and value.int == 0:
            value = None
        elif kafka_type in ("timedelta_i32", "timedelta_i64"):
            value = datetime.timedelta(milliseconds=value)
        elif kafka_type == "datetime_i64":
            value = datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
        elif kafka_type == "error_code":
            value = ErrorCode(value)
        elif isinstance(value, list):
            elem = typing.get_args(t)[0]
            value = tuple(to_kio(x, elem) if dataclasses.is_dataclass(elem) else x for x in value)
        elif dataclasses.is_dataclass(value):
            value = to_kio(value, t)
        elif isinstance(value, memoryview):
            value = bytes(value)
        kwargs[f.name] = value
    return kio_cls(**kwargs)


def from_kafka_python(kp_obj: Any, cls: type[Any]) -> Any:
    """Build one of our dataclasses from a kafka-python object (for decode comparisons)."""
    kwargs = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        value = getattr(kp_obj, f.name)
        t = _unwrap_optional(hints[f.name])
        origin = typing.get_origin(t)
        if value is None:
            pass
        elif origin is list and dataclasses.is_dataclass(typing.get_args(t)[0]):
            value = [from_kafka_python(x, typing.get_args(t)[0]) for x in value]
        elif dataclasses.is_dataclass(t):
            value = from_kafka_python(value, t)  # type: ignore[arg-type]
        kwargs[f.name] = value
    return cls(**kwargs)
