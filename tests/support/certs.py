"""Throw-away TLS certificates for tests: a CA, server and client certificates, and decoys. [pure + files]

:func:`generate_certs` writes PEM files into a directory and returns their paths as a :class:`TestCerts`:

==========================  ==========================================================================
``ca_cert`` / ``ca_key``    the test CA (self-signed); clients trust it with ``ssl.ca.location``
``server_cert`` / ``_key``  signed by the CA, for ``IP:127.0.0.1`` and ``DNS:localhost``
``wrong_ca_cert`` / ``_key`` a second, unrelated CA: a client trusting only it must refuse the server
``other_host_cert`` / ``_key`` signed by the good CA but for ``DNS:other.example`` only: it fails
                            host name verification unless that is turned off
``client_cert`` / ``_key``  a client certificate (``CN=kaflux-client``) signed by the CA, for mutual
                            TLS; its key is encrypted (PKCS#8) with ``client_key_password``
==========================  ==========================================================================

Keys are ECDSA P-256 (fast to make) and unencrypted except the client's. Certificates are valid from
an hour ago (clock skew) for ``days`` days. Needs the ``cryptography`` package (``dev`` extra).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CLIENT_KEY_PASSWORD", "OTHER_HOST_NAME", "TestCerts", "generate_certs"]

#: Password of the client certificate's encrypted private key.
CLIENT_KEY_PASSWORD = "kaflux-client-key-pw"
#: The only name the "other host" certificate is valid for.
OTHER_HOST_NAME = "other.example"


@dataclass(frozen=True, slots=True)
class TestCerts:
    """Paths of the generated PEM files (see the module docstring)."""

    __test__ = False  # not a pytest test class

    directory: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    wrong_ca_cert: Path
    wrong_ca_key: Path
    other_host_cert: Path
    other_host_key: Path
    client_cert: Path
    client_key: Path
    client_key_password: str = CLIENT_KEY_PASSWORD


def generate_certs(directory: str | os.PathLike[str], *, days: int = 2) -> TestCerts:
    """Create the CA, server, decoy and client certificates as PEM files in ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    not_before = now - datetime.timedelta(hours=1)
    not_after = now + datetime.timedelta(days=days)

    def new_key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def name(common_name: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kaflux tests"),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            ]
        )

    def builder(
        subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, *, ca: bool
    ) -> x509.CertificateBuilder:
        """What every certificate here has: names, key, serial, validity, basic constraints and key
        usage (a CA signs certificates and CRLs, a leaf signs and agrees keys)."""
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=not ca,
                    key_cert_sign=ca,
                    crl_sign=ca,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
        )

    def make_ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = new_key()
        subject = name(common_name)
        cert = (
            builder(subject, subject, key, ca=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cert, key

    def make_leaf(
        common_name: str,
        ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
        *,
        sans: list[x509.GeneralName],
        usage: x509.ObjectIdentifier,
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        ca_cert, ca_key = ca
        key = new_key()
        leaf = (
            builder(name(common_name), ca_cert.subject, key, ca=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
        )
        if sans:
            leaf = leaf.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return leaf.sign(ca_key, hashes.SHA256()), key

    def write(
        stem: str, pair: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], password: str = ""
    ) -> tuple[Path, Path]:
        cert, key = pair
        cert_path = out / f"{stem}.crt"
        key_path = out / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        key_bytes = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        # Private keys readable by the owner only (stunnel warns about others).
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_bytes)
        return cert_path, key_path

    ca = make_ca("kaflux test CA")
    wrong_ca = make_ca("kaflux wrong CA")
    server = make_leaf(
        "localhost",
        ca,
        sans=[x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")), x509.DNSName("localhost")],
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
    )
    other = make_leaf(
        OTHER_HOST_NAME, ca, sans=[x509.DNSName(OTHER_HOST_NAME)], usage=ExtendedKeyUsageOID.SERVER_AUTH
    )
    client = make_leaf("kaflux-client", ca, sans=[], usage=ExtendedKeyUsageOID.CLIENT_AUTH)

    ca_cert, ca_key = write("ca", ca)
    wrong_ca_cert, wrong_ca_key = write("wrong-ca", wrong_ca)
    server_cert, server_key = write("server", server)
    other_cert, other_key = write("other-host", other)
    client_cert, client_key = write("client", client, CLIENT_KEY_PASSWORD)
    return TestCerts(
        directory=out,
        ca_cert=ca_cert,
        ca_key=ca_key,
        server_cert=server_cert,
        server_key=server_key,
        wrong_ca_cert=wrong_ca_cert,
        wrong_ca_key=wrong_ca_key,
        other_host_cert=other_cert,
        other_host_key=other_key,
        client_cert=client_cert,
        client_key=client_key,
    )
