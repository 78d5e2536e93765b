"""librdkafka's mock cluster with share-group settings, for the share group tests. [test]

Not a test module. :class:`ShareMockCluster` runs, in a child process (this file is its script),
a 3-broker mock cluster built through librdkafka's C API (``ctypes``), so that the mock's share
group settings can be changed: its ``rd_kafka_mock_sharegroup_set_session_timeout`` and
``..._set_heartbeat_interval`` (45 s and 5 s by default), ``..._set_record_lock_duration``
(30 s) and ``..._set_auto_offset_reset`` (latest) are not reachable through
confluent-kafka's Python API. With a short session a SIGKILLed member's records come back in
seconds instead of 45.

The child prints its bootstrap servers and serves until its stdin closes; it is stopped by PID.
Meanwhile it takes commands on stdin, one a line: :meth:`ShareMockCluster.members` lists a share
group's member ids, :meth:`ShareMockCluster.assign` sets one member's partitions and
:meth:`ShareMockCluster.set_leader` moves a partition's leadership. The mock's own
assignment gives each partition to one member only; ``rd_kafka_mock_sharegroup_target_assignment``
overrides it (several members on one partition, as Kafka's share assignor may do), and from then on
the group is in manual mode: a member that joins later gets nothing until assigned.
"""

from __future__ import annotations

import ctypes
import glob
import os
import selectors
import subprocess
import sys
import time
from types import TracebackType
from typing import Self

_READY = "KAFLUX-SHARE-MOCK "
_GROUP_ID_NOT_FOUND = 69


