"""Connection and channel states and the ONE transition table that drives both.

``TRANSITIONS[(state, method class)]`` gives the state after the method has been handled
successfully.  A pair that is missing from the table is a protocol error; ``violation``
turns it into the reply code the spec (or, where the spec is silent, RabbitMQ 3.10)
prescribes.  Handlers may still raise errors of their own (e.g. 404 on a missing queue);
the table only decides whether a method may be *considered* in a state.
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

from pamqp import base
from pamqp import commands as spec

from .errors import AMQPError, ReplyCode


class ConnectionState(Enum):
    # Members are singletons: hash by identity (C speed) rather than Enum's Python-level
    # hash of the name -- the transition table is looked up for every method frame.
    __hash__ = object.__hash__

    AWAITING_HEADER = "awaiting-protocol-header"
    AWAITING_START_OK = "starting"
    AWAITING_TUNE_OK = "tuning"
    AWAITING_OPEN = "opening"
    OPEN = "running"
    CLOSING = "closing"  # we sent connection.close, waiting for close-ok
    CLOSED = "closed"


class ChannelState(Enum):
    __hash__ = object.__hash__  # as ConnectionState

    CLOSED = "closed"  # never opened, or close handshake finished: the id is free
    OPEN = "open"
    CLOSING = "closing"  # we sent channel.close, waiting for close-ok


class Signal(Enum):
    """What moves a state besides a client method: the protocol header, our own closes,
    timers and the socket.  They go through the same table as methods."""

    HEADER_ACCEPTED = "protocol header accepted"
    HEADER_REFUSED = "protocol header refused"
    SERVER_CLOSE = "the server sent close"  # connection.close / channel.close, awaiting close-ok
    ABORT = "closed without the close handshake"  # handshake errors, timeouts, missed heartbeats
    SOCKET_LOST = "the socket went away"
    RELEASED = "the channel's close handshake finished"


class Disposition(Enum):
    """What to do with a method that is not in the table."""

    DISCARD = "discard"


C, Ch = ConnectionState, ChannelState

#: methods a client may send on an open channel; all leave it open (errors aside).
_CHANNEL_METHODS: tuple[type[base.Frame], ...] = (
    spec.Channel.Flow,
    spec.Exchange.Declare,
    spec.Exchange.Delete,
    spec.Exchange.Bind,
    spec.Exchange.Unbind,
    spec.Queue.Declare,
    spec.Queue.Bind,
    spec.Queue.Purge,
    spec.Queue.Delete,
    spec.Queue.Unbind,
    spec.Basic.Qos,
    spec.Basic.Consume,
    spec.Basic.Cancel,
    spec.Basic.Publish,
    spec.Basic.Get,
    spec.Basic.Ack,
    spec.Basic.Reject,
    spec.Basic.RecoverAsync,
    spec.Basic.Recover,
    spec.Basic.Nack,
    spec.Tx.Select,
    spec.Tx.Commit,
    spec.Tx.Rollback,
    spec.Confirm.Select,
)

_LIVE = (C.AWAITING_HEADER, C.AWAITING_START_OK, C.AWAITING_TUNE_OK, C.AWAITING_OPEN, C.OPEN, C.CLOSING)

TRANSITIONS: dict[tuple[Enum, type[base.Frame] | Signal], Enum] = {
    # -- connection (channel 0) --------------------------------------------------------
    (C.AWAITING_START_OK, spec.Connection.StartOk): C.AWAITING_TUNE_OK,
    (C.AWAITING_TUNE_OK, spec.Connection.TuneOk): C.AWAITING_OPEN,
    (C.AWAITING_OPEN, spec.Connection.Open): C.OPEN,
    (C.AWAITING_OPEN, spec.Connection.Close): C.CLOSED,
    (C.OPEN, spec.Connection.Close): C.CLOSED,
    # RabbitMQ's extension (OAuth 2 token refresh): the connection stays open
    (C.OPEN, spec.Connection.UpdateSecret): C.OPEN,
    # spec connection.close: "After sending this method, any received methods except
    # Close and Close-OK MUST be discarded."  A crossing close counts as close-ok.
    (C.CLOSING, spec.Connection.CloseOk): C.CLOSED,
    (C.CLOSING, spec.Connection.Close): C.CLOSED,
    # -- channels ------------------------------------------------------------------------
    (Ch.CLOSED, spec.Channel.Open): Ch.OPEN,
    (Ch.OPEN, spec.Channel.Close): Ch.CLOSED,
    # spec channel.close: same discard rule as the connection.  RabbitMQ answers a
    # crossing channel.close with close-ok and keeps waiting for the client's close-ok.
    (Ch.CLOSING, spec.Channel.CloseOk): Ch.CLOSED,
    (Ch.CLOSING, spec.Channel.Close): Ch.CLOSING,
    **{(Ch.OPEN, m): Ch.OPEN for m in _CHANNEL_METHODS},
    # -- signals ---------------------------------------------------------------------------
    (C.AWAITING_HEADER, Signal.HEADER_ACCEPTED): C.AWAITING_START_OK,
    # spec 4.2.2: reject the header by writing ours and closing the socket
    (C.AWAITING_HEADER, Signal.HEADER_REFUSED): C.CLOSED,
    **{(s, Signal.SERVER_CLOSE): C.CLOSING for s in _LIVE if s is not C.CLOSING},
    **{(s, Signal.ABORT): C.CLOSED for s in _LIVE},
    **{(s, Signal.SOCKET_LOST): C.CLOSED for s in _LIVE},
    (Ch.OPEN, Signal.SERVER_CLOSE): Ch.CLOSING,
    (Ch.OPEN, Signal.RELEASED): Ch.CLOSED,  # the client closed it (close-ok sent)
    (Ch.CLOSING, Signal.RELEASED): Ch.CLOSED,  # the client's close-ok arrived
}


#: a connection state or a channel state; the table never moves one into the other.
S = TypeVar("S", ConnectionState, ChannelState)


def _same_kind(state: S, nxt: Enum) -> S:
    if not isinstance(nxt, type(state)):
        raise AssertionError(f"the table moves {state} to {nxt}, a state of another kind")
    return nxt


def transition(state: S, method: base.Frame) -> S | Disposition:
    """The next state for ``method`` in ``state``, DISCARD, or raise the spec's error."""
    key = (state, type(method))
    if key in TRANSITIONS:
        return _same_kind(state, TRANSITIONS[key])
    if state in (C.CLOSING, Ch.CLOSING):
        return Disposition.DISCARD
    raise violation(state, method)


