"""A kaflux share consumer in a child process, for the SIGKILL test. [test]

Not a test module. ``python tests/support/share_child.py BOOTSTRAP GROUP TOPIC`` joins the share group in
explicit mode, prints ``joined`` once it has an assignment, then a JSON line per record it gets
(partition, offset, delivery count) and never acknowledges them: it waits to be killed.
"""

from __future__ import annotations

import json
import sys
import time

from kaflux import ShareConsumer


def main(bootstrap: str, group: str, topic: str) -> None:
    consumer = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    consumer.subscribe([topic])
    joined = False
    while True:
        if not joined:
            consumer.poll(0.2)
            state = consumer.group_state()
            if state.state == "STABLE" and state.assignment:
                joined = True
                print("joined", flush=True)
            continue
        records = consumer.poll(0.5)
        for r in records:
            print(
                json.dumps({"partition": r.partition, "offset": r.offset, "count": r.delivery_count}),
                flush=True,
            )
        if records:
            while True:  # holds its records, unacknowledged, until killed
                time.sleep(1)


if __name__ == "__main__":
    main(*sys.argv[1:4])
