"""Kerberos for SASL GSSAPI, on python-gssapi (the gssapi extra). [app: at construction; bg: logins]

The credentials are acquired on the application thread when a client is constructed; the network
thread makes a security context per login, whose first step may ask the KDC for the broker's
service ticket (a local library call that can wait for the KDC, as in Java's client).

:func:`kerberos_context_factory` acquires the client's initiator credentials once, when a client
is constructed, so that a missing ticket, a keytab without the principal's keys, a principal the
KDC does not know or an unreachable KDC fail the constructor with an
:class:`~kaflux.errors.AuthenticationError` that says what to do (a missing keytab file: a
:class:`~kaflux.errors.ConfigError`). It returns a
:data:`~kaflux.network.sasl.GssContextFactory`: every SASL login (re-authentications included)
gets a new security context for the broker's hostbased service ``<sasl.kerberos.service.name>@<host>``
with mutual authentication, as Java's client does.

Credentials come from a keytab (``sasl.kerberos.keytab`` + ``sasl.kerberos.principal``, or
Krb5LoginModule's ``keyTab``/``principal`` in ``sasl.jaas.config``): the tickets go to a
credential cache in memory, private to the client, and once 80 % of the ticket-granting ticket's
life has passed the next login fetches a new one from the keytab (as Java's client renews at 80 %).
Without a keytab the client uses the default credential cache (what ``kinit`` filled;
``KRB5CCNAME`` names another one), of ``sasl.kerberos.principal`` if given; renewing those tickets
(``kinit -R``, or ``kinit`` again) is the user's, as for Java's ticket cache, and the next login
uses the renewed ones.

python-gssapi is imported only here, and only when GSSAPI is configured: without it the error
says ``pip install 'kaflux[gssapi]'``.
"""

from __future__ import annotations

import importlib
import os
import secrets
from types import ModuleType
from typing import Any

from kaflux.config import KerberosLogin
from kaflux.errors import AuthenticationError, ConfigError
from kaflux.network.sasl import GssContext, GssContextFactory, GssError

__all__ = ["gssapi_module", "kerberos_context_factory"]

INSTALL_HINT = (
    "SASL GSSAPI (Kerberos) needs the python-gssapi package: pip install 'kaflux[gssapi]'. It "
    "builds against the system's Kerberos library: install it first (Debian/Ubuntu: apt-get install "
    "libkrb5-dev; RHEL/Fedora: dnf install krb5-devel; macOS: it ships with the OS)"
)


def gssapi_module() -> ModuleType:
    """python-gssapi, imported now. Raises ConfigError (naming sasl.mechanism) without it."""
    try:
        return importlib.import_module("gssapi")
    except ImportError as exc:
        raise ConfigError("sasl.mechanism", f"{INSTALL_HINT} ({exc})") from None
    except OSError as exc:  # the package is there but the Kerberos library is not
        raise ConfigError("sasl.mechanism", f"{INSTALL_HINT}; loading it failed: {exc}") from None


def kerberos_context_factory(login: KerberosLogin, *, gssapi: ModuleType | None = None) -> GssContextFactory:
    """Acquire the client's Kerberos credentials now; return the factory of security contexts.

    Raises ConfigError when the keytab is missing or unreadable, AuthenticationError when the
    credentials cannot be had (the message quotes the Kerberos library and says what to check).
    """
    if login.keytab is not None:
        if not os.path.isfile(login.keytab):
            raise ConfigError("sasl.kerberos.keytab", f"the keytab {login.keytab!r} does not exist")
        if not os.access(login.keytab, os.R_OK):
            raise ConfigError("sasl.kerberos.keytab", f"the keytab {login.keytab!r} is not readable")
    lib = gssapi if gssapi is not None else gssapi_module()
    login_credentials = _Credentials(lib, login)  # acquired now, on the constructing thread
    service_name = login.service_name

    def new_context(service: str, host: str) -> GssContext:
        try:
            credentials = login_credentials.current()
        except AuthenticationError as exc:
            raise GssError(str(exc)) from None
        try:
            target = lib.Name(f"{service}@{host}", lib.NameType.hostbased_service)
            flags = lib.RequirementFlag.mutual_authentication | lib.RequirementFlag.out_of_sequence_detection
            context = lib.SecurityContext(
                name=target, creds=credentials, usage="initiate", mech=lib.MechType.kerberos, flags=flags
            )
        except lib.exceptions.GSSError as exc:
            raise GssError(describe_gss_error(exc, service_name, host)) from None
        return _Context(lib, context, service, host)

    return new_context


#: acquire the credentials again once this share of their life is left (Java's client renews its
#: ticket at 80 % of its life)
_RENEW_WHEN_LEFT = 0.2


class _Credentials:
    """The client's initiator credentials, acquired again once 80 % of their life has passed or
    when they have expired: from the keytab (a new ticket-granting ticket), or from the ticket
    cache (which the user renews). Used by one thread at a time: the constructor's, then the
    network thread's."""

    def __init__(self, lib: ModuleType, login: KerberosLogin) -> None:
        self._lib = lib
        self._login = login
        self._credentials = _acquire(lib, login)
        self._full_life = self._remaining()

    def _remaining(self) -> float | None:
        """Seconds the credentials have left (None: no end), 0 once expired."""
        try:
            lifetime = self._credentials.lifetime
        except self._lib.exceptions.GSSError:  # e.g. ExpiredCredentialsError
            return 0.0
        return None if lifetime is None else float(lifetime)

    def current(self) -> Any:
        """Credentials for a new security context. Raises AuthenticationError when they have
        expired and cannot be had again."""
        remaining = self._remaining()
        if remaining is None or self._full_life is None or remaining > _RENEW_WHEN_LEFT * self._full_life:
            return self._credentials
        try:
            fresh = _acquire(self._lib, self._login)
        except AuthenticationError:
            if remaining > 0:
                return self._credentials  # still valid: try again at the next login
            raise
        self._credentials = fresh
        self._full_life = self._remaining()
        return fresh


