"""The soak run (``bench/soak.py``) for four rounds of 20 s: classic group churn on Tansu,
kill/restart on noida-db, KIP-848 churn (a broker outage, a member SIGKILL, a join) on
librdkafka's mock cluster, then share-group churn there (a member SIGKILLed while it holds records,
an outage, a join).

It must exit 0 (no acknowledged record lost or left unaccepted by the share group, no partition owned
twice at once, a killed share member's records back with a higher delivery count, no other guarantee
broken) and end with its totals line. The longer run is ``python bench/soak.py`` (10 minutes).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"
#: no round starts after this; the fourth (share) round starts after the KIP-848 round ends, at about
#: 95-100 s on a loaded 2-core machine
DURATION_S = 120
#: classic churn, kill/restart, KIP-848 churn, share churn
ROUNDS = 4
ROUND_S = 20
#: the run ends its last round (up to a kill round's drain or a churn round's final convergence) after
#: the duration; far above what it takes on a loaded 2-core machine (114 s with the share round)
TIMEOUT_S = 300


def test_soak_four_rounds() -> None:
    pytest.importorskip("confluent_kafka")
    try:
        result = subprocess.run(
            [
                sys.executable,
                str(SOAK),
                "--duration",
                str(DURATION_S),
                "--round-seconds",
                str(ROUND_S),
                "--rounds",
                str(ROUNDS),
                "--seed",
                "20261124",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the soak run did not finish within {TIMEOUT_S} s; output so far:\n{e.stdout}")  # type: ignore[str-bytes-safe]
    output = result.stdout
    print(output)  # the round summaries and totals, in the test's captured output
    totals = re.search(r"^TOTALS .*$", output, re.MULTILINE)
    assert totals is not None, (
        f"no totals line (exit {result.returncode}):\n{output}\n{result.stderr[-3000:]}"
    )
    assert result.returncode == 0, f"soak failed:\n{output}\n{result.stderr[-3000:]}"
    fields = dict(item.split("=", 1) for item in totals.group(0).split()[1:])
    for name in (
        "produced",
        "acknowledged",
        "consumed",
        "lost",
        "duplicates",
        "rebalances",
        "restarts",
        "worst_recovery_s",
    ):
        assert name in fields, f"the totals line lacks {name}: {totals.group(0)}"
    assert int(fields["lost"]) == 0 and int(fields["overlaps"]) == 0
    assert int(fields["acknowledged"]) > 0 and int(fields["restarts"]) > 0 and int(fields["rebalances"]) > 0
    # KIP-848 members ran too, through a member SIGKILL and a broker outage
    assert int(fields["kip848_rounds"]) >= 1
    assert int(fields["member_kills"]) >= 1 and int(fields["outages"]) >= 1
    # share-group members ran too, through a SIGKILL while holding records, an outage and a join: the
    # round's "lost" counts acknowledged records no member accepted (in the totals' lost, 0 above)
    assert int(fields["share_rounds"]) >= 1, totals.group(0)
    share = re.search(r"^\[.*\] share churn on .*$", output, re.MULTILINE)
    assert share is not None, output
    assert re.search(r"kill:\S+ outage:\S+ join:\S+", share.group(0)), share.group(0)
    assert re.search(r", lost 0 ", share.group(0)), share.group(0)
    # the victim died holding records (acquired, unacknowledged), and they came back (else a problem)
    held = re.search(r"\((\d+) held by killed members", share.group(0))
    assert held is not None and int(held.group(1)) >= 1, share.group(0)
