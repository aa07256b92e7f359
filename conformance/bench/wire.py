"""The load generator's AMQP connection: pamqp for the handshake, raw bytes on the hot path.

A benchmark that decodes every frame into objects measures its own allocator, not the broker.
So the few frames that set things up (connection.*, channel.open, queue.declare, qos, consume,
confirm.select, tx.select) go through pamqp, while the frames that arrive by the hundred
thousand — basic.ack / basic.nack from confirms, basic.deliver with its header and body,
tx.commit-ok — are recognised by their class/method bytes and read with one ``struct`` call.
Messages are encoded once with pamqp and written as one ``bytes`` object per batch.

Everything is callback driven (an ``asyncio.Protocol``): the next batch goes out from the
callback that processed the confirms that made room for it, without a task switch.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pamqp import body as pbody
from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp.exceptions import UnmarshalingException

from conformance import __version__
from conformance.protocol.raw import URL, reply_name

FRAME_HEADER = struct.Struct(">BHI")
CLASS_METHOD = struct.Struct(">I")
TAG_BITS = struct.Struct(">QB")
TAG = struct.Struct(">Q")
FRAME_END = 0xCE
# (class_id << 16) | method_id of the frames read without pamqp.
BASIC_ACK = (60 << 16) | 80
BASIC_NACK = (60 << 16) | 120
BASIC_DELIVER = (60 << 16) | 60
TX_COMMIT_OK = (90 << 16) | 21
WRITE_HIGH_WATER = 4 * 1024 * 1024


class BenchError(Exception):
    """The broker refused, closed or did not answer; the message is one line."""


class BrokerClosed(BenchError):
    """The broker sent channel.close or connection.close (or the socket ended)."""


def encode_publish(channel: int, routing_key: str, body: bytes, *, persistent: bool,
                   exchange: str = "") -> bytes:
    """basic.publish + content header + body, encoded once, to be written many times."""
    props = spec.Basic.Properties(delivery_mode=2 if persistent else 1)
    return b"".join((
        pframe.marshal(spec.Basic.Publish(exchange=exchange, routing_key=routing_key), channel),
        pframe.marshal(pheader.ContentHeader(0, len(body), props), channel),
        pframe.marshal(pbody.ContentBody(body), channel),
    ))


def encode(method: Any, channel: int) -> bytes:
    return pframe.marshal(method, channel)


@dataclass(frozen=True)
class ServerInfo:
    product: str
    version: str
    frame_max: int


class BenchConnection(asyncio.Protocol):
    """One AMQP connection with one channel (1), driven by a scenario's hot-path callbacks.

    A scenario sets ``on_ack(tag, multiple, nack)``, ``on_deliver(tag)`` or ``on_commit_ok()``;
    everything else arrives as a decoded pamqp frame and completes the pending :meth:`rpc`.
    """

    CHANNEL = 1

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._expect: tuple[type, ...] = ()
        self._reply: asyncio.Future[Any] | None = None
        self.closed: str | None = None
        self.blocked = False
        self.blocked_count = 0  # connection.blocked / unblocked received (the capability must be announced)
        self.unblocked_count = 0
        self.capabilities: dict[str, bool] = {"publisher_confirms": True}
        self.on_ack: Callable[[int, bool, bool], None] | None = None
        self.on_deliver: Callable[[int], None] | None = None
        self.on_commit_ok: Callable[[], None] | None = None
        self.on_close: Callable[[str], None] | None = None
        self.on_writable: Callable[[], None] | None = None
        self.paused = False
        self.server = ServerInfo("?", "?", 131072)

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed(f"socket closed ({exc})" if exc else "socket closed by the broker")

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.on_writable is not None:
            self.on_writable()

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        n = len(buf)
        pos = 0
        unpack_header, unpack_cm = FRAME_HEADER.unpack_from, CLASS_METHOD.unpack_from
        while n - pos >= 8:
            ftype, _channel, size = unpack_header(buf, pos)
            end = pos + 8 + size
            if end > n:
                break
            if buf[end - 1] != FRAME_END:
                self._fatal(f"frame without frame-end at byte {pos} (type {ftype}, size {size})")
                return
            if ftype == 1:
                cm = unpack_cm(buf, pos + 7)[0]
                if cm == BASIC_ACK or cm == BASIC_NACK:
                    tag, bits = TAG_BITS.unpack_from(buf, pos + 11)
                    if self.on_ack is not None:
                        self.on_ack(tag, bool(bits & 1), cm == BASIC_NACK)
                elif cm == BASIC_DELIVER:
                    tag = TAG.unpack_from(buf, pos + 12 + buf[pos + 11])[0]
                    if self.on_deliver is not None:
                        self.on_deliver(tag)
                elif cm == TX_COMMIT_OK and self.on_commit_ok is not None:
                    self.on_commit_ok()
                else:
                    self._slow_frame(bytes(buf[pos:end]))
            # Content headers and bodies (2, 3) carry nothing the counters need; heartbeats (8)
            # are not negotiated (heartbeat=0) but are harmless.
            pos = end
        if pos:
            del buf[:pos]
        if n >= 8 and not pos and buf[:4] == b"AMQP":
            self._fatal(f"the broker answered with protocol header {bytes(buf[:8])!r}")

    # -- setup path ------------------------------------------------------------------------

    def _slow_frame(self, raw: bytes) -> None:
        try:
            _used, channel, frame = pframe.unmarshal(raw)
        except UnmarshalingException as exc:
            self._fatal(f"undecodable frame from the broker: {exc}")
            return
        if isinstance(frame, (spec.Connection.Close, spec.Channel.Close)):
            what = "connection" if isinstance(frame, spec.Connection.Close) else f"channel {channel}"
            reason = f"{what} closed by the broker: {reply_name(frame.reply_code)} {frame.reply_text!r}"
            if self.transport is not None:
                ok = (
                    spec.Connection.CloseOk()
                    if isinstance(frame, spec.Connection.Close)
                    else spec.Channel.CloseOk()
                )
                self.transport.write(encode(ok, channel))
            self._closed(reason)
            return
        if isinstance(frame, spec.Connection.Blocked):
            self.blocked = True
            self.blocked_count += 1
            return
        if isinstance(frame, spec.Connection.Unblocked):
            self.blocked = False
            self.unblocked_count += 1
            return
        if self._reply is not None and not self._reply.done() and isinstance(frame, self._expect):
            self._reply.set_result(frame)

    def _fatal(self, reason: str) -> None:
        self._closed(reason)
        if self.transport is not None:
            self.transport.abort()

    def _closed(self, reason: str) -> None:
        if self.closed is None:
            self.closed = reason
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(BrokerClosed(self.closed))
        if self.on_close is not None:
            self.on_close(self.closed)

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    async def rpc(self, method: Any, expect: type | tuple[type, ...], timeout: float,
                  channel: int = CHANNEL) -> Any:
        """Send a synchronous method and wait (with a deadline) for its reply."""
        if self.closed is not None:
            raise BrokerClosed(self.closed)
        loop = asyncio.get_running_loop()
        self._expect = expect if isinstance(expect, tuple) else (expect,)
        self._reply = loop.create_future()
        if method is not None:
            self.write(encode(method, channel))
        try:
            return await asyncio.wait_for(self._reply, timeout)
        except TimeoutError as exc:
            names = "/".join(t.__name__ for t in self._expect)
            sent = type(method).__name__ if method is not None else "the protocol header"
            raise BenchError(f"no {names} within {timeout:.0f}s after {sent}") from exc
        finally:
            self._reply = None

    @classmethod
    async def open(
        cls, url: URL, timeout: float, *, capabilities: dict[str, bool] | None = None
    ) -> BenchConnection:
        loop = asyncio.get_running_loop()
        try:
            _t, conn = await asyncio.wait_for(
                loop.create_connection(cls, url.host, url.port), timeout)
        except (OSError, TimeoutError) as exc:
            raise BenchError(f"cannot connect to {url.host}:{url.port}: {exc or 'timed out'}") from exc
        assert isinstance(conn, cls)
        if capabilities:
            conn.capabilities = {**conn.capabilities, **capabilities}
        try:
            await conn._handshake(url, timeout)
        except BaseException:
            conn.abort()
            raise
        return conn

    async def _handshake(self, url: URL, timeout: float) -> None:
        self.write(pframe.marshal(pheader.ProtocolHeader(), 0))
        start = await self.rpc(None, spec.Connection.Start, timeout, channel=0)
        props = start.server_properties or {}
        tune_wait = self.rpc(spec.Connection.StartOk(
            client_properties={"product": "amqp-conformance bench", "version": __version__,
                               "capabilities": dict(self.capabilities)},
            mechanism="PLAIN", response=f"\0{url.user}\0{url.password}", locale="en_US"),
            spec.Connection.Tune, timeout, channel=0)
        tune = await tune_wait
        frame_max = tune.frame_max or 131072
        self.server = ServerInfo(_text(props.get("product")), _text(props.get("version")), frame_max)
        self.write(encode(spec.Connection.TuneOk(channel_max=tune.channel_max or 2047,
                                                 frame_max=frame_max, heartbeat=0), 0))
        await self.rpc(
            spec.Connection.Open(virtual_host=url.vhost), spec.Connection.OpenOk, timeout, channel=0
        )
        await self.rpc(spec.Channel.Open(), spec.Channel.OpenOk, timeout)

    async def close(self, timeout: float) -> None:
        """connection.close and wait briefly for close-ok; abort the socket either way."""
        if self.transport is None or self.transport.is_closing():
            return
        if self.closed is None:
            try:
                await self.rpc(
                    spec.Connection.Close(reply_code=200, reply_text="bench done", class_id=0, method_id=0),
                    spec.Connection.CloseOk,
                    timeout,
                    channel=0,
                )
            except BenchError:
                pass
        self.abort()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value) if value is not None else "?"


def now() -> float:
    return time.perf_counter()
