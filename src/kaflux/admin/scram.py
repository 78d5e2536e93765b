"""SCRAM credentials of users, and the admin requests that list, set and delete them. [pure]

As Java's ``Admin.alterUserScramCredentials`` does, the salted password is computed here
(PBKDF2 with the mechanism's hash over a fresh random salt): the plain password never leaves the
process, and no ``repr`` shows it.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kaflux.admin.names import NamedIntEnum
from kaflux.admin.operation import AdminApi, Lookup, Outcome
from kaflux.errors import InvalidArgumentError, KafkaError, ResourceNotFoundError, error_for_code
from kaflux.network.sasl import MIN_SCRAM_ITERATIONS
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kaflux.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    UserName,
)
from kaflux.structs import Node

__all__ = [
    "AlterScramCredentialsApi",
    "DescribeScramCredentialsApi",
    "ScramCredentialInfo",
    "ScramMechanism",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
]

#: Java's default iteration count for a new credential
DEFAULT_ITERATIONS = 4096
#: Kafka's limit (ScramMechanism.maxIterations)
MAX_ITERATIONS = 16384


class ScramMechanism(NamedIntEnum):
    """A SCRAM mechanism (wire values as Java's ``ScramMechanism``)."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def label(self) -> str:
        """Kafka's name for it, ``SCRAM-SHA-256``."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    """One credential of a user: its mechanism and iteration count."""

    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True, slots=True)
class UserScramCredentialsDescription:
    """A user's SCRAM credentials (never the password nor its salted form)."""

    user: str
    credential_infos: list[ScramCredentialInfo]


def _user(user: object) -> str:
    if not isinstance(user, str) or not user:
        raise InvalidArgumentError(f"a SCRAM user name must be a non-empty string, got {user!r}")
    return user


@dataclass(frozen=True, slots=True)
class UserScramCredentialUpsertion:
    """Set ``user``'s password for ``mechanism`` (``"SCRAM-SHA-256"`` or ``"SCRAM-SHA-512"``).
    The salted password is computed at once, and the plain one dropped."""

    user: str
    mechanism: ScramMechanism
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)

    def __init__(
        self,
        user: str,
        mechanism: ScramMechanism | str,
        password: str | bytes,
        iterations: int = DEFAULT_ITERATIONS,
        *,
        salt: bytes | None = None,
    ) -> None:
        kind = ScramMechanism.parse(mechanism)
        if isinstance(iterations, bool) or not isinstance(iterations, int):
            raise InvalidArgumentError(f"SCRAM iterations must be an int, got {type(iterations).__name__}")
        if not MIN_SCRAM_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise InvalidArgumentError(
                f"SCRAM iterations must be between {MIN_SCRAM_ITERATIONS} and {MAX_ITERATIONS}, "
                f"got {iterations}"
            )
        if isinstance(password, str):
            secret = password.encode()
        elif isinstance(password, bytes):
            secret = password
        else:
            raise InvalidArgumentError(f"a SCRAM password must be a string, got {type(password).__name__}")
        if not secret:
            raise InvalidArgumentError("a SCRAM password must not be empty")
        salt = secrets.token_bytes(32) if salt is None else salt
        object.__setattr__(self, "user", _user(user))
        object.__setattr__(self, "mechanism", kind)
        object.__setattr__(self, "iterations", iterations)
        object.__setattr__(self, "salt", salt)
        object.__setattr__(
            self, "salted_password", hashlib.pbkdf2_hmac(kind.hash_name, secret, salt, iterations)
        )


@dataclass(frozen=True, slots=True)
class UserScramCredentialDeletion:
    """Delete ``user``'s credential for ``mechanism``."""

    user: str
    mechanism: ScramMechanism

    def __init__(self, user: str, mechanism: ScramMechanism | str) -> None:
        object.__setattr__(self, "user", _user(user))
        object.__setattr__(self, "mechanism", ScramMechanism.parse(mechanism))


def _error(code: int, message: str | None, what: str) -> KafkaError:
    return error_for_code(code)(f"{what}: {message or ''}".rstrip(": "))


class DescribeScramCredentialsApi(AdminApi[None, dict[str, UserScramCredentialsDescription]]):
    """DescribeUserScramCredentials: the credentials of ``users`` (None: every user)."""

    lookup = Lookup.ANY

    def __init__(self, users: Sequence[str] | None) -> None:
        self._users = users

    def keys(self) -> list[None]:
        return [None]

    def describe(self, key: None) -> str:
        return "the users' SCRAM credentials"

    def build(self, node: Node | None, keys: list[None]) -> list[tuple[RequestMessage[Any], list[None]]]:
        users = None if self._users is None else [UserName(name=u) for u in self._users]
        return [(DescribeUserScramCredentialsRequest(users=users), keys)]

    def handle(
        self, node: Node | None, keys: list[None], body: DescribeUserScramCredentialsResponse
    ) -> Outcome[None, dict[str, UserScramCredentialsDescription]]:
        if body.error_code:
            error = _error(body.error_code, body.error_message, "describe_user_scram_credentials()")
            return Outcome(retry={None: error}) if error.retriable else Outcome(failed={None: error})
        described: dict[str, UserScramCredentialsDescription] = {}
        for result in body.results:
            if result.error_code == ResourceNotFoundError.code and self._users is None:
                continue
            if result.error_code:
                return Outcome(
                    failed={None: _error(result.error_code, result.error_message, f"user {result.user!r}")}
                )
            infos = [
                ScramCredentialInfo(ScramMechanism(i.mechanism), i.iterations)
                for i in result.credential_infos
                if i.mechanism in (1, 2)
            ]
            described[result.user] = UserScramCredentialsDescription(result.user, infos)
        return Outcome(completed={None: dict(sorted(described.items()))})


class AlterScramCredentialsApi(AdminApi[str, None]):
    """AlterUserScramCredentials: keys are the users; every change of a user goes in one request."""

    lookup = Lookup.ANY

    def __init__(
        self,
        upsertions: Sequence[UserScramCredentialUpsertion],
        deletions: Sequence[UserScramCredentialDeletion],
    ) -> None:
        self._upsertions = list(upsertions)
        self._deletions = list(deletions)
        self._users = list(dict.fromkeys([u.user for u in upsertions] + [d.user for d in deletions]))

    def keys(self) -> list[str]:
        return self._users

    def describe(self, key: str) -> str:
        return f"user {key!r}"

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        wanted = set(keys)
        request = AlterUserScramCredentialsRequest(
            deletions=[
                ScramCredentialDeletion(name=d.user, mechanism=int(d.mechanism))
                for d in self._deletions
                if d.user in wanted
            ],
            upsertions=[
                ScramCredentialUpsertion(
                    name=u.user,
                    mechanism=int(u.mechanism),
                    iterations=u.iterations,
                    salt=u.salt,
                    salted_password=u.salted_password,
                )
                for u in self._upsertions
                if u.user in wanted
            ],
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[str], body: AlterUserScramCredentialsResponse
    ) -> Outcome[str, None]:
        outcome: Outcome[str, None] = Outcome()
        for result in body.results:
            if result.user not in keys:
                continue
            if result.error_code:
                error = _error(result.error_code, result.error_message, f"user {result.user!r}")
                (outcome.retry if error.retriable else outcome.failed)[result.user] = error
            else:
                outcome.completed[result.user] = None
        return outcome
