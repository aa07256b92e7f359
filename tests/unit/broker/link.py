"""A fake client link for the sans-IO core: pamqp-encoded client frames go straight into
``ConnectionCore.receive_data`` and whatever the core emits is decoded back into frames.
No sockets, no threads, a fake clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp.base import Frame
from pamqp.body import ContentBody
from pamqp.exceptions import UnmarshalingException
from pamqp.heartbeat import Heartbeat

from conformance.broker.core import CloseTransport, ConnectionCore, Event, marshal_method
from conformance.broker.model import Broker
from conformance.broker.store import MemoryStore, Store
from conformance.fuzz.inproc import ManualClock

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
CAPS = {"authentication_failure_close": True, "consumer_cancel_notify": True, "basic.nack": True}


# The hand-moved clock the fuzzer's in-process mode drives the core with (one copy).
FakeClock = ManualClock


def make_broker(clock: FakeClock | None = None, store: Store | None = None, **kw: Any) -> Broker:
    clock = clock or FakeClock()
    return Broker(store if store is not None else MemoryStore(), clock=clock, wallclock=clock.wallclock, **kw)


@dataclass
class Content:
    method: Frame
    properties: spec.Basic.Properties
    body: bytes


class Link:
    def __init__(
        self,
        broker: Broker,
        *,
        handshake: bool = True,
        caps: dict[str, Any] | None = None,
        vhost: str = "/",
        heartbeat: int = 0,
        channel: int | None = 1,
    ) -> None:
        self.broker = broker
        self.core = ConnectionCore(broker)
        self.buf = b""
        self.frames: list[tuple[int, Any]] = []
        self.core_events: list[Event] = []
        self.raw_out = b""
        self._pending: dict[int, list[Any]] = {}
        if handshake:
            self.handshake(caps=CAPS if caps is None else caps, vhost=vhost, heartbeat=heartbeat)
            if channel is not None:
                self.open(channel)

    # -- plumbing ------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        self.core.receive_data(data)
        self.pump()

    def pump(self) -> None:
        data = self.core.data_to_send()
        self.raw_out += data
        self.buf += data
        self.core_events += self.core.events()
        while self.buf:
            if self.buf.startswith(b"AMQP"):
                self.frames.append((0, self.buf[:8]))
                self.buf = self.buf[8:]
                continue
            try:
                used, ch, fr = pframe.unmarshal(self.buf)
            except UnmarshalingException:
                break
            self.buf = self.buf[used:]
            self._file(ch, fr)

    def _file(self, ch: int, fr: Any) -> None:
        if isinstance(fr, (spec.Basic.Deliver, spec.Basic.GetOk, spec.Basic.Return)):
            self._pending[ch] = [fr, None, []]
            return
        if isinstance(fr, pheader.ContentHeader):
            p = self._pending[ch]
            p[1] = fr
            if fr.body_size == 0:
                del self._pending[ch]
                self.frames.append((ch, Content(p[0], fr.properties, b"")))
            return
        if isinstance(fr, ContentBody):
            p = self._pending[ch]
            p[2].append(fr.value)
            if sum(len(b) for b in p[2]) >= p[1].body_size:
                del self._pending[ch]
                self.frames.append((ch, Content(p[0], p[1].properties, b"".join(p[2]))))
            return
        self.frames.append((ch, fr))

    @property
    def transport_closed(self) -> bool:
        return any(isinstance(e, CloseTransport) for e in self.core_events)

    # -- client actions ------------------------------------------------------------------------
    def send(self, method: Frame, channel: int = 1) -> None:
        self.feed(marshal_method(method, channel))

    def publish(
        self,
        body: bytes = b"x",
        exchange: str = "",
        routing_key: str = "",
        *,
        channel: int = 1,
        mandatory: bool = False,
        immediate: bool = False,
        properties: spec.Basic.Properties | None = None,
        **props: Any,
    ) -> None:
        prop = properties or spec.Basic.Properties(**props)
        data = marshal_method(
            spec.Basic.Publish(
                exchange=exchange, routing_key=routing_key, mandatory=mandatory, immediate=immediate
            ),
            channel,
        )
        data += pframe.marshal(pheader.ContentHeader(0, len(body), prop), channel)
        if body:
            data += pframe.marshal(ContentBody(body), channel)
        self.feed(data)

    def take(self) -> list[tuple[int, Any]]:
        self.pump()
        out, self.frames = self.frames, []
        return out

    def take_objs(self) -> list[Any]:
        return [o for _, o in self.take() if not isinstance(o, Heartbeat)]

    def expect(self, cls: type, channel: int | None = None) -> Any:
        self.pump()
        frames = [f for f in self.frames if not isinstance(f[1], Heartbeat)]
        assert frames, f"expected {cls.__name__}, got nothing"
        ch, obj = frames[0]
        self.frames.remove((ch, obj))
        target = obj.method if isinstance(obj, Content) and cls is not Content else obj
        assert isinstance(target, cls), f"expected {cls.__name__}, got {obj!r} on channel {ch}"
        if channel is not None:
            assert ch == channel, f"{cls.__name__} on channel {ch}, expected {channel}"
        return obj

    def rpc(self, method: Frame, reply: type, channel: int = 1) -> Any:
        self.send(method, channel)
        return self.expect(reply, channel)

    def nothing(self) -> None:
        self.pump()
        rest = [f for f in self.frames if not isinstance(f[1], Heartbeat)]
        assert not rest, f"unexpected frames: {rest}"

    def channel_closed(self, code: int, channel: int = 1) -> spec.Channel.Close:
        close = self.expect(spec.Channel.Close, channel)
        assert close.reply_code == code, close.reply_text
        self.send(spec.Channel.CloseOk(), channel)
        return close

    def connection_closed(self, code: int) -> spec.Connection.Close:
        close = self.expect(spec.Connection.Close, 0)
        assert close.reply_code == code, close.reply_text
        return close

    # -- handshake ---------------------------------------------------------------------------
    def handshake(
        self,
        *,
        caps: dict[str, Any] | None = None,
        vhost: str = "/",
        heartbeat: int = 0,
        user: str = "guest",
        password: str = "guest",
        mechanism: str = "PLAIN",
    ) -> None:
        self.feed(PROTOCOL_HEADER)
        self.expect(spec.Connection.Start, 0)
        if mechanism == "PLAIN":
            response: Any = f"\0{user}\0{password}"
        else:
            from pamqp import encode

            response = encode.field_table({"LOGIN": user, "PASSWORD": password})[4:].decode()
        self.send(
            spec.Connection.StartOk(
                client_properties={"product": "link", "capabilities": caps if caps is not None else CAPS},
                mechanism=mechanism,
                response=response,
            ),
            0,
        )
        tune = self.expect(spec.Connection.Tune, 0)
        self.send(
            spec.Connection.TuneOk(
                channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=heartbeat
            ),
            0,
        )
        self.send(spec.Connection.Open(virtual_host=vhost), 0)
        self.expect(spec.Connection.OpenOk, 0)

    def open(self, channel: int) -> None:
        self.rpc(spec.Channel.Open(), spec.Channel.OpenOk, channel)

    def declare(self, queue: str = "", channel: int = 1, **kw: Any) -> spec.Queue.DeclareOk:
        return self.rpc(spec.Queue.Declare(queue=queue, **kw), spec.Queue.DeclareOk, channel)

    def get(self, queue: str, channel: int = 1, no_ack: bool = False) -> Content | None:
        self.send(spec.Basic.Get(queue=queue, no_ack=no_ack), channel)
        self.pump()
        _ch, obj = self.frames.pop(0)
        if isinstance(obj, spec.Basic.GetEmpty):
            return None
        assert isinstance(obj, Content), obj
        return obj

    def bodies(self) -> list[bytes]:
        return [o.body for o in self.take_objs() if isinstance(o, Content)]
