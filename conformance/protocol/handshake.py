"""The opening handshake driven step by step on a plain socket: the raw client's handshake mode.

:class:`RawConnection.open <conformance.protocol.raw.RawConnection.open>` runs every step in a row
(header, start-ok, tune-ok, open); the connection cases use the same :class:`Handshake` one step
at a time, so they can send a wrong header, a bad mechanism or a frame of an exact size, and see
what the broker answers and how the socket ends. Reads are bounded by deadlines; the socket's end
is recorded (``ended``), never raised, so a case can judge it.
"""

from __future__ import annotations

import socket
import ssl
import time
from typing import Any

from pamqp import commands as spec
from pamqp import encode as pencode
from pamqp import frame as pframe
from pamqp import heartbeat as pheartbeat
from pamqp.exceptions import UnmarshalingException

from conformance.protocol import trace
from conformance.protocol.errors import AnswerTimeout, ClientFault, Mismatch
from conformance.protocol.wire import PROTOCOL_HEADER, URL, describe


class HandshakeError(ClientFault):
    """The broker refused or broke the opening handshake. ``stage`` says where:
    tls | header | start | mechanism | login | vhost (``tls``: a TLS peer answered a plain
    connection; ``mechanism``: the broker offers none of the URL's SASL mechanisms)."""

    def __init__(self, stage: str, detail: str) -> None:
        super().__init__(f"handshake failed at {stage}: {detail}")
        self.stage = stage
        self.detail = detail


class HandshakeRefused(Mismatch):
    """The broker refused the connection in answer to what the client sent or negotiated: a
    connection.close during the handshake, or the socket ended right after a start-ok or tune-ok
    carrying values the caller chose (a frame_max, channel_max, heartbeat, client properties,
    credentials, vhost). The broker's doing, not the harness's: a :class:`Mismatch`, so the case
    that negotiated it is judged (FAIL/NON_STRICT by its expectation) with the close or the reset
    as evidence. ``stage`` as :class:`HandshakeError`'s (login | tune | vhost); ``sent`` names
    what the client negotiated."""

    def __init__(self, stage: str, detail: str, *, expected: str, sent: str = "") -> None:
        after = f" (sent: {sent})" if sent else ""
        super().__init__(f"the broker refused the connection at {stage}: {detail}{after}",
                         expected=expected, observed=f"{detail}{after}")
        self.stage = stage
        self.detail = detail
        self.sent = sent


