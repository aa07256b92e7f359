"""A fault-injecting AMQP proxy: a good broker behind it becomes a deliberately broken one.

The proxy decodes every frame in both directions and lets a :class:`Fault` rewrite, drop, add or
reorder them. With a fault, the broker seen through the proxy violates one stated expectation.
A fault may also answer the client itself (``st["to_client"]``), as a broker that skips a step
would, or hold frames and release them later.
"""

from __future__ import annotations

import copy
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from conformance.protocol.errors import ClientFault
from conformance.protocol.handshake import connect
from conformance.protocol.loopback import Listener
from conformance.protocol.wire import URL, split_frames

Frame = tuple[int, Any]  # (channel, pamqp frame)


def assemble(
    partial: dict[int, list[Frame]], channel: int, frm: Any, starts: tuple[type, ...]
) -> list[Frame] | None:
    """Gather whole messages, per channel: a method of ``starts`` begins one, its header and
    body frames join it. The whole message once its body is complete, [] while it is not,
    None for a frame that is no part of a message (``partial`` holds the incomplete ones)."""
    if isinstance(frm, starts):
        partial[channel] = [(channel, frm)]
        return []
    if isinstance(frm, (ContentHeader, ContentBody)) and channel in partial:
        partial[channel].append((channel, frm))
        hdr = next((f for _c, f in partial[channel] if isinstance(f, ContentHeader)), None)
        got = sum(len(f.value) for _c, f in partial[channel] if isinstance(f, ContentBody))
        if hdr is None or got < hdr.body_size:
            return []
        return partial.pop(channel)
    return None

# Frames a fault queues here (per connection) go to the client right after the frames it
# returned: a proxy answering in the broker's name (e.g. a select-ok the broker never sent).
TO_CLIENT = "to_client"


def replace(frm: Any, **changes: Any) -> Any:
    """A copy of a decoded frame with some fields changed, re-encoded on the way out."""
    out = copy.copy(frm)
    for name, value in changes.items():
        setattr(out, name, value)
    if hasattr(out, "_raw"):
        del out._raw  # the raw bytes are the unchanged frame's
    return out


@dataclass(frozen=True)
class Pause:
    """Among the frames a fault returns: the proxy sends what came before, then waits ``seconds``
    (the broker made slower, its frame order kept)."""

    seconds: float


class Fault:
    """Override ``to_client`` / ``to_broker``: frames in, frames out (per connection state in ``st``)."""

    name = "none"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        return [(channel, frm)]

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        return [(channel, frm)]


class DoubleConfirm(Fault):
    """confirms: every basic.ack from the broker is followed by a basic.nack of the same tag."""

    name = "confirm-ack-and-nack"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Ack) and channel in st.setdefault("confirm_channels", set()):
            return [
                (channel, frm),
                (
                    channel,
                    spec.Basic.Nack(delivery_tag=frm.delivery_tag, multiple=frm.multiple, requeue=False),
                ),
            ]
        return [(channel, frm)]

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Confirm.Select):
            st.setdefault("confirm_channels", set()).add(channel)
        return [(channel, frm)]


class RollbackCommits(Fault):
    """tx: tx.rollback is carried out as tx.commit (and its commit-ok shown as rollback-ok)."""

    name = "tx-rollback-commits"

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Tx.Rollback):
            st.setdefault("swapped", set()).add(channel)
            return [(channel, spec.Tx.Commit())]
        return [(channel, frm)]

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Tx.CommitOk) and channel in st.get("swapped", set()):
            st["swapped"].discard(channel)
            return [(channel, spec.Tx.RollbackOk())]
        return [(channel, frm)]


class NoRedeliveredFlag(Fault):
    """reject / recover: the broker never sets redelivered=true."""

    name = "no-redelivered-flag"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, (spec.Basic.Deliver, spec.Basic.GetOk)) and frm.redelivered:
            return [(channel, replace(frm, redelivered=False))]
        return [(channel, frm)]


