"""Applies the admin client's application events on its network thread. [bg]

An admin event is a call itself: an :class:`~kaflux.admin.request_manager.AdminCall` (one
request) or an :class:`~kaflux.admin.operation.AdminOperation` (keys looked up and fanned out).
Each goes to the :class:`~kaflux.admin.request_manager.AdminRequestManager`, which completes its
future, fails it at its deadline, or fails it at close.
"""

from __future__ import annotations

from typing import Any

from kaflux.admin.operation import AdminOperation
from kaflux.admin.request_manager import AdminCall, AdminRequestManager


class AdminEventProcessor:
    """Hands admin calls to the request manager."""

    def __init__(self, manager: AdminRequestManager) -> None:
        self._manager = manager

    def process(self, event: AdminCall | AdminOperation[Any, Any], now_ms: int) -> None:
        self._manager.submit(event)

    def expire(self, now_ms: int) -> None:
        self._manager.expire(now_ms)

    def next_deadline_ms(self) -> int | None:
        return self._manager.next_deadline_ms()

    def fail_all(self, error: Exception) -> None:
        self._manager.fail_all(error)
