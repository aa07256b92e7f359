"""A raw AMQP 0-9-1 frame client on the pamqp codec, for the cases client libraries hide.

It gives exact control of what is sent (any method, any tag, any flag, hand-made bytes) and a
faithful, ordered record of everything the broker sends back. A reader thread decodes frames,
assembles content (method + header + bodies) into one :class:`Event`, answers the broker's
``channel.close`` / ``connection.close`` with the matching ``close-ok`` (as the spec requires
of a peer) and files every event into its channel's inbox and history.

Every wait has a deadline. When a wait expires the client raises
:class:`~conformance.protocol.errors.AnswerTimeout`; when the broker closes the channel or connection
while a case waits for something else, it raises :class:`UnexpectedClose` (a
:class:`~conformance.protocol.errors.Mismatch`: the broker did something the case did not expect).
Socket and decoding failures raise :class:`~conformance.protocol.errors.ClientFault`.
"""

from __future__ import annotations

import itertools
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp import heartbeat as pheartbeat
from pamqp.base import Frame
from pamqp.body import ContentBody
from pamqp.exceptions import UnmarshalingException

from conformance import __version__
from conformance.protocol import invariants, trace
from conformance.protocol.errors import AnswerTimeout, Mismatch
from conformance.protocol.handshake import (
    Handshake,
    HandshakeError,
    HandshakeRefused,
    choose_mechanism,
    connect,
)
from conformance.protocol.rawchannel import Channel, bodies, tags
from conformance.protocol.rawevents import Event, SocketClosed, UnexpectedClose
from conformance.protocol.wire import (
    CONTENT_METHODS,
    FRAME_END,
    PROTOCOL_HEADER,
    REPLY_NAMES,
    URL,
    describe,
    method_name,
    method_name_from_text,
    redact,
    reply_name,
    split_frames,
)

# The raw client's whole surface, wherever each piece lives (importers use this module).
__all__ = [
    "CONTENT_METHODS",
    "DEFAULT_TIMEOUT",
    "FRAME_END",
    "PROTOCOL_HEADER",
    "REPLY_NAMES",
    "URL",
    "Event",
    "HandshakeError",
    "HandshakeRefused",
    "RawChannel",
    "RawConnection",
    "SocketClosed",
    "UnexpectedClose",
    "bodies",
    "default_client_properties",
    "describe",
    "method_name",
    "method_name_from_text",
    "redact",
    "reply_name",
    "tags",
]

DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class _Chosen:
    """What a :meth:`RawConnection.open` caller chose beyond the run's own handshake, as text
    ("" = nothing): the start-ok's (login), the tune-ok's (tune) and the open's (vhost)."""

    login: str = ""
    tune: str = ""
    vhost: str = ""


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")


@dataclass
class _Inbox:
    pending: list[Event] = field(default_factory=list)
    history: list[Event] = field(default_factory=list)


