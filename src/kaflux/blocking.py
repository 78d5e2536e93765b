"""Blocking calls written once, waited on two ways. [app: the public APIs' waiting]

Theory of operation. A client call that needs the network thread submits an event and waits on
the event's future, maybe more than once (``describe_topics()`` asks twice), maybe on data
arriving (``poll()``), with work before, between and after. Such a call is written here once,
as a generator of *wait steps*: it yields what it waits for (:class:`FutureWait`,
:class:`DoneWait`, :class:`SignalWait`, :class:`AwaitableWait`) and is sent back the outcome.
The generator holds all the call's logic; only the driver decides how to wait:

* :func:`run_sync` blocks the calling thread (``Future.result``, a condition variable): the
  sync clients ``Consumer``, ``Producer``, ``AdminClient``.
* ``kaflux.aio`` awaits the same futures on an event loop (completed with
  ``loop.call_soon_threadsafe``), with no executor and no extra thread.

A public method decorated with :func:`blocking` is the sync call; its generator is
:attr:`Blocking.steps`, which the async facades drive (so a new call needs no async code).
Because the steps run inside the generator, a ``with``/``finally`` in it (the single-user
guard, the wakeup registration) spans the whole call, waits included, under either driver;
closing the generator (a cancelled coroutine) runs them too.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from types import MethodType
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

from kaflux.timeouts import await_future

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


class Signal(Protocol):
    """What :class:`SignalWait` waits on: something another thread signals (data in the fetch
    buffer, a wakeup, memory freed in the producer's buffer)."""

    def await_signal(self, timeout_s: float) -> object:
        """Block until signalled or ``timeout_s`` passed (the sync driver)."""
        ...

    def watch(self, waiter: Callable[[], None]) -> bool:
        """Call ``waiter`` from the signalling thread on each signal until :meth:`unwatch`;
        True if signalled already (no need to wait)."""
        ...

    def unwatch(self, waiter: Callable[[], None]) -> None: ...


@dataclass(slots=True)
class FutureWait:
    """Wait for ``future``; the step's outcome is its result, or its error raised. Still not
    done after ``timeout_s``: :class:`~kaflux.errors.KafkaTimeoutError` naming ``what`` (and
    the reason ``why()`` gives, if any), as :func:`kaflux.timeouts.await_future` words it."""

    future: Future[Any]
    timeout_s: float
    what: str
    #: explains a timeout (e.g. no broker reachable), added to its message when it says something
    why: Callable[[], str | None] | None = None


@dataclass(slots=True)
class DoneWait:
    """Wait until ``future`` is done or ``timeout_s`` passes; the outcome is ``future.done()``
    (its result or error is not raised)."""

    future: Future[Any]
    timeout_s: float


@dataclass(slots=True)
class SignalWait:
    """Wait until ``signal`` is signalled or ``timeout_s`` passes; no outcome (the caller
    checks what it waited for)."""

    signal: Signal
    timeout_s: float


@dataclass(slots=True)
class AwaitableWait:
    """Await ``awaitable`` (an ``async def`` rebalance listener's coroutine); the outcome is its
    result. Only an event loop can: the sync driver raises TypeError into the call."""

    awaitable: Awaitable[Any]


Step = FutureWait | DoneWait | SignalWait | AwaitableWait
#: a blocking call: yields wait steps, is sent their outcomes, returns the call's result
Steps = Generator[Step, Any, R]


def wait_sync(step: Step) -> Any:
    """Wait for one step on the calling thread."""
    if isinstance(step, FutureWait):
        return await_future(step.future, step.timeout_s, step.what, step.why)
    if isinstance(step, DoneWait):
        try:
            step.future.exception(timeout=step.timeout_s)
        except FutureTimeoutError:
            return False
        return True
    if isinstance(step, SignalWait):
        step.signal.await_signal(step.timeout_s)
        return None
    close = getattr(step.awaitable, "close", None)
    if close is not None:
        close()  # never awaited: no "coroutine was never awaited" warning
    raise TypeError(
        "an async def rebalance listener needs an event loop: use kaflux.aio.AsyncConsumer, "
        "or make the listener's methods plain functions"
    )


def run_sync(steps: Steps[R]) -> R:
    """Drive a blocking call on the calling thread: each step's outcome (or error) is sent
    (or thrown) back into the generator, until it returns."""
    outcome: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(outcome) if error is None else steps.throw(error)
        except StopIteration as stop:
            result: R = stop.value
            return result
        error = None
        try:
            outcome = wait_sync(step)
        except BaseException as exc:  # thrown into the call, which may handle it
            outcome, error = None, exc


class Blocking(Generic[S, P, R]):
    """A blocking method: called, it runs its steps with :func:`run_sync`; :attr:`steps` is the
    generator function itself, for drivers that wait otherwise (``kaflux.aio``)."""

    def __init__(self, steps: Callable[Concatenate[S, P], Steps[R]]) -> None:
        self.steps = steps
        functools.update_wrapper(self, steps)

        def call(instance: S, *args: P.args, **kwargs: P.kwargs) -> R:
            return run_sync(steps(instance, *args, **kwargs))

        functools.update_wrapper(call, steps)
        call.__signature__ = inspect.signature(steps)  # type: ignore[attr-defined]
        #: what an instance's attribute binds: made once, so that binding costs no more than a
        #: plain method's (a hot path: ``poll()``)
        self._call = call

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> Blocking[S, P, R]: ...

    @overload
    def __get__(self, instance: S, owner: type[Any] | None = None) -> Callable[P, R]: ...

    def __get__(self, instance: S | None, owner: type[Any] | None = None) -> Any:
        if instance is None:
            return self
        return MethodType(self._call, instance)

    def __call__(self, instance: S, *args: P.args, **kwargs: P.kwargs) -> R:
        return run_sync(self.steps(instance, *args, **kwargs))


def blocking(steps: Callable[Concatenate[S, P], Steps[R]]) -> Blocking[S, P, R]:
    """Make a generator method of wait steps a blocking method (see the module docstring)."""
    return Blocking(steps)
