"""Admin calls as data: which broker each key needs, what to send, what an answer means. [pure]

An admin call works on *keys* (group ids, partitions, broker ids, topic names). Its
:class:`AdminApi` says how a key finds its broker (:class:`Lookup`: the group's coordinator,
the partition's leader, every broker, the controller...), which requests to send to one broker
for some keys, and what the answer means for each key (:class:`Outcome`: done, failed, look it
up again, or retry). The application thread hands an :class:`AdminOperation` to the network
thread as an event; :class:`~kaflux.admin.request_manager.AdminRequestManager` does the lookups,
the fan-out, the retries and the deadline, as Java's ``AdminApiDriver`` does, and completes the
operation's future with an :class:`AdminResult`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Generic, TypeVar

from kaflux.errors import KafkaError
from kaflux.network.metadata_manager import MetadataAnswer
from kaflux.protocol.framing import RequestMessage
from kaflux.structs import Node, TopicPartition

__all__ = [
    "AdminApi",
    "AdminCall",
    "AdminOperation",
    "AdminResult",
    "Lookup",
    "MetadataApi",
    "Outcome",
    "RequestApi",
]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lookup(Enum):
    """How the keys of an :class:`AdminApi` find the broker their requests go to."""

    #: any broker (the least loaded); the key needs no lookup
    ANY = "any broker"
    #: the controller the metadata names, else any broker
    CONTROLLER = "the controller"
    #: the coordinator of the group the key names (FindCoordinator)
    COORDINATOR = "the group coordinator"
    #: the leader of the key's partition (Metadata for its topic)
    LEADER = "the partition leader"
    #: every broker: the keys are the broker ids (ints) a Metadata request lists
    BROKERS = "every broker"
    #: no request of its own: a Metadata answer completes the keys
    METADATA = "a metadata answer"
    #: the broker :meth:`AdminApi.node_id` names for the key (None: any broker)
    NODE = "a named broker"


@dataclass(slots=True)
class Outcome(Generic[K, V]):
    """What one answer means for the keys it was about. A key the answer does not mention is
    retried after the backoff."""

    completed: dict[K, V] = field(default_factory=dict)
    failed: dict[K, KafkaError] = field(default_factory=dict)
    #: look these keys up again after the backoff (the coordinator or the leader moved)
    unmapped: dict[K, KafkaError] = field(default_factory=dict)
    #: send these to the same broker again after the backoff
    retry: dict[K, KafkaError] = field(default_factory=dict)
    #: send these again at once, without counting a failure (the api now asks differently)
    resend: set[K] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class AdminResult(Generic[K, V]):
    """The answer of an admin call: a value or an error per key."""

    completed: dict[K, V]
    failed: dict[K, KafkaError]

    def values(self) -> dict[K, V]:
        """The completed values. Raises the first key's error if any key failed."""
        for error in self.failed.values():
            raise error
        return self.completed


class AdminApi(ABC, Generic[K, V]):
    """One kind of admin request: its keys, how they are looked up, how requests are built
    and answers read. Runs on the network thread; keeps whatever state it needs between
    attempts (e.g. which API to ask with)."""

    #: how the keys find their broker (a class attribute, or set by ``__init__``)
    lookup: Lookup
    #: the newest version of the requests this api builds that it can read (None: any)
    max_version: ClassVar[int | None] = None

    @abstractmethod
    def keys(self) -> Iterable[K]:
        """The keys to complete (none for :attr:`Lookup.BROKERS`: the broker ids are the keys)."""

    def describe(self, key: K) -> str:
        """The key, for error messages."""
        return repr(key)

    def group_id(self, key: K) -> str:
        """The group whose coordinator serves ``key`` (:attr:`Lookup.COORDINATOR`)."""
        return str(key)

    #: FindCoordinator's key type for :attr:`Lookup.COORDINATOR`: 0 a group, 1 a transactional id
    coordinator_type: ClassVar[int] = 0

    def node_id(self, key: K) -> int | None:
        """The broker ``key`` must be sent to (:attr:`Lookup.NODE`; None: any broker)."""
        return None

    def partition(self, key: K) -> TopicPartition:
        """The partition whose leader serves ``key`` (:attr:`Lookup.LEADER`)."""
        if not isinstance(key, TopicPartition):
            raise TypeError(f"{type(self).__name__} keys are not partitions: override partition()")
        return key

    def metadata_topics(self) -> list[str] | None:
        """The topics to ask Metadata for (:attr:`Lookup.METADATA`; None: all)."""
        return []

    def build(self, node: Node | None, keys: list[K]) -> list[tuple[RequestMessage[Any], list[K]]]:
        """The requests to send to ``node`` (None: any broker) for ``keys``, each with the
        keys it is about. Keys left out wait for the next poll."""
        raise NotImplementedError(f"{type(self).__name__} sends no requests")

    def min_version(self, request: RequestMessage[Any]) -> int | None:
        """The oldest version of ``request`` (one :meth:`build` made) that carries its meaning
        (None: any): a broker offering only older ones fails it unsent with
        UnsupportedVersionError, which :meth:`handle_error` may explain."""
        return None

    def handle(self, node: Node | None, keys: list[K], body: Any) -> Outcome[K, V]:
        """Read the answer ``node`` gave to the request for ``keys``."""
        raise NotImplementedError(f"{type(self).__name__} sends no requests")

    def handle_error(
        self, node: Node | None, keys: list[K], request: Any, error: KafkaError
    ) -> Outcome[K, V] | None:
        """The request for ``keys`` got no answer (``error``). None: the default handling
        (retriable errors retried, after a new lookup for coordinators and leaders; others
        fail the keys)."""
        return None

    def handle_metadata(self, keys: list[K], answer: MetadataAnswer) -> Outcome[K, V]:
        """Complete ``keys`` from a Metadata answer (:attr:`Lookup.METADATA`)."""
        raise NotImplementedError(f"{type(self).__name__} is not answered from metadata")