class ExclusiveIgnored(Fault):
    """exclusive queues: the exclusive flag of queue.declare is dropped."""

    name = "exclusive-ignored"

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Queue.Declare) and frm.exclusive:
            return [(channel, replace(frm, exclusive=False))]
        return [(channel, frm)]


class RejectRequeueDropped(Fault):
    """reject: basic.reject(requeue=true) from the client is carried out with requeue=false."""

    name = "reject-requeue-dropped"

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Reject) and frm.requeue:
            return [(channel, replace(frm, requeue=False))]
        return [(channel, frm)]


class NackMultipleIgnored(Fault):
    """nack: basic.nack(multiple=true) from the client settles only the tag it names."""

    name = "nack-multiple-ignored"

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Nack) and frm.multiple and frm.delivery_tag:
            return [(channel, replace(frm, multiple=False))]
        return [(channel, frm)]


class SwapDeliveries(Fault):
    """ordering: every two consecutive deliveries on a channel arrive in swapped order.

    A delivery is a method frame, a header and its body frames; the first of a pair is held
    until the second is complete. A lone held delivery is released by the next non-content frame.
    """

    name = "swap-deliveries"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        held = st.setdefault("held", {})
        done = assemble(st.setdefault("cur", {}), channel, frm, (spec.Basic.Deliver,))
        if done is None:
            return [*held.pop(channel, []), (channel, frm)]
        if not done:
            return []
        if channel in held:
            first = held.pop(channel)
            return done + first
        held[channel] = done
        return []


FAULTS: dict[str, type[Fault]] = {
    f.name: f
    for f in (
        Fault,
        DoubleConfirm,
        RollbackCommits,
        NoRedeliveredFlag,
        ExclusiveIgnored,
        NackMultipleIgnored,
        SwapDeliveries,
        RejectRequeueDropped,
    )
}


_UNCHECKED: dict[type, type] = {}


def _unchecked(frm: Any) -> Any:
    """``frm`` as an instance of a subclass that skips pamqp's validation: a broker may send
    names pamqp's client-side domain checks refuse, and a mutant must be able to pass them on."""
    cls = type(frm)
    sub = _UNCHECKED.get(cls)
    if sub is None:
        sub = _UNCHECKED[cls] = type(cls.__name__, (cls,), {"validate": lambda self: None})
    out: Any = object.__new__(sub)
    for name in cls.__slots__:
        if hasattr(frm, name):
            setattr(out, name, getattr(frm, name))
    return out


def _pass_headers(
    buf: bytes, dst: socket.socket, to_broker: bool, header_pending: bool
) -> tuple[bytes, bool] | None:
    """Forward an 8-octet protocol header at the start of ``buf``: the client's first bytes, or
    a broker's own header refusing the client's. ``(the rest, whether the client's header is
    still to come)``, or None while a header is incomplete."""
    if not to_broker and buf[:4] == b"AMQP":
        if len(buf) < 8:
            return None
        dst.sendall(buf[:8])
        buf = buf[8:]
    if header_pending:
        if len(buf) < 8:
            return None
        dst.sendall(buf[:8])
        buf, header_pending = buf[8:], False
    return buf, header_pending


def _keep_bytes(frm: Any, channel: int, chunk: bytes) -> None:
    """Remember the bytes ``frm`` was decoded from (``_encode`` sends them when it is unchanged)."""
    frm._raw = (channel, chunk)


def _encode(ch: int, f: Any) -> bytes:
    raw = getattr(f, "_raw", None)
    # re-encoding decoded frames is not always valid pamqp: unchanged frames keep their bytes
    if raw is not None and raw[0] == ch:
        return raw[1]
    try:
        return pframe.marshal(f, ch)
    except ValueError:
        if not hasattr(f, "validate"):
            raise
        return pframe.marshal(_unchecked(f), ch)


