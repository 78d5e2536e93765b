"""The producer: an application-side accumulator and a background sender. [app]

:class:`~kaflux.producer.producer.Producer` is the API; the network thread runs the
:class:`~kaflux.producer.sender.ProduceRequestManager` and, with idempotence (the default), the
:class:`~kaflux.producer.transaction_manager.TransactionManager`.
"""

from kaflux.producer.futures import BatchMetadata, RecordFuture
from kaflux.producer.txn_state import TransactionAbortedError

__all__ = ["BatchMetadata", "RecordFuture", "TransactionAbortedError"]