@dataclass(slots=True, eq=False)
class AdminOperation(Generic[K, V]):
    """An admin call, as the event the application thread hands to the network thread. Its
    future gets the :class:`AdminResult` (unfinished keys failed with KafkaTimeoutError at
    ``deadline_ms``), or an error that concerns the whole call."""

    what: str
    deadline_ms: int
    api: AdminApi[K, V]
    future: Future[AdminResult[K, V]] = field(default_factory=Future)


class RequestApi(AdminApi[None, Any]):
    """One request, to the controller or any broker; its decoded answer is the value."""

    def __init__(self, request: RequestMessage[Any], *, to_controller: bool) -> None:
        self._request = request
        self.lookup = Lookup.CONTROLLER if to_controller else Lookup.ANY

    def keys(self) -> list[None]:
        return [None]

    def describe(self, key: None) -> str:
        return type(self._request).__name__

    def build(self, node: Node | None, keys: list[None]) -> list[tuple[RequestMessage[Any], list[None]]]:
        return [(self._request, keys)]

    def handle(self, node: Node | None, keys: list[None], body: Any) -> Outcome[None, Any]:
        return Outcome(completed={None: body})


class MetadataApi(AdminApi[None, MetadataAnswer]):
    """A Metadata answer for some topics (None: all, ``[]``: only the brokers)."""

    lookup = Lookup.METADATA

    def __init__(self, topics: list[str] | None) -> None:
        self._topics = topics

    def keys(self) -> list[None]:
        return [None]

    def describe(self, key: None) -> str:
        return "Metadata"

    def metadata_topics(self) -> list[str] | None:
        return self._topics

    def handle_metadata(self, keys: list[None], answer: MetadataAnswer) -> Outcome[None, MetadataAnswer]:
        return Outcome(completed={None: answer})


@dataclass(slots=True)
class AdminCall:
    """One request call, the simplest operation. ``request`` None lists every topic (from
    metadata); otherwise it goes to the controller (``to_controller``) or to any broker. The
    future gets the decoded answer, or the error."""

    what: str
    deadline_ms: int
    request: RequestMessage[Any] | None = None
    to_controller: bool = True
    future: Future[Any] = field(default_factory=Future)

    def as_operation(self) -> AdminOperation[None, Any]:
        """The operation that runs this call and completes its future."""
        api: AdminApi[None, Any] = (
            MetadataApi(None)
            if self.request is None
            else RequestApi(self.request, to_controller=self.to_controller)
        )
        operation: AdminOperation[None, Any] = AdminOperation(self.what, self.deadline_ms, api)
        operation.future.add_done_callback(self._complete)
        return operation

    def _complete(self, done: Future[AdminResult[None, Any]]) -> None:
        if self.future.done():
            return
        error = done.exception()
        if error is None:
            result = done.result()
            error = result.failed.get(None)
            if error is None:
                self.future.set_result(result.completed.get(None))
                return
        self.future.set_exception(error)
