"""The admin client's delegation-token (KIP-48) and client-quota (KIP-546) calls, and their
types. [app: public methods of ``AdminClient``, which mixes this class in; the types are pure]

Delegation tokens and DescribeClientQuotas go to any broker, AlterClientQuotas to the controller,
as Java's ``Admin`` sends them. A client logs in with a token over SCRAM: the token id as the user
name, the base64 HMAC as the password, and ``tokenauth="true"`` in ``sasl.jaas.config``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kaflux.admin.operation import AdminApi, AdminResult, RequestApi
from kaflux.blocking import Steps, blocking
from kaflux.errors import InvalidArgumentError, error_for_code
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages import alter_client_quotas as acq
from kaflux.protocol.messages import describe_client_quotas as dcq
from kaflux.protocol.messages.create_delegation_token import CreatableRenewers, CreateDelegationTokenRequest
from kaflux.protocol.messages.describe_delegation_token import (
    DescribeDelegationTokenOwner,
    DescribeDelegationTokenRequest,
)
from kaflux.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from kaflux.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest

__all__ = [
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilterComponent",
    "DelegationToken",
    "TokenInformation",
    "TokenQuotaCalls",
]

#: the entity types of client quotas, as Java's ``ClientQuotaEntity`` names them
QUOTA_ENTITY_TYPES = ("user", "client-id", "ip")


def _principal(text: str, what: str) -> tuple[str, str]:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise InvalidArgumentError(f"{what}: a principal is 'Type:name' (e.g. 'User:alice'), got {text!r}")
    return kind, name


@dataclass(frozen=True, slots=True)
class TokenInformation:
    """A delegation token's metadata, as Java's ``TokenInformation``: principals are
    ``"User:alice"`` strings; times are epoch milliseconds."""

    token_id: str
    owner: str
    token_requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class DelegationToken:
    """A delegation token: its information and its HMAC (the secret; a client logs in with the
    token id and :attr:`password`)."""

    token_info: TokenInformation
    hmac: bytes = field(repr=False)

    @property
    def password(self) -> str:
        """The SCRAM password of a token login: the HMAC in base64, as Java's clients send it."""
        return base64.b64encode(self.hmac).decode()

    def jaas_config(self, mechanism: str = "SCRAM-SHA-256") -> str:
        """A ``sasl.jaas.config`` value that logs in with this token (``tokenauth="true"``)."""
        del mechanism  # one login module serves both SCRAM mechanisms
        return (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{self.token_info.token_id}" password="{self.password}" tokenauth="true";'
        )


class ClientQuotaEntity:
    """Whom a quota applies to, as Java's ``ClientQuotaEntity``: entity type (``"user"``,
    ``"client-id"``, ``"ip"``) to name, None for the type's default entity. E.g.
    ``ClientQuotaEntity({"user": "alice", "client-id": None})``."""

    __slots__ = ("entries",)

    def __init__(self, entries: Mapping[str, str | None]) -> None:
        if not entries:
            raise InvalidArgumentError("a client quota entity names at least one entity type")
        for kind, name in entries.items():
            if kind not in QUOTA_ENTITY_TYPES:
                raise InvalidArgumentError(
                    f"unknown quota entity type {kind!r}: use {', '.join(QUOTA_ENTITY_TYPES)}"
                )
            if name is not None and not isinstance(name, str):
                raise InvalidArgumentError(f"quota entity {kind}: the name must be a string or None")
        self.entries: dict[str, str | None] = dict(sorted(entries.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientQuotaEntity) and other.entries == self.entries

    def __hash__(self) -> int:
        return hash(tuple(self.entries.items()))

    def __repr__(self) -> str:
        return f"ClientQuotaEntity({self.entries!r})"


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    """Changes of one entity's quotas: ``ops`` maps a quota key (``producer_byte_rate``,
    ``consumer_byte_rate``, ``request_percentage``, ``controller_mutation_rate``,
    ``connection_creation_rate``) to its new value, or None to remove it."""

    entity: ClientQuotaEntity
    ops: Mapping[str, float | None]


@dataclass(frozen=True, slots=True)
class ClientQuotaFilterComponent:
    """One entity type's part of a :meth:`~TokenQuotaCalls.describe_client_quotas` filter, as
    Java's: :meth:`of_entity` (that name), :meth:`of_default_entity` or :meth:`of_entity_type`
    (any entity of the type)."""

    entity_type: str
    match: str | None
    match_type: int  # 0 exact, 1 default, 2 any

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, name, 0)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, None, 1)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, None, 2)