class ShareMockCluster:
    """A child process serving the mock cluster with the given share group timings."""

    def __init__(
        self,
        *,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 1_000,
        record_lock_duration_ms: int = 30_000,
        auto_offset_reset: str = "latest",
        brokers: int = 3,
    ) -> None:
        if auto_offset_reset not in ("latest", "earliest"):
            raise ValueError(f"auto_offset_reset must be latest or earliest, not {auto_offset_reset!r}")
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.record_lock_duration_ms = record_lock_duration_ms
        self.auto_offset_reset = auto_offset_reset
        #: brokers in the cluster (1 puts every partition and the coordinator behind one address)
        self.brokers = brokers
        self._proc: subprocess.Popen[str] | None = None
        self.bootstrap_servers = ""

    def start(self, timeout: float = 30.0) -> Self:
        proc = self._proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                str(self.session_timeout_ms),
                str(self.heartbeat_interval_ms),
                str(self.record_lock_duration_ms),
                self.auto_offset_reset,
                str(self.brokers),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        line = ""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline and not line:
                if selector.select(max(0.0, deadline - time.monotonic())):
                    line = proc.stdout.readline()
                    break
        if not line.startswith(_READY):
            self.stop()
            raise RuntimeError(f"the share mock cluster did not start within {timeout} s (got {line!r})")
        self.bootstrap_servers = line[len(_READY) :].strip()
        return self

    @property
    def pid(self) -> int | None:
        """The serving process's PID while it runs (for SIGSTOP/SIGCONT outages)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _command(self, line: str, timeout: float = 10.0) -> list[str]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        answer = ""
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            if selector.select(timeout):
                answer = proc.stdout.readline()
        if not answer.startswith("OK"):
            raise RuntimeError(f"the share mock refused {line!r}: {answer!r}")
        return answer.split()[1:]

    def members(self, group: str) -> list[str]:
        """The member ids of share group ``group``, as the mock knows them (none before one joins)."""
        return self._command(f"members {group}")

    def set_leader(self, topic: str, partition: int, broker: int) -> None:
        """Make ``broker`` (1-3) lead ``topic``-``partition`` (the mock picks leaders at random)."""
        self._command(f"leader {topic} {partition} {broker}")

    def assign(self, group: str, member_id: str, topic: str, partitions: list[int]) -> None:
        """Give ``member_id`` of share group ``group`` exactly ``partitions`` of ``topic`` (it
        learns of it on its next heartbeat)."""
        parts = ",".join(str(p) for p in partitions) or "-"
        self._command(f"assign {group} {member_id} {topic} {parts}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(timeout=3)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _serve(
    session_timeout_ms: int,
    heartbeat_interval_ms: int,
    record_lock_duration_ms: int,
    auto_offset_reset: str,
    brokers: int = 3,
) -> None:
    import confluent_kafka

    libs = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs")
    lib = ctypes.CDLL(glob.glob(os.path.join(libs, "librdkafka*.so*"))[0])
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_handle_mock_cluster.restype = ctypes.c_void_p
    lib.rd_kafka_handle_mock_cluster.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_sharegroup_set_session_timeout.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_sharegroup_set_heartbeat_interval.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_sharegroup_set_record_lock_duration.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_sharegroup_set_auto_offset_reset.argtypes = [ctypes.c_void_p, ctypes.c_int]
    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    for key, value in (
        ("test.mock.num.brokers", str(brokers)),
        ("bootstrap.servers", ""),
        ("log_level", "0"),
    ):
        if lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, len(errstr)) != 0:
            raise SystemExit(errstr.value.decode())
    rk = lib.rd_kafka_new(0, conf, errstr, len(errstr))  # a producer handle holds the cluster
    if not rk:
        raise SystemExit(errstr.value.decode())
    cluster = lib.rd_kafka_handle_mock_cluster(rk)
    lib.rd_kafka_mock_sharegroup_set_session_timeout(cluster, session_timeout_ms)
    lib.rd_kafka_mock_sharegroup_set_heartbeat_interval(cluster, heartbeat_interval_ms)
    lib.rd_kafka_mock_sharegroup_set_record_lock_duration(cluster, record_lock_duration_ms)
    # a new share group starts at the partitions' end (0, Kafka's default) or start (1)
    lib.rd_kafka_mock_sharegroup_set_auto_offset_reset(cluster, 1 if auto_offset_reset == "earliest" else 0)
    lib.rd_kafka_mock_sharegroup_get_member_ids.restype = ctypes.c_int
    lib.rd_kafka_mock_sharegroup_get_member_ids.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.rd_kafka_topic_partition_list_new.restype = ctypes.c_void_p
    lib.rd_kafka_topic_partition_list_new.argtypes = [ctypes.c_int]
    lib.rd_kafka_topic_partition_list_add.restype = ctypes.c_void_p
    lib.rd_kafka_topic_partition_list_add.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32]
    lib.rd_kafka_mock_sharegroup_target_assignment.restype = None
    lib.rd_kafka_mock_sharegroup_target_assignment.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_size_t,
    ]

    def member_ids(group: bytes) -> list[str]:
        ids = ctypes.POINTER(ctypes.c_char_p)()
        count = ctypes.c_size_t()
        err = lib.rd_kafka_mock_sharegroup_get_member_ids(
            cluster, group, ctypes.byref(ids), ctypes.byref(count)
        )
        if err == _GROUP_ID_NOT_FOUND:
            return []  # no member joined yet
        if err:
            raise ValueError(f"get_member_ids: error {err}")
        return [(ids[i] or b"").decode() for i in range(count.value)]  # the strings leak: a test child

    def assign(group: bytes, member: bytes, topic: bytes, partitions: list[int]) -> None:
        members = (ctypes.c_char_p * 1)(member)
        lists = (ctypes.c_void_p * 1)(lib.rd_kafka_topic_partition_list_new(max(1, len(partitions))))
        for partition in partitions:
            lib.rd_kafka_topic_partition_list_add(lists[0], topic, partition)
        lib.rd_kafka_mock_sharegroup_target_assignment(cluster, group, members, lists, 1)  # copies them

    lib.rd_kafka_mock_partition_set_leader.restype = ctypes.c_int
    lib.rd_kafka_mock_partition_set_leader.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int32,
        ctypes.c_int32,
    ]

    def serve(command: str, args: list[str]) -> str:
        if command == "leader" and len(args) == 3:
            set_leader = lib.rd_kafka_mock_partition_set_leader
            err = set_leader(cluster, args[0].encode(), int(args[1]), int(args[2]))
            return f"ERR set_leader: error {err}" if err else "OK"
        if command == "members" and len(args) == 1:
            return " ".join(["OK", *member_ids(args[0].encode())])
        if command == "assign" and len(args) == 4:
            partitions = [] if args[3] == "-" else [int(p) for p in args[3].split(",")]
            assign(args[0].encode(), args[1].encode(), args[2].encode(), partitions)
            return "OK"
        return f"ERR unknown command {command!r} {args!r}"

    print(_READY + lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    try:
        for line in sys.stdin:
            command, *args = line.split() or [""]
            try:
                answer = serve(command, args)
            except ValueError as exc:
                answer = f"ERR {exc}"
            print(answer, flush=True)
    finally:
        os._exit(0)


if __name__ == "__main__":
    reset = sys.argv[4] if len(sys.argv) > 4 else "latest"
    count = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    _serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), reset, count)
