"""Probe a target before any case runs: TCP, protocol header, login, vhost — and read the
server properties once (product, version, platform, capabilities)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from conformance.model.verdicts import CaseTimeout, HarnessError
from conformance.protocol.handshake import TLSError
from conformance.protocol.raw import URL, HandshakeError, HandshakeRefused, RawConnection, redact


class ProbeError(Exception):
    """The target cannot be used; ``kind`` is unreachable | tls | not-amqp | login | vhost | timeout | url."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class ServerInfo:
    product: str
    version: str
    platform: str
    capabilities: dict[str, bool] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)

    def supports(self, capability: str) -> bool:
        return bool(self.capabilities.get(capability, False))

    def to_json(self) -> dict[str, Any]:
        return {"product": self.product, "version": self.version, "platform": self.platform,
                "capabilities": dict(self.capabilities)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerInfo:
        return cls(data.get("product", "?"), data.get("version", "?"), data.get("platform", "?"),
                   dict(data.get("capabilities", {})))


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value) if value is not None else "?"


def server_info(props: dict[str, Any]) -> ServerInfo:
    caps = props.get("capabilities") or {}
    return ServerInfo(
        product=_text(props.get("product")),
        version=_text(props.get("version")),
        platform=_text(props.get("platform")),
        capabilities={_text(k): bool(v) for k, v in caps.items()},
        properties={_text(k): (_text(v) if isinstance(v, (bytes, str)) else v) for k, v in props.items()
                    if k != "capabilities"},
    )


def probe(u: URL, timeout: float = 8.0) -> ServerInfo:
    """Connect, log in, open the vhost; raise :class:`ProbeError` with one clear line otherwise."""
    shown = redact(u)
    started = time.monotonic()
    try:
        conn = RawConnection.open(u, timeout=timeout)
    except TLSError as exc:
        raise ProbeError("tls", f"{shown}: {exc.message}") from exc
    except (HandshakeError, HandshakeRefused) as exc:
        # The run's own handshake refused (HandshakeRefused: a connection.close in answer to it)
        # or broken: either way the target cannot be used, said in one line by stage.
        if exc.stage == "tls":
            raise ProbeError("tls", f"{shown}: {exc.detail}") from exc
        if exc.stage == "header":
            raise ProbeError("not-amqp", f"{shown} does not speak AMQP 0-9-1 ({exc.detail})") from exc
        if exc.stage == "start":
            # A TLS listener given plain bytes may just hang up: say so rather than "not AMQP".
            hint = "" if u.tls else "; if it is a TLS port, use amqps://"
            raise ProbeError(
                "not-amqp", f"{shown} accepted TCP but did not start AMQP 0-9-1 ({exc.detail}){hint}"
            ) from exc
        if exc.stage == "mechanism":
            raise ProbeError("login", f"{shown}: {exc.detail} (auth_mechanism= in the URL)") from exc
        if exc.stage == "login":
            raise ProbeError("login", f"{shown}: login refused for user {u.user!r} ({exc.detail}); "
                                      "check the user and password in the URL") from exc
        if exc.stage == "tune":
            raise ProbeError("vhost", f"{shown}: the connection was refused after tune-ok ({exc.detail}); "
                                      "check frame_max=, channel_max=, heartbeat= in the URL") from exc
        raise ProbeError("vhost", f"{shown}: vhost {u.vhost!r} refused ({exc.detail}); "
                                  "check the vhost in the URL (%2F is the default '/')") from exc
    except CaseTimeout as exc:
        raise ProbeError("timeout", f"{shown}: no AMQP answer within {time.monotonic() - started:.1f}s "
                                    f"(waiting for {exc.waiting_for})") from exc
    except HarnessError as exc:
        raise ProbeError(
            "unreachable",
            f"broker unreachable at {u.host}:{u.port} ({exc.message.split(': ', 1)[-1]}); "
            "is it running, and is the URL right?",
        ) from exc
    try:
        return server_info(conn.server_properties)
    finally:
        conn.close(timeout=min(2.0, timeout))
