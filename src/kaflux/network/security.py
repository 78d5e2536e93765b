"""TLS contexts and SASL credentials from a client's configuration. [app: at construction]

:func:`ssl_context_for` builds the one :class:`ssl.SSLContext` a client's connections share
(every broker, the ones metadata advertises included, is reached with the same settings);
:func:`sasl_credentials_for` resolves who logs in and how. Problems with the files or the
settings raise :class:`~kaflux.errors.ConfigError` naming the key, at construction, never
quoting a password.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable

from kaflux.config import CommonConfig
from kaflux.errors import ConfigError
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.kerberos import kerberos_context_factory
from kaflux.network.sasl import SaslCredentials, TokenProvider, unsecured_jwt
from kaflux.network.token_refresh import TokenRefresh

log = logging.getLogger("kaflux.network.oauthbearer")


def ssl_context_for(config: CommonConfig) -> ssl.SSLContext | None:
    """The TLS context for security.protocol SSL / SASL_SSL, else None."""
    if not config.uses_tls:
        return None
    ca_key, cafile = "ssl.ca.location", config.ssl_ca_location
    if config.ssl_truststore_location is not None:  # a PEM truststore (checked in the config)
        ca_key, cafile = "ssl.truststore.location", config.ssl_truststore_location
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(ca_key, f"cannot load CA certificates from {cafile!r}: {exc}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if config.ssl_endpoint_identification_algorithm in ("none", ""):
        context.check_hostname = False
    certfile, keyfile = config.ssl_certificate_location, config.ssl_key_location
    cert_key = "ssl.certificate.location"
    if config.ssl_keystore_location is not None:  # a PEM keystore holds key and certificate
        cert_key, certfile, keyfile = "ssl.keystore.location", config.ssl_keystore_location, None
    if certfile is not None:
        password = config.ssl_key_password or config.ssl_keystore_password
        try:
            context.load_cert_chain(certfile, keyfile, password)
        except ssl.SSLError as exc:  # before OSError, its base class
            raise ConfigError(
                "ssl.key.password" if password is not None else cert_key,
                f"the client certificate and key do not load ({exc.reason or exc}): check that they "
                "are PEM, belong together, and that ssl.key.password decrypts the key",
            ) from None
        except OSError as exc:
            raise ConfigError(
                cert_key, f"cannot read the client certificate or key: {exc.strerror}"
            ) from None
    return context


def sasl_credentials_for(
    config: CommonConfig, wall_clock: Callable[[], float] = time.time
) -> SaslCredentials | None:
    """Who logs in and how, for SASL_PLAINTEXT / SASL_SSL, else None."""
    if not config.uses_sasl:
        return None
    mechanism = config.sasl_mechanism.upper()
    if mechanism == "GSSAPI":
        login = config.kerberos_login()
        factory = kerberos_context_factory(login)  # the credentials now: no ticket fails the constructor
        return SaslCredentials(
            mechanism, gss_context_factory=factory, kerberos_service_name=login.service_name
        )
    if mechanism == "OAUTHBEARER":
        provider = _token_provider(config, wall_clock)
        if config.sasl_oauthbearer_method == "oidc":
            provider()  # the first token now: a wrong secret or a dead endpoint fails the constructor
        return SaslCredentials(mechanism, token_provider=provider, extensions=config.oauthbearer_extensions())
    username, password = config.sasl_credentials()
    assert username is not None and password is not None  # the config checked them
    return SaslCredentials(mechanism, username, password, extensions=config.scram_extensions())


def _token_provider(config: CommonConfig, wall_clock: Callable[[], float]) -> TokenProvider:
    """oauth_cb, or an OIDC endpoint, cached until shortly before its token expires; or
    unsecured JWTs."""
    backoff = ExponentialBackoff(config.sasl_login_retry_backoff_ms, config.sasl_login_retry_backoff_max_ms)
    if config.sasl_oauthbearer_method == "oidc":
        # Imported here: the OIDC client brings http.client and urllib, which no other client needs.
        from kaflux.network.oidc import ClientCredentialsTokens

        timeout_s = (config.sasl_login_connect_timeout_ms + config.sasl_login_read_timeout_ms) / 2000
        oidc = ClientCredentialsTokens(
            config.oidc_client(), timeout_s=timeout_s, wall_clock=wall_clock, ssl_context=None
        )
        return RefreshingTokens(oidc, wall_clock, backoff, name=oidc.describe())
    if config.oauth_cb is not None:
        source: TokenProvider = config.oauth_cb
    else:
        options = dict(
            part.partition("=")[::2] for part in (config.sasl_oauthbearer_config or "").split() if "=" in part
        )
        principal = options.get("principal")
        if not principal:
            raise ConfigError(
                "sasl.oauthbearer.config",
                "unsecured JWT mode needs 'principal=<name>' in sasl.oauthbearer.config",
            )
        lifetime = float(options.get("lifeSeconds", "3600"))

        def source() -> tuple[str, float]:
            return unsecured_jwt(principal, wall_clock(), lifetime)

    name = (
        "oauth_cb" if config.oauth_cb is not None else "the unsecured JWT generator (sasl.oauthbearer.config)"
    )
    return RefreshingTokens(source, wall_clock, backoff, name=name)


class RefreshingTokens:
    """A token provider that asks its source again once 80 % of a token's life has passed
    (as Java refreshes), so every connection and re-authentication has a fresh one. A failed
    refresh is logged at WARNING (throttled) and keeps the current token while it is valid,
    trying again after the backoff (doubling per failure); an expired token is never handed
    out: :class:`~kaflux.network.token_refresh.TokenExpiredError` says why it could not be
    refreshed. The decisions are :class:`~kaflux.network.token_refresh.TokenRefresh`'s; this
    shell reads the clock, calls the source and logs."""

    def __init__(
        self,
        source: TokenProvider,
        wall_clock: Callable[[], float],
        backoff: ExponentialBackoff,
        *,
        name: str = "oauth_cb",
    ) -> None:
        self._source = source
        self._clock = wall_clock
        self._refresh = TokenRefresh(name, backoff)

    def __call__(self) -> tuple[str, float]:
        now = self._clock()
        if self._refresh.refresh_due(now):
            try:
                token, expiry = self._source()
            except Exception as exc:
                line = self._refresh.failed(now, str(exc) or type(exc).__name__)
                if line is not None:
                    log.warning("%s", line)
                if not self._refresh.has_token():
                    raise  # never had one: the source's own error says what to check
            else:
                line = self._refresh.fetched(now, token, expiry)
                if line is not None:
                    log.info("%s", line)
        return self._refresh.token(now)
