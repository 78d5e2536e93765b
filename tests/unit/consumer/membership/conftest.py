"""Fixtures of the membership tests. [test]"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.kip848_membership_rig import forget_drivers


@pytest.fixture(autouse=True)
def _forget_drivers() -> Iterator[None]:
    """The KIP-848 drivers a test made are forgotten after it (the state-table test collects
    the drivers of the scenarios it runs)."""
    yield
    forget_drivers()
