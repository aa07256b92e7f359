"""Throw-away certificates for TLS targets and tests: one CA, a server certificate for
``localhost``/``127.0.0.1``/``::1`` and a client certificate, written as PEM files.

They live as long as the target that made them (a temp dir); nothing here is for production.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

SERVER_NAMES = ("localhost",)
SERVER_IPS = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class TLSFiles:
    """PEM files: the CA, the server's certificate and key, a client's certificate and key
    (its common name is ``client_cn``, the user name RabbitMQ's EXTERNAL mechanism takes)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_cn: str


def make_tls_files(directory: Path, *, client_cn: str = "guest", ca_name: str = "amqp-conformance test CA",
                   server_names: tuple[str, ...] = SERVER_NAMES, server_ips: tuple[str, ...] = SERVER_IPS,
                   ) -> TLSFiles:
    """Write a fresh CA, server and client certificate under ``directory`` (valid one day)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write_key(path: Path, k: ec.EllipticCurvePrivateKey) -> Path:
        path.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
        path.chmod(0o600)
        return path

    def write_cert(path: Path, cert: x509.Certificate) -> Path:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return path

    ca_key = key()
    ca = (
        x509.CertificateBuilder()
        .subject_name(name(ca_name))
        .issuer_name(name(ca_name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]) -> tuple[x509.Certificate,
                                                                                              ec.EllipticCurvePrivateKey]:
        k = key()
        b = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca.subject)
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
        )
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return b.sign(ca_key, hashes.SHA256()), k

    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
    server, server_key = leaf(
        server_names[0] if server_names else "server", ExtendedKeyUsageOID.SERVER_AUTH, sans
    )
    client, client_key = leaf(client_cn, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return TLSFiles(
        ca=write_cert(directory / "ca.pem", ca),
        server_cert=write_cert(directory / "server.pem", server),
        server_key=write_key(directory / "server.key", server_key),
        client_cert=write_cert(directory / "client.pem", client),
        client_key=write_key(directory / "client.key", client_key),
        client_cn=client_cn,
    )
