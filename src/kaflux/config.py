"""Client configuration: Kafka's dotted keys, Java's defaults, validated. [pure]

Each client takes a ``dict`` of Kafka's configuration keys (``"bootstrap.servers"``,
``"max.poll.records"``, ...). :func:`ConsumerConfig.from_dict` and friends check every key:
an unknown key, a value of the wrong type or outside its allowed range raises
:class:`~kaflux.errors.ConfigError` naming the key. Values may be given as Python values or as
strings (``"500"``, ``"true"``), as Spark and properties files pass them.

Each setting is a dataclass field whose metadata names its Kafka key, so the key, its type,
its default and its check are written once.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from kaflux.errors import ConfigError

_INT_MAX = 2**31 - 1


#: The meaning of each setting declared without ``doc=`` (Java's documentation, in short): the
#: configuration reference (docs/reference/configuration.md, tools/generate_docs.py) shows it.
#: A new setting says what it means with ``doc=`` in its declaration.
_MEANINGS: dict[str, str] = {
    "client.id": "A name for this client in broker logs and metrics (default: generated).",
    "client.rack": (
        "The rack of this client, sent with fetches and group membership. "
        "With it a consumer fetches from the closest replica (KIP-392): a partition whose leader "
        "names a preferred read replica (replica.selector.class on the brokers) is read from that "
        "replica until metadata.max.age.ms passes or a fetch from it fails, then from the leader. "
        "In a classic group the range, sticky and cooperative-sticky assignors are rack-aware "
        "(KIP-881): where the brokers have broker.rack, a member gets partitions with a replica in "
        "its rack whenever the assignment stays as balanced. With group.protocol=consumer the rack "
        "goes to the group coordinator, whose assignor decides."
    ),
    "request.timeout.ms": (
        "How long to wait for a broker's answer before failing the request and closing the connection."
    ),
    "retry.backoff.ms": "The first wait before retrying a failed request (exponential, jittered).",
    "retry.backoff.max.ms": "The longest wait between retries of a failed request.",
    "reconnect.backoff.ms": (
        "The first wait before connecting again to a broker that failed (exponential, jittered). "
    ),
    "reconnect.backoff.max.ms": "The longest wait before connecting again to a broker that keeps failing.",
    "socket.connection.setup.timeout.ms": (
        "How long a new connection may take (TCP, TLS, ApiVersions, SASL) before it is abandoned. "
    ),
    "socket.connection.setup.timeout.max.ms": "The longest connection setup timeout after repeated failures.",
    "connections.max.idle.ms": "Close connections idle for longer than this (-1: never).",
    "metadata.max.age.ms": "Refresh cluster metadata at least this often, even without a reason to.",
    "send.buffer.bytes": "The socket's send buffer (SO_SNDBUF); -1 for the OS default.",
    "receive.buffer.bytes": "The socket's receive buffer (SO_RCVBUF); -1 for the OS default.",
    "max.in.flight.requests.per.connection": "Requests sent to one broker without waiting for their answers.",
    "ssl.key.password": "The password of the private key in ssl.key.location or the key store.",
    "ssl.truststore.location": "A PEM trust store (Java's name for ssl.ca.location).",
    "ssl.truststore.type": "The trust store's format: PEM (JKS and PKCS12 must be converted).",
    "ssl.truststore.password": "The trust store's password (unused for PEM).",
    "ssl.keystore.location": "A PEM key store with the client's certificate and key (mutual TLS).",
    "ssl.keystore.type": "The key store's format: PEM (JKS and PKCS12 must be converted).",
    "ssl.keystore.password": "The key store's password.",
    "sasl.username": "The SASL PLAIN or SCRAM user (librdkafka's name; or sasl.jaas.config).",
    "sasl.password": "The SASL PLAIN or SCRAM password; never logged or shown.",
    "group.id": "The consumer group to join for subscribe() and commits.",
    "group.instance.id": "A static member id: a restart within session.timeout.ms keeps the assignment.",
    "group.protocol": "classic (JoinGroup/SyncGroup) or consumer (KIP-848, the broker assigns).",
    "partition.assignment.strategy": (
        "Assignors of the classic protocol, preferred first: range, roundrobin, sticky, "
        "cooperative-sticky (or Java's class names). range, sticky and cooperative-sticky are "
        "rack-aware (KIP-881, see client.rack); roundrobin is not."
    ),
    "session.timeout.ms": (
        "A member not heard from for this long is removed from the group (classic protocol). "
    ),
    "heartbeat.interval.ms": "How often a member heartbeats to the group coordinator (classic protocol).",
    "max.poll.interval.ms": "The longest gap between poll() calls before the member leaves the group.",
    "max.poll.records": "The most records one poll() returns.",
    "enable.auto.commit": "Commit the positions of returned records in the background.",
    "auto.commit.interval.ms": "How often positions are committed with enable.auto.commit.",
    "auto.offset.reset": (
        "Where to start without a committed offset: earliest, latest, none (raise), or "
        "by_duration:<ISO-8601 duration> (KIP-1106: the first record at most that old, e.g. "
        "by_duration:PT1H; the end when there is none)."
    ),
    "fetch.min.bytes": "The least data a broker returns for a fetch, waiting up to fetch.max.wait.ms for it.",
    "fetch.max.bytes": "The most data one fetch response may carry.",
    "fetch.max.wait.ms": "How long a broker may hold a fetch waiting for fetch.min.bytes.",
    "max.partition.fetch.bytes": "The most data one fetch returns per partition.",
    "isolation.level": "read_uncommitted, or read_committed to see only committed transactions.",
    "check.crcs": "Check the CRC32C of every fetched record batch.",
    "default.api.timeout.ms": (
        "The timeout of blocking calls given no timeout (seconds in the API: this / 1000). "
    ),
    "allow.auto.create.topics": "Let metadata requests create missing topics, where the broker allows it.",
    "exclude.internal.topics": "Leave internal topics (__consumer_offsets...) out of pattern subscriptions.",
    "acks": "Acknowledgements a write needs: all (-1), 1 (the leader) or 0 (none). 1 and 0 may be ints.",
    "linger.ms": "How long a batch waits for more records before it is sent.",
    "batch.size": "The most bytes of records per partition batch.",
    "buffer.memory": (
        "The most bytes of records waiting to be sent; send() blocks up to max.block.ms beyond it."
    ),
    "max.block.ms": "How long send() may block for metadata or buffer space.",
    "max.request.size": "The largest produce request (and so the largest record).",
    "compression.type": "none, gzip, snappy, lz4 or zstd, per batch.",
    "retries": "How often a failed batch is retried (bounded by delivery.timeout.ms).",
    "delivery.timeout.ms": "The time a record has to be acknowledged, from send() to success or failure. "
    "At least linger.ms + request.timeout.ms: a smaller value set explicitly is refused (as in Java); "
    "the default is raised to that sum.",
    "partitioner.ignore.keys": "Spread keyed records like unkeyed ones (sticky) instead of hashing the key.",
}


def _setting(
    key: str,
    default: Any,
    *,
    kind: str = "int",
    low: int | None = None,
    high: int | None = None,
    choices: Sequence[str] | None = None,
    doc: str = "",
) -> Any:
    """Declare one setting: its Kafka key, default, value kind and allowed range/choices."""
    meta = {
        "key": key,
        "kind": kind,
        "low": low,
        "high": high,
        "choices": choices,
        "doc": doc or _MEANINGS.get(key, ""),
    }
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


_ISO_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:[.,]\d{1,9})?)S)?)?",
    re.IGNORECASE,
)


def parse_iso_duration_ms(key: str, text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` takes it (``PnDTnHnMn.nS``; days are
    24 hours), in ms; negative or malformed durations are refused naming ``key``."""
    match = _ISO_DURATION.fullmatch(text.strip())
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ConfigError(
            key,
            f"{text!r} is not an ISO-8601 duration such as PT1H, P2D or PT30M (negative ones are refused)",
        )
    days, hours, minutes = (int(match.group(g) or 0) for g in ("d", "h", "m"))
    seconds = float((match.group("s") or "0").replace(",", "."))
    return round((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def _parse_bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(key, f"expected a boolean (True/False or 'true'/'false'), got {value!r}")


def _parse_int(key: str, value: object) -> int:
    if isinstance(value, bool):
        raise ConfigError(key, f"expected an integer, got the boolean {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    raise ConfigError(key, f"expected an integer, got {value!r}")


def _parse_list(key: str, value: object) -> list[str]:
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
        return [item for item in items if item]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise ConfigError(key, f"expected a comma-separated string or a list of strings, got {value!r}")


def _parse_str(key: str, value: object, nullable: bool) -> str | None:
    if value is None and nullable:
        return None
    if isinstance(value, str):
        return value
    raise ConfigError(key, f"expected a string, got {value!r}")


def _parse_secret(key: str, value: object) -> str | None:
    """A password, JAAS line or token setting: a string or None. The error names the type it
    was given as, never the value (a password passed as bytes is still a password)."""
    if value is None or isinstance(value, str):
        return value
    raise ConfigError(
        key, f"expected a string, got a value of type {type(value).__name__} (not shown: it is a secret)"
    )


def _parse_value(f: dataclasses.Field[Any], value: object) -> object:
    meta = f.metadata
    key: str = meta["key"]
    kind: str = meta["kind"]
    parsed: object
    if kind == "int":
        number = _parse_int(key, value)
        low, high = meta["low"], meta["high"]
        if low is not None and number < low:
            raise ConfigError(key, f"must be at least {low}, got {number}")
        if high is not None and number > high:
            raise ConfigError(key, f"must be at most {high}, got {number}")
        parsed = number
    elif kind == "bool":
        parsed = _parse_bool(key, value)
    elif kind == "list":
        parsed = _parse_list(key, value)
    elif kind == "secret":
        parsed = _parse_secret(key, value)
    elif kind in ("str", "optional_str"):
        if meta["choices"] is not None and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # acks=1 as Java's and librdkafka's users write it
        parsed = _parse_str(key, value, nullable=kind != "str")
    elif kind == "callable":
        if value is not None and not callable(value):
            raise ConfigError(key, f"expected a callable, got {type(value).__name__}")
        parsed = value
    else:  # pragma: no cover - a programming error in a declaration below
        raise AssertionError(f"unknown setting kind {kind!r}")
    choices = meta["choices"]
    if choices is not None and parsed is not None:
        values = parsed if isinstance(parsed, list) else [parsed]
        for item in values:
            if str(item).lower() not in choices:
                from kaflux.peer_settings import value_advice_for  # only on a refusal: not at import

                alias = value_advice_for(key, item)
                hint = f" ({alias})" if alias is not None else ""
                raise ConfigError(key, f"must be one of {', '.join(choices)}; got {item!r}{hint}")
        parsed = [str(v).lower() for v in values] if isinstance(parsed, list) else str(parsed).lower()
    return parsed


@dataclass(frozen=True, slots=True, repr=False)
class CommonConfig:
    """Settings every kaflux client shares (``CommonClientConfigs`` in Java)."""

    CLIENT_KIND: ClassVar[str] = "client"

    bootstrap_servers: list[str] = _setting(
        "bootstrap.servers", [], kind="list", doc="host:port pairs used to discover the cluster"
    )
    client_id: str = _setting("client.id", "", kind="str")
    client_rack: str = _setting("client.rack", "", kind="str")
    request_timeout_ms: int = _setting("request.timeout.ms", 30000, low=0, high=_INT_MAX)
    retry_backoff_ms: int = _setting("retry.backoff.ms", 100, low=0, high=_INT_MAX)
    retry_backoff_max_ms: int = _setting("retry.backoff.max.ms", 1000, low=0, high=_INT_MAX)
    reconnect_backoff_ms: int = _setting("reconnect.backoff.ms", 50, low=0, high=_INT_MAX)
    reconnect_backoff_max_ms: int = _setting("reconnect.backoff.max.ms", 1000, low=0, high=_INT_MAX)
    socket_connection_setup_timeout_ms: int = _setting(
        "socket.connection.setup.timeout.ms", 10000, low=0, high=_INT_MAX
    )
    socket_connection_setup_timeout_max_ms: int = _setting(
        "socket.connection.setup.timeout.max.ms", 30000, low=0, high=_INT_MAX
    )
    connections_max_idle_ms: int = _setting("connections.max.idle.ms", 540000, low=-1, high=_INT_MAX)
    metadata_max_age_ms: int = _setting("metadata.max.age.ms", 300000, low=0, high=_INT_MAX)
    metadata_recovery_strategy: str = _setting(
        "metadata.recovery.strategy",
        "rebootstrap",
        kind="str",
        choices=("rebootstrap", "none"),
        doc="what the client does when it can reach none of the brokers it knows (KIP-899): rebootstrap "
        "(forget them and start again from bootstrap.servers, as Java's default) or none (keep trying "
        "them)",
    )
    metadata_recovery_rebootstrap_trigger_ms: int = _setting(
        "metadata.recovery.rebootstrap.trigger.ms",
        300000,
        low=0,
        high=_INT_MAX,
        doc="with metadata.recovery.strategy=rebootstrap, also rebootstrap when no metadata refresh "
        "succeeded for this long (KIP-1102)",
    )
    send_buffer_bytes: int = _setting("send.buffer.bytes", 131072, low=-1, high=_INT_MAX)
    receive_buffer_bytes: int = _setting("receive.buffer.bytes", 65536, low=-1, high=_INT_MAX)
    max_in_flight_requests_per_connection: int = _setting(
        "max.in.flight.requests.per.connection", 5, low=1, high=_INT_MAX
    )
    receive_message_max_bytes: int = _setting(
        "receive.message.max.bytes",
        100_000_000,
        low=1000,
        high=_INT_MAX,
        doc="kaflux (as librdkafka): the largest response frame accepted from a broker; a larger "
        "length prefix closes the connection before anything is allocated",
    )
    metrics_sample_window_ms: int = _setting(
        "metrics.sample.window.ms",
        30000,
        low=1,
        high=2**62,
        doc="the time one sample of a windowed metric (rate, average, maximum) covers",
    )
    metrics_num_samples: int = _setting(
        "metrics.num.samples", 2, low=1, high=_INT_MAX, doc="the samples a windowed metric is computed over"
    )
    security_protocol: str = _setting(
        "security.protocol",
        "plaintext",
        kind="str",
        choices=("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"),
        doc="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (any case)",
    )
    ssl_ca_location: str | None = _setting(
        "ssl.ca.location",
        None,
        kind="optional_str",
        doc="PEM file of CA certificates (default: the system's)",
    )
    ssl_certificate_location: str | None = _setting(
        "ssl.certificate.location", None, kind="optional_str", doc="PEM client certificate (mutual TLS)"
    )
    ssl_key_location: str | None = _setting(
        "ssl.key.location", None, kind="optional_str", doc="PEM private key of the client certificate"
    )
    ssl_key_password: str | None = _setting("ssl.key.password", None, kind="secret")
    ssl_endpoint_identification_algorithm: str = _setting(
        "ssl.endpoint.identification.algorithm",
        "https",
        kind="str",
        choices=("https", "none", ""),
        doc="https: check the broker's host name against its certificate; none (or empty): do not",
    )
    ssl_truststore_location: str | None = _setting("ssl.truststore.location", None, kind="optional_str")
    ssl_truststore_type: str = _setting(
        "ssl.truststore.type", "jks", kind="str", choices=("jks", "pkcs12", "pem")
    )
    ssl_truststore_password: str | None = _setting("ssl.truststore.password", None, kind="secret")
    ssl_keystore_location: str | None = _setting("ssl.keystore.location", None, kind="optional_str")
    ssl_keystore_type: str = _setting(
        "ssl.keystore.type", "jks", kind="str", choices=("jks", "pkcs12", "pem")
    )
    ssl_keystore_password: str | None = _setting("ssl.keystore.password", None, kind="secret")
    sasl_mechanism: str = _setting(
        "sasl.mechanism",
        "gssapi",
        kind="str",
        choices=("gssapi", "plain", "scram-sha-256", "scram-sha-512", "oauthbearer"),
        doc="GSSAPI (Kerberos, Java's default; needs kaflux[gssapi]), PLAIN, SCRAM-SHA-256/512, OAUTHBEARER",
    )
    # GSSAPI (Kerberos): librdkafka's keys, Java's semantics
    sasl_kerberos_service_name: str = _setting(
        "sasl.kerberos.service.name",
        "kafka",
        kind="str",
        doc="GSSAPI: the brokers' Kerberos service; a broker's principal is <this>/<its host>@REALM",
    )
    sasl_kerberos_principal: str | None = _setting(
        "sasl.kerberos.principal",
        None,
        kind="optional_str",
        doc="GSSAPI: the client's principal (with sasl.kerberos.keytab; or principal in sasl.jaas.config)",
    )
    sasl_kerberos_keytab: str | None = _setting(
        "sasl.kerberos.keytab",
        None,
        kind="optional_str",
        doc="GSSAPI: log in from this keytab (or keyTab in sasl.jaas.config); unset: the ticket cache "
        "of kinit (KRB5CCNAME)",
    )
    sasl_username: str | None = _setting("sasl.username", None, kind="optional_str")
    sasl_password: str | None = _setting("sasl.password", None, kind="secret")
    sasl_jaas_config: str | None = _setting(
        "sasl.jaas.config",
        None,
        kind="secret",
        doc="Java's JAAS line: PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule or Krb5LoginModule",
    )
    sasl_oauthbearer_config: str | None = _setting(
        "sasl.oauthbearer.config", None, kind="secret", doc="unsecured JWT mode: 'principal=<name>'"
    )
    enable_sasl_oauthbearer_unsecure_jwt: bool = _setting(
        "enable.sasl.oauthbearer.unsecure.jwt", False, kind="bool", doc="development only: unsigned tokens"
    )
    oauth_cb: Callable[[], tuple[str, float]] | None = _setting(
        "oauth_cb", None, kind="callable", doc="() -> (token, expiry epoch seconds), for OAUTHBEARER"
    )
    # OAUTHBEARER from an OIDC provider (client credentials grant): librdkafka's keys, Java's semantics
    sasl_oauthbearer_method: str = _setting(
        "sasl.oauthbearer.method",
        "default",
        kind="str",
        choices=("default", "oidc"),
        doc="oidc: fetch tokens from sasl.oauthbearer.token.endpoint.url (client credentials grant)",
    )
    sasl_oauthbearer_token_endpoint_url: str | None = _setting(
        "sasl.oauthbearer.token.endpoint.url", None, kind="optional_str", doc="the OIDC token endpoint"
    )
    sasl_oauthbearer_client_id: str | None = _setting(
        "sasl.oauthbearer.client.id",
        None,
        kind="optional_str",
        doc="OIDC client id (or clientId in the JAAS line)",
    )
    sasl_oauthbearer_client_secret: str | None = _setting(
        "sasl.oauthbearer.client.secret", None, kind="secret", doc="OIDC client secret (or clientSecret)"
    )
    sasl_oauthbearer_scope: str | None = _setting(
        "sasl.oauthbearer.scope", None, kind="optional_str", doc="scope asked of the token endpoint"
    )
    sasl_oauthbearer_extensions: str | None = _setting(
        "sasl.oauthbearer.extensions", None, kind="optional_str", doc="SASL extensions: 'key=value,key=value'"
    )
    sasl_login_retry_backoff_ms: int = _setting(
        "sasl.login.retry.backoff.ms", 100, low=1, doc="wait before fetching a token again after a failure"
    )
    sasl_login_retry_backoff_max_ms: int = _setting(
        "sasl.login.retry.backoff.max.ms", 10000, low=1, doc="the longest wait between token fetch attempts"
    )
    sasl_login_connect_timeout_ms: int = _setting(
        "sasl.login.connect.timeout.ms", 10000, low=1, doc="connecting to the token endpoint"
    )
    sasl_login_read_timeout_ms: int = _setting(
        "sasl.login.read.timeout.ms", 10000, low=1, doc="waiting for the token endpoint's answer"
    )

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> Self:
        """Parse and validate a dict of Kafka configuration keys.

        Raises:
            ConfigError: a key is unknown (the message suggests the nearest known key), a
                value has the wrong type or is out of range, or settings contradict each other.
        """
        if not isinstance(raw, Mapping):
            raise ConfigError("<config>", f"expected a dict of Kafka settings, got {type(raw).__name__}")
        by_key = {f.metadata["key"]: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if not isinstance(key, str) or key not in by_key:
                raise ConfigError(str(key), cls._unknown_key_message(str(key), by_key))
            f = by_key[key]
            values[f.name] = _parse_value(f, value)
        config = cls(**values)
        config.validate()
        config.validate_explicit(frozenset(raw))
        return config

    @classmethod
    def _unknown_key_message(cls, key: str, by_key: Mapping[str, object]) -> str:
        from kaflux.peer_settings import advice_for  # only on a refusal: not at import

        advice = advice_for(key, cls.CLIENT_KIND, by_key)
        if advice is not None:
            return advice
        dotted = key.replace("_", ".") if "_" in key and "." not in key else key
        owners = " and ".join(
            sorted({c.CLIENT_KIND for c in _client_configs() if c is not cls and dotted in set(c.keys())})
        )
        if owners:
            kind = cls.CLIENT_KIND
            taker = f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} does not take it"
            if dotted != key:
                return f"is the keyword-argument spelling of {dotted!r}, a {owners} setting; {taker}"
            return f"is a {owners} setting; {taker}"
        close = difflib.get_close_matches(key, list(by_key), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {cls.CLIENT_KIND} setting{hint}"

    @classmethod
    def keys(cls) -> list[str]:
        """All Kafka keys this client accepts."""
        return [f.metadata["key"] for f in dataclasses.fields(cls)]

    def to_dict(self) -> dict[str, object]:
        """The settings as a dict of Kafka keys (defaults included; secrets too: do not log it)."""
        return {f.metadata["key"]: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __repr__(self) -> str:
        """The settings, with every secret (passwords, JAAS lines, token config) masked."""
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata["kind"] == "secret" and value is not None:
                value = "[hidden]"
            parts.append(f"{f.metadata['key']}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def validate_explicit(self, given: frozenset[str]) -> None:
        """Check rules that depend on which keys the user set explicitly (none by default)."""

    @property
    def max_response_bytes(self) -> int:
        """The cap on a received frame (``receive.message.max.bytes``)."""
        return self.receive_message_max_bytes

    def validate(self) -> None:
        """Check settings that depend on each other. Raises ConfigError."""
        if not self.bootstrap_servers:
            raise ConfigError("bootstrap.servers", "at least one host:port is required")
        for server in self.bootstrap_servers:
            parse_host_port(server)
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ConfigError("retry.backoff.max.ms", "must not be less than retry.backoff.ms")
        if self.reconnect_backoff_max_ms < self.reconnect_backoff_ms:
            raise ConfigError("reconnect.backoff.max.ms", "must not be less than reconnect.backoff.ms")
        self._validate_security()

    @property
    def uses_tls(self) -> bool:
        """Whether connections are TLS (security.protocol SSL or SASL_SSL)."""
        return self.security_protocol in ("ssl", "sasl_ssl")

    @property
    def uses_sasl(self) -> bool:
        """Whether connections authenticate with SASL (SASL_PLAINTEXT or SASL_SSL)."""
        return self.security_protocol in ("sasl_plaintext", "sasl_ssl")

    def _validate_security(self) -> None:
        for kind in ("truststore", "keystore"):
            location = getattr(self, f"ssl_{kind}_location")
            store_type = getattr(self, f"ssl_{kind}_type")
            if location is not None and store_type != "pem":
                raise ConfigError(
                    f"ssl.{kind}.type",
                    f"kaflux reads PEM files only, and ssl.{kind}.location is a {store_type.upper()} store "
                    f"(Java's default type). If the file is PEM, set ssl.{kind}.type=PEM; otherwise convert "
                    "it, e.g. keytool -importkeystore -deststoretype PKCS12 ... then openssl pkcs12 -nodes "
                    "-in store.p12 -out store.pem",
                )
        if self.ssl_truststore_location is not None and self.ssl_ca_location is not None:
            raise ConfigError("ssl.truststore.location", "give either it or ssl.ca.location, not both")
        if self.ssl_keystore_location is not None and self.ssl_certificate_location is not None:
            raise ConfigError("ssl.keystore.location", "give either it or ssl.certificate.location, not both")
        if (self.ssl_key_location is None) != (self.ssl_certificate_location is None):
            raise ConfigError(
                "ssl.key.location", "mutual TLS needs both ssl.certificate.location and ssl.key.location"
            )
        if not self.uses_sasl:
            return
        mechanism = self.sasl_mechanism.upper()
        if mechanism == "GSSAPI":
            self.kerberos_login()
            return
        if mechanism == "OAUTHBEARER" and self.sasl_oauthbearer_method == "oidc":
            self._validate_oidc()
            return
        if mechanism == "OAUTHBEARER":
            if self.oauth_cb is None and not self.enable_sasl_oauthbearer_unsecure_jwt:
                raise ConfigError(
                    "oauth_cb",
                    "OAUTHBEARER needs a token provider: oauth_cb=() -> (token, expiry epoch seconds), "
                    "or enable.sasl.oauthbearer.unsecure.jwt=true for development",
                )
            return
        username, password = self.sasl_credentials()
        if not username or password is None:
            raise ConfigError(
                "sasl.username",
                f"SASL {mechanism} needs sasl.username and sasl.password (or sasl.jaas.config)",
            )

    def _validate_oidc(self) -> None:
        if self.oauth_cb is not None or self.enable_sasl_oauthbearer_unsecure_jwt:
            raise ConfigError(
                "sasl.oauthbearer.method",
                "oidc fetches its own tokens: drop oauth_cb and enable.sasl.oauthbearer.unsecure.jwt",
            )
        url = self.sasl_oauthbearer_token_endpoint_url
        if not url or not re.match(r"https?://[^/\s]+", url):
            raise ConfigError(
                "sasl.oauthbearer.token.endpoint.url",
                "sasl.oauthbearer.method=oidc needs the token endpoint's http(s) URL",
            )
        oidc = self.oidc_client()
        if not oidc.client_id or not oidc.client_secret:
            raise ConfigError(
                "sasl.oauthbearer.client.id",
                "sasl.oauthbearer.method=oidc needs sasl.oauthbearer.client.id and "
                "sasl.oauthbearer.client.secret (or clientId and clientSecret in sasl.jaas.config)",
            )
        self.oauthbearer_extensions()

    def oidc_client(self) -> OidcClient:
        """The OIDC client settings, from the keys or else from Java's JAAS line options
        (``clientId``, ``clientSecret``, ``scope``)."""
        options = (
            {} if self.sasl_jaas_config is None else parse_jaas_config(self.sasl_jaas_config, "OAUTHBEARER")
        )
        return OidcClient(
            token_endpoint_url=self.sasl_oauthbearer_token_endpoint_url or "",
            client_id=self.sasl_oauthbearer_client_id or options.get("clientId", ""),
            client_secret=self.sasl_oauthbearer_client_secret or options.get("clientSecret", ""),
            scope=self.sasl_oauthbearer_scope or options.get("scope"),
        )

    def oauthbearer_extensions(self) -> dict[str, str]:
        """``sasl.oauthbearer.extensions`` as a dict (RFC 7628 keys: letters only; never ``auth``)."""
        extensions: dict[str, str] = {}
        for part in (self.sasl_oauthbearer_extensions or "").split(","):
            if not part.strip():
                continue
            key, sep, value = part.strip().partition("=")
            if not sep or not re.fullmatch(r"[A-Za-z]+", key) or key == "auth" or "\x01" in value:
                raise ConfigError(
                    "sasl.oauthbearer.extensions",
                    "expected key=value pairs separated by commas, keys of letters other than 'auth'; "
                    f"got {key!r}",
                )
            extensions[key] = value
        return extensions

    def kerberos_login(self) -> KerberosLogin:
        """How a GSSAPI client logs in: ``sasl.kerberos.*``, else the Krb5LoginModule options of
        ``sasl.jaas.config`` (``useKeyTab``/``keyTab``, ``principal``, ``serviceName``, and
        ``useTicketCache``/``ticketCache`` for a credential cache other than the default)."""
        options = {} if self.sasl_jaas_config is None else parse_jaas_config(self.sasl_jaas_config, "GSSAPI")
        service = self.sasl_kerberos_service_name
        if service == "kafka" and options.get("serviceName"):
            service = options["serviceName"]
        if not service or any(c in service for c in "/@ "):
            raise ConfigError(
                "sasl.kerberos.service.name",
                "must be the brokers' Kerberos service name alone (e.g. kafka), without '/', '@' or spaces",
            )
        principal = self.sasl_kerberos_principal or options.get("principal") or None
        keytab = self.sasl_kerberos_keytab
        if keytab is None and options.get("useKeyTab", "false").lower() == "true":
            keytab = options.get("keyTab")
            if not keytab:
                raise ConfigError(
                    "sasl.jaas.config", 'Krb5LoginModule with useKeyTab=true needs keyTab="<path>"'
                )
        if keytab is not None and not principal:
            raise ConfigError(
                "sasl.kerberos.principal",
                "sasl.kerberos.keytab needs the principal to log in as (e.g. alice@EXAMPLE.COM)",
            )
        ticket_cache = None
        if keytab is None and options.get("useTicketCache", "false").lower() == "true":
            ticket_cache = options.get("ticketCache") or None
        return KerberosLogin(
            service_name=service, principal=principal, keytab=keytab, ticket_cache=ticket_cache
        )

    def scram_extensions(self) -> dict[str, str]:
        """SCRAM's extensions, as Java's ScramLoginModule sends them: ``tokenauth=true`` when
        ``sasl.jaas.config`` has ``tokenauth="true"`` (a delegation-token login, KIP-48)."""
        mechanism = self.sasl_mechanism.upper()
        if self.sasl_jaas_config is None or not mechanism.startswith("SCRAM-"):
            return {}
        options = parse_jaas_config(self.sasl_jaas_config, mechanism)
        return {"tokenauth": "true"} if options.get("tokenauth", "").lower() == "true" else {}

    def sasl_credentials(self) -> tuple[str | None, str | None]:
        """(username, password) from sasl.username/sasl.password, else from sasl.jaas.config."""
        if self.sasl_jaas_config is None:
            return self.sasl_username, self.sasl_password
        options = parse_jaas_config(self.sasl_jaas_config, self.sasl_mechanism.upper())
        return options.get("username", self.sasl_username), options.get("password", self.sasl_password)


@dataclass(frozen=True, slots=True)
class OidcClient:
    """Where and as whom an OAUTHBEARER client fetches its tokens (``sasl.oauthbearer.method=oidc``)."""

    token_endpoint_url: str
    client_id: str
    client_secret: str = dataclasses.field(repr=False)
    scope: str | None = None


@dataclass(frozen=True, slots=True)
class KerberosLogin:
    """Who a GSSAPI (Kerberos) client is: ``keytab`` and ``principal``, or (without a keytab) the
    tickets in the credential cache ``kinit`` filled: ``ticket_cache`` (Krb5LoginModule's
    ``ticketCache``), else the default one (``KRB5CCNAME``); of ``principal`` if given."""

    service_name: str = "kafka"
    principal: str | None = None
    keytab: str | None = None
    ticket_cache: str | None = None


_JAAS_MODULES = {
    "GSSAPI": "com.sun.security.auth.module.Krb5LoginModule",
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
_JAAS_LINE = re.compile(
    r"\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<options>.*?);?\s*$", re.S
)
_JAAS_OPTION = re.compile(r'\s*(?P<key>[\w.]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;"]+))')


def parse_jaas_config(line: str, mechanism: str) -> dict[str, str]:
    """The options of Java's ``sasl.jaas.config`` line, e.g. ``org.apache.kafka.common.security.plain.
    PlainLoginModule required username="u" password="p";``. The login module must suit
    ``mechanism``. Raises ConfigError (never quoting the line: it holds a password)."""
    match = _JAAS_LINE.fullmatch(line)
    if match is None:
        raise ConfigError(
            "sasl.jaas.config", "expected '<LoginModule class> required key=\"value\" ...;' (one module)"
        )
    expected = _JAAS_MODULES.get(mechanism)
    if match["module"] != expected:
        raise ConfigError(
            "sasl.jaas.config",
            f"names login module {match['module']}, but sasl.mechanism={mechanism} needs {expected}",
        )
    options: dict[str, str] = {}
    rest = match["options"]
    while rest.strip():
        option = _JAAS_OPTION.match(rest)
        if option is None:
            raise ConfigError("sasl.jaas.config", 'its options must be key=value or key="value" pairs')
        quoted = option["quoted"]
        options[option["key"]] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else option["bare"]
        rest = rest[option.end() :]
    return options


def parse_host_port(server: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 as ``[::1]:9092``). Raises ConfigError on a malformed entry."""
    match = re.fullmatch(r"\s*(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\s]+)):(?P<port>\d{1,5})\s*", server)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise ConfigError("bootstrap.servers", f"{server!r} is not of the form host:port")
    return (match["v6"] or match["host"], int(match["port"]))


#: settings of the classic group protocol that group.protocol=consumer refuses
_CLASSIC_ONLY_KEYS = frozenset(
    {"partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"}
)


@dataclass(frozen=True, slots=True, repr=False)
class ConsumerConfig(CommonConfig):
    """Consumer settings (Java's ``ConsumerConfig``)."""

    @property
    def reset_duration_ms(self) -> int | None:
        """The duration of ``auto.offset.reset=by_duration:...`` in ms, else None."""
        text = self.auto_offset_reset.strip()
        if not text.lower().startswith("by_duration:"):
            return None
        return parse_iso_duration_ms("auto.offset.reset", text[len("by_duration:") :])

    CLIENT_KIND: ClassVar[str] = "consumer"

    interceptor_classes: list[str] = _setting(
        "interceptor.classes",
        [],
        kind="list",
        doc="dotted paths of interceptor classes (kaflux.ConsumerInterceptor subclasses), each made with no "
        "arguments, then configure(config); see kaflux.interceptors",
    )

    group_id: str | None = _setting("group.id", None, kind="optional_str")
    group_instance_id: str | None = _setting("group.instance.id", None, kind="optional_str")
    group_protocol: str = _setting("group.protocol", "classic", kind="str", choices=("classic", "consumer"))
    group_remote_assignor: str | None = _setting(
        "group.remote.assignor",
        None,
        kind="optional_str",
        doc="group.protocol=consumer: the assignor the coordinator runs (None: the broker's default)",
    )
    partition_assignment_strategy: list[str] = _setting(
        "partition.assignment.strategy", ["range", "cooperative-sticky"], kind="list"
    )
    session_timeout_ms: int = _setting("session.timeout.ms", 45000, low=1, high=_INT_MAX)
    heartbeat_interval_ms: int = _setting("heartbeat.interval.ms", 3000, low=1, high=_INT_MAX)
    max_poll_interval_ms: int = _setting("max.poll.interval.ms", 300000, low=1, high=_INT_MAX)
    max_poll_records: int = _setting("max.poll.records", 500, low=1, high=_INT_MAX)
    enable_auto_commit: bool = _setting("enable.auto.commit", True, kind="bool")
    auto_commit_interval_ms: int = _setting("auto.commit.interval.ms", 5000, low=0, high=_INT_MAX)
    auto_offset_reset: str = _setting("auto.offset.reset", "latest", kind="str")
    fetch_min_bytes: int = _setting("fetch.min.bytes", 1, low=0, high=_INT_MAX)
    fetch_max_bytes: int = _setting("fetch.max.bytes", 52428800, low=0, high=_INT_MAX)
    fetch_max_wait_ms: int = _setting("fetch.max.wait.ms", 500, low=1, high=_INT_MAX)
    max_partition_fetch_bytes: int = _setting("max.partition.fetch.bytes", 1048576, low=0, high=_INT_MAX)
    fetch_buffer_max_bytes: int = _setting(
        "fetch.buffer.max.bytes",
        64 * 1024 * 1024,
        low=1,
        high=2**62,
        doc="kaflux: bytes of fetched, not yet consumed data kept in memory (KIP-81 style)",
    )
    isolation_level: str = _setting(
        "isolation.level", "read_uncommitted", kind="str", choices=("read_uncommitted", "read_committed")
    )
    check_crcs: bool = _setting("check.crcs", True, kind="bool")
    default_api_timeout_ms: int = _setting("default.api.timeout.ms", 60000, low=0, high=_INT_MAX)
    enable_metrics_push: bool = _setting(
        "enable.metrics.push",
        True,
        kind="bool",
        doc="push the metrics a broker's client-telemetry subscription asks for (KIP-714), OTLP-encoded",
    )
    allow_auto_create_topics: bool = _setting("allow.auto.create.topics", True, kind="bool")
    exclude_internal_topics: bool = _setting("exclude.internal.topics", True, kind="bool")
    enable_fetch_sessions: bool = _setting(
        "enable.fetch.sessions", True, kind="bool", doc="kaflux: use KIP-227 incremental fetch sessions"
    )

    def validate(self) -> None:
        CommonConfig.validate(self)
        reset = self.auto_offset_reset.strip().lower()
        if reset.startswith("by_duration:"):
            reset = "by_duration:" + self.auto_offset_reset.strip()[len("by_duration:") :].upper()
            self.reset_duration_ms  # noqa: B018 - parses the duration: a bad one is refused now
        elif reset not in ("earliest", "latest", "none"):
            from kaflux.peer_settings import value_advice_for  # only on a refusal: not at import

            alias = value_advice_for("auto.offset.reset", self.auto_offset_reset)
            raise ConfigError(
                "auto.offset.reset",
                f"must be one of earliest, latest, none or by_duration:<ISO-8601 duration>; got "
                f"{self.auto_offset_reset!r}" + (f" ({alias})" if alias is not None else ""),
            )
        object.__setattr__(self, "auto_offset_reset", reset)
        if self.group_id is not None and not self.group_id.strip():
            raise ConfigError("group.id", "must not be empty or blank; leave it unset for no group")
        if self.group_protocol == "classic":
            if self.group_remote_assignor is not None and self.group_remote_assignor.strip():
                raise ConfigError(
                    "group.remote.assignor",
                    "cannot be set when group.protocol=classic: the broker assigns only under "
                    "group.protocol=consumer (classic members use partition.assignment.strategy)",
                )
            if self.heartbeat_interval_ms >= self.session_timeout_ms:
                raise ConfigError("heartbeat.interval.ms", "must be lower than session.timeout.ms")

    def validate_explicit(self, given: frozenset[str]) -> None:
        if self.group_protocol == "consumer":
            # As Java: these belong to the classic protocol; under KIP-848 the broker sets the
            # session and heartbeat interval and runs the assignor (group.remote.assignor).
            classic_only = sorted(given & _CLASSIC_ONLY_KEYS)
            if classic_only:
                raise ConfigError(
                    classic_only[0],
                    f"{', '.join(classic_only)} cannot be set when group.protocol=consumer: the "
                    "coordinator sets the session timeout and heartbeat interval and assigns the "
                    "partitions (choose its assignor with group.remote.assignor); remove "
                    f"{'them' if len(classic_only) > 1 else 'it'} or use group.protocol=classic",
                )
        # Java silently turns auto-commit off without a group, unless the user asked for it.
        if self.group_id is None and self.enable_auto_commit and "enable.auto.commit" in given:
            raise ConfigError("enable.auto.commit", "cannot be true without a group.id")

    @property
    def max_response_bytes(self) -> int:
        """``receive.message.max.bytes``, raised to fit a full ``fetch.max.bytes`` response
        plus protocol overhead (as librdkafka does)."""
        return max(self.receive_message_max_bytes, self.fetch_max_bytes + 512)

    @property
    def auto_commit(self) -> bool:
        """Whether offsets are committed automatically (never without a group)."""
        return self.enable_auto_commit and self.group_id is not None


@dataclass(frozen=True, slots=True, repr=False)
class ProducerConfig(CommonConfig):
    """Producer settings (Java's ``ProducerConfig``)."""

    CLIENT_KIND: ClassVar[str] = "producer"

    interceptor_classes: list[str] = _setting(
        "interceptor.classes",
        [],
        kind="list",
        doc="dotted paths of interceptor classes (kaflux.ProducerInterceptor subclasses), each made with no "
        "arguments, then configure(config); see kaflux.interceptors",
    )

    receive_buffer_bytes: int = _setting("receive.buffer.bytes", 32768, low=-1, high=_INT_MAX)
    acks: str = _setting("acks", "all", kind="str", choices=("all", "-1", "0", "1"))
    linger_ms: int = _setting("linger.ms", 5, low=0, high=_INT_MAX)
    batch_size: int = _setting("batch.size", 16384, low=0, high=_INT_MAX)
    buffer_memory: int = _setting("buffer.memory", 33554432, low=0, high=2**62)
    max_block_ms: int = _setting("max.block.ms", 60000, low=0, high=_INT_MAX)
    max_request_size: int = _setting("max.request.size", 1048576, low=0, high=_INT_MAX)
    compression_type: str = _setting(
        "compression.type", "none", kind="str", choices=("none", "gzip", "snappy", "lz4", "zstd")
    )
    compression_gzip_level: int = _setting(
        "compression.gzip.level",
        -1,
        low=-1,
        high=9,
        doc="the gzip level with compression.type=gzip (KIP-390): 1 (fastest) to 9 (smallest), or -1 "
        "for zlib's default (6)",
    )
    compression_lz4_level: int = _setting(
        "compression.lz4.level",
        9,
        low=1,
        high=17,
        doc="the lz4 level with compression.type=lz4 (KIP-390): 1 to 17; at the default 9 the fast lz4 "
        "compressor is used (as Java's producer), other levels use the high-compression one",
    )
    compression_zstd_level: int = _setting(
        "compression.zstd.level",
        3,
        low=-131072,
        high=22,
        doc="the zstd level with compression.type=zstd (KIP-390): -131072 (fastest) to 22 (smallest)",
    )
    retries: int = _setting("retries", _INT_MAX, low=0, high=_INT_MAX)
    delivery_timeout_ms: int = _setting("delivery.timeout.ms", 120000, low=0, high=_INT_MAX)
    partitioner_ignore_keys: bool = _setting("partitioner.ignore.keys", False, kind="bool")
    enable_metrics_push: bool = _setting(
        "enable.metrics.push",
        True,
        kind="bool",
        doc="push the metrics a broker's client-telemetry subscription asks for (KIP-714), OTLP-encoded",
    )
    enable_idempotence: bool = _setting(
        "enable.idempotence",
        True,
        kind="bool",
        doc="exactly one copy of each record per partition, in order, despite retries (producer id and "
        "sequence numbers); needs acks=all, retries > 0 and max.in.flight.requests.per.connection <= 5. "
        "Left at its default, it is turned off (as in Java) when those settings conflict with it",
    )
    transactional_id: str | None = _setting(
        "transactional.id",
        None,
        kind="optional_str",
        doc="enables transactions (init_transactions(), begin_transaction(), ...); needs idempotence",
    )
    transaction_timeout_ms: int = _setting(
        "transaction.timeout.ms",
        60000,
        low=1,
        high=_INT_MAX,
        doc="the longest a transaction may stay open before the coordinator aborts it (the broker caps "
        "it at its transaction.max.timeout.ms)",
    )

    #: The most in-flight requests per connection idempotence can keep in order (the broker
    #: remembers the last five batches of each producer per partition).
    MAX_IDEMPOTENT_IN_FLIGHT: ClassVar[int] = 5

    def validate(self) -> None:
        CommonConfig.validate(self)
        if self.compression_gzip_level == 0:
            raise ConfigError(
                "compression.gzip.level", "must be between 1 and 9, or -1 for the default level, got 0"
            )
        if self.transactional_id is not None and not self.transactional_id.strip():
            raise ConfigError(
                "transactional.id", "must not be empty or blank; leave it unset for no transactions"
            )

    def _idempotence_conflicts(self) -> list[tuple[str, str]]:
        """The settings that rule idempotence out: (key, why)."""
        conflicts: list[tuple[str, str]] = []
        if self.acks not in ("all", "-1"):
            conflicts.append(("acks", f"must be all (or -1) with idempotence, got {self.acks!r}"))
        if self.max_in_flight_requests_per_connection > self.MAX_IDEMPOTENT_IN_FLIGHT:
            conflicts.append(
                (
                    "max.in.flight.requests.per.connection",
                    f"must be at most {self.MAX_IDEMPOTENT_IN_FLIGHT} with idempotence, got "
                    f"{self.max_in_flight_requests_per_connection}",
                )
            )
        if self.retries == 0:
            conflicts.append(("retries", "must be greater than 0 with idempotence"))
        return conflicts

    def validate_explicit(self, given: frozenset[str]) -> None:
        self._check_delivery_timeout(given)
        # Java's rules (ProducerConfig, Kafka 3.2+): idempotence set explicitly must not meet a
        # conflicting setting; left at its default it quietly gives way to one. Transactions
        # always need it.
        conflicts = self._idempotence_conflicts() if self.enable_idempotence else []
        transactional = self.transactional_id is not None
        if conflicts and ("enable.idempotence" in given or transactional):
            key, why = conflicts[0]
            reason = "transactional.id is set" if transactional else "enable.idempotence=true"
            raise ConfigError(key, f"{why}: it conflicts with idempotence ({reason})")
        if conflicts:
            object.__setattr__(self, "enable_idempotence", False)
        if transactional and not self.enable_idempotence:
            raise ConfigError(
                "enable.idempotence", "cannot be false with a transactional.id: transactions need idempotence"
            )

    def _check_delivery_timeout(self, given: frozenset[str]) -> None:
        """Java's rule (KafkaProducer, KIP-91): a record must have time for its linger and one
        request. delivery.timeout.ms set below linger.ms + request.timeout.ms is refused; left at
        its default, it is raised to that sum."""
        floor = min(self.linger_ms + self.request_timeout_ms, _INT_MAX)
        if self.delivery_timeout_ms >= floor:
            return
        if "delivery.timeout.ms" in given:
            raise ConfigError(
                "delivery.timeout.ms",
                f"must be at least linger.ms + request.timeout.ms ({self.linger_ms} + "
                f"{self.request_timeout_ms} = {floor}), got {self.delivery_timeout_ms}: a record needs "
                "time to wait for its batch and for one request. Raise delivery.timeout.ms, or lower "
                "linger.ms or request.timeout.ms",
            )
        object.__setattr__(self, "delivery_timeout_ms", floor)

    @property
    def compression_level(self) -> int | None:
        """The level of ``compression.type``'s codec to compress with; None: the codec's default
        (gzip at -1, lz4 at 9: the fast compressor)."""
        kind = self.compression_type
        if kind == "gzip":
            return None if self.compression_gzip_level == -1 else self.compression_gzip_level
        if kind == "lz4":
            return None if self.compression_lz4_level == 9 else self.compression_lz4_level
        if kind == "zstd":
            return self.compression_zstd_level
        return None

    @property
    def acks_value(self) -> int:
        """``acks`` as the wire value: -1 for all, else 0 or 1."""
        return -1 if self.acks in ("all", "-1") else int(self.acks)


@dataclass(frozen=True, slots=True, repr=False)
class AdminConfig(CommonConfig):
    """Admin client settings."""

    CLIENT_KIND: ClassVar[str] = "admin"

    default_api_timeout_ms: int = _setting("default.api.timeout.ms", 60000, low=0, high=_INT_MAX)
    enable_metrics_push: bool = _setting(
        "enable.metrics.push",
        False,
        kind="bool",
        doc="push the metrics a broker's client-telemetry subscription asks for (KIP-714), OTLP-encoded; "
        "off by default for the admin client, as in Java",
    )


#: consumer-group settings a share consumer refuses by name (share groups have none of them)
_CONSUMER_GROUP_ONLY_KEYS = frozenset(
    {
        "group.protocol",
        "group.instance.id",
        "group.remote.assignor",
        "partition.assignment.strategy",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "auto.offset.reset",
        "isolation.level",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "enable.fetch.sessions",
        "max.partition.fetch.bytes",
    }
)


@dataclass(frozen=True, slots=True, repr=False)
class ShareConsumerConfig(CommonConfig):
    """Share consumer settings (Java's ``ShareConsumerConfig``, KIP-932)."""

    CLIENT_KIND: ClassVar[str] = "share consumer"

    interceptor_classes: list[str] = _setting(
        "interceptor.classes",
        [],
        kind="list",
        doc="dotted paths of interceptor classes (kaflux.ShareConsumerInterceptor subclasses), each "
        "made with no arguments, then configure(config); see kaflux.interceptors",
    )

    group_id: str = _setting("group.id", "", kind="str", doc="required: the share group to join")
    share_acknowledgement_mode: str = _setting(
        "share.acknowledgement.mode",
        "implicit",
        kind="str",
        choices=("implicit", "explicit"),
        doc="implicit: each poll() or commit accepts the records the previous poll() returned; "
        "explicit: every record must be acknowledged before the next poll()",
    )
    share_acquire_mode: str = _setting(
        "share.acquire.mode",
        "batch_optimized",
        kind="str",
        choices=("batch_optimized", "record_limit"),
        doc="KIP-1206: record_limit: the broker acquires at most max.poll.records per fetch "
        "(ShareFetch v2, Kafka 4.2+; a broker without it is fetched from in batch_optimized "
        "mode); batch_optimized: it may round up to the end of a record batch",
    )
    max_poll_records: int = _setting(
        "max.poll.records",
        500,
        low=1,
        high=_INT_MAX,
        doc="the most records one poll() returns, and the most a member acquires at a time",
    )
    fetch_min_bytes: int = _setting("fetch.min.bytes", 1, low=0, high=_INT_MAX)
    fetch_max_bytes: int = _setting("fetch.max.bytes", 52428800, low=0, high=_INT_MAX)
    fetch_max_wait_ms: int = _setting("fetch.max.wait.ms", 500, low=1, high=_INT_MAX)
    fetch_buffer_max_bytes: int = _setting(
        "fetch.buffer.max.bytes",
        64 * 1024 * 1024,
        low=1,
        high=2**62,
        doc="kaflux: bytes of acquired, not yet returned record data kept in memory",
    )
    check_crcs: bool = _setting("check.crcs", True, kind="bool")
    default_api_timeout_ms: int = _setting("default.api.timeout.ms", 60000, low=0, high=_INT_MAX)
    enable_metrics_push: bool = _setting(
        "enable.metrics.push",
        True,
        kind="bool",
        doc="push the metrics a broker's client-telemetry subscription asks for (KIP-714), OTLP-encoded",
    )

    @classmethod
    def _unknown_key_message(cls, key: str, by_key: Mapping[str, object]) -> str:
        if key in _CONSUMER_GROUP_ONLY_KEYS:
            return (
                "belongs to consumer groups and does not apply to a share group (the broker "
                "assigns partitions, tracks delivery and starts a new group at the latest offset); "
                "remove it, or use kaflux.Consumer for a consumer group"
            )
        return super(ShareConsumerConfig, cls)._unknown_key_message(key, by_key)

    def validate(self) -> None:
        CommonConfig.validate(self)
        if not self.group_id.strip():
            raise ConfigError("group.id", "is required for a share consumer: name the share group to join")

    @property
    def max_response_bytes(self) -> int:
        """``receive.message.max.bytes``, raised to fit a full ``fetch.max.bytes`` response."""
        return max(self.receive_message_max_bytes, self.fetch_max_bytes + 512)


def _client_configs() -> list[type[CommonConfig]]:
    """The settings classes of every kaflux client (consumer, producer, admin, share consumer)."""
    return [ConsumerConfig, ProducerConfig, AdminConfig, ShareConsumerConfig]
