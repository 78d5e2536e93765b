"""Producer sequence numbers, as Kafka's record batches carry them. [pure]"""

from __future__ import annotations

#: no sequence assigned yet (Kafka's RecordBatch.NO_SEQUENCE)
NO_SEQUENCE = -1
_INT_MAX = 2**31 - 1


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past 2**31 - 1 to 0 as Kafka's sequences do."""
    if sequence > _INT_MAX - increment:
        return increment - (_INT_MAX - sequence) - 1
    return sequence + increment
