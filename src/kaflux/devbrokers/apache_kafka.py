"""Apache Kafka itself, run from its jars: a KRaft single node or a cluster on loopback. [io]

Apache Kafka is the broker kaflux is proven on (the other dev brokers are stand-ins, each with
defects listed in ``docs/brokers.md``). It runs on Java 17+ from the jars of one Kafka version,
found, in this order:

1. ``kafka_home``: an unpacked Apache Kafka distribution (its ``libs/*.jar``), given as an argument
   or as ``$KAFLUX_KAFKA_HOME``;
2. the jar cache: ``python -m kaflux.devbrokers resolve 4.4.0`` resolves the jars of
   that version from Maven Central with Maven (strict checksums) and writes their classpath to
   ``$KAFLUX_KAFKA_CACHE/<version>/classpath.txt`` (default ``~/.cache/kaflux/kafka``). A second
   run finds the jars there and does not touch the network. ``scripts/bootstrap.sh --test`` does this
   for the versions the tests use.

Without either, :class:`~kaflux.devbrokers.brokers.BrokerUnavailableError` says how to get them.

:class:`KafkaBroker` is one combined broker and controller (``process.roles=broker,controller``),
formatted in a temporary directory on its first start; its data survives :meth:`~Broker.restart`.
:class:`KafkaCluster` is several such nodes forming one KRaft quorum, each with ``broker.rack`` set
and the rack-aware replica selector, so clients can fetch from a follower (KIP-392). Every port is a
free loopback port; every process is stopped by its PID.

Optional listeners, each on its own port: ``SASL_PLAINTEXT`` and ``SASL_SSL`` with SCRAM-SHA-256 and
SCRAM-SHA-512 users created at format time, ``SSL``, and the ``StandardAuthorizer`` with super users.
The plain listener is always there and is what :attr:`~Broker.bootstrap_servers` names.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Self

from kaflux.devbrokers.brokers import (
    Broker,
    BrokerStartError,
    BrokerUnavailableError,
    free_port,
    make_workdir,
)

__all__ = [
    "KAFKA_VERSION",
    "KafkaBroker",
    "KafkaCluster",
    "KafkaSecurity",
    "kafka_classpath",
    "resolve_kafka_jars",
]

#: The Apache Kafka version kaflux is proven on, and the default of everything here.
KAFKA_VERSION = "4.4.0"

_HOST = "127.0.0.1"
_READY_MARKER = "Kafka Server started"
#: log4j 1 (reload4j, Kafka 3.x) configuration: INFO to stdout, which goes to the broker's log
_LOG4J1_PROPERTIES = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
"""
# The JVM of one node, sized for a 2-core machine running a test suite beside it.
_DEFAULT_JVM_OPTIONS = (
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
_VERSION_RE = re.compile(r"Kafka version: (\S+)")


# --- finding the jars ------------------------------------------------------------------------------------


def kafka_cache_dir() -> Path:
    """Where resolved classpaths are kept: ``$KAFLUX_KAFKA_CACHE`` or ``~/.cache/kaflux/kafka``."""
    override = os.environ.get("KAFLUX_KAFKA_CACHE")
    return Path(override) if override else Path.home() / ".cache" / "kaflux" / "kafka"


def _cached_classpath(version: str) -> list[str] | None:
    path = kafka_cache_dir() / version / "classpath.txt"
    try:
        jars = [j for j in path.read_text().strip().split(os.pathsep) if j]
    except FileNotFoundError:
        return None
    return jars if jars and all(os.path.isfile(j) for j in jars) else None


def _home_classpath(home: Path) -> list[str]:
    libs = home / "libs"
    jars = sorted(str(j) for j in libs.glob("*.jar"))
    if not jars:
        raise BrokerUnavailableError(
            f"{home} is not an Apache Kafka distribution: it has no libs/*.jar. "
            "Pass the directory an Apache Kafka .tgz unpacks to."
        )
    return jars


def kafka_classpath(
    version: str = KAFKA_VERSION, kafka_home: str | os.PathLike[str] | None = None
) -> list[str]:
    """The jars that run Apache Kafka ``version`` (see the module docs for where they are looked for).

    Raises :class:`BrokerUnavailableError`, saying how to get them, when there are none.
    """
    home = kafka_home or os.environ.get("KAFLUX_KAFKA_HOME")
    if home:
        return _home_classpath(Path(home))
    cached = _cached_classpath(version)
    if cached is not None:
        return cached
    raise BrokerUnavailableError(
        f"Apache Kafka {version} is not available here: no jar cache at "
        f"{kafka_cache_dir() / version / 'classpath.txt'} and no Kafka distribution given. Either "
        f"run `python -m kaflux.devbrokers resolve {version}` (needs Maven and Java 17; "
        "it downloads the jars from Maven Central once), or unpack an Apache Kafka distribution and "
        "pass its directory (--kafka-home DIR, or $KAFLUX_KAFKA_HOME)."
    )


def resolve_kafka_jars(version: str = KAFKA_VERSION, *, offline: bool = False) -> list[str]:
    """Resolve Apache Kafka ``version``'s jars with Maven into the jar cache; returns the classpath.

    A version already in the cache (every jar still present) is returned without running Maven.
    Maven checks each download against Maven Central's checksum (``--strict-checksums``).
    """
    cached = _cached_classpath(version)
    if cached is not None:
        return cached
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise ValueError(f"not an Apache Kafka release version: {version!r} (expected e.g. {KAFKA_VERSION})")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerUnavailableError(
            "resolving Apache Kafka's jars needs Maven (`mvn`), which is not on PATH: install Maven 3 "
            "(e.g. apt-get install maven), or pass an unpacked Kafka distribution instead"
        )
    target = kafka_cache_dir() / version
    target.mkdir(parents=True, exist_ok=True)
    pom = resources.files("kaflux.devbrokers").joinpath("kafka-jars.pom.xml")
    out = target / "classpath.txt.partial"
    with resources.as_file(pom) as pom_path:
        command = [
            mvn,
            "--batch-mode",
            "--quiet",
            "--strict-checksums",
            *(["--offline"] if offline else []),
            "-f",
            str(pom_path),
            "dependency:build-classpath",
            f"-Dkafka.version={version}",
            f"-Dmdep.outputFile={out}",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
    if result.returncode != 0:
        raise BrokerUnavailableError(
            f"Maven could not resolve Apache Kafka {version} (exit {result.returncode}):\n"
            f"{(result.stdout + result.stderr)[-3000:]}"
        )
    os.replace(out, target / "classpath.txt")
    jars = _cached_classpath(version)
    if jars is None:
        raise BrokerUnavailableError(f"Maven reported success but the jars of Kafka {version} are missing")
    return jars


# --- security ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KafkaSecurity:
    """Extra listeners and authorization for a :class:`KafkaBroker` or :class:`KafkaCluster`.

    ``scram_users`` (name → password) are created for SCRAM-SHA-256 and SCRAM-SHA-512 when the
    storage is formatted, and enable the ``SASL_PLAINTEXT`` listener. ``ssl_certificate`` and
    ``ssl_key`` (PEM files; the key unencrypted) enable the ``SSL`` listener, and with SCRAM users
    the ``SASL_SSL`` listener too. ``authorizer`` turns on the ``StandardAuthorizer`` with
    ``allow.everyone.if.no.acl.found=false``: only ``super_users`` (and the plain listener's
    ``ANONYMOUS``, which the nodes talk to each other as) may do anything without an ACL.
    """

    scram_users: Mapping[str, str] = field(default_factory=dict)
    ssl_certificate: str | None = None
    ssl_key: str | None = None
    authorizer: bool = False
    super_users: Sequence[str] = ("admin",)
    #: Kafka's SASL mechanisms enabled on the SASL listeners.
    sasl_mechanisms: Sequence[str] = ("SCRAM-SHA-256", "SCRAM-SHA-512")

    def listener_names(self) -> list[str]:
        """The extra listeners these settings open, in a fixed order."""
        names = []
        if self.scram_users:
            names.append("SASL_PLAINTEXT")
        if self.ssl_certificate:
            names.append("SSL")
            if self.scram_users:
                names.append("SASL_SSL")
        return names


# --- one node ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Quorum:
    voters: str  # "1@127.0.0.1:PORT,2@..."
    cluster_id: str


class KafkaBroker(Broker):
    """One Apache Kafka node in KRaft mode, broker and controller in one JVM.

    Alone (the default) it is a single-node cluster. ``config`` adds or overrides
    ``server.properties`` entries; ``jvm_options`` replaces the JVM's heap and GC flags;
    ``extra_classpath`` (jars or class directories) puts plugins on the broker's classpath, for
    ``metric.reporters=`` and the like. Its storage is formatted on the first start
    (``kafka-storage format``) and kept across restarts; ``features`` sets feature levels at
    format time (``--feature NAME=LEVEL``, e.g. ``{"transaction.version": 1}`` for a cluster
    without transactions v2).

    ``advertised_port`` makes the plain listener advertise that port instead of its own (e.g. a
    TCP proxy's, forwarding to :attr:`port`): clients then reach the node only through it. The
    nodes then talk to each other on a separate plain listener (``INTERNAL``, on
    :attr:`internal_port`), so that a fault in front of the clients' port does not cut
    replication. ``advertised_listener_ports`` does the same for the secured listeners, by name
    (``{"SASL_SSL": relay_port}``): a TLS connection cannot be rewritten by what relays it, so
    the broker itself must name the relay.
    """

    name = "kafka"
    ready_marker = _READY_MARKER
    start_timeout = 120.0  # a JVM: about 10 s alone, longer on a busy machine

    def __init__(
        self,
        *,
        port: int | None = None,
        workdir: str | os.PathLike[str] | None = None,
        version: str = KAFKA_VERSION,
        kafka_home: str | os.PathLike[str] | None = None,
        config: Mapping[str, object] | None = None,
        security: KafkaSecurity | None = None,
        jvm_options: Iterable[str] | None = None,
        extra_classpath: Iterable[str | os.PathLike[str]] = (),
        node_id: int = 1,
        rack: str | None = None,
        controller_port: int | None = None,
        advertised_port: int | None = None,
        advertised_listener_ports: Mapping[str, int] | None = None,
        features: Mapping[str, int] | None = None,
        _quorum: _Quorum | None = None,
    ) -> None:
        self.version = version
        #: Kafka's jars, then ``extra_classpath`` (plugins: metric reporters, authorizers...)
        self.classpath = [*kafka_classpath(version, kafka_home), *(str(p) for p in extra_classpath)]
        self.kafka_home = Path(kafka_home) if kafka_home else None
        self.java = shutil.which("java")
        if self.java is None:
            raise BrokerUnavailableError("Apache Kafka needs Java 17 or newer (`java` is not on PATH)")
        super().__init__(port=port, workdir=workdir)
        self.node_id = node_id
        self.rack = rack
        self.security = security or KafkaSecurity()
        self.extra_config = dict(config or {})
        self.features = dict(features or {})
        self.jvm_options = tuple(jvm_options) if jvm_options is not None else _DEFAULT_JVM_OPTIONS
        self.data_dir = self.workdir / "data"
        self.properties_path = self.workdir / "server.properties"
        self.controller_port = controller_port if controller_port is not None else free_port()
        self._listener_ports: dict[str, int] = {n: free_port() for n in self.security.listener_names()}
        self.advertised_port = advertised_port
        self.advertised_listener_ports = dict(advertised_listener_ports or {})
        unknown = set(self.advertised_listener_ports) - set(self._listener_ports)
        if unknown:
            raise ValueError(
                f"advertised_listener_ports names {sorted(unknown)}, but this broker's secured "
                f"listeners are {sorted(self._listener_ports)} (see KafkaSecurity)"
            )
        # With an advertised port of its own (e.g. a fault proxy's), the nodes talk to each other
        # on a separate plain listener, so that what stands in front of the clients' port is not
        # between the nodes.
        self.internal_port = free_port() if advertised_port is not None else None
        self._quorum = _quorum or _Quorum(f"{node_id}@{_HOST}:{self.controller_port}", _new_cluster_id())

    # --- what clients see ---

    def listener(self, security_protocol: str) -> str:
        """``"127.0.0.1:PORT"`` of the listener for ``security_protocol`` (e.g. ``"SASL_SSL"``)."""
        if security_protocol == "PLAINTEXT":
            return self.bootstrap_servers
        try:
            return f"{_HOST}:{self._listener_ports[security_protocol]}"
        except KeyError:
            raise ValueError(
                f"this broker has no {security_protocol} listener; it has PLAINTEXT"
                + "".join(f", {n}" for n in self._listener_ports)
                + " (see KafkaSecurity)"
            ) from None

    def started_version(self) -> str | None:
        """The version the running broker logged at its latest start ("Kafka version: …")."""
        found = _VERSION_RE.findall(self.log_tail(2_000_000))
        return found[-1] if found else None

    # --- the process ---

    def server_properties(self, port: int) -> dict[str, str]:
        """The ``server.properties`` this node runs with on ``port``."""
        listeners = {"PLAINTEXT": port, **self._listener_ports}
        protocol_map = {"CONTROLLER": "PLAINTEXT", **{n: n for n in listeners}}
        advertised = {**listeners, **self.advertised_listener_ports}
        inter_broker = "PLAINTEXT"
        if self.advertised_port is not None and self.internal_port is not None:
            advertised["PLAINTEXT"] = self.advertised_port
            listeners["INTERNAL"] = advertised["INTERNAL"] = self.internal_port
            protocol_map["INTERNAL"] = "PLAINTEXT"
            inter_broker = "INTERNAL"
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": self._quorum.voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(
                [f"{n}://{_HOST}:{p}" for n, p in listeners.items()]
                + [f"CONTROLLER://{_HOST}:{self.controller_port}"]
            ),
            "advertised.listeners": ",".join(f"{n}://{_HOST}:{p}" for n, p in advertised.items()),
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocol_map.items()),
            "inter.broker.listener.name": inter_broker,
            "log.dirs": str(self.data_dir),
            "num.partitions": 1,
            # Fewer internal partitions than production's 50: creating them is the first group's
            # or transaction's wait, and a test suite makes hundreds.
            "offsets.topic.num.partitions": 4,
            # One node: internal topics of one replica (a KafkaCluster raises these).
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.num.partitions": 4,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            # A client's test should not wait 45 s for a member that is gone.
            "group.consumer.min.session.timeout.ms": 3000,
            "group.consumer.min.heartbeat.interval.ms": 500,
            "group.share.min.session.timeout.ms": 3000,
            "group.share.min.heartbeat.interval.ms": 500,
            "group.share.min.record.lock.duration.ms": 1000,
            "group.min.session.timeout.ms": 1000,
            "log.message.timestamp.after.max.ms": 3_600_000_000,
        }
        if self.rack is not None:
            props["broker.rack"] = self.rack
            props["replica.selector.class"] = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
        sec = self.security
        if sec.scram_users:
            props["sasl.enabled.mechanisms"] = ",".join(sec.sasl_mechanisms)
            for name in ("SASL_PLAINTEXT", "SASL_SSL"):
                if name in listeners:
                    for mech in sec.sasl_mechanisms:
                        key = f"listener.name.{name.lower()}.{mech.lower()}.sasl.jaas.config"
                        props[key] = "org.apache.kafka.common.security.scram.ScramLoginModule required ;"
        if sec.ssl_certificate:
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.location"] = str(self._keystore_path())
            props["ssl.client.auth"] = "none"
            props["ssl.endpoint.identification.algorithm"] = ""
        if sec.authorizer:
            props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            props["allow.everyone.if.no.acl.found"] = "false"
            props["super.users"] = ";".join(["User:ANONYMOUS", *(f"User:{u}" for u in sec.super_users)])
        props.update(self.extra_config)
        return {k: str(v) for k, v in props.items()}

    def _keystore_path(self) -> Path:
        return self.workdir / "keystore.pem"

    def _prepare(self, port: int) -> None:
        props = self.server_properties(port)
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in sorted(props.items())))
        sec = self.security
        if sec.ssl_certificate and sec.ssl_key:
            # Kafka's PEM key store: the private key, then its certificate chain, in one file.
            key = Path(sec.ssl_key).read_text()
            self._keystore_path().write_text(key.rstrip() + "\n" + Path(sec.ssl_certificate).read_text())
        if not (self.data_dir / "meta.properties").exists():
            self._format()

    def _java(self, main: str, *args: str, jvm: Iterable[str] = ()) -> list[str]:
        assert self.java is not None
        logging: list[str] = []
        if self.kafka_home is not None:
            for name in ("log4j2.yaml", "log4j2.properties"):
                conf = self.kafka_home / "config" / name
                if conf.is_file():
                    logging = [f"-Dlog4j2.configurationFile={conf}"]
                    break
        if not logging:
            # Kafka 3.x logs through reload4j (log4j 1), which prints nothing without a
            # configuration, and the start waits for the "started" line: log INFO to stdout.
            conf = self.workdir / "log4j.properties"
            if not conf.is_file():
                conf.write_text(_LOG4J1_PROPERTIES)
            logging = [f"-Dlog4j.configuration=file:{conf}"]
        return [
            self.java,
            *jvm,
            *logging,
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp",
            os.pathsep.join(self.classpath),
            main,
            *args,
        ]

    def _format(self) -> None:
        args = ["format", "-t", self._quorum.cluster_id, "-c", str(self.properties_path)]
        args.append("--ignore-formatted")
        for feature, level in sorted(self.features.items()):
            args += ["--feature", f"{feature}={level}"]
        for user, password in self.security.scram_users.items():
            for mech in self.security.sasl_mechanisms:
                if mech.startswith("SCRAM-"):
                    args += ["--add-scram", f"{mech}=[name={user},password={password}]"]
        command = self._java("kafka.tools.StorageTool", *args, jvm=("-Xmx256m", "-XX:TieredStopAtLevel=1"))
        with open(self.log_path, "ab") as log:
            log.write(b"\n=== kaflux: formatting storage\n")
            log.flush()
            result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False, timeout=180)
        if result.returncode != 0:
            raise BrokerStartError(
                f"formatting Apache Kafka's storage in {self.data_dir} failed (exit {result.returncode}).\n"
                f"log {self.log_path} ends with:\n{self.log_tail()}"
            )

    def _command(self, port: int) -> list[str]:
        return self._java("kafka.Kafka", str(self.properties_path), jvm=self.jvm_options)


