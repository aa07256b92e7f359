"""A tiny blocking raw AMQP client (pamqp codec) for the broker's own integration tests
and for side-by-side runs against RabbitMQ.  Every read has a timeout."""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp.base import Frame
from pamqp.body import ContentBody
from pamqp.exceptions import UnmarshalingException
from pamqp.heartbeat import Heartbeat

from conformance.broker.core import marshal_method

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"


@dataclass
class Content:
    method: Frame
    properties: spec.Basic.Properties
    body: bytes


class Closed(Exception):
    pass


class RawClient:
    def __init__(self, host: str, port: int, *, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.timeout = timeout
        self.buf = b""
        self.frames: list[tuple[int, Any]] = []
        self.pending: dict[int, list[Any]] = {}
        self.frame_max = 131072
        self.eof = False

    # -- low level --------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, method: Frame, channel: int = 0) -> None:
        self.send_raw(marshal_method(method, channel))

    def publish(
        self,
        channel: int,
        body: bytes,
        exchange: str = "",
        routing_key: str = "",
        *,
        mandatory: bool = False,
        immediate: bool = False,
        properties: spec.Basic.Properties | None = None,
    ) -> None:
        props = properties or spec.Basic.Properties()
        data = marshal_method(
            spec.Basic.Publish(
                exchange=exchange, routing_key=routing_key, mandatory=mandatory, immediate=immediate
            ),
            channel,
        )
        data += pframe.marshal(pheader.ContentHeader(0, len(body), props), channel)
        if body:
            data += pframe.marshal(ContentBody(body), channel)
        self.send_raw(data)

    def _read_frame(self, deadline: float) -> tuple[int, Any] | None:
        while True:
            if self.buf:
                try:
                    used, ch, fr = pframe.unmarshal(self.buf)
                except UnmarshalingException:
                    pass
                else:
                    self.buf = self.buf[used:]
                    return ch, fr
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                return None
            except (ConnectionResetError, BrokenPipeError, OSError):
                data = b""
            if not data:
                self.eof = True
                raise Closed("socket closed by peer")
            self.buf += data

    def next(self, timeout: float | None = None) -> tuple[int, Any] | None:
        """Next complete event (method, or Content for deliver/get-ok/return)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            got = self._read_frame(deadline)
            if got is None:
                return None
            ch, fr = got
            if isinstance(fr, Heartbeat):
                continue
            if isinstance(fr, (spec.Basic.Deliver, spec.Basic.GetOk, spec.Basic.Return)):
                self.pending[ch] = [fr, None, []]
                continue
            if isinstance(fr, pheader.ContentHeader):
                p = self.pending[ch]
                p[1] = fr
                if fr.body_size == 0:
                    del self.pending[ch]
                    return ch, Content(p[0], fr.properties, b"")
                continue
            if isinstance(fr, ContentBody):
                p = self.pending[ch]
                p[2].append(fr.value)
                if sum(len(b) for b in p[2]) >= p[1].body_size:
                    del self.pending[ch]
                    return ch, Content(p[0], p[1].properties, b"".join(p[2]))
                continue
            try:  # answer like a well-behaved peer; the broker may already be gone
                if isinstance(fr, spec.Connection.Close):
                    self.send(spec.Connection.CloseOk())
                elif isinstance(fr, spec.Channel.Close):
                    self.send(spec.Channel.CloseOk(), ch)
            except OSError:
                pass
            return ch, fr

    def expect(self, cls: type, channel: int | None = None, timeout: float | None = None) -> Any:
        got = self.next(timeout)
        if got is None:
            raise AssertionError(f"timed out waiting for {cls.__name__}")
        ch, fr = got
        obj = fr.method if isinstance(fr, Content) and not issubclass(cls, Content) else fr
        if not isinstance(obj, cls) or (channel is not None and ch != channel):
            raise AssertionError(f"expected {cls} on {channel}, got {describe(fr)} on {ch}")
        return fr

    def rpc(self, method: Frame, channel: int, reply: type) -> Any:
        self.send(method, channel)
        return self.expect(reply, channel)

    # -- handshake --------------------------------------------------------------------------
    def handshake(
        self,
        *,
        user: str = "guest",
        password: str = "guest",
        vhost: str = "/",
        capabilities: dict[str, Any] | None = None,
        heartbeat: int = 0,
        open_: bool = True,
    ) -> Any:
        self.send_raw(PROTOCOL_HEADER)
        self.expect(spec.Connection.Start)
        caps = (
            capabilities
            if capabilities is not None
            else {"authentication_failure_close": True, "consumer_cancel_notify": True, "basic.nack": True}
        )
        self.send(
            spec.Connection.StartOk(
                client_properties={"product": "broker-rawclient", "capabilities": caps},
                mechanism="PLAIN",
                response=f"\0{user}\0{password}",
                locale="en_US",
            )
        )
        got = self.next()
        if got is None or not isinstance(got[1], spec.Connection.Tune):
            return got
        tune = got[1]
        self.frame_max = tune.frame_max
        self.send(
            spec.Connection.TuneOk(
                channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=heartbeat
            )
        )
        if open_:
            self.send(spec.Connection.Open(virtual_host=vhost))
            return self.next()
        return tune

    def open_channel(self, n: int = 1) -> None:
        self.rpc(spec.Channel.Open(), n, spec.Channel.OpenOk)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def describe(ev: Any) -> str:
    """A stable, comparable one-line description of an event."""
    if ev is None:
        return "timeout"
    if isinstance(ev, Content):
        m = ev.method
        if isinstance(m, spec.Basic.Deliver):
            return f"basic.deliver(tag={m.delivery_tag}, redelivered={m.redelivered}, body={ev.body!r})"
        if isinstance(m, spec.Basic.GetOk):
            return (
                f"basic.get-ok(tag={m.delivery_tag}, redelivered={m.redelivered}, "
                f"count={m.message_count}, body={ev.body!r})"
            )
        return f"basic.return({m.reply_code}, {m.reply_text}, body={ev.body!r})"
    if isinstance(ev, (spec.Connection.Close, spec.Channel.Close)):
        return f"{ev.name}({ev.reply_code}, {ev.reply_text!r}, {ev.class_id}, {ev.method_id})"
    if isinstance(ev, (spec.Basic.Ack, spec.Basic.Nack)):
        return f"{ev.name}({ev.delivery_tag}, multiple={ev.multiple})"
    if isinstance(ev, spec.Queue.DeclareOk):
        return f"{ev.name}(count={ev.message_count}, consumers={ev.consumer_count})"
    if isinstance(ev, (spec.Queue.PurgeOk, spec.Queue.DeleteOk)):
        return f"{ev.name}({ev.message_count})"
    if isinstance(ev, bytes):
        return f"raw {ev!r}"
    return getattr(ev, "name", type(ev).__name__)


def drain(c: RawClient, timeout: float = 0.3) -> list[str]:
    out: list[str] = []
    try:
        while True:
            got = c.next(timeout)
            if got is None:
                break
            out.append(f"{got[0]}:{describe(got[1])}")
    except Closed:
        out.append("EOF")
    return out


def pack_frame(ftype: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + b"\xce"
