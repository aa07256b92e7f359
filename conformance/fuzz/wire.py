"""Fuzzing any broker over TCP.

One input = one fresh connection: the (mutated) session's octets, then a client
connection.close, then a half-close of our side.  Whatever the broker thinks of the
input, it must answer or close the socket within ``bound`` seconds; a broker that does
neither *hangs*.  After each input a health check on another fresh connection (handshake,
channel.open, queue.declare, connection.close) must succeed within the same bound, else
(after one retry with a longer bound, so that a loaded machine is not mistaken for a
fault) the broker is *dead*.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from pamqp import commands as spec

from conformance.protocol.wire import URL, redact

from .inproc import CHANNEL_CLOSE, CONNECTION_CLOSE, SPEC_REPLY_CODES
from .sessions import FRAME_END, PROTOCOL_HEADER, handshake, method

CLOSE_OK = spec.Connection.CloseOk.index
_PROBE_CLOSE = method(
    spec.Connection.Close(reply_code=200, reply_text="fuzz probe", class_id=0, method_id=0), 0
).encode()


class WireError(Exception):
    """The target cannot be used at all (bad URL, nothing listening); one line for the user."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    user: str
    password: str
    vhost: str

    @classmethod
    def from_url(cls, url: URL) -> Endpoint:
        if url.tls:
            raise WireError(f"fuzzing speaks plain amqp://, not {redact(url)}")
        return cls(host=url.host, port=url.port, user=url.user, password=url.password, vhost=url.vhost)

    @property
    def display(self) -> str:
        return f"amqp://{self.user}@{self.host}:{self.port}/{self.vhost if self.vhost != '/' else ''}"


@dataclass(frozen=True)
class WireOutcome:
    codes: tuple[int, ...]  # reply codes of connection.close / channel.close the broker sent
    ended: str  # "close" | "close-ok" (from the broker) | "eof" | "reset" | "refused" | "hang"
    seconds: float

    @property
    def hang(self) -> bool:
        return self.ended == "hang"