@dataclass
class FaultProxy:
    """Listens plain on ``host`` (a free port); each client connection gets its own upstream
    connection, TLS-wrapped when ``upstream_tls`` (the broker's amqps:// URL, with its CA and
    client certificate) is given, so a TLS-only broker can stand behind the proxy."""

    upstream_host: str
    upstream_port: int
    fault: Fault = field(default_factory=Fault)
    host: str = "127.0.0.1"
    upstream_tls: URL | None = None

    def __post_init__(self) -> None:
        self.listener = Listener(self._on_accept, host=self.host, backlog=64)
        self.port = self.listener.port
        self.errors: list[str] = []  # faults that raised: the frame went through unchanged

    def url(self, user: str = "guest", password: str = "guest", vhost: str = "/") -> URL:
        return URL(host=self.host, port=self.port, user=user, password=password, vhost=vhost)

    def __enter__(self) -> FaultProxy:
        self.listener.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()

    def _on_accept(self, client: socket.socket) -> None:
        try:
            upstream = self._connect_upstream()
        except (OSError, ClientFault) as exc:
            # the client sees its connection end; why is kept for the mutate report
            self.errors.append(f"upstream connection: {exc}")
            client.close()
            return
        upstream.settimeout(None)
        self.listener.track(client, upstream)
        state: dict[str, Any] = {}
        lock = threading.Lock()
        threading.Thread(target=self._pump, args=(client, upstream, True, state, lock), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client, False, state, lock), daemon=True).start()

    def _connect_upstream(self) -> socket.socket:
        if self.upstream_tls is None:
            return socket.create_connection((self.upstream_host, self.upstream_port), timeout=5)
        # The TLS handshake runs in the accept thread: bounded (5 s), as the plain connect.
        return connect(self.upstream_tls.with_(host=self.upstream_host, port=self.upstream_port), timeout=5)

    def _rewrite(self, chunks: list[bytes], to_broker: bool, st: dict[str, Any],
                 dst: socket.socket | None = None) -> tuple[bytes, bytes]:
        """The fault applied to whole frames: (bytes onward, bytes back to the client). A fault
        may return a :class:`Pause` among its frames (a slow broker): what comes before it is
        sent to ``dst`` first, then the pump sleeps; the frames after it wait behind it."""
        rewrite = self.fault.to_broker if to_broker else self.fault.to_client
        out = bytearray()
        back = bytearray()
        for chunk in chunks:
            try:
                _n, channel, frm = pframe.unmarshal(chunk)
            except Exception:  # noqa: BLE001 - pass through what we cannot decode
                out += chunk
                continue
            _keep_bytes(frm, channel, chunk)
            try:
                frames = rewrite(st, channel, frm)
                encoded = [f if isinstance(f, Pause) else _encode(f[0], f[1]) for f in frames]
                injected = b"".join(_encode(ch, f) for ch, f in st.pop(TO_CLIENT, []))
            except Exception as exc:  # noqa: BLE001 - a fault's bug taints the run, never a verdict
                self.errors.append(f"{self.fault.name}: {type(exc).__name__}: {exc}")
                encoded, injected = [chunk], b""
            for item in encoded:
                if isinstance(item, Pause):
                    if dst is not None and out:
                        dst.sendall(out)
                        out.clear()
                    time.sleep(item.seconds)
                else:
                    out += item
            (back if to_broker else out).extend(injected)
        return bytes(out), bytes(back)

    def _pump(self, src: socket.socket, dst: socket.socket, to_broker: bool, st: dict[str, Any],
              lock: threading.Lock) -> None:
        buf = b""
        header_pending = to_broker  # the client's first 8 bytes are the protocol header
        client = src if to_broker else dst
        try:
            while True:
                got = src.recv(65536)
                if not got:
                    if buf:
                        dst.sendall(buf)  # an incomplete tail is the peer's to judge, not ours
                    break
                passed = _pass_headers(buf + got, dst, to_broker, header_pending)
                if passed is None:
                    buf += got
                    continue
                buf, header_pending = passed
                chunks, buf = split_frames(buf)
                # Sending under the connection's lock keeps the frames a fault injects towards
                # the client in order with the broker's own frames.
                with lock:
                    out, back = self._rewrite(chunks, to_broker, st, dst)
                    if out:
                        dst.sendall(out)
                    if back:
                        client.sendall(back)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