class RawConnection:
    """One AMQP connection driven frame by frame. Use :meth:`open` to connect and handshake."""

    def __init__(self, sock: socket.socket, url: URL, *, timeout: float) -> None:
        self.sock = sock
        self.url = url
        self.timeout = timeout
        self.server_properties: dict[str, Any] = {}
        self.tune: spec.Connection.Tune | None = None
        self.frame_max = 131072
        self.channel_max = 2047
        self._lock = threading.Condition()
        self._send_lock = threading.Lock()
        self._closed_channels: set[int] = set()  # closed by the broker, close-ok sent
        self._inboxes: dict[int, _Inbox] = {}
        self._seq = itertools.count(1)
        self._next_channel = itertools.count(1)
        self.closed_by_broker: Event | None = None
        self.socket_closed: SocketClosed | None = None
        self.heartbeats_received = 0
        self.frames_received = 0
        self.auto_close_ok = True
        self._reader: threading.Thread | None = None
        self._closing = False
        self._stopped = threading.Event()  # set once the client drops the connection
        self.heartbeat = 0  # the negotiated interval (s); 0: none
        # The running case's frame trace (evidence for its verdict), None outside a case.
        self.trace = trace.current()
        self.label = self.trace.connection("raw") if self.trace else ""
        # The running case's wire invariant monitor (None outside a case).
        case_monitor = invariants.current()
        self.monitor = invariants.WireMonitor(case_monitor, self.label) if case_monitor else None

    # -- connecting ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: URL,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        vhost: str | None = None,
        user: str | None = None,
        password: str | None = None,
        heartbeat: int | None = None,
        frame_max: int | None = None,
        channel_max: int | None = None,
        client_properties: dict[str, Any] | None = None,
        handshake: bool = True,
    ) -> RawConnection:
        """Connect and run the whole handshake (header, start-ok, tune-ok, open).

        ``heartbeat``, ``frame_max`` and ``channel_max`` not given come from the URL's query
        options, else 0 (no heartbeats), 131072 and 2047. The URL's ``connection_timeout`` (else
        ``timeout``) bounds TCP connect, TLS and the AMQP handshake together; ``timeout`` bounds
        every wait after. With ``handshake=False`` only the TCP (and TLS) connection is made;
        drive it with :meth:`send_bytes` and read ``conn.sock`` directly (no reader thread runs).
        """
        u = url
        if vhost is not None or user is not None or password is not None:
            u = u.with_(user=user if user is not None else u.user,
                        password=password if password is not None else u.password,
                        vhost=vhost if vhost is not None else u.vhost)
        connect_within = u.connection_timeout or timeout
        sock = connect(u, connect_within)
        conn = cls(sock, u, timeout=timeout)
        if not handshake:
            return conn
        # What the caller chose beyond the run's own handshake (the one the probe opened): a
        # refusal of it is the broker's answer to the case (HandshakeRefused), not our fault.
        chosen = _Chosen(
            login=", ".join(n for n, v in (("client-properties", client_properties), ("user", user),
                                            ("password", password)) if v is not None),
            tune=", ".join(f"{n}={v}" for n, v in (("frame_max", frame_max), ("channel_max", channel_max),
                                                   ("heartbeat", heartbeat)) if v is not None),
            vhost=f"vhost={vhost!r}" if vhost is not None else "",
        )
        conn._handshake(
            (u.heartbeat or 0) if heartbeat is None else heartbeat,
            (u.frame_max or 131072) if frame_max is None else frame_max,
            (u.channel_max or 2047) if channel_max is None else channel_max,
            client_properties,
            deadline=time.monotonic() + connect_within,
            chosen=chosen,
        )
        return conn

    def _handshake(
        self, heartbeat: int, frame_max: int, channel_max: int, client_properties: dict[str, Any] | None,
        *, deadline: float, chosen: _Chosen | None = None,
    ) -> None:
        """Every step of :class:`~conformance.protocol.handshake.Handshake` in a row, within one
        deadline; then the reader thread takes over the socket (and, when a heartbeat was
        negotiated, a sender keeps the connection alive).

        Blame follows cause: a connection.close in answer to start-ok or to tune-ok and open is the
        broker refusing what was sent (:class:`HandshakeRefused`, a Mismatch); so is the socket
        ending right after a start-ok or tune-ok carrying values the caller chose (``chosen``). The
        socket ending on the run's own handshake (what the probe opened) stays a HandshakeError: it
        names no cause of the case's."""
        chosen = chosen or _Chosen()
        hs = Handshake(self.sock, self.url, self.timeout, label=self.label or None)
        start = hs.start(deadline=deadline)
        self.server_properties = dict(start.server_properties or {})
        props = client_properties if client_properties is not None else default_client_properties()
        mechanism = choose_mechanism(self.url, _text(start.mechanisms))
        hs.start_ok(mechanism=mechanism, client_properties=props)
        tune = hs.next_frame("connection.tune", deadline=deadline)
        if isinstance(tune, spec.Connection.Close):
            raise HandshakeRefused(
                "login", f"connection.close {reply_name(tune.reply_code)} {tune.reply_text!r} in answer to "
                f"start-ok ({mechanism})", expected="connection.tune", sent=chosen.login)
        if tune is None and chosen.login:
            raise HandshakeRefused("login", f"socket {hs.ended} after start-ok, no connection.tune",
                                   expected="connection.tune", sent=chosen.login)
        if not isinstance(tune, spec.Connection.Tune):
            raise HandshakeError("login", hs.unexpected("connection.tune", tune))
        self.tune = tune
        # 0 in connection.tune means "no limit" (amqp0-9-1.xml, connection.tune fields).
        self.frame_max = (
            min(frame_max, tune.frame_max) if tune.frame_max and frame_max else frame_max or tune.frame_max
        )
        self.channel_max = (min(channel_max, tune.channel_max) if tune.channel_max and channel_max
                            else channel_max or tune.channel_max)
        hb = min(heartbeat, tune.heartbeat) if tune.heartbeat and heartbeat else heartbeat
        self.heartbeat = hb
        hs.tune_ok_open(tune, frame_max=self.frame_max, channel_max=self.channel_max, heartbeat=hb)
        ok = hs.next_frame("connection.open-ok", deadline=deadline)
        tuned = (f"tune-ok frame_max={self.frame_max} channel_max={self.channel_max} heartbeat={hb} "
                 f"to the broker's tune frame_max={tune.frame_max} channel_max={tune.channel_max} "
                 f"heartbeat={tune.heartbeat}; open vhost={self.url.vhost!r}")
        sent = "; ".join(p for p in (chosen.tune, chosen.vhost, tuned) if p)
        if isinstance(ok, spec.Connection.Close):
            raise HandshakeRefused(
                "vhost", f"connection.close {reply_name(ok.reply_code)} {ok.reply_text!r} in answer to "
                f"tune-ok and open", expected="connection.open-ok", sent=sent)
        if ok is None and (chosen.tune or chosen.vhost):
            raise HandshakeRefused(
                "tune", f"socket {hs.ended} after tune-ok and open, no connection.open-ok",
                expected="connection.open-ok", sent=sent)
        if not isinstance(ok, spec.Connection.OpenOk):
            raise HandshakeError("vhost", hs.unexpected("connection.open-ok", ok))
        self._pending_handshake_bytes = hs.buf  # frames that came right after open-ok
        if self.monitor is not None:
            self.monitor.frame_max = self.frame_max
        self.sock.settimeout(None)
        self._inboxes[0] = _Inbox()
        self._reader = threading.Thread(target=self._read_loop, name="raw-amqp-reader", daemon=True)
        self._reader.start()
        if hb:
            threading.Thread(target=self._beat, args=(hb,), name="raw-amqp-heartbeat", daemon=True).start()

    def _beat(self, interval: int) -> None:
        """Send a heartbeat every half interval (as pika does) until the connection ends, so a
        URL's heartbeat= does not get the connection closed for silence."""
        while not self._stopped.wait(interval / 2):
            if not self.is_open:
                return
            try:
                self.send_frame(0, pheartbeat.Heartbeat())
            except (UnexpectedClose, OSError):
                return

    # -- sending ------------------------------------------------------------------------------

    def _traced(self, direction: str, channel: int, frm: Any) -> None:
        """Record a frame in the case's trace; one we send goes to the invariant monitor too,
        before it is on the wire (so the broker's answer can never be seen first)."""
        if self.trace is not None:
            self.trace.add_frame(self.label, direction, channel, frm)
        if direction == trace.SENT and self.monitor is not None:
            self.monitor.sent(channel, frm)

    def send_bytes(self, data: bytes) -> None:
        """Send bytes as they are (hand-made frames: traced as bytes; the monitor learns of the
        whole frames among them that decode, e.g. a hand-made channel.open)."""
        if self.trace is not None:
            self.trace.add(self.label, trace.SENT, -1, f"bytes ({len(data)}) {data[:32].hex()}")
        if self.monitor is not None:
            for channel, frm in _decodable_frames(data):
                self.monitor.sent(channel, frm)
        self._send(data)

    def _send(self, data: bytes) -> None:
        with self._send_lock:
            self._sendall_locked(data)

    def _sendall_locked(self, data: bytes) -> None:
        """``sock.sendall`` with ``_send_lock`` held; a socket that refuses it is the broker's close."""
        try:
            self.sock.sendall(data)
        except OSError as exc:
            # A connection.close the broker sent before it dropped the socket is what it did.
            ended = self.closed_by_broker or self.socket_closed or SocketClosed(str(exc))
            raise UnexpectedClose("the socket to accept data", ended) from exc

    def send_frame(
        self, channel: int, frm: Frame | pheader.ContentHeader | ContentBody | pheartbeat.Heartbeat
    ) -> None:
        self._traced(trace.SENT, channel, frm)
        self._send(pframe.marshal(frm, channel))

    def send_method(self, channel: int, method: Frame) -> None:
        if isinstance(method, spec.Channel.Open) and channel:
            # A (re)opened channel starts afresh: whatever is still pending belongs to its
            # previous incarnation (e.g. the channel.close that ended it) and answers nothing now.
            with self._lock:
                self._inbox(channel).pending.clear()
            with self._send_lock:
                self._closed_channels.discard(channel)
        self.send_frame(channel, method)

    def send_if_open(self, channel: int, method: Frame) -> bool:
        """Send ``method`` unless the broker has closed ``channel`` (and we answered close-ok);
        False when it was not sent. For probes, which must never reach a closed channel."""
        data = pframe.marshal(method, channel)
        with self._send_lock:
            if channel in self._closed_channels:
                return False
            self._traced(trace.SENT, channel, method)
            self._sendall_locked(data)
        return True

    def discard(self, channel: int, event: Event) -> None:
        """Remove ``event`` from the channel's pending events (it has been dealt with)."""
        with self._lock:
            box = self._inbox(channel)
            if event in box.pending:
                box.pending.remove(event)

    def send_content(
        self,
        channel: int,
        method: Frame,
        body: bytes = b"",
        properties: spec.Basic.Properties | None = None,
        *,
        frame_max: int | None = None,
    ) -> None:
        """A content-bearing method, its header and body frames, written in one send."""
        fmax = (frame_max or self.frame_max) - 8
        parts: list[Any] = [
            method,
            pheader.ContentHeader(0, len(body), properties or spec.Basic.Properties()),
        ]
        parts += [ContentBody(body[i:i + fmax]) for i in range(0, len(body), max(fmax, 1))]
        for part in parts:
            self._traced(trace.SENT, channel, part)
        self._send(b"".join(pframe.marshal(part, channel) for part in parts))

    # -- receiving ----------------------------------------------------------------------------

    def _inbox(self, channel: int) -> _Inbox:
        with self._lock:
            box = self._inboxes.get(channel)
            if box is None:
                box = self._inboxes[channel] = _Inbox()
            return box

    def _recv(self) -> bytes:
        """The next bytes from the broker (b"" at its end). On TLS, OpenSSL must not read and
        write one connection from two threads at once, so each read is a non-blocking one under
        the send lock, after select() says bytes (perhaps only a TLS record with no data for us,
        such as a session ticket) have arrived."""
        if not isinstance(self.sock, ssl.SSLSocket):
            return self.sock.recv(262144)
        while True:
            try:
                if not self.sock.pending():
                    select.select([self.sock], [], [])
            except ValueError:  # the client closed the socket (fd -1) while the reader waited
                return b""
            with self._send_lock:
                if self.sock.fileno() == -1:
                    return b""
                self.sock.setblocking(False)
                try:
                    return self.sock.recv(262144)
                except (ssl.SSLWantReadError, BlockingIOError):
                    continue
                finally:
                    if self.sock.fileno() != -1:
                        self.sock.setblocking(True)

    def _read_loop(self) -> None:
        buf = getattr(self, "_pending_handshake_bytes", b"")
        partial: dict[int, tuple[Any, pheader.ContentHeader | None, list[bytes], int]] = {}
        reason = "closed by the broker"
        try:
            while True:
                chunks, buf = split_frames(buf)
                for chunk in chunks:
                    try:
                        _n, channel, frm = pframe.unmarshal(chunk)
                    except UnmarshalingException as exc:
                        reason = f"undecodable frame from the broker: {exc}"
                        raise _Stop from exc
                    if self.monitor is not None:
                        self.monitor.received(channel, frm, len(chunk) - 8)
                    self._on_frame(channel, frm, partial)
                got = self._recv()
                if not got:
                    break
                buf += got
        except _Stop:
            pass
        except OSError as exc:
            reason = f"socket error: {exc}" if not self._closing else "closed by the client"
        finally:
            if self.trace is not None:
                self.trace.add(self.label, trace.RECEIVED, 0, f"socket closed ({reason})")
            with self._lock:
                self.socket_closed = SocketClosed(reason, time.monotonic())
                self._lock.notify_all()

    def _on_frame(self, channel: int, frm: Any, partial: dict[int, Any]) -> None:
        self.frames_received += 1
        self._traced(trace.RECEIVED, channel, frm)
        if isinstance(frm, pheartbeat.Heartbeat):
            self.heartbeats_received += 1
            return
        if isinstance(frm, pheader.ContentHeader):
            if channel in partial:
                method, _, bodies, _ = partial[channel]
                partial[channel] = (method, frm, bodies, 0)
                if frm.body_size == 0:
                    self._file(channel, method, frm, b"")
                    del partial[channel]
            return
        if isinstance(frm, ContentBody):
            if channel in partial:
                method, hdr, bodies, got = partial[channel]
                bodies.append(frm.value)
                got += len(frm.value)
                if hdr is not None and got >= hdr.body_size:
                    self._file(channel, method, hdr, b"".join(bodies))
                    del partial[channel]
                else:
                    partial[channel] = (method, hdr, bodies, got)
            return
        if isinstance(frm, CONTENT_METHODS):
            partial[channel] = (frm, None, [], 0)
            return
        if isinstance(frm, spec.Channel.Close) and self.auto_close_ok:
            # Mark the channel closed and answer under the send lock, so no probe of ours can
            # slip onto the wire after the close-ok (a method on a closed channel is a 504).
            with self._send_lock:
                self._closed_channels.add(channel)
                self._traced(trace.SENT, channel, spec.Channel.CloseOk())
                try:
                    self.sock.sendall(pframe.marshal(spec.Channel.CloseOk(), channel))
                except OSError:
                    pass
        if isinstance(frm, spec.Connection.Close) and self.auto_close_ok:
                self._safe_send(0, spec.Connection.CloseOk())
        self._file(channel, frm, None, None)

    def _safe_send(self, channel: int, method: Frame) -> None:
        try:
            self.send_method(channel, method)
        except Mismatch:
            pass

    def _file(self, channel: int, method: Any, hdr: pheader.ContentHeader | None, body: bytes | None) -> None:
        ev = Event(next(self._seq), channel, method, hdr.properties if hdr else None, body, time.monotonic())
        with self._lock:
            box = self._inboxes.get(channel)
            if box is None:
                box = self._inboxes[channel] = _Inbox()
            box.pending.append(ev)
            box.history.append(ev)
            if isinstance(method, spec.Connection.Close):
                self.closed_by_broker = ev
            self._lock.notify_all()

    def wait_event(
        self,
        channel: int,
        match: Callable[[Event], bool],
        what: str,
        *,
        timeout: float | None = None,
        close_is_error: bool = True,
    ) -> Event:
        """Take the first pending event on ``channel`` that ``match`` accepts.

        A channel.close on this channel, a connection.close or the end of the socket that
        arrives first raises :class:`UnexpectedClose` (unless ``match`` accepts it).
        """
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        box = self._inbox(channel)
        with self._lock:
            while True:
                for i, ev in enumerate(box.pending):
                    if match(ev):
                        del box.pending[i]
                        return ev
                if close_is_error:
                    for ev in box.pending:
                        if isinstance(ev.method, spec.Channel.Close):
                            raise UnexpectedClose(what, ev)
                    if self.closed_by_broker is not None:
                        raise UnexpectedClose(what, self.closed_by_broker)
                if self.socket_closed is not None:
                    # Nothing more can arrive.
                    raise UnexpectedClose(what, self.closed_by_broker or self.socket_closed)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AnswerTimeout(what, limit)
                self._lock.wait(remaining)

    def history(self, channel: int) -> list[Event]:
        with self._lock:
            return list(self._inbox(channel).history)

    def pending(self, channel: int) -> list[Event]:
        with self._lock:
            return list(self._inbox(channel).pending)

    # -- channels and closing -----------------------------------------------------------------

    def channel(self, channel_id: int | None = None) -> RawChannel:
        """Open a channel (channel.open, wait for open-ok)."""
        return self.channel_within(None, channel_id)

    def channel_within(self, timeout: float | None, channel_id: int | None = None) -> RawChannel:
        """Open a channel, waiting at most ``timeout`` (else the connection's) for open-ok."""
        cid = channel_id if channel_id is not None else next(self._next_channel)
        ch = RawChannel(self, cid)
        ch.rpc(spec.Channel.Open(), timeout=timeout)
        return ch

    def wait_connection_close(
        self, *, timeout: float | None = None, what: str = "connection.close"
    ) -> Event | SocketClosed:
        """Wait until the broker closes the connection (connection.close, or the socket ends)."""
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        with self._lock:
            while True:
                if self.closed_by_broker is not None:
                    return self.closed_by_broker
                if self.socket_closed is not None:
                    return self.socket_closed
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AnswerTimeout(what, limit)
                self._lock.wait(remaining)

    @property
    def is_open(self) -> bool:
        return self.closed_by_broker is None and self.socket_closed is None and not self._closing

    def close(self, *, timeout: float = 2.0) -> None:
        """Close politely when still open (bounded), then drop the socket. Never raises."""
        if self.is_open and self._reader is not None:
            try:
                self.send_method(
                    0, spec.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0)
                )
                self.wait_event(0, lambda e: isinstance(e.method, spec.Connection.CloseOk),
                                "connection.close-ok", timeout=timeout, close_is_error=False)
            except (Mismatch, AnswerTimeout, OSError):
                pass  # best effort: the socket is dropped below
        self.abort()

    def abort(self) -> None:
        """Drop the TCP connection without any AMQP close (as a crashing client would)."""
        self._closing = True
        self._stopped.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        if self._reader is not None:
            self._reader.join(timeout=2.0)

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RawChannel(Channel):
    """A channel of a :class:`RawConnection`, with helpers for the common methods."""

    conn: RawConnection  # the whole connection, for callers that reach past the channel


class _Stop(Exception):
    pass


def _decodable_frames(data: bytes) -> list[tuple[int, Any]]:
    """The whole frames at the start of ``data`` that decode (hand-made bytes may be anything)."""
    out: list[tuple[int, Any]] = []
    for chunk in split_frames(data)[0]:
        try:
            _n, channel, frm = pframe.unmarshal(chunk)
        except Exception:  # noqa: BLE001 - hand-made bytes may be anything; the broker judges them
            break
        out.append((channel, frm))
    return out


def default_client_properties() -> dict[str, Any]:
    return {
        "product": "amqp-conformance raw client",
        "version": __version__,
        "platform": "Python",
        "capabilities": {
            "publisher_confirms": True,
            "exchange_exchange_bindings": True,
            "basic.nack": True,
            "consumer_cancel_notify": True,
            "connection.blocked": True,
            "authentication_failure_close": True,
            "per_consumer_qos": True,
        },
    }
