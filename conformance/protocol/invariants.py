"""The wire invariant monitor: properties true of every AMQP exchange, whatever the scenario.

Every raw connection a case opens feeds the frames it sends and receives (after the handshake)
into a :class:`WireMonitor`. A frame that breaks an invariant is recorded as an
:class:`~conformance.protocol.errors.InvariantViolation` in the running case's :class:`CaseMonitor`; the
plugin hands them to :func:`~conformance.model.verdicts.decide`, which makes the case FAIL naming the
invariant, even when the case body itself passed. The monitor only reads: it never changes what
the client does.

``amqp-conformance cases --invariants`` lists :data:`INVARIANTS`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from pamqp import commands as spec
from pamqp import header as pheader
from pamqp.body import ContentBody

from conformance.protocol import fielddomains
from conformance.protocol.case_slot import CaseSlot
from conformance.protocol.errors import InvariantViolation
from conformance.protocol.wire import decoded, describe

FRAME_OVERHEAD = 8  # type, channel, size, frame-end: frame-max counts the whole frame


@dataclass(frozen=True)
class Invariant:
    id: str
    text: str
    rule: str  # the spec rule, field or document that makes it true of every exchange


INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        "wire.delivery-tags-consecutive",
        "delivery tags of basic.deliver and basic.get-ok on a channel are 1, 2, 3 … (one more each time, "
        "starting again when the channel is reopened)",
        "domain delivery-tag (channel-specific, non-zero); RabbitMQ docs, Consumer Acknowledgements "
        "§ Delivery Identifiers: monotonically growing positive integers",
    ),
    Invariant(
        "wire.nothing-after-channel-close",
        "after the broker's channel.close, it sends nothing on that channel but channel.close-ok "
        "until the client opens it again",
        "channel.close/stability",
    ),
    Invariant(
        "wire.nothing-after-connection-close",
        "after the broker's connection.close, it sends nothing but connection.close-ok",
        "connection.close/stability",
    ),
    Invariant(
        "wire.frame-max",
        "no frame from the broker is larger than the negotiated frame-max",
        (
            "field connection.tune-ok frame-max (the negotiated maximum frame size, including frame "
            "header and end-byte)"
        ),
    ),
    Invariant(
        "wire.body-size",
        "the body frames after a content header add up to exactly its body-size, with no other "
        "frame on that channel in between",
        "amqp0-9-1 § 4.2.6 content framing (content header body size; content is sent whole)",
    ),
    Invariant(
        "wire.channel-opened",
        "the broker sends frames only on channel 0 and channels the client opened",
        "channel.open (a channel exists once the client opens it)",
    ),
    Invariant(
        "wire.confirms-settle-once",
        "a publisher confirm (basic.ack / basic.nack) never settles a publish again: its tag is "
        "above every tag a multiple confirm already covered and was not confirmed before",
        (
            "RabbitMQ docs, Publisher Confirms (each publish is confirmed once; multiple covers all "
            "up to the tag)"
        ),
    ),
    Invariant(
        "wire.reserved-fields",
        "every reserved field of a method from the broker holds its type's empty value "
        "(shortstr and longstr \"\", integers 0, bit 0)",
        'amqp0-9-1.xml fields with reserved="1" (channel.open-ok, connection.open-ok and '
        "basic.get-empty reserved-1)",
    ),
    Invariant(
        "wire.field-asserts",
        "every field of a method from the broker that the spec asserts notnull is non-zero and "
        "non-empty (reply-code, reply-text, queue.declare-ok queue)",
        'amqp0-9-1.xml <assert check="notnull"/> on the field or its domain',
    ),
)
BY_ID: dict[str, Invariant] = {i.id: i for i in INVARIANTS}
MAX_VIOLATIONS = 20  # per case: the first ones are the evidence, the rest would only repeat it


class CaseMonitor:
    """The violations of one case, from all its connections (reader threads add to it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.violations: list[InvariantViolation] = []

    def violate(self, invariant_id: str, detail: str) -> None:
        inv = BY_ID[invariant_id]
        with self._lock:
            if len(self.violations) < MAX_VIOLATIONS:
                self.violations.append(InvariantViolation(inv.id, inv.text, inv.rule, detail))


@dataclass
class _Channel:
    """What the monitor knows of one channel since the client last opened it."""

    open: bool = True
    closed_by_broker: bool = False
    last_tag: int = 0  # the last delivery tag (deliver / get-ok)
    confirming: bool = False
    confirmed_upto: int = 0  # every tag up to this was covered by a multiple confirm
    confirmed: set[int] | None = None  # single confirms above confirmed_upto
    content: tuple[int, int] | None = None  # (body size announced, bytes so far) while a body is due
    content_method: bool = False  # a content method came; its header is due


class WireMonitor:
    """The invariants of one connection, fed its frames in wire order in each direction."""

    def __init__(self, case: CaseMonitor, label: str = "") -> None:
        self.case = case
        self.label = label
        self.frame_max = 0  # 0: not negotiated yet (the handshake is not checked)
        self.channels: dict[int, _Channel] = {}
        self.connection_closed = False
        # The case thread reports what it sends (before it is on the wire, so the broker's answer
        # never comes first), the reader thread what it receives.
        self._lock = threading.Lock()

    def _violate(self, invariant_id: str, channel: int, detail: str) -> None:
        where = f"{self.label} " if self.label else ""
        self.case.violate(invariant_id, f"{where}channel {channel}: {detail}")

    # -- what the client sends ----------------------------------------------------------------

    def sent(self, channel: int, frm: Any) -> None:
        with self._lock:
            self._sent(channel, frm)

    def _sent(self, channel: int, frm: Any) -> None:
        if isinstance(frm, spec.Channel.Open):
            self.channels[channel] = _Channel()
        elif isinstance(frm, spec.Confirm.Select) and channel in self.channels:
            self.channels[channel].confirming = True

    # -- what the broker sends ----------------------------------------------------------------

    def received(self, channel: int, frm: Any, size: int) -> None:
        """One frame from the broker; ``size`` is its payload size as framed on the wire."""
        with self._lock:
            self._received(channel, frm, size)

    def _received(self, channel: int, frm: Any, size: int) -> None:
        for invariant_id, detail in fielddomains.breaches(frm):
            self._violate(invariant_id, channel, detail)
        if self.frame_max and size + FRAME_OVERHEAD > self.frame_max:
            self._violate(
                "wire.frame-max",
                channel,
                f"a {size + FRAME_OVERHEAD}-byte frame ({describe(frm)}) over frame-max {self.frame_max}",
            )
        if self.connection_closed and not isinstance(frm, spec.Connection.CloseOk):
            self._violate(
                "wire.nothing-after-connection-close", channel, f"{describe(frm)} after connection.close"
            )
        if channel == 0:
            if isinstance(frm, spec.Connection.Close):
                self.connection_closed = True
            return
        ch = self.channels.get(channel)
        if ch is None:
            self._violate(
                "wire.channel-opened", channel, f"{describe(frm)} on a channel the client never opened"
            )
            self.channels[channel] = ch = _Channel()
        if ch.closed_by_broker and not isinstance(frm, spec.Channel.CloseOk):
            self._violate(
                "wire.nothing-after-channel-close",
                channel,
                f"{describe(frm)} after the broker's channel.close",
            )
        self._content(ch, channel, frm)
        if isinstance(frm, spec.Channel.Close):
            ch.closed_by_broker = True
        elif isinstance(frm, (spec.Basic.Deliver, spec.Basic.GetOk)):
            tag = decoded(frm.delivery_tag)
            if tag != ch.last_tag + 1:
                self._violate("wire.delivery-tags-consecutive", channel,
                              f"{describe(frm)} after tag {ch.last_tag} (expected tag {ch.last_tag + 1})")
            ch.last_tag = max(ch.last_tag, tag)
        elif isinstance(frm, (spec.Basic.Ack, spec.Basic.Nack)) and ch.confirming:
            self._confirm(ch, channel, frm)

    def _content(self, ch: _Channel, channel: int, frm: Any) -> None:
        """Content framing: method, then a header, then bodies adding up to its body size."""
        if isinstance(frm, pheader.ContentHeader):
            if not ch.content_method:
                self._violate("wire.body-size", channel, "a content header with no content method before it")
            ch.content_method = False
            ch.content = (int(frm.body_size), 0) if frm.body_size else None
            return
        if isinstance(frm, ContentBody):
            if ch.content is None:
                self._violate(
                    "wire.body-size",
                    channel,
                    f"a {len(frm.value or b'')}-byte body frame beyond the announced body size",
                )
                return
            size, got = ch.content[0], ch.content[1] + len(frm.value or b"")
            if got > size:
                self._violate(
                    "wire.body-size", channel, f"body frames add up to {got} bytes, header said {size}"
                )
                ch.content = None
            else:
                ch.content = None if got == size else (size, got)
            return
        if ch.content is not None or ch.content_method:
            due = f"{ch.content[1]} of {ch.content[0]} body bytes" if ch.content else "the content header"
            self._violate("wire.body-size", channel, f"{describe(frm)} while {due} were still due")
            ch.content = None
        ch.content_method = isinstance(frm, (spec.Basic.Deliver, spec.Basic.GetOk, spec.Basic.Return))

    def _confirm(self, ch: _Channel, channel: int, frm: spec.Basic.Ack | spec.Basic.Nack) -> None:
        tag = int(frm.delivery_tag)
        done = ch.confirmed if ch.confirmed is not None else set()
        if frm.multiple and tag == 0:
            return  # "everything so far": covers nothing new by name
        if tag <= ch.confirmed_upto or tag in done:
            self._violate(
                "wire.confirms-settle-once",
                channel,
                f"{describe(frm)} settles tag {tag} again (already covered up to {ch.confirmed_upto}"
                f"{', and ' + str(tag) + ' singly' if tag in done else ''})",
            )
        if frm.multiple:
            ch.confirmed_upto = max(ch.confirmed_upto, tag)
            done = {t for t in done if t > ch.confirmed_upto}
        else:
            done.add(tag)
        ch.confirmed = done


# The running case's CaseMonitor: the plugin calls begin() and end() around every case.
_case: CaseSlot[CaseMonitor] = CaseSlot(CaseMonitor)
begin = _case.begin
current = _case.current
end = _case.end


def listing() -> list[str]:
    """``amqp-conformance cases --invariants``: one line per invariant."""
    return [f"{i.id}  {i.text}  [{i.rule}]" for i in INVARIANTS]