def _new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding, as Kafka makes them,
    never starting with ``-`` (Kafka's ``Uuid.randomUuid`` avoids those too: command-line parsers,
    ``kafka-storage format -t`` among them, take such an argument for an option)."""
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


# --- a cluster --------------------------------------------------------------------------------------------


class KafkaCluster:
    """``size`` Apache Kafka nodes forming one KRaft quorum, each broker and controller.

    Node ``i`` (1-based) has ``broker.rack`` ``racks[i-1]`` (default ``rack-1`` … ``rack-N``) and the
    rack-aware replica selector. Internal topics are replicated ``min(3, size)`` times.
    ``advertised_ports`` (one per node) are what each node's plain listener advertises (see
    :class:`KafkaBroker`): put a proxy in front of each node to cut a node off from the clients.
    ``nodes`` are :class:`KafkaBroker` objects: stop, kill and restart each on its own (by PID).
    ``features`` sets feature levels when every node's storage is formatted, as for
    :class:`KafkaBroker` (e.g. ``{"transaction.version": 1}``).
    """

    def __init__(
        self,
        size: int = 3,
        *,
        workdir: str | os.PathLike[str] | None = None,
        version: str = KAFKA_VERSION,
        kafka_home: str | os.PathLike[str] | None = None,
        config: Mapping[str, object] | None = None,
        security: KafkaSecurity | None = None,
        racks: Sequence[str] | None = None,
        jvm_options: Iterable[str] | None = None,
        advertised_ports: Sequence[int] | None = None,
        features: Mapping[str, int] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one node, not {size}")
        racks = list(racks) if racks is not None else [f"rack-{i}" for i in range(1, size + 1)]
        if len(racks) != size:
            raise ValueError(f"{size} nodes need {size} racks, got {len(racks)}")
        if advertised_ports is not None and len(advertised_ports) != size:
            raise ValueError(f"{size} nodes need {size} advertised ports, got {len(advertised_ports)}")
        self.workdir, self._owns_workdir = make_workdir(workdir, prefix="kaflux-kafka-cluster-")
        replication = min(3, size)
        cluster_config: dict[str, object] = {
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": min(2, size),
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": min(2, size),
            "default.replication.factor": replication,
            **(config or {}),
        }
        controller_ports = [free_port() for _ in range(size)]
        quorum = _Quorum(
            ",".join(f"{i + 1}@{_HOST}:{p}" for i, p in enumerate(controller_ports)),
            _new_cluster_id(),
        )
        self.nodes = [
            KafkaBroker(
                port=free_port(),
                workdir=self.workdir / f"node-{i + 1}",
                version=version,
                kafka_home=kafka_home,
                config=cluster_config,
                security=security,
                jvm_options=jvm_options,
                node_id=i + 1,
                rack=racks[i],
                controller_port=controller_ports[i],
                advertised_port=advertised_ports[i] if advertised_ports is not None else None,
                features=features,
                _quorum=quorum,
            )
            for i in range(size)
        ]

    @property
    def bootstrap_servers(self) -> str:
        """Every node's plain listener, comma-separated."""
        return ",".join(n.bootstrap_servers for n in self.nodes)

    def listener(self, security_protocol: str) -> str:
        """Every node's listener for ``security_protocol``, comma-separated."""
        return ",".join(n.listener(security_protocol) for n in self.nodes)

    def node(self, node_id: int) -> KafkaBroker:
        """The node whose ``node.id`` is ``node_id``."""
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id} in this cluster (nodes 1..{len(self.nodes)})")

    def start(self, timeout: float = 120.0) -> Self:
        """Start every node (they start in parallel: a quorum forms only once a majority runs)."""
        errors: list[BaseException] = []

        def run(node: KafkaBroker) -> None:
            try:
                node.start(timeout)
            except BaseException as e:  # reported below, for every node that failed
                errors.append(e)

        threads = [
            threading.Thread(target=run, args=(n,), name=f"start-kafka-{n.node_id}") for n in self.nodes
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            self.stop()
            raise errors[0]
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """Stop every node that runs (SIGTERM, then SIGKILL after ``timeout``)."""
        for n in self.nodes:
            n.stop(timeout)

    def cleanup(self) -> None:
        """Stop every node and remove the work directory if this object made it."""
        for n in self.nodes:
            n.cleanup()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()


# --- command line: resolve the jars ----------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kaflux.devbrokers resolve [VERSION ...]``: fill the jar cache."""
    parser = argparse.ArgumentParser(prog="python -m kaflux.devbrokers")
    sub = parser.add_subparsers(dest="command", required=True)
    resolve = sub.add_parser("resolve", help="resolve Apache Kafka's jars with Maven into the jar cache")
    resolve.add_argument("versions", nargs="*", default=[KAFKA_VERSION])
    resolve.add_argument("--offline", action="store_true", help="use only Maven's local repository")
    sub.add_parser("cache-dir", help="print the jar cache's directory")
    args = parser.parse_args(argv)
    if args.command == "cache-dir":
        print(kafka_cache_dir())
        return 0
    for version in args.versions:
        started = time.monotonic()
        try:
            jars = resolve_kafka_jars(version, offline=args.offline)
        except (BrokerUnavailableError, ValueError) as e:
            print(f"kafka {version}: {e}", file=sys.stderr)
            return 1
        print(f"kafka {version}: {len(jars)} jars ({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0
