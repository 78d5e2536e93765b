"""Which response belongs to which request is checked by mypy --strict: an UnsentRequest's
handler must take the response class its request's generated ``RESPONSE`` names.

mypy runs in a child process: run in-process (``mypy.api``) it leaves ~700k objects alive in the
pytest worker, and every later full garbage collection there then stops all threads for up to
1.8 s (measured), which the timing assertions of the tests after it would feel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

REPO = Path(__file__).resolve().parents[3]

MANAGER = """
from kaflux.network.requests import ClientResponse, UnsentRequest
from kaflux.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kaflux.protocol.messages.join_group import JoinGroupResponse


def on_heartbeat(response: ClientResponse[HeartbeatResponse]) -> None:
    print(response.body.error_code)


def on_join(response: ClientResponse[JoinGroupResponse]) -> None:
    print(response.body.member_id)


def request() -> HeartbeatRequest:
    return HeartbeatRequest(group_id="g", generation_id=1, member_id="m")


HANDLER = {handler}
UNSENT: UnsentRequest[HeartbeatResponse] = UnsentRequest(request(), 0, HANDLER)
"""


def _mypy(tmp_path: Path, handler: str) -> tuple[str, int]:
    module = tmp_path / "manager_under_test.py"
    module.write_text(MANAGER.format(handler=handler), encoding="utf-8")
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent"]
    done = subprocess.run(
        [*command, str(module)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.stdout + done.stderr, done.returncode


@pytest.mark.parametrize(
    ("handler", "ok"),
    [("on_heartbeat", True), ("on_join", False)],
    ids=["matching-handler", "handler-for-another-response"],
)
def test_mypy_checks_that_a_handler_takes_its_requests_response(
    tmp_path: Path, handler: str, ok: bool
) -> None:
    output, status = _mypy(tmp_path, handler)
    if ok:
        assert status == 0, output
    else:
        assert status == 1, output
        assert "ClientResponse[JoinGroupResponse]" in output and "ClientResponse[HeartbeatResponse]" in output