def _acquire(lib: ModuleType, login: KerberosLogin) -> Any:
    name = None
    if login.principal is not None:
        name = lib.Name(login.principal, lib.NameType.kerberos_principal)
    store: dict[str, str] | None = None
    if login.keytab is not None:
        # a private in-memory ticket cache: never the user's default one
        store = {"client_keytab": login.keytab, "ccache": f"MEMORY:kaflux-{secrets.token_hex(8)}"}
    elif login.ticket_cache is not None:
        store = {"ccache": login.ticket_cache}
    try:
        return lib.Credentials(name=name, usage="initiate", store=store)
    except NotImplementedError:  # e.g. Heimdal (macOS): no credential store extension
        if login.keytab is None:
            raise ConfigError(
                "sasl.jaas.config",
                "this system's Kerberos library cannot read a named ticket cache (it lacks MIT "
                "Kerberos' credential store extension): drop ticketCache and set "
                f"KRB5CCNAME={login.ticket_cache}",
            ) from None
        raise ConfigError(
            "sasl.kerberos.keytab",
            "this system's Kerberos library cannot log in from a keytab itself (it lacks MIT "
            f"Kerberos' credential store extension): run kinit -k -t {login.keytab} "
            f"{login.principal} and leave sasl.kerberos.keytab out to use the ticket cache",
        ) from None
    except lib.exceptions.GSSError as exc:
        detail = _minor_message(exc)
        advice = _advice_for(detail, "")
        if advice is None and login.keytab is not None:
            advice = (
                f"check that the keytab {login.keytab} holds keys of {login.principal} (klist -k -t "
                f"{login.keytab}) and that the KDC knows this principal"
            )
        elif advice is None:
            who = f" of {login.principal}" if login.principal else ""
            where = login.ticket_cache or "the credential cache"
            advice = (
                f"no usable Kerberos tickets{who} in {where}: run kinit (KRB5CCNAME names another "
                "cache), or set sasl.kerberos.keytab and sasl.kerberos.principal"
            )
        raise AuthenticationError(
            f"SASL GSSAPI: cannot get Kerberos credentials ({detail}): {advice}"
        ) from None


class _Context:
    """A python-gssapi initiator context as a :class:`~kaflux.network.sasl.GssContext`."""

    def __init__(self, lib: ModuleType, context: Any, service: str, host: str) -> None:
        self._lib = lib
        self._context = context
        self._service = service
        self._host = host

    def _error(self, exc: Exception) -> GssError:
        return GssError(describe_gss_error(exc, self._service, self._host))

    @property
    def complete(self) -> bool:
        return bool(self._context.complete)

    @property
    def initiator(self) -> str:
        try:
            return str(self._context.initiator_name)
        except self._lib.exceptions.GSSError as exc:
            raise self._error(exc) from None

    def step(self, token: bytes | None) -> bytes | None:
        try:
            out = self._context.step(token)
        except self._lib.exceptions.GSSError as exc:
            raise self._error(exc) from None
        return None if out is None else bytes(out)

    def unwrap(self, message: bytes) -> bytes:
        try:
            return bytes(self._context.unwrap(message).message)
        except self._lib.exceptions.GSSError as exc:
            raise self._error(exc) from None

    def wrap(self, payload: bytes) -> bytes:
        try:
            return bytes(self._context.wrap(payload, False).message)
        except self._lib.exceptions.GSSError as exc:
            raise self._error(exc) from None


def _minor_message(exc: Exception) -> str:
    """The Kerberos library's own words (the minor status), else the whole GSS message."""
    text = str(exc)
    marker = text.rfind("Minor (")
    if marker >= 0:
        minor = text[marker:].split("):", 1)[-1].strip()
        if minor:
            return minor
    return text


#: Kerberos library messages (lower case fragments) and what the user should do about them
_ADVICE = (
    (
        "client '",  # Client 'alice@R' not found in Kerberos database
        "the KDC does not know the client principal: check sasl.kerberos.principal (and its realm)",
    ),
    (
        "not found in kerberos database",
        "the KDC does not know the broker's service principal {principal}: check "
        "sasl.kerberos.service.name (default kafka) and that bootstrap.servers and the brokers' "
        "advertised listeners use the host names their principals were made for",
    ),
    ("clock skew", "this host's clock and the KDC's differ too much: synchronise them (NTP)"),
    (
        "cannot contact any kdc",
        "the KDC is unreachable: check the realm's kdc entries in krb5.conf (KRB5_CONFIG) and the network",
    ),
    (
        "no kerberos credentials",
        "run kinit, or set sasl.kerberos.keytab and sasl.kerberos.principal",
    ),
    ("ticket expired", "the Kerberos tickets expired: run kinit again (or use a keytab)"),
    ("cannot find kdc for realm", "no KDC is configured for the realm: check krb5.conf (KRB5_CONFIG)"),
)


def describe_gss_error(exc: Exception, service: str, host: str) -> str:
    """A GSS-API failure for broker host ``host`` in words that say what to do."""
    detail = _minor_message(exc)
    principal = f"{service}/{host}"
    advice = _advice_for(detail, principal)
    if advice is not None:
        return f"Kerberos: {detail}; {advice}"
    return f"Kerberos: {detail} (the broker's service principal is {principal})"


def _advice_for(detail: str, principal: str) -> str | None:
    lowered = detail.lower()
    for fragment, advice in _ADVICE:
        if fragment in lowered:
            return advice.format(principal=principal)
    return None
