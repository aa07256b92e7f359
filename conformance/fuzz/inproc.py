"""Feed inputs to the reference broker's sans-IO core in process: no sockets, a manual
clock, thousands of inputs a second.

For every input the core must (1) return from every ``receive_data`` within a time bound,
(2) raise nothing, (3) write only well-formed frames whose close reply codes are the
spec's, (4) keep its input buffer within one frame, and (5) end: after the input, a client
connection.close plus the longest timer of the core (close-ok wait, frame-error grace,
handshake timeout) must leave the transport closed (unless the input ended inside a frame,
so that the probe only completes it) and, after the socket is gone, nothing of the connection behind
in the shared broker (listeners, exclusive queues, consumers).  A broken rule is a *finding*.
"""

from __future__ import annotations

import signal
import struct
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pamqp import commands as spec

from conformance.broker import core as broker_core
from conformance.broker.core import CloseTransport, ConnectionCore
from conformance.broker.model import Broker
from conformance.broker.store import MemoryStore

from .sessions import FRAME_END, FRAME_MAX, PROTOCOL_HEADER, method

#: every reply code the spec defines (amqp0-9-1.xml constants) plus 200 for a normal close
SPEC_REPLY_CODES = frozenset(
    {200, 311, 312, 313, 320, 402, 403, 404, 405, 406, 501, 502, 503, 504, 505, 506, 530, 540, 541}
)
CONNECTION_CLOSE = spec.Connection.Close.index
CHANNEL_CLOSE = spec.Channel.Close.index
#: a single receive_data that takes longer than this counts as stuck
FEED_LIMIT = 5.0
_LONGEST_TIMER = (
    max(broker_core.HANDSHAKE_TIMEOUT, broker_core.CLOSE_OK_TIMEOUT, broker_core.FATAL_FRAME_CLOSE_DELAY,
        broker_core.CLIENT_CLOSE_TIMEOUT)
    + 1.0
)
_CLIENT_CLOSE = method(
    spec.Connection.Close(reply_code=200, reply_text="fuzz probe", class_id=0, method_id=0), 0
).encode()


class ManualClock:
    """Monotonic and wall clock the fuzzer moves by hand (timers fire without waiting)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.wall = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def wallclock(self) -> float:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.wall += seconds


@dataclass(frozen=True)
class CoreOutcome:
    codes: tuple[int, ...]  # reply codes of the connection.close / channel.close the core sent
    finding: str | None  # None: every rule held; else which one broke and how
    kind: str = ""  # "exception" | "stuck" | "malformed" | "leak" | "" (no finding)


class _Overrun(BaseException):
    """Raised by the watchdog inside a receive_data that overran FEED_LIMIT."""


@contextmanager
def _watchdog(limit: float) -> Iterator[None]:
    """Interrupt the main thread after ``limit`` s (a spinning core never returns)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(_signum: int, _frame: object) -> None:
        raise _Overrun()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def scan_output(data: bytes) -> tuple[list[int], str | None]:
    """Reply codes in the server's output, or why the output is not a frame sequence."""
    codes: list[int] = []
    pos = 0
    if data.startswith(b"AMQP"):
        if data[:8] != PROTOCOL_HEADER:
            return codes, f"bad protocol header written: {data[:8]!r}"
        pos = 8
    while pos < len(data):
        if len(data) - pos < 8:
            return codes, f"truncated frame at octet {pos}"
        ftype, _ch, size = struct.unpack_from(">BHI", data, pos)
        end = pos + 7 + size
        if ftype not in (1, 2, 3, 8) or end >= len(data) or data[end] != FRAME_END:
            return codes, f"malformed frame at octet {pos}: type {ftype}, size {size}"
        if size > FRAME_MAX - 8:
            return codes, f"frame of {size} octets exceeds frame-max"
        if ftype == 1 and size >= 6:
            index = int.from_bytes(data[pos + 7 : pos + 11], "big")
            if index in (CONNECTION_CLOSE, CHANNEL_CLOSE):
                codes.append(int.from_bytes(data[pos + 11 : pos + 13], "big"))
        pos = end + 1
    return codes, None


class CoreHarness:
    """One shared ``Broker`` (like one server process) that many connections are fed to."""

    def __init__(self, *, renew_every: int = 500) -> None:
        self.renew_every = renew_every
        self._fed = 0
        self.clock = ManualClock()
        self.broker = self._new_broker()

    def _new_broker(self) -> Broker:
        return Broker(MemoryStore(), clock=self.clock, wallclock=self.clock.wallclock)

    def renew(self) -> None:
        self.broker = self._new_broker()

    def run(self, pieces: list[bytes]) -> CoreOutcome:
        """Feed one input (already cut into the pieces a socket would deliver)."""
        self._fed += 1
        if self._fed % self.renew_every == 0:
            self.renew()  # the in-memory log and the queues of earlier inputs add up
        try:
            outcome = self._run(pieces)
        except _Overrun:
            outcome = CoreOutcome((), f"receive_data did not return within {FEED_LIMIT} s", "stuck")
        except Exception as exc:  # noqa: BLE001 - an exception out of the core IS the finding
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            outcome = CoreOutcome(
                (), f"{type(exc).__name__}: {exc} at {tb.filename}:{tb.lineno}", "exception"
            )
        if outcome.finding is not None:
            self.renew()  # never let a broken broker state leak into the next input
        return outcome

    def _run(self, pieces: list[bytes]) -> CoreOutcome:
        core = ConnectionCore(self.broker, heartbeat=0)
        out: list[bytes] = []
        closed = False
        bound = 2 * FRAME_MAX + 16
        aligned = True
        for piece in [*pieces, _CLIENT_CLOSE]:
            # the probe is a frame of its own only if no partial frame precedes it
            aligned = not core._in
            with _watchdog(FEED_LIMIT):
                core.receive_data(piece)
            if len(core._in) > bound:
                return CoreOutcome((), f"input buffer holds {len(core._in)} octets", "leak")
            out.append(core.data_to_send())
            closed = closed or any(isinstance(e, CloseTransport) for e in core.events())
        self.clock.advance(_LONGEST_TIMER)
        core.tick()
        out.append(core.data_to_send())
        closed = closed or any(isinstance(e, CloseTransport) for e in core.events())
        codes, bad = scan_output(b"".join(out))
        state = core.state.value
        core.connection_lost()  # what the shell does once the socket is gone
        core.events()
        if bad is not None:
            return CoreOutcome(tuple(codes), bad, "malformed")
        unknown = [c for c in codes if c not in SPEC_REPLY_CODES]
        if unknown:
            return CoreOutcome(tuple(codes), f"reply codes outside the spec: {unknown}", "malformed")
        if not closed and aligned:
            # (when the probe only completes a partial frame of the input, the core rightly
            # waits for more: the peer's EOF, not a timer, ends such a connection)
            return CoreOutcome(
                tuple(codes), f"connection not closed after close + timers (state {state})", "stuck"
            )
        leak = self._leftovers(core)
        if leak is not None:
            return CoreOutcome(tuple(codes), leak, "leak")
        return CoreOutcome(tuple(codes), None)

    def _leftovers(self, core: ConnectionCore) -> str | None:
        if core in self.broker.listeners:
            return "closed connection still a broker listener"
        for vh in self.broker.vhosts.values():
            for q in vh.queues.values():
                if q.exclusive_owner is core:
                    return f"exclusive queue {q.name!r} outlived its connection"
                for c in q.consumers:
                    if getattr(c.sink, "conn", None) is core:
                        return f"consumer {c.tag!r} on {q.name!r} outlived its connection"
        return None


