"""The Schema Registry client for asyncio: HTTP awaited on the loop (httpx). [io: HTTP, event loop]

:class:`AsyncSchemaRegistryClient` takes the keys of
:class:`~kaflux.schema_registry.SchemaRegistryClient` and has its calls as coroutines. It
runs the same sans-I/O core (:mod:`kaflux.schema_registry._core`): the same caches, retries,
deadline (``timeout``) and errors; only the waiting differs, so no call ever blocks the loop.
A ``mock://scope`` URL uses the in-memory registry of that scope, shared with sync clients of
the same scope.

HTTP is httpx's (``httpx2``, its maintained successor, when installed, as confluent-kafka
does; otherwise ``httpx``): its ``AsyncClient`` speaks HTTP/1.1 with connection pooling and
TLS from the standard library, and the same package is what confluent-kafka's own
Schema Registry client uses, so one install serves both.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import ssl
import time
import uuid
from collections.abc import Mapping
from typing import Any

from kaflux.schema_registry._core import (
    Answer,
    HttpCall,
    NoAnswer,
    RegisteredSchema,
    RegistryCore,
    Schema,
    SchemaRegistryError,
    Send,
    Sleep,
    Steps,
    T,
    exchange,
    parse_config,
)
from kaflux.schema_registry.client import log_answer
from kaflux.schema_registry.mock import scope as mock_scope


def _httpx_name() -> str:
    for name in ("httpx2", "httpx"):
        if importlib.util.find_spec(name) is not None:
            return name
    raise ImportError(
        "AsyncSchemaRegistryClient needs httpx2 (or httpx): pip install 'kaflux[schema-registry]'"
    )


class AsyncSchemaRegistryClient:
    """A Schema Registry client for asyncio; its calls are coroutines.

    Example::

        async with AsyncSchemaRegistryClient({"url": "https://registry:8081"}) as registry:
            deserializer = AsyncAvroDeserializer(registry)
            async with AsyncConsumer(config, value_deserializer=deserializer) as consumer:
                ...

    Keys, caching, retries and errors are :class:`~kaflux.schema_registry.SchemaRegistryClient`'s.

    Raises:
        ConfigError: an unknown key or an invalid value (a credential is never shown).
    """

    def __init__(self, config: Mapping[str, object]) -> None:
        cfg = parse_config(config)
        self._core = RegistryCore(cfg, time.monotonic)
        self._mock = None if cfg.mock_scope is None else mock_scope(cfg.mock_scope)
        self._http: Any = None
        self._httpx: Any = None
        # importing httpx and loading the CA certificates take a blocking second: they happen
        # on the first request, in a worker thread (see _connect), never on the loop
        self._httpx_name = None if self._mock is not None else _httpx_name()
        self._connecting: asyncio.Lock | None = None
        self._closed = False

    @classmethod
    def new_client(cls, config: Mapping[str, object]) -> AsyncSchemaRegistryClient:
        """``cls(config)``: confluent-kafka's constructor for ``mock://`` URLs, kept so code
        moving over runs unchanged (kaflux's constructor takes ``mock://`` URLs itself)."""
        return cls(config)

    def __repr__(self) -> str:
        return f"AsyncSchemaRegistryClient(url={','.join(self._core.config.urls)!r})"

    async def __aenter__(self) -> AsyncSchemaRegistryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP connections."""
        self._closed = True
        if self._http is not None:
            await self._http.aclose()

    @property
    def core(self) -> RegistryCore:
        """The calls and caches this client runs (shared with kaflux's serializers)."""
        return self._core

    # --- calls (see SchemaRegistryClient for each) ----------------------------------------------------------

    async def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        return (await self.register_schema_full_response(subject, schema, normalize)).schema_id

    async def register_schema_full_response(
        self, subject: str, schema: Schema, normalize: bool = False
    ) -> RegisteredSchema:
        return await self.run(self._core.register_schema_full_response(subject, schema, normalize))

    async def lookup_schema(self, subject: str, schema: Schema, normalize: bool = False) -> RegisteredSchema:
        return await self.run(self._core.lookup_schema(subject, schema, normalize))

    async def get_schema(self, schema_id: int, fmt: str | None = None) -> Schema:
        return await self.run(self._core.get_schema(schema_id, fmt))

    async def get_schema_by_guid(self, guid: str | uuid.UUID, fmt: str | None = None) -> Schema:
        return await self.run(self._core.get_schema_by_guid(guid, fmt))

    async def get_latest_version(self, subject: str) -> RegisteredSchema:
        return await self.run(self._core.get_latest_version(subject))

    async def get_version(self, subject: str, version: int, fmt: str | None = None) -> RegisteredSchema:
        return await self.run(self._core.get_version(subject, version, fmt))

    async def get_versions(self, subject: str) -> list[int]:
        return await self.run(self._core.get_versions(subject))

    async def get_subjects(self) -> list[str]:
        return await self.run(self._core.get_subjects())

    async def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        return await self.run(self._core.delete_subject(subject, permanent))

    async def get_compatibility(self, subject: str | None = None) -> str:
        return await self.run(self._core.get_compatibility(subject))

    async def set_compatibility(self, subject: str | None = None, level: str = "BACKWARD") -> str:
        return await self.run(self._core.set_compatibility(subject, level))

    async def test_compatibility(self, subject: str, schema: Schema, version: int | str = "latest") -> bool:
        return await self.run(self._core.test_compatibility(subject, schema, version))

    def clear_latest_caches(self) -> None:
        self._core.clear_latest_caches()

    # --- the driver ---------------------------------------------------------------------------------------

    async def run(self, steps: Steps[T]) -> T:
        """Run ``steps`` (see :mod:`kaflux.schema_registry._core`), awaiting each request."""
        try:
            call = next(steps)
            while True:
                try:
                    answer = await self._exchange(call)
                except SchemaRegistryError as exc:
                    call = steps.throw(exc)
                else:
                    call = steps.send(answer)
        except StopIteration as stop:
            result: T = stop.value
            return result

    async def _exchange(self, call: HttpCall) -> Any:
        if self._closed:
            raise SchemaRegistryError(-1, -1, "the client is closed")
        steps = exchange(self._core.config, call, time.monotonic)
        try:
            step = next(steps)
            while True:
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                    step = steps.send(None)
                else:
                    step = steps.send(await self._send(step))
        except StopIteration as stop:
            return stop.value

    def _open(self) -> tuple[Any, Any]:
        """httpx and its client (blocking: run in a worker thread)."""
        cfg = self._core.config
        assert self._httpx_name is not None
        httpx = importlib.import_module(self._httpx_name)
        verify: ssl.SSLContext | bool = True
        if cfg.ca_location is not None or cfg.certificate_location is not None:
            context = ssl.create_default_context(cafile=cfg.ca_location)
            if cfg.certificate_location is not None:
                context.load_cert_chain(cfg.certificate_location, cfg.key_location, cfg.key_password)
            verify = context
        elif not any(url.startswith("https:") for url in cfg.urls):
            verify = False  # plain HTTP: no certificates to load
        # the deadline is the core's (asyncio.timeout per attempt), not httpx's per-read one
        return httpx, httpx.AsyncClient(verify=verify, timeout=None, follow_redirects=False)

    async def _connect(self) -> Any:
        if self._http is None:
            if self._connecting is None:
                self._connecting = asyncio.Lock()
            async with self._connecting:
                if self._http is None:
                    self._httpx, self._http = await asyncio.to_thread(self._open)
        return self._http

    async def _send(self, send: Send) -> Answer | NoAnswer:
        if self._mock is not None:
            return self._mock.answer(send)
        outcome: Answer | NoAnswer
        try:
            async with asyncio.timeout(send.timeout_s):
                http = self._http if self._http is not None else await self._connect()
                response = await http.request(
                    send.call.method,
                    send.base + send.call.target,
                    content=send.data,
                    headers=dict(send.headers),
                )
            outcome = Answer(response.status_code, response.content)
        except TimeoutError as exc:
            outcome = NoAnswer(type(exc).__name__)
        except Exception as exc:
            if self._httpx is None or not isinstance(exc, self._httpx.HTTPError):
                raise
            outcome = NoAnswer(type(exc).__name__)
        log_answer(send, outcome)
        return outcome
