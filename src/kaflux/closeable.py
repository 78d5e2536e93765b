"""A base for clients used as context managers. [pure]"""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closeable:
    """``with Client(...) as client:`` closes the client on exit, error or not."""

    def close(self) -> None:  # pragma: no cover - every client overrides it
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
