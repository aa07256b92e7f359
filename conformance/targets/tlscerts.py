"""Throw-away certificates for TLS targets and tests: one CA, a server certificate for
``localhost``/``127.0.0.1``/``::1`` and a client certificate, written as PEM files.

Made by ``trustme`` (a CA for tests, kept by python-trio). They live as long as the target that
made them (a temp dir); nothing here is for production.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

SERVER_NAMES = ("localhost",)
SERVER_IPS = ("127.0.0.1", "::1")
VALID_FOR = datetime.timedelta(days=1)


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
    import trustme

    directory.mkdir(parents=True, exist_ok=True)
    until = datetime.datetime.now(datetime.UTC) + VALID_FOR
    ca = trustme.CA(organization_name="amqp-conformance", organization_unit_name=ca_name)
    identities = (*server_names, *server_ips)
    server = ca.issue_cert(*identities, common_name=server_names[0] if server_names else "server",
                           not_after=until)
    # A client certificate names no host; its common name is the login (ssl_cert_login_from).
    client = ca.issue_cert(client_cn, common_name=client_cn, not_after=until)

    def write(path: Path, pem: bytes, *, secret: bool = False) -> Path:
        path.write_bytes(pem)
        if secret:
            path.chmod(0o600)
        return path

    return TLSFiles(
        ca=write(directory / "ca.pem", ca.cert_pem.bytes()),
        server_cert=write(directory / "server.pem", b"".join(b.bytes() for b in server.cert_chain_pems)),
        server_key=write(directory / "server.key", server.private_key_pem.bytes(), secret=True),
        client_cert=write(directory / "client.pem", b"".join(b.bytes() for b in client.cert_chain_pems)),
        client_key=write(directory / "client.key", client.private_key_pem.bytes(), secret=True),
        client_cn=client_cn,
    )
