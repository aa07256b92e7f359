"""Building blocks for mutants: generic faults parametrised by the frames they touch.

Each class breaks one kind of promise (rewrite a field, drop, duplicate, hold, reorder, answer in
the broker's name); the catalogue instantiates them with the exact frames and fields.
Per-connection state lives in ``st`` (the proxy gives every connection its own dict); every
fault records which channels are in confirm or tx mode, because many promises only hold there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from conformance.protocol.proxy import TO_CLIENT, Fault, Frame, assemble, replace
from conformance.protocol.wire import CONTENT_METHODS

Change = Callable[[Any], dict[str, Any]]
When = Callable[[dict[str, Any], int, Any], bool]


def _always(st: dict[str, Any], channel: int, frm: Any) -> bool:
    return True


def in_confirm_mode(st: dict[str, Any], channel: int, frm: Any) -> bool:
    return channel in st.get("confirm", set())


def in_tx_mode(st: dict[str, Any], channel: int, frm: Any) -> bool:
    return channel in st.get("tx", set())


class Tracking(Fault):
    """Records the channels in confirm / tx mode (from what the client asked for)."""

    name = "tracking"

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Confirm.Select):
            st.setdefault("confirm", set()).add(channel)
        elif isinstance(frm, spec.Tx.Select):
            st.setdefault("tx", set()).add(channel)
        elif isinstance(frm, spec.Basic.Publish) and channel in st.get("confirm", set()):
            st.setdefault("published", {})[channel] = st.get("published", {}).get(channel, 0) + 1
        elif isinstance(frm, spec.Channel.Open):
            for key in ("confirm", "tx"):
                st.get(key, set()).discard(channel)
            st.get("published", {}).pop(channel, None)
        return self.broker_frame(st, channel, frm)

    def broker_frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        return [(channel, frm)]


class Rewrite(Tracking):
    """Frames of ``types`` going one way get the fields ``change(frame)`` returns."""

    def __init__(self, name: str, types: type | tuple[type, ...], change: Change, *, to_client: bool = True,
                 when: When = _always) -> None:
        self.name, self.types, self.change, self.client_side, self.when = name, types, change, to_client, when

    def _apply(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, self.types) and self.when(st, channel, frm):
            changes = self.change(frm)
            if changes:
                return [(channel, replace(frm, **changes))]
        return [(channel, frm)]

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        return self._apply(st, channel, frm) if self.client_side else [(channel, frm)]

    def broker_frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        return [(channel, frm)] if self.client_side else self._apply(st, channel, frm)


class Drop(Tracking):
    """Method frames of ``types`` from the broker are lost (the ``first`` only, or all)."""

    def __init__(
        self, name: str, types: type | tuple[type, ...], *, when: When = _always, first: bool = False
    ) -> None:
        self.name, self.types, self.when, self.first = name, types, when, first

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, self.types) and self.when(st, channel, frm):
            seen = st.setdefault("dropped", set())
            if not self.first or channel not in seen:
                seen.add(channel)
                return []
        return [(channel, frm)]


class Duplicate(Tracking):
    """Method frames of ``types`` from the broker arrive twice."""

    def __init__(self, name: str, types: type | tuple[type, ...], *, when: When = _always) -> None:
        self.name, self.types, self.when = name, types, when

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, self.types) and self.when(st, channel, frm):
            return [(channel, frm), (channel, replace(frm))]
        return [(channel, frm)]


class SwapPairs(Tracking):
    """Two consecutive method frames of ``types`` on a channel arrive in swapped order; a lone
    held frame is released, in place, by the next other frame on its channel."""

    def __init__(self, name: str, types: type | tuple[type, ...], *, when: When = _always) -> None:
        self.name, self.types, self.when = name, types, when

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        held = st.setdefault("held", {})
        if isinstance(frm, self.types) and self.when(st, channel, frm):
            if channel in held:
                return [(channel, frm), held.pop(channel)]
            held[channel] = (channel, frm)
            return []
        return ([held.pop(channel)] if channel in held else []) + [(channel, frm)]


class AnswerInstead(Tracking):
    """The client's ``request`` never reaches the broker; the proxy answers ``reply`` itself,
    as a broker that acknowledges a method without carrying it out."""

    def __init__(
        self, name: str, request: type, reply: Callable[[Any], Any], *, when: When = _always
    ) -> None:
        self.name, self.request, self.reply, self.when = name, request, reply, when

    def broker_frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, self.request) and self.when(st, channel, frm):
            st.setdefault(TO_CLIENT, []).append((channel, self.reply(frm)))
            return []
        return [(channel, frm)]


class Messages(Tracking):
    """Base for faults on whole messages from the broker: a content method (basic.deliver,
    basic.get-ok, basic.return), its header and its body frames, handed over complete."""

    kinds: tuple[type, ...] = CONTENT_METHODS

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        unit = assemble(st.setdefault("msg", {}), channel, frm, CONTENT_METHODS)
        if unit is None:
            return self.frame(st, channel, frm)
        if not unit:
            return []
        if isinstance(unit[0][1], self.kinds):
            return self.message(st, channel, unit)
        return self.other(st, channel, unit)

    def message(self, st: dict[str, Any], channel: int, unit: list[Frame]) -> list[Frame]:
        return unit

    def other(self, st: dict[str, Any], channel: int, unit: list[Frame]) -> list[Frame]:
        return unit

    def frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        return [(channel, frm)]


def join_body(unit: list[Frame]) -> bytes:
    return b"".join(f.value for _c, f in unit if isinstance(f, ContentBody))


def with_content(unit: list[Frame], *, body: bytes | None = None, properties: Any = None) -> list[Frame]:
    """The message ``unit`` with a new body and/or properties, re-framed in one body frame."""
    channel, method = unit[0]
    hdr = next(f for _c, f in unit if isinstance(f, ContentHeader))
    new_body = join_body(unit) if body is None else body
    props = hdr.properties if properties is None else properties
    out: list[Frame] = [(channel, method), (channel, ContentHeader(0, len(new_body), props))]
    if new_body:
        out.append((channel, ContentBody(new_body)))
    return out


class EditMessage(Messages):
    """Messages of ``kinds`` get a new body (``body(old)``) and/or properties (``props(old)``)."""

    def __init__(self, name: str, kinds: tuple[type, ...], *, body: Callable[[bytes], bytes] | None = None,
                 props: Callable[[Any], Any] | None = None) -> None:
        self.name, self.kinds, self.body_fn, self.props_fn = name, kinds, body, props

    def message(self, st: dict[str, Any], channel: int, unit: list[Frame]) -> list[Frame]:
        hdr = next(f for _c, f in unit if isinstance(f, ContentHeader))
        body = self.body_fn(join_body(unit)) if self.body_fn else None
        props = self.props_fn(hdr.properties) if self.props_fn else None
        return with_content(unit, body=body, properties=props)


class DropMessage(Messages):
    """Messages of ``kinds`` are lost (the ``first`` per channel, or all); ``instead`` may put a
    method in their place (e.g. basic.get-empty for a basic.get-ok)."""

    def __init__(self, name: str, kinds: tuple[type, ...], *, first: bool = False,
                 instead: Callable[[Any], Any] | None = None, when: When = _always) -> None:
        self.name, self.kinds, self.first, self.instead, self.when = name, kinds, first, instead, when

    def message(self, st: dict[str, Any], channel: int, unit: list[Frame]) -> list[Frame]:
        seen = st.setdefault("dropped", set())
        if not self.when(st, channel, unit[0][1]) or (self.first and channel in seen):
            return unit
        seen.add(channel)
        return [(channel, self.instead(unit[0][1]))] if self.instead else []


class DuplicateMessage(Messages):
    """Messages of ``kinds`` arrive twice (same method fields, same content)."""

    def __init__(self, name: str, kinds: tuple[type, ...]) -> None:
        self.name, self.kinds = name, kinds

    def message(self, st: dict[str, Any], channel: int, unit: list[Frame]) -> list[Frame]:
        return unit + [(c, replace(f)) for c, f in unit]


class HoldMessage(Messages):
    """Messages of ``kinds`` are held back until the broker sends a method of ``until`` on the
    same channel (then they follow it), or any later method if ``until`` is None."""

    def __init__(self, name: str, kinds: tuple[type, ...], *, until: tuple[type, ...] | None = None,
                 when: When = _always) -> None:
        self.name, self.kinds, self.until, self.when = name, kinds, until, when

    def message(self, st: dict[str, Any], channel: int, unit: list[Frame]) -> list[Frame]:
        if not self.when(st, channel, unit[0][1]):
            return unit
        st.setdefault("held", {}).setdefault(channel, []).extend(unit)
        return []

    def frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        held = st.setdefault("held", {})
        if channel in held and (self.until is None or isinstance(frm, self.until)):
            return [(channel, frm), *held.pop(channel)]
        if channel in held and isinstance(frm, (spec.Channel.Close, spec.Connection.Close)):
            return [(channel, frm)]  # a broker that closes never sends what it held
        return [(channel, frm)]


class EscalateChannelClose(Tracking):
    """A channel error becomes a connection error: channel.close from the broker is sent as
    connection.close with the same reply; the client's connection.close-ok ends the connection."""

    name = "escalate"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Channel.Close) and channel:
            st["escalated"] = True
            return [(0, spec.Connection.Close(reply_code=frm.reply_code, reply_text=frm.reply_text,
                                              class_id=frm.class_id, method_id=frm.method_id))]
        return [(channel, frm)]

    def broker_frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if st.get("escalated"):
            return []  # the client believes the connection is closing; the broker never hears more
        return [(channel, frm)]


