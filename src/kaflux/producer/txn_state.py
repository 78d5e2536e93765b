"""The transaction states and their allowed moves, as Java's TransactionManager has them. [pure]

:class:`TxnState` and :data:`TXN_TRANSITIONS` drive the producer's
:class:`~kaflux.producer.transaction_manager.TransactionManager` (a :class:`StateMachine`
raises on any other move); :class:`GroupMetadataLike` is what ``send_offsets_to_transaction``
needs of a consumer's group metadata.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Protocol

from kaflux.errors import KafkaError

__all__ = ["TXN_TRANSITIONS", "GroupMetadataLike", "TransactionAbortedError", "TxnState"]


class TransactionAbortedError(KafkaError):
    """The record was not sent because its transaction was aborted (Java's
    TransactionAbortedException)."""


class TxnState(enum.Enum):
    """The states of Java's TransactionManager."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_S = TxnState
#: Allowed moves (Java's ``isTransitionValid``): any state may become FATAL_ERROR, and none
#: leaves it.
TXN_TRANSITIONS: Mapping[TxnState, frozenset[TxnState]] = {
    _S.UNINITIALIZED: frozenset({_S.INITIALIZING, _S.FATAL_ERROR}),
    _S.INITIALIZING: frozenset({_S.READY, _S.FATAL_ERROR}),
    _S.READY: frozenset({_S.UNINITIALIZED, _S.IN_TRANSACTION, _S.FATAL_ERROR}),
    _S.IN_TRANSACTION: frozenset(
        {_S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION, _S.ABORTABLE_ERROR, _S.FATAL_ERROR}
    ),
    _S.COMMITTING_TRANSACTION: frozenset({_S.READY, _S.ABORTABLE_ERROR, _S.FATAL_ERROR}),
    _S.ABORTING_TRANSACTION: frozenset({_S.READY, _S.INITIALIZING, _S.FATAL_ERROR}),
    _S.ABORTABLE_ERROR: frozenset({_S.ABORTING_TRANSACTION, _S.ABORTABLE_ERROR, _S.FATAL_ERROR}),
    _S.FATAL_ERROR: frozenset({_S.FATAL_ERROR}),
}


class GroupMetadataLike(Protocol):
    """What ``send_offsets_to_transaction`` needs of ``Consumer.group_metadata()``."""

    @property
    def group_id(self) -> str: ...

    @property
    def generation_id(self) -> int: ...

    @property
    def member_id(self) -> str: ...

    @property
    def group_instance_id(self) -> str | None: ...