def _token(
    token_id: str,
    owner: tuple[str, str],
    requester: tuple[str, str],
    renewers: Iterable[tuple[str, str]],
    times: tuple[int, int, int],
    hmac: bytes,
) -> DelegationToken:
    info = TokenInformation(
        token_id,
        ":".join(owner),
        ":".join(requester),
        tuple(":".join(r) for r in renewers),
        *times,
    )
    return DelegationToken(info, hmac)


class TokenQuotaCalls:
    """Delegation-token and client-quota methods of :class:`~kaflux.admin.client.AdminClient`."""

    def _run(self, what: str, api: AdminApi[Any, Any], deadline_ms: int) -> Steps[AdminResult[Any, Any]]:
        raise NotImplementedError  # AdminClient runs it on its network thread

    def _deadline_ms(self, timeout: float | None) -> tuple[float, int]:
        raise NotImplementedError  # AdminClient: (seconds, deadline in monotonic ms)

    def _send(
        self, what: str, request: RequestMessage[Any], timeout: float | None, *, to_controller: bool = False
    ) -> Steps[Any]:
        _, deadline = self._deadline_ms(timeout)
        api = RequestApi(request, to_controller=to_controller)
        return (yield from self._run(what, api, deadline)).values()[None]

    @staticmethod
    def _check(what: str, code: int, message: str | None = None) -> None:
        if code:
            raise error_for_code(code)(message or what)

    @blocking
    def create_delegation_token(
        self,
        *,
        renewers: Iterable[str] = (),
        owner: str | None = None,
        max_lifetime: float | None = None,
        timeout: float | None = None,
    ) -> Steps[DelegationToken]:
        """Create a delegation token for the logged-in user (or for ``owner``, which needs
        CREATE_TOKENS on that user), as Java's ``Admin.createDelegationToken``. ``renewers`` may
        renew it (``"User:bob"``); ``max_lifetime`` (seconds; None: the broker's
        ``delegation.token.max.lifetime.ms``) caps its life.

        Raises:
            InvalidArgumentError: a principal that is not ``Type:name``.
            DelegationTokenAuthDisabledError: the brokers have no ``delegation.token.secret.key``.
            DelegationTokenRequestNotAllowedError: asked over a connection without SASL (or
                with a token login).
            KafkaTimeoutError: not answered in time.
        """
        what = "create_delegation_token()"
        wanted = [_principal(r, what) for r in renewers]
        owner_type, owner_name = _principal(owner, what) if owner is not None else (None, None)
        request = CreateDelegationTokenRequest(
            owner_principal_type=owner_type,
            owner_principal_name=owner_name,
            renewers=[CreatableRenewers(principal_type=t, principal_name=n) for t, n in wanted],
            max_lifetime_ms=-1 if max_lifetime is None else int(max_lifetime * 1000),
        )
        response = yield from self._send(what, request, timeout)
        self._check(what, response.error_code)
        return _token(
            response.token_id,
            (response.principal_type, response.principal_name),
            (response.token_requester_principal_type, response.token_requester_principal_name),
            wanted,
            (response.issue_timestamp_ms, response.expiry_timestamp_ms, response.max_timestamp_ms),
            response.hmac,
        )

    @blocking
    def renew_delegation_token(
        self, hmac: bytes, *, renew_period: float | None = None, timeout: float | None = None
    ) -> Steps[int]:
        """Renew a token (its owner or a renewer may), as Java's ``Admin.renewDelegationToken``:
        its expiry moves ``renew_period`` seconds from now (None: the broker's
        ``delegation.token.expiry.time.ms``), never past its max lifetime. Returns the new
        expiry time (epoch ms).

        Raises:
            DelegationTokenNotFoundError / DelegationTokenExpiredError: no such token, or expired.
            DelegationTokenOwnerMismatchError: the caller is neither owner nor renewer.
            KafkaTimeoutError: not answered in time.
        """
        what = "renew_delegation_token()"
        period = -1 if renew_period is None else int(renew_period * 1000)
        response = yield from self._send(
            what, RenewDelegationTokenRequest(hmac=hmac, renew_period_ms=period), timeout
        )
        self._check(what, response.error_code)
        return int(response.expiry_timestamp_ms)

    @blocking
    def expire_delegation_token(
        self, hmac: bytes, *, expiry_period: float | None = None, timeout: float | None = None
    ) -> Steps[int]:
        """Expire a token, as Java's ``Admin.expireDelegationToken``: at once (``expiry_period``
        None or negative: it can no longer log in), or ``expiry_period`` seconds from now.
        Returns the new expiry time (epoch ms).

        Raises:
            DelegationTokenNotFoundError: no such token.
            DelegationTokenOwnerMismatchError: the caller is neither owner nor renewer.
            KafkaTimeoutError: not answered in time.
        """
        what = "expire_delegation_token()"
        period = -1 if expiry_period is None else int(expiry_period * 1000)
        request = ExpireDelegationTokenRequest(hmac=hmac, expiry_time_period_ms=period)
        response = yield from self._send(what, request, timeout)
        self._check(what, response.error_code)
        return int(response.expiry_timestamp_ms)

    @blocking
    def describe_delegation_tokens(
        self, owners: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> Steps[list[DelegationToken]]:
        """The delegation tokens the caller may see (its own, those it may renew, and any with
        DESCRIBE on the owner), of ``owners`` (``"User:alice"``) or of everyone when None, as
        Java's ``Admin.describeDelegationToken``.

        Raises:
            InvalidArgumentError: a principal that is not ``Type:name``.
            DelegationTokenAuthDisabledError: the brokers have no delegation tokens.
            KafkaTimeoutError: not answered in time.
        """
        what = "describe_delegation_tokens()"
        wanted = None if owners is None else [_principal(o, what) for o in owners]
        request = DescribeDelegationTokenRequest(
            owners=None
            if wanted is None
            else [DescribeDelegationTokenOwner(principal_type=t, principal_name=n) for t, n in wanted]
        )
        response = yield from self._send(what, request, timeout)
        self._check(what, response.error_code)
        return [
            _token(
                t.token_id,
                (t.principal_type, t.principal_name),
                (t.token_requester_principal_type, t.token_requester_principal_name),
                [(r.principal_type, r.principal_name) for r in t.renewers],
                (t.issue_timestamp, t.expiry_timestamp, t.max_timestamp),
                t.hmac,
            )
            for t in response.tokens
        ]

    @blocking
    def describe_client_quotas(
        self,
        components: Iterable[ClientQuotaFilterComponent] = (),
        *,
        strict: bool = False,
        timeout: float | None = None,
    ) -> Steps[dict[ClientQuotaEntity, dict[str, float]]]:
        """The client quotas of the entities matching the filter, as Java's
        ``Admin.describeClientQuotas``: each component narrows one entity type; ``strict``
        leaves out entities with types the filter does not name. No components and not strict:
        every quota.

        Raises:
            InvalidRequestError: a filter the broker refuses (e.g. an unknown entity type).
            KafkaTimeoutError: not answered in time.
        """
        what = "describe_client_quotas()"
        request = dcq.DescribeClientQuotasRequest(
            components=[
                dcq.ComponentData(entity_type=c.entity_type, match_type=c.match_type, match=c.match)
                for c in components
            ],
            strict=strict,
        )
        response = yield from self._send(what, request, timeout)
        self._check(what, response.error_code, response.error_message)
        return {
            ClientQuotaEntity({e.entity_type: e.entity_name for e in entry.entity}): {
                v.key: v.value for v in entry.values
            }
            for entry in response.entries or ()
        }

    @blocking
    def alter_client_quotas(
        self,
        alterations: Iterable[ClientQuotaAlteration],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> Steps[None]:
        """Set or remove client quotas, as Java's ``Admin.alterClientQuotas``. A quota takes
        effect on the brokers within moments: a client over it is throttled (its
        ``produce-throttle-time-avg`` / ``fetch-throttle-time-avg`` metrics show it).

        Raises:
            InvalidArgumentError: an alteration that is not a ClientQuotaAlteration.
            InvalidRequestError: a key or value the broker refuses (the message names the entity).
            ClusterAuthorizationFailedError: the caller may not alter configs.
            KafkaTimeoutError: not answered in time.
        """
        what = "alter_client_quotas()"
        wanted = list(alterations)
        for a in wanted:
            if not isinstance(a, ClientQuotaAlteration):
                raise InvalidArgumentError(
                    f"{what} takes ClientQuotaAlteration values, got {type(a).__name__}"
                )
        if not wanted:
            return
        request = acq.AlterClientQuotasRequest(
            entries=[
                acq.AlterClientQuotasRequestEntryData(
                    entity=[
                        acq.AlterClientQuotasRequestEntityData(entity_type=k, entity_name=v)
                        for k, v in a.entity.entries.items()
                    ],
                    ops=[
                        acq.OpData(
                            key=key, value=0.0 if value is None else float(value), remove=value is None
                        )
                        for key, value in a.ops.items()
                    ],
                )
                for a in wanted
            ],
            validate_only=validate_only,
        )
        response = yield from self._send(what, request, timeout, to_controller=True)
        for entry in response.entries:
            entity = {e.entity_type: e.entity_name for e in entry.entity}
            self._check(what, entry.error_code, f"quotas of {entity}: {entry.error_message or ''}".strip())