class CloseThenEscalate(Tracking):
    """A channel error is reported correctly, then the broker ends the whole connection anyway
    (connection.close 504 right after the channel.close); or, with ``silent``, the connection goes
    silent instead: nothing the broker sends after the channel.close reaches the client."""

    def __init__(self, silent: bool = False) -> None:
        self.silent = silent
        self.name = "silent-after-channel-error" if silent else "close-then-escalate"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if st.get("escalated"):
            return []
        if isinstance(frm, spec.Channel.Close) and channel:
            st["escalated"] = True
            if self.silent:
                return [(channel, frm)]
            return [(channel, frm), (0, spec.Connection.Close(
                reply_code=504, reply_text="CHANNEL_ERROR - escalated by the mutant",
                class_id=frm.class_id, method_id=frm.method_id))]
        return [(channel, frm)]

    def broker_frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if st.get("escalated") and not self.silent:
            return []  # the client believes the connection is closing; the broker never hears more
        return [(channel, frm)]


class ConsistentTags(Tracking):
    """Server-generated consumer tags are renamed, consistently in both directions."""

    name = "consistent-tags"
    PREFIX = "mutated."

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        own = st.setdefault("server_tags", set())
        if isinstance(frm, spec.Basic.ConsumeOk) and channel in st.get("asked_empty", set()):
            st["asked_empty"].discard(channel)
            own.add(frm.consumer_tag)
        if (
            isinstance(
                frm, (spec.Basic.ConsumeOk, spec.Basic.Deliver, spec.Basic.Cancel, spec.Basic.CancelOk)
            )
            and isinstance(frm.consumer_tag, str)
            and frm.consumer_tag in own
        ):
            return [(channel, replace(frm, consumer_tag=self.PREFIX + frm.consumer_tag))]
        return [(channel, frm)]

    def broker_frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Consume) and not frm.consumer_tag:
            st.setdefault("asked_empty", set()).add(channel)
        if isinstance(frm, (spec.Basic.Cancel, spec.Basic.Consume)) and isinstance(frm.consumer_tag, str) \
                and frm.consumer_tag.startswith(self.PREFIX):
            return [(channel, replace(frm, consumer_tag=frm.consumer_tag[len(self.PREFIX):]))]
        return [(channel, frm)]