class _Frames:
    """Incremental splitter of the server's output into (type, channel, payload)."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        self.buf += data
        out: list[tuple[int, int, bytes]] = []
        while True:
            if self.buf.startswith(b"AMQP") and len(self.buf) >= 8:
                self.buf = self.buf[8:]  # the server's protocol header (it refused ours)
                continue
            if len(self.buf) < 8:
                return out
            ftype, channel, size = struct.unpack_from(">BHI", self.buf)
            if len(self.buf) < size + 8:
                return out
            out.append((ftype, channel, self.buf[7 : 7 + size]))
            self.buf = self.buf[size + 8 :]


def _reply_codes(frames: list[tuple[int, int, bytes]]) -> list[int]:
    codes = []
    for ftype, _ch, payload in frames:
        if (
            ftype == 1
            and len(payload) >= 6
            and int.from_bytes(payload[:4], "big") in (CONNECTION_CLOSE, CHANNEL_CLOSE)
        ):
            codes.append(int.from_bytes(payload[4:6], "big"))
    return codes


def _connection_ending(frames: list[tuple[int, int, bytes]]) -> str:
    for ftype, channel, payload in frames:
        if ftype == 1 and channel == 0 and len(payload) >= 4:
            index = int.from_bytes(payload[:4], "big")
            if index == CONNECTION_CLOSE:
                return "close"
            if index == CLOSE_OK:
                return "close-ok"
    return ""


def send_input(ep: Endpoint, pieces: list[bytes], *, bound: float = 5.0) -> WireOutcome:
    """Send one input on a fresh connection and wait (at most ``bound`` s) for the end."""
    t0 = time.monotonic()
    try:
        sock = socket.create_connection((ep.host, ep.port), timeout=bound)
    except OSError:
        return WireOutcome((), "refused", time.monotonic() - t0)
    codes: list[int] = []
    frames = _Frames()
    try:
        sock.settimeout(bound)
        try:
            for piece in [*pieces, _PROBE_CLOSE]:
                sock.sendall(piece)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the broker closed on us mid-input: read what it said
        deadline = t0 + bound
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return WireOutcome(tuple(codes), "hang", time.monotonic() - t0)
            sock.settimeout(remaining)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                return WireOutcome(tuple(codes), "hang", time.monotonic() - t0)
            except OSError:
                return WireOutcome(tuple(codes), "reset", time.monotonic() - t0)
            if not data:
                return WireOutcome(tuple(codes), "eof", time.monotonic() - t0)
            got = frames.feed(data)
            codes += _reply_codes(got)
            ending = _connection_ending(got)
            if ending:
                # the broker answered the probe or closed the connection itself: not a hang,
                # and no need to sit out a close delay (RabbitMQ waits 3 s after a 501)
                return WireOutcome(tuple(codes), ending, time.monotonic() - t0)
    finally:
        sock.close()


class _Client:
    """Just enough of a blocking AMQP client for the health check."""

    def __init__(self, ep: Endpoint, deadline: float) -> None:
        self.deadline = deadline
        self.frames = _Frames()
        self.pending: list[tuple[int, int, bytes]] = []
        self.sock = socket.create_connection(
            (ep.host, ep.port), timeout=max(0.1, deadline - time.monotonic())
        )

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def expect(self, index: int, channel: int) -> bytes:
        while True:
            while self.pending:
                ftype, ch, payload = self.pending.pop(0)
                if ftype == 8:
                    continue
                got = int.from_bytes(payload[:4], "big") if ftype == 1 and len(payload) >= 4 else None
                if got != index or ch != channel:
                    raise ConnectionError(
                        f"expected method {index >> 16}.{index & 0xFFFF} on {channel}, got type "
                        f"{ftype} method "
                        f"{got} on {ch}"
                    )
                return payload[4:]
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no answer in time")
            self.sock.settimeout(remaining)
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("socket closed")
            self.pending += self.frames.feed(data)

    def close(self) -> None:
        self.sock.close()


def health_check(ep: Endpoint, *, bound: float = 5.0) -> str | None:
    """None when the broker serves a fresh connection end to end, else what went wrong."""
    deadline = time.monotonic() + bound
    try:
        c = _Client(ep, deadline)
    except OSError as exc:
        return f"connect: {exc}"
    try:
        c.send(PROTOCOL_HEADER)
        c.expect(spec.Connection.Start.index, 0)
        start_ok, tune_ok, open_ = handshake(ep.user, ep.password, ep.vhost)
        c.send(start_ok.encode())
        tune = c.expect(spec.Connection.Tune.index, 0)
        channel_max, frame_max = struct.unpack_from(">HI", tune)
        tune_ok = method(spec.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max, heartbeat=0), 0)
        c.send(tune_ok.encode() + open_.encode())
        c.expect(spec.Connection.OpenOk.index, 0)
        c.send(method(spec.Channel.Open(), 1).encode())
        c.expect(spec.Channel.OpenOk.index, 1)
        c.send(method(spec.Queue.Declare(queue="", exclusive=True), 1).encode())
        c.expect(spec.Queue.DeclareOk.index, 1)
        c.send(_PROBE_CLOSE)
        c.expect(CLOSE_OK, 0)
        return None
    except (OSError, ConnectionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        c.close()


def alive(ep: Endpoint, bound: float) -> str | None:
    """Health check with one retry at twice the bound; None = alive."""
    first = health_check(ep, bound=bound)
    if first is None:
        return None
    second = health_check(ep, bound=2 * bound)
    return None if second is None else f"{first}; again: {second}"


def unknown_codes(codes: tuple[int, ...]) -> list[int]:
    return [c for c in codes if c not in SPEC_REPLY_CODES]


__all__ = ["FRAME_END", "Endpoint", "WireError", "WireOutcome", "alive", "health_check", "send_input"]
