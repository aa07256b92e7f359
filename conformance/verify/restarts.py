"""Restart steps: restart a case's private broker, look at it afterwards, and leave it clean.

A restart case (``needs_restart=True``, the ``restartable`` fixture) makes something durable on a
broker private to its worker, restarts that broker and looks at what survived::

    ch = amqp.channel(restartable.url)
    ch.declare_queue(q, durable=True)
    ...
    with restarted(amqp, restartable, queues=(q,)) as url:
        ev = amqp.channel(url).get(q, no_ack=True)
        ctx.check(...)

What the case made durable outlives the case on that broker, and the next restart case of the
worker shares it: :func:`restarted` deletes it after the block, whatever the block concluded.

Before the block judges the broker, :func:`restarted` proves the restart happened: a connection
opened before it must be gone afterwards (a restarted broker closed every socket it had). A
restart command that did nothing (``--restart-cmd true``) leaves that connection answering; the
case is then UNSUPPORTED, "the controller did nothing", never FAIL: the broker is not to blame.

The alarm cases prove their alarm likewise (:func:`controller_did_nothing` words the verdict).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pamqp import commands as spec

from conformance.model.verdicts import CaseTimeout
from conformance.protocol.raw import UnexpectedClose
from conformance.protocol.wire import URL
from conformance.verify.unsupported import Unsupported

if TYPE_CHECKING:
    from conformance.targets.base import Target


def forget(amqp: Any, url: URL, queues: Sequence[str] = (), exchanges: Sequence[str] = ()) -> None:
    """Delete what a case made durable on the private broker (best effort, bounded)."""
    with contextlib.suppress(Exception):
        ch = amqp.channel(url)
        for q in queues:
            with contextlib.suppress(UnexpectedClose, CaseTimeout):
                ch.delete_queue(q)
        for x in exchanges:
            with contextlib.suppress(UnexpectedClose, CaseTimeout):
                ch.rpc(spec.Exchange.Delete(exchange=x))


def controller_did_nothing(what: str, *, expected: str, observed: str) -> Unsupported:
    """The verdict of a case whose controller (restart or alarm command) had no effect."""
    return Unsupported(f"the controller did nothing: {what}", expected=expected, observed=observed)


def _outlived(conn: Any) -> bool:
    """Whether ``conn`` (opened before a restart) still answers: a channel.open round trip."""
    if not conn.is_open:
        return False
    try:
        conn.channel()
    except (UnexpectedClose, CaseTimeout, OSError):
        return False
    return True


@contextlib.contextmanager
def restarted(amqp: Any, target: Target, *, queues: Sequence[str] = (), exchanges: Sequence[str] = (),
              kill: bool = False) -> Iterator[URL]:
    """Restart ``target``'s broker (cleanly, or by SIGKILL with ``kill``) and give the block its
    URL; afterwards :func:`forget` ``queues`` and ``exchanges`` there."""
    if target.controller is None:
        raise RuntimeError(f"target {target.name} has no controller: not a restartable target")
    witness = amqp(target.url)  # must not survive the restart
    target.controller.restart(kill=kill)
    if _outlived(witness):
        forget(amqp, target.url, queues, exchanges)
        raise controller_did_nothing(
            f"a connection opened before the {'kill and start' if kill else 'restart'} still answers "
            "after it (the broker was not restarted)",
            expected="the connection closed by the restart", observed="channel.open-ok on it")
    try:
        yield target.url
    finally:
        forget(amqp, target.url, queues, exchanges)