class InOrderAckAsMultiple(Tracking):
    """A confirm of tag n with multiple=false becomes multiple=true when every tag below n is
    already confirmed on that channel (so it covers exactly the same messages)."""

    name = "in-order-ack-as-multiple"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, (spec.Basic.Ack, spec.Basic.Nack)) and in_confirm_mode(st, channel, frm):
            done = st.setdefault("confirmed", {}).setdefault(channel, set())
            tag = frm.delivery_tag
            if frm.multiple:
                done.update(range(1, tag + 1))
                return [(channel, frm)]
            covered = all(t in done for t in range(1, tag))
            done.add(tag)
            if covered and tag > 1:
                return [(channel, replace(frm, multiple=True))]
        return [(channel, frm)]


class FirstAckCoversAll(Tracking):
    """The first confirm on a channel acknowledges, with multiple=true, every publish sent so far,
    before the broker confirmed them."""

    name = "first-ack-covers-all"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Ack) and in_confirm_mode(st, channel, frm):
            firsts = st.setdefault("first_ack", set())
            if channel not in firsts:
                firsts.add(channel)
                top = st.get("published", {}).get(channel, frm.delivery_tag)
                if top > frm.delivery_tag:
                    return [(channel, replace(frm, delivery_tag=top, multiple=True))]
        return [(channel, frm)]


class EditPublished(Tracking):
    """Messages the client publishes reach the broker with the properties ``props(old)`` gives
    (the content header that follows basic.publish; the body is untouched)."""

    def __init__(self, name: str, props: Callable[[Any], Any]) -> None:
        self.name, self.props_fn = name, props

    def broker_frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, ContentHeader):
            return [(channel, replace(frm, properties=self.props_fn(frm.properties)))]
        return [(channel, frm)]


class Smuggle(Messages):
    """A property or header the broker acts on travels past it unseen: on the way in ``hide``
    moves it into a header of its own (the broker carries unknown headers as they are), on the
    way out ``show`` puts it back in place, in deliveries and gets. What the client sees is a
    broker that ignored the property (kept it, routed or accepted as if it were absent)."""

    kinds = (spec.Basic.Deliver, spec.Basic.GetOk)

    def __init__(self, name: str, hide: Callable[[Any, dict[str, Any]], Any],
                 show: Callable[[Any], Any]) -> None:
        self.name, self.hide, self.show = name, hide, show

    def broker_frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Connection.StartOk):
            st["login_user"] = plain_user(frm)
        if isinstance(frm, ContentHeader):
            return [(channel, replace(frm, properties=self.hide(frm.properties, st)))]
        return [(channel, frm)]

    def message(self, st: dict[str, Any], channel: int, unit: list[Frame]) -> list[Frame]:
        hdr = next(f for _c, f in unit if isinstance(f, ContentHeader))
        return with_content(unit, properties=self.show(hdr.properties))


def plain_user(start_ok: Any) -> str | None:
    """The user a connection.start-ok logs in as (PLAIN's response is NUL user NUL password)."""
    raw = start_ok.response
    parts = (raw if isinstance(raw, bytes) else str(raw).encode()).split(b"\0")
    return parts[1].decode() if start_ok.mechanism == "PLAIN" and len(parts) == 3 else None
