"""The python-gssapi shell of SASL GSSAPI, without a KDC: the missing extra, a missing keytab,
credentials that cannot be had, and the Kerberos library's messages turned into advice. (The real
library against a real KDC: tests/integration/test_security_gssapi.py.)"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from kaflux.config import KerberosLogin, ProducerConfig
from kaflux.errors import AuthenticationError, ConfigError
from kaflux.network.kerberos import describe_gss_error, gssapi_module, kerberos_context_factory
from kaflux.network.sasl import GssError
from kaflux.network.security import sasl_credentials_for


class FakeGSSError(Exception):
    pass


class FakeCredentials:
    """Credentials whose remaining life (seconds) the test sets; None: they never end; expired:
    asking raises, as python-gssapi's ExpiredCredentialsError does."""

    def __init__(self, lifetime: float | None) -> None:
        self.remaining = lifetime
        self.expired = False

    @property
    def lifetime(self) -> float | None:
        if self.expired:
            raise FakeGSSError("Major (720896): The referenced credential has expired")
        return self.remaining


def fake_gssapi(
    credentials_error: str | None = None, *, no_store_extension: bool = False, lifetime: float | None = 36000
) -> Any:
    """Just enough of python-gssapi's surface for kerberos_context_factory: acquisition (each
    returns new FakeCredentials, kept in ``issued``) and security contexts (recorded)."""
    acquired: list[dict[str, Any]] = []
    issued: list[FakeCredentials] = []
    contexts: list[dict[str, Any]] = []

    def credentials(**kwargs: Any) -> FakeCredentials:
        acquired.append(kwargs)
        if no_store_extension and kwargs["store"] is not None:
            raise NotImplementedError(
                "Your GSSAPI implementation does not have support for credential stores"
            )
        if lib.credentials_error is not None:
            raise FakeGSSError(
                "Major (458752): No credentials were supplied, or the credentials were unavailable "
                f"or inaccessible, Minor (2529639053): {lib.credentials_error}"
            )
        issued.append(FakeCredentials(lifetime))
        return issued[-1]

    def security_context(**kwargs: Any) -> object:
        contexts.append(kwargs)
        return object()

    lib = types.SimpleNamespace(
        Name=lambda text, kind: (text, kind),
        NameType=types.SimpleNamespace(kerberos_principal="principal", hostbased_service="service"),
        RequirementFlag=types.SimpleNamespace(mutual_authentication=1, out_of_sequence_detection=4),
        MechType=types.SimpleNamespace(kerberos="krb5"),
        Credentials=credentials,
        SecurityContext=security_context,
        exceptions=types.SimpleNamespace(GSSError=FakeGSSError),
        acquired=acquired,
        issued=issued,
        contexts=contexts,
        credentials_error=credentials_error,
    )
    return lib


def test_without_python_gssapi_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi raises ImportError
    with pytest.raises(ConfigError) as info:
        gssapi_module()
    text = str(info.value)
    assert info.value.key == "sasl.mechanism"
    assert "pip install 'kaflux[gssapi]'" in text and "libkrb5-dev" in text


