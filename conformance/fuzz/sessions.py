"""Valid client sessions as lists of frames: the seeds that ``mutate`` edits.

A session is the 8-octet protocol header plus frames; ``Frame.encode`` writes a frame the
way the spec lays it out (type, channel, size, payload, frame-end) but can be told to lie
about the size or the end octet, which is how the mutator reaches the framing layer.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pamqp import base
from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp.common import FieldTable

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
#: what the fuzzer offers in tune-ok: RabbitMQ's and the reference broker's maximum
FRAME_MAX = 131072
CHANNEL_MAX = 2047
_HDR = struct.Struct(">BHI")


@dataclass(frozen=True)
class Frame:
    """One frame.  ``size``/``end`` override what ``encode`` writes (None: the true values)."""

    type: int
    channel: int
    payload: bytes
    size: int | None = None
    end: int | None = None

    def encode(self) -> bytes:
        size = len(self.payload) if self.size is None else self.size
        end = FRAME_END if self.end is None else self.end
        return _HDR.pack(self.type, self.channel, size & 0xFFFFFFFF) + self.payload + bytes([end])

    @property
    def method_index(self) -> int | None:
        if self.type != FRAME_METHOD or len(self.payload) < 4:
            return None
        return int.from_bytes(self.payload[:4], "big")


@dataclass(frozen=True)
class Session:
    header: bytes
    frames: tuple[Frame, ...]
    #: raw bytes appended after the frames (truncations and raw edits land here)
    tail: bytes = b""
    name: str = ""

    def encode(self) -> bytes:
        return self.header + b"".join(f.encode() for f in self.frames) + self.tail

    def with_frames(self, frames: list[Frame] | tuple[Frame, ...]) -> Session:
        return replace(self, frames=tuple(frames))


def method(m: base.Frame, channel: int) -> Frame:
    raw = pframe.marshal(m, channel)
    return Frame(FRAME_METHOD, channel, raw[7:-1])


def content(
    channel: int, body: bytes, props: spec.Basic.Properties, frame_max: int = FRAME_MAX
) -> list[Frame]:
    raw = pframe.marshal(pheader.ContentHeader(0, len(body), props), channel)
    frames = [Frame(FRAME_HEADER, channel, raw[7:-1])]
    step = frame_max - 8
    frames += [Frame(FRAME_BODY, channel, body[i : i + step]) for i in range(0, len(body), step)]
    return frames


def handshake(user: str = "guest", password: str = "guest", vhost: str = "/") -> list[Frame]:
    return [
        method(
            spec.Connection.StartOk(
                client_properties={
                    "product": "amqp-conformance fuzz",
                    "capabilities": {
                        "publisher_confirms": True,
                        "basic.nack": True,
                        "consumer_cancel_notify": True,
                    },
                },
                mechanism="PLAIN",
                response=f"\0{user}\0{password}",
                locale="en_US",
            ),
            0,
        ),
        method(spec.Connection.TuneOk(channel_max=CHANNEL_MAX, frame_max=FRAME_MAX, heartbeat=0), 0),
        method(spec.Connection.Open(virtual_host=vhost), 0),
    ]


@dataclass
class _Builder:
    rng: random.Random
    frames: list[Frame] = field(default_factory=list)
    #: each template runs on a channel of its own (delivery tags and modes are per channel)
    channel: int = 1

    def name(self, kind: str) -> str:
        return f"fuzz.{kind}.{self.rng.getrandbits(40):010x}"

    def props(self) -> spec.Basic.Properties:
        r = self.rng
        headers: list[FieldTable | None] = [None, {"x-a": 1, "b": "two"}, {}]
        return spec.Basic.Properties(
            content_type=r.choice([None, "text/plain", "application/json"]),
            delivery_mode=r.choice([None, 1, 2]),
            priority=r.choice([None, 0, 9]),
            correlation_id=r.choice([None, "c1"]),
            headers=r.choice(headers),
            expiration=r.choice([None, "60000"]),
            message_id=r.choice([None, "m-1"]),
        )

    def body(self) -> bytes:
        # multi-frame bodies are rare: they make an input 100 times longer
        big = self.rng.random() < 0.04
        size = self.rng.choice([FRAME_MAX - 8, FRAME_MAX + 100] if big else [0, 1, 10, 200])
        return self.rng.randbytes(size) if size < 300 else bytes(size)

    def add(self, m: base.Frame, channel: int | None = None) -> None:
        self.frames.append(method(m, self.channel if channel is None else channel))

    def publish(self, queue: str, channel: int | None = None, *, mandatory: bool = False) -> None:
        ch = self.channel if channel is None else channel
        self.add(spec.Basic.Publish(exchange="", routing_key=queue, mandatory=mandatory), ch)
        self.frames += content(ch, self.body(), self.props())


def _queue_roundtrip(b: _Builder) -> None:
    q = b.name("q")
    b.add(spec.Queue.Declare(queue=q, exclusive=True))
    for _ in range(b.rng.randint(1, 3)):
        b.publish(q)
    no_ack = b.rng.random() < 0.3
    b.add(spec.Basic.Get(queue=q, no_ack=no_ack))
    if not no_ack:
        b.add(spec.Basic.Ack(delivery_tag=1, multiple=b.rng.random() < 0.5))
    b.add(spec.Queue.Purge(queue=q))
    b.add(spec.Queue.Delete(queue=q))


def _confirms(b: _Builder) -> None:
    q = b.name("q")
    b.add(spec.Confirm.Select())
    b.add(
        spec.Queue.Declare(
            queue=q, exclusive=True, arguments={"x-max-length": 2} if b.rng.random() < 0.3 else {}
        )
    )
    for _ in range(b.rng.randint(1, 4)):
        b.publish(q, mandatory=b.rng.random() < 0.5)
    b.publish(b.name("unroutable"), mandatory=True)


def _tx(b: _Builder) -> None:
    q = b.name("q")
    b.add(spec.Queue.Declare(queue=q, exclusive=True))
    b.add(spec.Tx.Select())
    b.publish(q)
    b.add(spec.Tx.Commit())  # a publish inside a transaction reaches the queue on commit
    b.add(spec.Basic.Get(queue=q))
    b.add(spec.Basic.Reject(delivery_tag=1, requeue=True))
    b.add(b.rng.choice([spec.Tx.Commit(), spec.Tx.Rollback()]))


def _consume(b: _Builder) -> None:
    q = b.name("q")
    b.add(spec.Basic.Qos(prefetch_count=b.rng.choice([0, 1, 10]), global_=b.rng.random() < 0.5))
    b.add(spec.Queue.Declare(queue=q, exclusive=True))
    no_ack = b.rng.random() < 0.3
    b.add(spec.Basic.Consume(queue=q, consumer_tag="ctag", no_ack=no_ack))
    for _ in range(b.rng.randint(1, 3)):
        b.publish(q)
    if not no_ack:
        b.add(spec.Basic.Nack(delivery_tag=1, multiple=False, requeue=b.rng.random() < 0.5))
    b.add(spec.Basic.Recover(requeue=True))
    b.add(spec.Basic.Cancel(consumer_tag="ctag"))


def _exchanges(b: _Builder) -> None:
    x, y, q = b.name("x"), b.name("y"), b.name("q")
    # not auto-delete: unbinding would delete them before the explicit deletes below
    b.add(
        spec.Exchange.Declare(
            exchange=x, exchange_type=b.rng.choice(["direct", "fanout", "topic", "headers"])
        )
    )
    b.add(spec.Exchange.Declare(exchange=y, exchange_type="fanout"))
    b.add(spec.Exchange.Bind(destination=y, source=x, routing_key="k"))
    b.add(spec.Queue.Declare(queue=q, exclusive=True))
    b.add(spec.Queue.Bind(queue=q, exchange=y, routing_key="k"))
    b.add(spec.Basic.Publish(exchange=x, routing_key="k"))
    b.frames += content(b.channel, b.body(), b.props())
    b.add(spec.Queue.Unbind(queue=q, exchange=y, routing_key="k"))
    b.add(spec.Exchange.Unbind(destination=y, source=x, routing_key="k"))
    b.add(spec.Exchange.Delete(exchange=y))
    b.add(spec.Exchange.Delete(exchange=x))


def _channels(b: _Builder) -> None:
    other = b.channel + 100
    b.add(spec.Channel.Open(), other)
    b.add(spec.Channel.Flow(active=True), other)
    q = b.name("q")
    b.add(spec.Queue.Declare(queue=q, exclusive=True), other)
    b.publish(q, channel=other)
    b.add(spec.Basic.Get(queue=q, no_ack=True))
    b.add(spec.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), other)


TEMPLATES: dict[str, Callable[[_Builder], None]] = {
    "queue-roundtrip": _queue_roundtrip,
    "confirms": _confirms,
    "tx": _tx,
    "consume": _consume,
    "exchanges": _exchanges,
    "channels": _channels,
}


def valid_session(
    rng: random.Random, *, user: str = "guest", password: str = "guest", vhost: str = "/"
) -> Session:
    """A handshake, one or two templates (channels 1 and 2), channel.close, connection.close."""
    b = _Builder(rng)
    b.frames += handshake(user, password, vhost)
    names = rng.sample(sorted(TEMPLATES), rng.randint(1, 2))
    for number, name in enumerate(names, 1):
        b.channel = number
        b.add(spec.Channel.Open())
        TEMPLATES[name](b)
    if rng.random() < 0.7:
        b.add(spec.Channel.Close(reply_code=200, reply_text="done", class_id=0, method_id=0))
    if rng.random() < 0.7:
        b.add(spec.Connection.Close(reply_code=200, reply_text="done", class_id=0, method_id=0), 0)
    return Session(PROTOCOL_HEADER, tuple(b.frames), name="+".join(names))


def corpus(seed: int, size: int = 64, **login: str) -> list[Session]:
    rng = random.Random(seed)
    return [valid_session(rng, **login) for _ in range(size)]