def step(state: S, signal: Signal) -> S:
    """The state after ``signal``; a pair missing from the table is a bug of the core."""
    try:
        nxt = TRANSITIONS[(state, signal)]
    except KeyError:
        raise AssertionError(f"no transition for {signal.name} in state {state}") from None
    return _same_kind(state, nxt)


def violation(state: Enum, method: base.Frame) -> AMQPError:
    class_id, method_id = method.index >> 16, method.index & 0xFFFF
    if state is Ch.CLOSED:
        # spec 4.2.3 / RabbitMQ: a frame on a channel that is not open is a connection
        # error CHANNEL_ERROR ("expected 'channel.open'").
        err = AMQPError(ReplyCode.CHANNEL_ERROR, "expected 'channel.open'")
    elif state is Ch.OPEN and isinstance(method, spec.Channel.Open):
        err = AMQPError(ReplyCode.CHANNEL_ERROR, "second 'channel.open' seen")
    elif isinstance(state, ChannelState):
        # spec: "COMMAND_INVALID - The client sent an invalid sequence of frames,
        # attempting to perform an operation that was considered invalid by the server."
        # (RabbitMQ: "unimplemented method" for server-to-client methods.)
        err = AMQPError(ReplyCode.COMMAND_INVALID, "unimplemented method")
    else:
        # RabbitMQ rabbit_reader: "unexpected method in connection state ~w" (504).
        err = AMQPError(ReplyCode.CHANNEL_ERROR, f"unexpected method in connection state {state.value}")
    return err.with_method(class_id, method_id)


def is_connection_method(method: base.Frame) -> bool:
    return method.index >> 16 == spec.Connection.frame_id