def test_a_gssapi_client_without_python_gssapi_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)
    config = ProducerConfig.from_dict({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(ConfigError, match=r"pip install 'kaflux\[gssapi\]'"):
        sasl_credentials_for(config)


def test_other_mechanisms_never_import_python_gssapi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)
    config = ProducerConfig.from_dict(
        {
            "bootstrap.servers": "h:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
        }
    )
    credentials = sasl_credentials_for(config)
    assert credentials is not None and credentials.mechanism == "PLAIN"


def test_a_missing_keytab_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    login = KerberosLogin(principal="alice@R", keytab=str(tmp_path / "absent.keytab"))
    with pytest.raises(ConfigError, match="does not exist") as info:
        kerberos_context_factory(login, gssapi=fake_gssapi())
    assert info.value.key == "sasl.kerberos.keytab"


def test_keytab_credentials_go_to_a_private_memory_cache(tmp_path: Path) -> None:
    keytab = tmp_path / "alice.keytab"
    keytab.write_bytes(b"\x05\x02")
    lib = fake_gssapi()
    kerberos_context_factory(KerberosLogin(principal="alice@R", keytab=str(keytab)), gssapi=lib)
    kerberos_context_factory(KerberosLogin(principal="alice@R", keytab=str(keytab)), gssapi=lib)
    first, second = (call["store"] for call in lib.acquired)
    assert first["client_keytab"] == str(keytab)
    assert first["ccache"].startswith("MEMORY:") and first["ccache"] != second["ccache"]
    assert lib.acquired[0]["name"] == ("alice@R", "principal") and lib.acquired[0]["usage"] == "initiate"


def test_a_kerberos_library_without_keytab_logins_says_to_kinit_from_the_keytab(tmp_path: Path) -> None:
    keytab = tmp_path / "alice.keytab"
    keytab.write_bytes(b"\x05\x02")
    lib = fake_gssapi(no_store_extension=True)
    with pytest.raises(ConfigError) as info:
        kerberos_context_factory(KerberosLogin(principal="alice@R", keytab=str(keytab)), gssapi=lib)
    assert info.value.key == "sasl.kerberos.keytab"
    assert f"kinit -k -t {keytab} alice@R" in str(info.value)


def test_a_named_ticket_cache_is_read_through_the_credential_store() -> None:
    lib = fake_gssapi()
    kerberos_context_factory(KerberosLogin(ticket_cache="FILE:/tmp/cc"), gssapi=lib)
    assert lib.acquired[0]["store"] == {"ccache": "FILE:/tmp/cc"}


def test_no_ticket_in_the_cache_fails_with_run_kinit() -> None:
    lib = fake_gssapi("No Kerberos credentials available (default cache: FILE:/tmp/krb5cc_0)")
    with pytest.raises(AuthenticationError) as info:
        kerberos_context_factory(KerberosLogin(), gssapi=lib)
    text = str(info.value)
    assert "No Kerberos credentials available" in text
    assert "run kinit" in text and "sasl.kerberos.keytab" in text
    assert lib.acquired[0]["store"] is None  # the default cache, as kinit filled it


def test_a_keytab_the_kdc_refuses_says_what_to_check(tmp_path: Path) -> None:
    keytab = tmp_path / "bob.keytab"
    keytab.write_bytes(b"\x05\x02")
    lib = fake_gssapi("Client 'bob@R' not found in Kerberos database")
    with pytest.raises(AuthenticationError) as info:
        kerberos_context_factory(KerberosLogin(principal="bob@R", keytab=str(keytab)), gssapi=lib)
    text = str(info.value)
    assert "Client 'bob@R' not found in Kerberos database" in text
    assert "the KDC does not know the client principal" in text and "sasl.kerberos.principal" in text


def test_a_keytab_without_the_principal_s_keys_says_to_list_it(tmp_path: Path) -> None:
    keytab = tmp_path / "alice.keytab"
    keytab.write_bytes(b"\x05\x02")
    lib = fake_gssapi("No credentials cache found")  # MIT's words when the keytab lacks bob's keys
    with pytest.raises(AuthenticationError) as info:
        kerberos_context_factory(KerberosLogin(principal="bob@R", keytab=str(keytab)), gssapi=lib)
    assert f"holds keys of bob@R (klist -k -t {keytab})" in str(info.value)


@pytest.mark.parametrize(
    ("minor", "advice"),
    [
        ("Server kafka/b1@R not found in Kerberos database", "sasl.kerberos.service.name"),
        ("Clock skew too great", "synchronise them"),
        ("Cannot contact any KDC for realm 'R'", "KDC is unreachable"),
        ("No Kerberos credentials available (default cache: FILE:/x)", "run kinit"),
        ("Ticket expired", "run kinit again"),
    ],
)
def test_kerberos_failures_come_with_what_to_do(minor: str, advice: str) -> None:
    error = FakeGSSError(f"Major (851968): Unspecified GSS failure., Minor (2529638919): {minor}")
    text = describe_gss_error(error, "kafka", "b1")
    assert minor in text and advice in text
    assert "Unspecified GSS failure" not in text  # the library's own words, not the generic ones


def test_an_unknown_failure_names_the_service_principal() -> None:
    text = describe_gss_error(FakeGSSError("Major (1): something odd"), "kafka", "b1")
    assert "something odd" in text and "kafka/b1" in text


def _keytab(tmp_path: Path) -> str:
    keytab = tmp_path / "alice.keytab"
    keytab.write_bytes(b"\x05\x02")
    return str(keytab)


def test_credentials_are_acquired_again_at_80_percent_of_their_life(tmp_path: Path) -> None:
    lib = fake_gssapi(lifetime=1000)
    new_context = kerberos_context_factory(
        KerberosLogin(principal="alice@R", keytab=_keytab(tmp_path)), gssapi=lib
    )
    first = lib.issued[0]
    first.remaining = 201  # 79.9 % of its life gone: still used
    new_context("kafka", "b1")
    assert len(lib.issued) == 1 and lib.contexts[-1]["creds"] is first
    first.remaining = 200  # 80 %: the next login takes fresh ones, in a new private cache
    new_context("kafka", "b1")
    assert len(lib.issued) == 2 and lib.contexts[-1]["creds"] is lib.issued[1]
    assert lib.acquired[1]["store"]["ccache"] != lib.acquired[0]["store"]["ccache"]
    new_context("kafka", "b2")
    assert len(lib.issued) == 2  # the fresh ones last


def test_expired_credentials_are_acquired_again(tmp_path: Path) -> None:
    lib = fake_gssapi(lifetime=1000)
    new_context = kerberos_context_factory(
        KerberosLogin(principal="alice@R", keytab=_keytab(tmp_path)), gssapi=lib
    )
    lib.issued[0].expired = True
    new_context("kafka", "b1")
    assert lib.contexts[-1]["creds"] is lib.issued[1]


def test_a_failed_renewal_keeps_valid_credentials_and_reports_expired_ones(tmp_path: Path) -> None:
    lib = fake_gssapi(lifetime=1000)
    new_context = kerberos_context_factory(
        KerberosLogin(principal="alice@R", keytab=_keytab(tmp_path)), gssapi=lib
    )
    first = lib.issued[0]
    lib.credentials_error = "Cannot contact any KDC for realm 'R'"
    first.remaining = 100  # due for renewal, the KDC is down, but the ticket is still good
    new_context("kafka", "b1")
    assert lib.contexts[-1]["creds"] is first
    first.expired = True  # now it is not: the login fails, saying why and what to do
    with pytest.raises(GssError, match="KDC is unreachable"):
        new_context("kafka", "b1")


def test_credentials_without_an_end_are_never_acquired_again(tmp_path: Path) -> None:
    lib = fake_gssapi(lifetime=None)
    new_context = kerberos_context_factory(KerberosLogin(), gssapi=lib)
    for _ in range(3):
        new_context("kafka", "b1")
    assert len(lib.acquired) == 1
