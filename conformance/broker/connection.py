"""One client connection (the connection layer of the sans-IO core): framing of the
input stream, the connection's state through the handshake (whose checks and texts are in
``handshake.py``), connection-class methods, channel frames and hard errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pamqp import base
from pamqp import commands as spec

from .access import Grant
from .channel import ChannelCore, ContentState
from .errors import AMQPError, ReplyCode, method_frame_expected
from .events import ChannelClosed, ChannelOpened, CloseTransport, ConnectionClosed, ConnectionOpened, Event
from .frames import (
    _FRAME_HDR,
    _PUBLISH_INDEX,
    ACCEPTED_HEADERS,
    CLIENT_CLOSE_TIMEOUT,
    CLOSE_OK_TIMEOUT,
    FATAL_FRAME_CLOSE_DELAY,
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_MIN_SIZE,
    HANDSHAKE_TIMEOUT,
    HEARTBEAT_FRAME,
    METHOD_CLASSES,
    PROTOCOL_HEADER,
    _as_text,
    _ids,
    _is_close_method,
    _snippet,
    decode_hot_method,
    decoded,
    marshal_method,
    read_publish,
    unvalidated,
)
from .handshake import check_tune_ok, login, open_vhost, start_method, tune_method
from .limits import MEMORY_ALARM_REASON
from .model import Broker, VHost
from .queues import Queue
from .states import ChannelState, ConnectionState, Disposition, Signal, is_connection_method, step, transition

# Enum members as module constants: on Python 3.11 ``ConnectionState.OPEN`` costs a slow
# class-attribute lookup, and the framing loop tests the state several times per frame.
_OPEN, _CLOSED, _CLOSING = ConnectionState.OPEN, ConnectionState.CLOSED, ConnectionState.CLOSING
_AWAITING_HEADER, _CH_OPEN = ConnectionState.AWAITING_HEADER, ChannelState.OPEN
_EXPECT_METHOD = ContentState.METHOD
_Publish = tuple[tuple[str, str, bool, bool], bytes, spec.Basic.Properties, bytes, int]  # read_publish


class ConnectionCore:
    """One client connection.  Feed it bytes, take bytes and events out."""

    def __init__(self, broker: Broker, *, heartbeat: int = 60, peer: str = "") -> None:
        self.broker = broker
        self.peer = peer
        self.id = broker.next_id()
        self.state = ConnectionState.AWAITING_HEADER
        #: input not parsed yet; ``_need``: the length that makes its next frame whole
        self._in = bytearray()
        self._need = 0
        #: (lsn, frames): a tx.commit-ok waiting for its fsync (``send_when_durable``)
        self.held: tuple[int, list[bytes]] | None = None
        self._out: list[bytes] = []
        self._events: list[Event] = []
        self.channels: dict[int, ChannelCore] = {}
        self.server_heartbeat = heartbeat
        self.heartbeat = 0
        self.frame_max = FRAME_MIN_SIZE
        self.channel_max = broker.limits.channel_max
        # Memory alarm (RabbitMQ's connection.blocked): a connection that publishes while the
        # alarm lasts is blocked (the shell stops reading from it) until the alarm clears.
        self.blocked = False
        self.blocked_notified = False
        self.counted_open = False  # counted in broker.open_connections (max_connections)
        self.user = ""
        self.vhost: VHost | None = None
        self.grant: Grant | None = None  # the user's permissions in the opened vhost
        self.client_properties: dict[str, Any] = {}
        self.exclusive_queues: set[Queue] = set()
        self.confirms_dirty = False
        self.transport_closing = False
        #: the shell's write buffer to this client is over its high-water mark: deliveries
        #: wait in their queues (replies still go out) until ``set_congested(False)``
        self.congested = False
        self.wake: Callable[[], None] | None = None
        self.sync_requester: Callable[[], None] | None = None
        now = broker.clock()
        self.created = now
        self.last_rx = now
        self.last_tx = now
        self.close_deadline: float | None = None
        self.discard_input = False  # after a fatal frame error the stream cannot be parsed
        broker.listeners.add(self)

    # -- sans-IO surface -------------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        if self.transport_closing or self.state is _CLOSED or self.discard_input:
            return
        self.last_rx = self.broker.clock()
        self._in += data
        if len(self._in) < self._need or self.held is not None:
            return  # the next frame is not whole yet (or reading waits for an fsync)
        self._consume()

    def _consume(self) -> None:
        """Parse what ``_in`` holds, then flush what the input made due."""
        # Each pass either ends the parse or moves the connection one step towards closed
        # (open -> closing -> discarding), so this loop runs at most three times.
        while True:
            was_closing = self.state is _CLOSING
            try:
                self._parse()
                break
            except AMQPError as err:
                self.connection_error(err)
                if was_closing:
                    # An error while closing has no reply left to give (spec connection.close:
                    # everything but close/close-ok is discarded), and a frame that cannot be
                    # delimited leaves nothing parseable after it: drop the rest of the stream
                    # and let the close-ok deadline end the connection.
                    self.discard_input = True
                if self.transport_closing or self.state is _CLOSED or self.discard_input:
                    break
        if self.transport_closing or self.state is _CLOSED or self.discard_input:
            self._in.clear()  # nothing after the end of a connection is ever read: do not hold it
        self._after_input()

    def data_to_send(self) -> bytes:
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        return data

    def events(self) -> list[Event]:
        evs, self._events = self._events, []
        return evs

    def connection_lost(self) -> None:
        """The socket went away (EOF or error)."""
        if self.state is not ConnectionState.CLOSED:
            self._cleanup()
            self.state = step(self.state, Signal.SOCKET_LOST)
            self.emit(ConnectionClosed(ReplyCode.CONNECTION_FORCED, "connection lost", by_peer=True))
        self.broker.listeners.discard(self)

    def tick(self) -> None:
        """Timers: heartbeats, dead-peer detection, handshake and close-ok timeouts, the
        consumer (delivery acknowledgement) timeout."""
        if self.transport_closing:
            return
        now = self.broker.clock()
        st = self.state
        if st is ConnectionState.CLOSED:
            if self.close_deadline is not None and now >= self.close_deadline:
                self._close_transport("the client kept the socket open after connection.close-ok")
            return
        if st is ConnectionState.CLOSING:
            if self.close_deadline is not None and now >= self.close_deadline:
                self._close_transport("timed out waiting for connection.close-ok")
            return
        if st is not ConnectionState.OPEN:
            if now - self.created > HANDSHAKE_TIMEOUT:
                self._cleanup()
                self.state = step(self.state, Signal.ABORT)
                self._close_transport("handshake timeout")
            return
        self._check_consumer_timeout(now)
        if self.heartbeat:
            if now - self.last_rx > 2 * self.heartbeat:
                # spec 4.2.7: "If a peer detects no incoming traffic (i.e. received
                # octets) for two heartbeat intervals or longer, it should close the
                # connection without following the Connection.Close/Close-Ok handshaking"
                self._cleanup()
                self.state = step(self.state, Signal.ABORT)
                self.emit(ConnectionClosed(ReplyCode.CONNECTION_FORCED, "missed heartbeats", by_peer=False))
                self._close_transport("missed heartbeats from client")
            elif now - self.last_tx >= self.heartbeat / 2:
                self.send_frames([HEARTBEAT_FRAME])

    def _check_consumer_timeout(self, now: float) -> None:
        timeout = self.broker.limits.consumer_timeout
        if timeout:
            for ch in list(self.channels.values()):
                ch.check_consumer_timeout(now, timeout)

    def on_durable(self) -> None:
        self.confirms_dirty = True
        held = self.held
        if held is not None and self.broker.is_durable(held[0]):
            self.held = None
            if self.state is _OPEN:
                self.send_frames(held[1])
                if self._in and not (self.transport_closing or self.discard_input):
                    self._consume()  # what the client sent after its commit, in order
                    return
        self._after_input()

    def set_congested(self, congested: bool) -> None:
        """The shell's flow control: stop deliveries while the client is not reading fast
        enough (RabbitMQ's credit flow keeps messages in the queue the same way); on relief
        every queue this connection consumes from is dispatched again."""
        self.congested = congested
        if not congested:
            for ch in list(self.channels.values()):
                ch.redispatch()

    def on_alarm(self, active: bool) -> None:
        """The broker's memory alarm changed. Raising it blocks nobody yet (RabbitMQ blocks a
        connection when it next publishes); clearing it unblocks, with connection.unblocked
        for a client that was told connection.blocked."""
        if active or not self.blocked:
            return
        self.blocked = False
        if self.blocked_notified and self.state is ConnectionState.OPEN:
            self.send_method(spec.Connection.Unblocked())
        self.blocked_notified = False
        if self.wake is not None:
            self.wake()  # the shell resumes reading

    def on_publish(self) -> None:
        """A basic.publish arrived: during the alarm it blocks the connection, and a client
        with the ``connection.blocked`` capability is told so (RabbitMQ's Blocked Connection
        Notifications: sent to publishing connections, once per alarm)."""
        if not self.broker.alarm or self.blocked:
            return
        self.blocked = True
        if self.capability("connection.blocked"):
            self.blocked_notified = True
            self.send_method(spec.Connection.Blocked(reason=MEMORY_ALARM_REASON))

    def send_when_durable(self, lsn: int, frames: list[bytes]) -> None:
        """Send ``frames`` (a tx.commit-ok) once everything up to ``lsn`` is durable.

        Without a shell the store syncs at once; with one (``sync_requester``) they wait for its
        group commit (shared by all connections) and this connection parses nothing until then,
        so what its client sent after the commit is answered after commit-ok, as before."""
        if self.broker.is_durable(lsn):
            self.send_frames(frames)
        elif self.sync_requester is None:
            self.broker.store.sync_now()
            self.broker.on_synced()
            self.send_frames(frames)
        else:
            self.held = (lsn, frames)
            self.sync_requester()

    # -- plumbing --------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        self._events.append(event)

    def send_frames(self, frames: list[bytes]) -> None:
        if self.transport_closing:
            return
        first = not self._out
        self._out.extend(frames)
        self.last_tx = self.broker.clock()
        if first and self.wake is not None:
            self.wake()

    def send_method(self, method: base.Frame, channel: int = 0) -> None:
        self.send_frames([marshal_method(method, channel)])

    def capability(self, name: str) -> bool:
        caps = self.client_properties.get("capabilities")
        return isinstance(caps, dict) and caps.get(name) is True

    def _close_transport(self, reason: str) -> None:
        if not self.transport_closing:
            self.emit(CloseTransport(reason))
            if self.wake is not None:
                self.wake()
        self.transport_closing = True
        self.broker.listeners.discard(self)

    def _after_input(self) -> None:
        if self.confirms_dirty and self.state is _OPEN:
            self.confirms_dirty = False
            for ch in list(self.channels.values()):
                if ch.settlement.confirm:
                    ch.settlement.flush_confirms()

    # -- framing -------------------------------------------------------------------------------
    def _parse(self) -> None:
        buf = bytes(self._in)  # one copy per parse: each payload is then one slice of it
        self._in.clear()
        self._need = 0
        pos = 0
        n = len(buf)
        try:
            while not self.transport_closing and self.state is not _CLOSED and self.held is None:
                if self.state is _AWAITING_HEADER:
                    if n - pos < 8:
                        return
                    header = buf[pos : pos + 8]
                    pos += 8
                    self._on_protocol_header(header)
                    continue
                if n - pos < 7:
                    self._need = 7
                    return
                ftype, channel, size = _FRAME_HDR.unpack_from(buf, pos)
                # RabbitMQ 3.10 (rabbit_reader): a payload up to frame_max octets is accepted, i.e.
                # a frame of up to frame_max + 8 (its FRAME_SIZE_FUDGE for old clients); the
                # error text names frame_max - 8, the largest payload the spec allows.
                # A content header is the exception: the broker hands it on unchanged with every
                # delivery, so one above the spec's limit would make the broker itself send a frame
                # larger than frame-max (found by `fuzz --in-process`); it gets the spec's limit.
                if self.frame_max and (size > self.frame_max
                                       or (ftype == FRAME_HEADER and size > self.frame_max - 8)):
                    raise AMQPError(
                        ReplyCode.FRAME_ERROR,
                        f"type {ftype}, all octets = <<>>: {{frame_too_large,{size},{self.frame_max - 8}}}",
                    )
                end = pos + 7 + size
                if n < end + 1:
                    self._need = end + 1 - pos
                    return
                if buf[end] != FRAME_END:
                    raise AMQPError(
                        ReplyCode.FRAME_ERROR,
                        (
                            f"type {ftype}, {_snippet(buf[pos + 7 : end])}: "
                            f"{{invalid_frame_end_marker,{buf[end]}}}"
                        ),
                    )
                if ftype == FRAME_METHOD and channel and size >= 9 and self.state is _OPEN \
                        and buf[pos + 7 : pos + 11] == _PUBLISH_INDEX:
                    ch = self.channels.get(channel)
                    read = self._whole_publish(ch, buf, pos, end)
                    if read is not None and ch is not None:
                        pos = read[4]  # past all three frames, whatever the publish raises
                        self._publish_read(ch, read)
                        continue
                payload = buf[pos + 7 : end]
                pos = end + 1
                self._on_frame(ftype, channel, payload)
        finally:
            if pos < n:
                self._in += buf[pos:] if pos else buf

    def _whole_publish(self, ch: ChannelCore | None, buf: bytes, pos: int, end: int) -> _Publish | None:
        """The hot path: a whole, well-formed publish (``frames.read_publish``) on an open channel
        expecting a method, in one step (``_publish_read``), same effects in the same order; None
        for anything else: the frame-by-frame path then handles it, errors included."""
        if ch is None or ch.state is not _CH_OPEN or ch.content is not _EXPECT_METHOD:
            return None
        return read_publish(buf, pos, end, ch.number, self.frame_max, self.broker.limits.max_message_size)

    def _publish_read(self, ch: ChannelCore, read: _Publish) -> None:
        (exchange, routing_key, mandatory, immediate), props_raw, props, body, _ = read
        try:
            self.on_publish()  # first the publish (memory alarm), then the complete message
            ch.publish_content(exchange, routing_key, mandatory, immediate, props_raw, props, body)
        except AMQPError as err:
            if err.is_hard:
                raise
            ch.close_with_error(err)

    def _on_protocol_header(self, header: bytes) -> None:
        if header not in ACCEPTED_HEADERS:
            # spec 4.2.2: "the server MUST reject the protocol header [...] write a valid
            # protocol header to the socket, then close the socket connection"
            self.send_frames([PROTOCOL_HEADER])
            self.state = step(self.state, Signal.HEADER_REFUSED)
            self._close_transport("unsupported protocol header")
            return
        self.state = step(self.state, Signal.HEADER_ACCEPTED)
        self.send_method(start_method())

    def _on_hot_frame(self, ftype: int, channel: int, payload: bytes) -> bool:
        """The hot path: publish (method, header, body) and ack on an open channel take the
        same steps as `_on_frame`, minus pamqp's generic decoding and a closure per frame.
        False when the frame is not one of those (the general path then handles it)."""
        ch = self.channels.get(channel)
        if ch is None or ch.state is not _CH_OPEN:
            return False
        if ftype == FRAME_METHOD:
            method = decode_hot_method(payload)
            if method is None:
                return False
            self._channel_call(ch, ch.on_method, method)
        elif ftype == FRAME_HEADER:
            self._channel_call(ch, ch.on_header, payload)
        elif ftype == FRAME_BODY:
            self._channel_call(ch, ch.on_body, payload)
        else:
            return False
        return True

    def _on_frame(self, ftype: int, channel: int, payload: bytes) -> None:
        if channel and self.state is _OPEN and self._on_hot_frame(ftype, channel, payload):
            return
        if self.state is ConnectionState.CLOSING and not _is_close_method(ftype, channel, payload):
            # spec connection.close: "any received methods except Close and Close-OK MUST be discarded"
            return
        if ftype == FRAME_HEARTBEAT:
            if channel != 0:
                raise AMQPError(ReplyCode.FRAME_ERROR, "heartbeat frame on a non-zero channel")
            return
        if ftype == FRAME_METHOD:
            method = self._decode_method(payload)
            if channel == 0:
                self._on_connection_method(method)
            else:
                self._on_channel_frame(channel, lambda ch: ch.on_method(method), method)
            return
        if ftype in (FRAME_HEADER, FRAME_BODY):
            if channel == 0 or self.state is not ConnectionState.OPEN:
                raise AMQPError(
                    ReplyCode.UNEXPECTED_FRAME, "content frame on channel 0 or before connection.open"
                )
            if ftype == FRAME_HEADER:
                self._on_channel_frame(channel, lambda ch: ch.on_header(payload), None)
            else:
                self._on_channel_frame(channel, lambda ch: ch.on_body(payload), None)
            return
        raise AMQPError(ReplyCode.FRAME_ERROR, f"type {ftype}, {_snippet(payload)}: unknown_frame")

    def _decode_method(self, payload: bytes) -> base.Frame:
        if len(payload) < 4:
            raise AMQPError(ReplyCode.FRAME_ERROR, "method frame too short")
        index = int.from_bytes(payload[:4], "big")
        cls = METHOD_CLASSES.get(index)
        if cls is None:
            raise AMQPError(
                ReplyCode.COMMAND_INVALID,
                f"unknown method {index >> 16}/{index & 0xFFFF}",
                index >> 16,
                index & 0xFFFF,
            )
        method = cls()
        try:
            method.unmarshal(payload[4:])
        except Exception as exc:
            # RabbitMQ: frame_error "cannot decode"
            raise AMQPError(
                ReplyCode.FRAME_ERROR, f"cannot decode {cls.name}: {exc}", index >> 16, index & 0xFFFF
            ) from exc
        return method

    # -- connection class ----------------------------------------------------------------------
    def _on_connection_method(self, method: base.Frame) -> None:
        nxt = transition(self.state, method)
        if nxt is Disposition.DISCARD:
            return
        assert isinstance(nxt, ConnectionState)
        try:
            # the table admitted only methods that have a handler here
            _CONNECTION_HANDLERS[type(method)](self, method)
        except AMQPError as err:
            if not isinstance(method, spec.Connection.StartOk):  # RabbitMQ: 0/0 for login failures
                err.with_method(*_ids(method))
            raise
        self.state = nxt

    def _on_close(self, m: spec.Connection.Close) -> None:
        self._cleanup()
        self.send_method(spec.Connection.CloseOk())
        if self.state is ConnectionState.CLOSING:  # a close crossing ours: the handshake is done
            self._close_transport("client closed the connection")
            return
        self.emit(ConnectionClosed(decoded(m.reply_code), _as_text(m.reply_text), by_peer=True))
        # RabbitMQ (rabbit_reader): close-ok, then the socket stays open for the client to close and
        # whatever else arrives is discarded; closing at once broke clients that wrote ahead of
        # their close (their writes failed before they read close-ok). Ended by the client, or
        # after the heartbeat interval, at most CLIENT_CLOSE_TIMEOUT.
        self.discard_input = True
        wait = self.heartbeat if 0 < self.heartbeat < CLIENT_CLOSE_TIMEOUT else CLIENT_CLOSE_TIMEOUT
        self.close_deadline = self.broker.clock() + wait
        self.broker.listeners.discard(self)

    def _on_update_secret(self, m: spec.Connection.UpdateSecret) -> None:
        # RabbitMQ 3.10's internal user backend keeps the authenticated user whatever the new
        # secret is (measured: update-secret-ok for a wrong one too); so do the fixed users here.
        self.send_method(spec.Connection.UpdateSecretOk())

    def _on_close_ok(self, m: spec.Connection.CloseOk) -> None:
        self._close_transport("close handshake complete")

    def _on_start_ok(self, m: spec.Connection.StartOk) -> None:
        self.client_properties = dict(m.client_properties or {})
        self.user = login(self.broker, m)
        self.send_method(tune_method(self.broker, self.server_heartbeat))

    def _on_tune_ok(self, m: spec.Connection.TuneOk) -> None:
        check_tune_ok(self.broker, m)
        self.frame_max = m.frame_max
        self.channel_max = m.channel_max
        self.heartbeat = m.heartbeat

    def _on_open(self, m: spec.Connection.Open) -> None:
        self.vhost, self.grant = open_vhost(self.broker, self.user, m.virtual_host)
        self.broker.open_connections += 1
        self.counted_open = True
        self.send_method(spec.Connection.OpenOk())
        self.emit(ConnectionOpened(self.user, self.vhost.name))

    def connection_error(self, err: AMQPError) -> None:
        """Hard error: connection.close with the code, then wait for close-ok."""
        if self.state in (ConnectionState.CLOSED, ConnectionState.CLOSING) or self.transport_closing:
            if self.state is ConnectionState.CLOSING:
                return
            self._close_transport(err.reply_text)
            return
        pre_open = self.state is not ConnectionState.OPEN
        notify = not pre_open
        if self.state is ConnectionState.AWAITING_START_OK and err.code is ReplyCode.ACCESS_REFUSED:
            notify = self.capability("authentication_failure_close")
        elif self.state is ConnectionState.AWAITING_OPEN and err.code is ReplyCode.NOT_ALLOWED:
            # RabbitMQ 3.10 answers an unknown/forbidden vhost with connection.close, but
            # a failed tune negotiation with a silent close.
            notify = True
        self._cleanup()
        self.emit(ConnectionClosed(int(err.code), err.reply_text, by_peer=False))
        if not notify:
            # RabbitMQ closes the socket without a word on other handshake errors.
            self.state = step(self.state, Signal.ABORT)
            self._close_transport(err.reply_text)
            return
        self.send_method(err.close_method(spec.Connection.Close))
        self.state = step(self.state, Signal.SERVER_CLOSE)
        self.close_deadline = self.broker.clock() + CLOSE_OK_TIMEOUT
        if err.code is ReplyCode.FRAME_ERROR:
            # RabbitMQ fatal_frame_error: the stream is out of sync, nothing more can be
            # parsed. Like RabbitMQ, discard further input and drop the socket only after a
            # grace period: closing at once turns the peer's unread bytes into a TCP reset,
            # which can destroy the connection.close before the peer reads it.
            self.discard_input = True
            self.close_deadline = self.broker.clock() + FATAL_FRAME_CLOSE_DELAY

    def close(self, code: int = ReplyCode.CONNECTION_FORCED, text: str = "broker shutdown") -> None:
        """Server-initiated close (e.g. broker shutdown)."""
        self.connection_error(AMQPError(ReplyCode(code), text))

    def _cleanup(self) -> None:
        """Channels release their messages and consumers; exclusive queues go away."""
        if self.counted_open:
            self.counted_open = False
            self.broker.open_connections -= 1
        self.blocked = False
        self.held = None
        for ch in list(self.channels.values()):
            ch.teardown()
        self.channels.clear()
        for q in list(self.exclusive_queues):
            q.vhost.delete_queue(q)
        self.exclusive_queues.clear()

    # -- channel frames ------------------------------------------------------------------------
    def _on_channel_frame(
        self, number: int, action: Callable[[ChannelCore], None], method: base.Frame | None
    ) -> None:
        if self.state is not ConnectionState.OPEN:
            raise AMQPError(ReplyCode.CHANNEL_ERROR, "channel frame before connection.open")
        if method is not None and is_connection_method(method):
            raise AMQPError(ReplyCode.COMMAND_INVALID, "unimplemented method", *_ids(method))
        ch = self.channels.get(number)
        if ch is None:
            if method is None:
                # RabbitMQ: a fresh channel's assembler expects a method frame first.
                raise method_frame_expected()
            if isinstance(method, spec.Channel.Open):
                if len(self.channels) >= self.channel_max:
                    raise AMQPError(
                        ReplyCode.NOT_ALLOWED,
                        (
                            f"number of channels opened ({len(self.channels)}) has reached the "
                            "negotiated channel_max "
                            f"({self.channel_max})"
                        ),
                    )  # RabbitMQ reports class/method 0/0 here
                ch = ChannelCore(self, number)
                self.channels[number] = ch
                # reserved-1 ("channel-id", "must be zero"): the empty long string RabbitMQ sends;
                # pamqp's default "0" makes clients that skip 4 octets lose frame sync
                ch.send(unvalidated(spec.Channel.OpenOk, channel_id=""))
                self.emit(ChannelOpened(number))
                return
            raise transition_error(ChannelState.CLOSED, method)
        try:
            if ch.state is ChannelState.CLOSING and isinstance(method, spec.Channel.Close):
                ch._channel_close_crossing(method)
                return
            action(ch)
        except AMQPError as err:
            if err.is_hard:
                raise
            ch.close_with_error(err)

    @staticmethod
    def _channel_call(ch: ChannelCore, action: Callable[[Any], None], arg: Any) -> None:
        """``_on_channel_frame``'s error handling for a frame on an open channel."""
        try:
            action(arg)
        except AMQPError as err:
            if err.is_hard:
                raise
            ch.close_with_error(err)

    def channel_gone(self, ch: ChannelCore, code: int, text: str, *, by_peer: bool) -> None:
        if self.channels.get(ch.number) is ch:
            del self.channels[ch.number]
        ch.state = step(ch.state, Signal.RELEASED)
        if by_peer:
            self.emit(ChannelClosed(ch.number, code, text, by_peer=True))


_CONNECTION_HANDLERS: dict[type[base.Frame], Callable[[ConnectionCore, Any], None]] = {
    spec.Connection.StartOk: ConnectionCore._on_start_ok,
    spec.Connection.TuneOk: ConnectionCore._on_tune_ok,
    spec.Connection.Open: ConnectionCore._on_open,
    spec.Connection.Close: ConnectionCore._on_close,
    spec.Connection.CloseOk: ConnectionCore._on_close_ok,
    spec.Connection.UpdateSecret: ConnectionCore._on_update_secret,
}


def transition_error(state: ChannelState, method: base.Frame) -> AMQPError:
    try:
        transition(state, method)
    except AMQPError as err:
        return err
    raise AssertionError("transition unexpectedly allowed")  # pragma: no cover


