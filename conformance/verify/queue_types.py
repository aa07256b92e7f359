"""Queue types: which kind of queue the queue-declaring cases declare (``--amqp-queue-type``).

RabbitMQ chooses a queue's type by the ``x-queue-type`` argument of queue.declare (RabbitMQ's
quorum queue guide, "Declaring"). A case that declares its queue through ``declared_queue`` (or
asks for the ``queue_type`` fixture) runs once per selected type; the other cases (no queue, or a
premise only a classic queue meets: exclusive, auto-delete, non-durable, server-named) run once.

Id scheme: a case's id for the classic type is its plain id (``confirms.multiple-ack-covers-range``
— unchanged, baselines and triage files keep working); for any other type the id gets the type as
a suffix, ``confirms.multiple-ack-covers-range[quorum]``. Result records carry the type in their
``queue_type`` field (``None`` for cases that declare no queue of a selected type).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conformance.protocol.wire import URL

if TYPE_CHECKING:
    from conformance.protocol.raw import RawChannel

CLASSIC = "classic"
QUORUM = "quorum"
QUEUE_TYPES: tuple[str, ...] = (CLASSIC, QUORUM)
SUFFIX_RE = re.compile(r"^(?P<base>.+)\[(?P<type>[a-z]+)\]$")


class PremiseError(RuntimeError):
    """A case asked a queue type for a declaration its premise rules out (a bug in the case: such a
    case must say ``queue_types=("classic",)``)."""


@dataclass(frozen=True)
class QueueType:
    name: str
    argument: str | None  # the x-queue-type value sent; None: send nothing (the broker's default)
    durable_only: bool = False
    refuses: tuple[str, ...] = ()  # queue.declare fields this type refuses (406)


TYPES: Mapping[str, QueueType] = {
    CLASSIC: QueueType(CLASSIC, None),
    QUORUM: QueueType(QUORUM, QUORUM, durable_only=True, refuses=("exclusive", "auto_delete")),
}


def run_case_id(case_id: str, queue_type: str | None) -> str:
    """The id a case's result carries for one queue type (classic: the plain id)."""
    return case_id if queue_type in (None, CLASSIC) else f"{case_id}[{queue_type}]"


def split_case_id(run_id: str) -> tuple[str, str | None]:
    """``confirms.x[quorum]`` → (``confirms.x``, ``quorum``); a plain id → (id, None)."""
    m = SUFFIX_RE.match(run_id)
    return (m["base"], m["type"]) if m else (run_id, None)


def declare_fields(queue_type: str, declare: Mapping[str, Any]) -> dict[str, Any]:
    """queue.declare fields for ``queue_type``: classic ones unchanged (the wire stays as it was);
    a quorum queue is durable and carries ``x-queue-type``; a field the type refuses raises
    :class:`PremiseError` (the case should not be run on that type)."""
    qt = TYPES[queue_type]
    fields = dict(declare)
    if qt.argument is None:
        return fields
    if fields.get("passive"):
        return fields  # a passive declare names an existing queue; its arguments are not compared
    for name in qt.refuses:
        if fields.get(name):
            raise PremiseError(
                f"a {queue_type} queue cannot be {name.replace('_', '-')}: this case's premise "
                f"holds for classic queues only (say queue_types=('classic',))"
            )
    if qt.durable_only:
        fields["durable"] = True
    fields["arguments"] = {**dict(fields.get("arguments") or {}), "x-queue-type": qt.argument}
    return fields


def queue_arguments(queue_type: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``arguments`` table of a declaration of ``queue_type`` (for client-library declares)."""
    qt = TYPES[queue_type]
    found = dict(arguments or {})
    if qt.argument is not None:
        found["x-queue-type"] = qt.argument
    return found


def offered(url: URL, queue_type: str, timeout: float) -> str | None:
    """Does the broker at ``url`` declare a queue of this type? None if it does, else one line with
    what it answered (asked once per run, before any case, on a queue of our own)."""
    from conformance.verify.fresh_channel import NoConnection, fresh_channel, probe_queue_name

    qt = TYPES[queue_type]
    if qt.argument is None:
        return None
    try:
        with fresh_channel(url, timeout) as ch:
            return _ask(ch, qt, probe_queue_name(f"queue-type-probe-{queue_type}"))
    except NoConnection as exc:
        return f"could not connect to ask: {_line(exc.outcome)}"


def _ask(ch: RawChannel, qt: QueueType, name: str) -> str | None:
    """Declare (and delete) a probe queue of type ``qt`` on ``ch``: None when the broker offers the type."""
    from conformance.model.verdicts import CaseOutcome

    try:
        ch.declare_queue(name, **declare_fields(qt.name, {}))
    except CaseOutcome as exc:
        return f"queue.declare with x-queue-type={qt.argument} (durable) answered: {_line(exc)}"
    try:
        ch.delete_queue(name)
    except CaseOutcome:
        pass
    if qt.durable_only:
        # A broker that ignores x-queue-type (an unknown argument, as AMQP allows) declares an
        # ordinary queue: it does not offer this type. Told by what the type refuses.
        plain = f"{name}-transient"
        try:
            ch.declare_queue(plain, arguments={"x-queue-type": qt.argument})
        except CaseOutcome:
            return None  # refused, as a queue of this type must be
        try:
            ch.delete_queue(plain)
        except CaseOutcome:
            pass
        return (
            f"the broker ignores x-queue-type={qt.argument}: a non-durable queue.declare with it was "
            f"answered declare-ok (a {qt.name} queue is durable only), so it declares ordinary queues"
        )
    return None


def _line(exc: Exception) -> str:
    return str(exc).replace("\n", "; ")