class TLSError(ClientFault):
    """The TLS layer failed before any AMQP: an untrusted or mismatched certificate
    (``kind="verify"``), a peer that does not speak TLS (``kind="handshake"``), or files the URL
    names that cannot be loaded (``kind="files"``). The message is one line for the user."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def connect(u: URL, timeout: float) -> socket.socket:
    """A TCP connection to the broker, TLS-wrapped for amqps:// (no AMQP yet); a failure is the
    harness's (or the deployment's), not a protocol verdict. ``timeout`` bounds the TCP connect
    and the TLS handshake each."""
    try:
        ctx = u.ssl_context()
    except ValueError as exc:
        raise TLSError("files", str(exc)) from exc
    try:
        sock = socket.create_connection((u.host, u.port), timeout=timeout)
    except OSError as exc:
        raise ClientFault(f"cannot connect to {u.host}:{u.port}: {exc}") from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ctx is None:
        return sock
    where = f"{u.host}:{u.port}"
    try:
        return ctx.wrap_socket(sock, server_hostname=u.tls_server_name)
    except ssl.SSLCertVerificationError as exc:
        sock.close()
        raise TLSError(
            "verify",
            f"TLS: the certificate of {where} is not accepted ({exc.verify_message}); "
            "name its CA with cacertfile=… (verify=verify_none skips the check)",
        ) from exc
    except ssl.SSLError as exc:
        sock.close()
        raise TLSError(
            "handshake",
            f"TLS handshake with {where} failed ({exc.reason or exc}): "
            "is it a TLS port? (use amqp:// for a plain one)",
        ) from exc
    except TimeoutError as exc:
        sock.close()
        raise TLSError(
            "handshake",
            f"TLS handshake with {where} got no answer within {timeout:.1f}s: "
            "is it a TLS port? (use amqp:// for a plain one)",
        ) from exc
    except OSError as exc:  # the peer closed or reset mid-handshake: a plain port hanging up
        sock.close()
        raise TLSError(
            "handshake",
            f"TLS handshake with {where} failed ({exc}): is it a TLS port? (use amqp:// for a plain one)",
        ) from exc


def sasl_response(mechanism: str, user: str, password: str) -> str:
    """The start-ok response for a SASL mechanism: PLAIN's ``\\0user\\0password``, AMQPLAIN's
    LOGIN/PASSWORD field table (without its length prefix, as RabbitMQ reads it), EXTERNAL's
    empty response (the identity is the TLS client certificate)."""
    if mechanism == "AMQPLAIN":
        table = pencode.field_table({"LOGIN": user, "PASSWORD": password})[4:]
        return table.decode("latin-1")  # pamqp encodes the str response as UTF-8: keep to ASCII names
    if mechanism == "EXTERNAL":
        return ""
    return f"\x00{user}\x00{password}"


def choose_mechanism(u: URL, offered: str) -> str:
    """The first of the URL's mechanisms (PLAIN if it names none) the broker offers; a
    HandshakeError("mechanism") when it offers none of them."""
    wanted = u.auth_mechanisms or ("PLAIN",)
    have = offered.split()
    for mech in wanted:
        if mech in have:
            return mech
    raise HandshakeError(
        "mechanism", f"the broker offers SASL mechanisms {offered!r}, none of {', '.join(wanted)}"
    )


# A TLS record of type alert (21), version 3.x: what a TLS server sends to bytes that are no
# ClientHello. No AMQP frame starts so (frame types are 1, 2, 3 and 8).
TLS_ALERT = bytes((21, 3))


class Handshake:
    """A plain socket with deadline-bounded reads: bytes in, frames out, and how it ended."""

    def __init__(self, sock: socket.socket, url: URL, timeout: float, *, label: str | None = None) -> None:
        self.sock = sock
        self.url = url
        self.timeout = timeout
        self.buf = b""
        self.ended: str | None = None  # "closed" | "reset" | "socket error: …" once the socket ended
        # The running case's frame trace (evidence); a raw connection passes its own label.
        self.trace = trace.current()
        self.label = label or (self.trace.connection("handshake") if self.trace else "")

    @classmethod
    def open(cls, url: URL, timeout: float) -> Handshake:
        return cls(connect(url, timeout), url, timeout)

    # -- bytes --------------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:
            self.ended = self.ended or f"send failed: {exc}"

    def send_method(self, method: Any, channel: int = 0) -> None:
        if self.trace is not None:
            self.trace.add_frame(self.label, trace.SENT, channel, method)
        self.send(pframe.marshal(method, channel))

    def read(self, within: float) -> None:
        """Wait up to ``within`` seconds for bytes; return as soon as some arrive or the socket ends."""
        deadline = time.monotonic() + within
        while self.ended is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self.sock.settimeout(remaining)
            try:
                got = self.sock.recv(65536)
            except TimeoutError:
                return
            except ConnectionResetError:
                self.ended = "reset"
                return
            except OSError as exc:
                self.ended = f"socket error: {exc}"
                return
            if not got:
                self.ended = "closed"
                return
            self.buf += got
            return

    # -- frames -------------------------------------------------------------------------------

    def next_frame(self, what: str, *, deadline: float | None = None) -> Any:
        """The next frame (heartbeats skipped), or ``None`` once the socket has ended; TIMEOUT at
        the deadline (``timeout`` seconds from now unless given). A protocol header where a frame
        should be means the peer does not speak this protocol version: HandshakeError("header")."""
        got = self.next_channel_frame(what, deadline=deadline)
        return None if got is None else got[1]

    def next_channel_frame(self, what: str, *, deadline: float | None = None) -> tuple[int, Any] | None:
        """:meth:`next_frame` with the channel the frame came on: ``(channel, frame)``."""
        until = time.monotonic() + self.timeout if deadline is None else deadline
        while True:
            if self.buf.startswith(b"AMQP") and len(self.buf) >= len(PROTOCOL_HEADER):
                if self.trace is not None:
                    self.trace.add(self.label, trace.RECEIVED, 0, f"protocol header {self.buf[:8]!r}")
                raise HandshakeError("header", f"broker answered with protocol header {self.buf[:8]!r}")
            if self.buf.startswith(TLS_ALERT) and not self.url.tls:
                raise HandshakeError(
                    "tls",
                    f"{self.url.host}:{self.url.port} answered the plain protocol header "
                    "with a TLS alert: it is a TLS port (use amqps://)",
                )
            while self.buf:
                try:
                    n, ch, frm = pframe.unmarshal(self.buf)
                except UnmarshalingException:
                    break
                self.buf = self.buf[n:]
                if self.trace is not None:
                    self.trace.add_frame(self.label, trace.RECEIVED, ch, frm)
                if not isinstance(frm, pheartbeat.Heartbeat):
                    return ch, frm
            if self.ended is not None:
                return None
            if time.monotonic() >= until:
                raise AnswerTimeout(what, self.timeout)
            self.read(until - time.monotonic())

    def until_end(self, what: str) -> str:
        """Wait (bounded) for the broker to end the socket; return what arrived before, described."""
        deadline = time.monotonic() + self.timeout
        while self.ended is None and time.monotonic() < deadline:
            self.read(deadline - time.monotonic())
        if self.ended is None:
            raise AnswerTimeout(
                what, self.timeout, observed=f"socket still open; received {self.describe_buf()}"
            )
        return self.describe_buf()

    def describe_buf(self) -> str:
        frames, rest = [], self.buf
        while rest:
            try:
                n, _ch, frm = pframe.unmarshal(rest)
            except UnmarshalingException:
                frames.append(f"bytes {rest[:16]!r}")
                break
            rest = rest[n:]
            frames.append(describe(frm))
        return ", ".join(frames) or "nothing"

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- the handshake, step by step ----------------------------------------------------------

    def start(self, *, deadline: float | None = None) -> spec.Connection.Start:
        """Send the protocol header; the broker's connection.start (HandshakeError otherwise)."""
        if self.trace is not None:
            self.trace.add(self.label, trace.SENT, 0, f"protocol header {PROTOCOL_HEADER!r}")
        self.send(PROTOCOL_HEADER)
        frm = self.next_frame("connection.start", deadline=deadline)
        if not isinstance(frm, spec.Connection.Start):
            raise HandshakeError("start", self.unexpected("connection.start", frm))
        return frm

    def start_ok_method(self, *, mechanism: str = "PLAIN", password: str | None = None,
                        client_properties: dict[str, Any] | None = None) -> spec.Connection.StartOk:
        pw = self.url.password if password is None else password
        props: dict[str, Any] = client_properties if client_properties is not None else {
            "product": "amqp-conformance wire", "capabilities": {"authentication_failure_close": True}}
        return spec.Connection.StartOk(client_properties=props, mechanism=mechanism,
                                       response=sasl_response(mechanism, self.url.user, pw), locale="en_US")

    def start_ok(self, *, mechanism: str = "PLAIN", password: str | None = None,
                 client_properties: dict[str, Any] | None = None) -> None:
        self.send_method(self.start_ok_method(mechanism=mechanism, password=password,
                                              client_properties=client_properties))

    def tune(self, *, deadline: float | None = None) -> spec.Connection.Tune:
        """The broker's connection.tune after start-ok; a refusal is a Mismatch naming what came."""
        frm = self.next_frame("connection.tune", deadline=deadline)
        if not isinstance(frm, spec.Connection.Tune):
            raise Mismatch("login", expected="connection.tune", observed=describe(frm) if frm else self.ended)
        return frm

    def tune_ok_open(self, tune: spec.Connection.Tune, *, frame_max: int | None = None,
                     channel_max: int | None = None, heartbeat: int = 0, vhost: str | None = None) -> None:
        self.send_method(spec.Connection.TuneOk(
            channel_max=tune.channel_max if channel_max is None else channel_max,
            frame_max=tune.frame_max if frame_max is None else frame_max, heartbeat=heartbeat))
        self.send_method(spec.Connection.Open(virtual_host=self.url.vhost if vhost is None else vhost))

    def login(self) -> spec.Connection.Tune:
        """:meth:`start`, :meth:`start_ok` with the URL's credentials, and the broker's
        connection.tune: the steps before the negotiation a case then drives itself."""
        self.start()
        self.start_ok()
        return self.tune()

    def header_answer(self, header: bytes, what: str) -> bytes:
        """Send ``header`` instead of the protocol header, wait (bounded) for the broker to end the
        socket and return every byte it sent before."""
        self.send(header)
        self.until_end(what)
        return self.buf

    def unexpected(self, wanted: str, frm: Any) -> str:
        if frm is None:
            return "socket closed by the broker" if self.ended in ("closed", None) else self.ended
        return f"expected {wanted}, got {describe(frm)}"
