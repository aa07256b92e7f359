"""Declare rules that exchanges and queues share, written once: reserved ``amq.`` names, the
name syntax, a passive declare of a missing entity, and redeclaring with the same or other fields.

test_exchange.py and test_queue.py each hold their own family (own ids and rules, built by
:func:`cases` from the same texts and profile data) in a ``DECLARE_RULES`` table and pass their
:class:`Entity`. Their ``EQUIVALENCE`` tables build the shared cases with :func:`inequivalent_case`
and :func:`equivalent_ok_case` and run them through :func:`redeclare`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pamqp import commands as spec
from pamqp.base import Frame

from conformance.model.cases import Case, Level, param
from conformance.model.verdicts import CaseOutcome
from conformance.verify.expect import expect_channel_close, expect_passive_missing
from conformance.verify.outcomes import check_outcome, outcome
from conformance.verify.steps import bad_name_frame


@dataclass(frozen=True)
class Entity:
    """How to declare, delete and clean up one kind of entity."""

    kind: str  # "exchange" | "queue": used in the texts of the checks
    suffix: str  # ctx.name suffix
    declare: Callable[..., Frame]  # declare(name, passive=…)
    delete: Callable[[str], Frame]
    declare_ok: type
    delete_ok: type
    register: Callable[[Any, str], str]  # register(cleanup, name): deleted after the case


EXCHANGE = Entity(
    "exchange", "x",
    lambda name, **kw: spec.Exchange.Declare(exchange=name, exchange_type="direct", **kw),
    lambda name: spec.Exchange.Delete(exchange=name),
    spec.Exchange.DeclareOk, spec.Exchange.DeleteOk, lambda cleanup, name: cleanup.exchange(name),
)
QUEUE = Entity(
    "queue", "q",
    lambda name, **kw: spec.Queue.Declare(queue=name, **kw),
    lambda name: spec.Queue.Delete(queue=name),
    spec.Queue.DeclareOk, spec.Queue.DeleteOk, lambda cleanup, name: cleanup.queue(name),
)

Scenario = Callable[[Any, Any, Any, Entity], None]


def reserved_name(amqp: Any, ctx: Any, cleanup: Any, entity: Entity) -> None:
    """Declaring a new entity named ``amq.…`` (not passive) closes the channel with 403."""
    ch = amqp.channel()
    name = entity.register(cleanup, "amq." + ctx.name(entity.suffix))
    declare = entity.declare(name)
    ch.send(declare)
    expect_channel_close(ch, 403, what=f"declare of a new amq.* {entity.kind}", method=type(declare))


def name_syntax(amqp: Any, ctx: Any, cleanup: Any, entity: Entity) -> None:
    """A declare whose name has characters outside the spec's syntax, judged per profile."""
    ch = amqp.channel()
    bad = ctx.name(entity.suffix) + " bad!*"  # not given to cleanup: pamqp cannot encode it
    try:
        raw = bad_name_frame(ch, bad, entity.declare)
        check_outcome(ctx, outcome(ch, entity.declare(entity.suffix), entity.declare_ok, raw=raw),
                      "declare with an illegal name")
    finally:
        drop_bad_name(amqp, bad, entity, ctx.timeout)


def drop_bad_name(amqp: Any, bad: str, entity: Entity, timeout: float) -> None:
    """Best-effort delete of an entity whose name pamqp refuses to encode (bounded, never raises)."""
    try:
        ch = amqp.channel()
        outcome(ch, None, entity.delete_ok, raw=bad_name_frame(ch, bad, entity.delete),
                timeout=min(3.0, timeout))
    except (CaseOutcome, OSError):
        pass


def passive_missing(amqp: Any, ctx: Any, cleanup: Any, entity: Entity) -> None:
    """A passive declare of an entity that does not exist closes the channel with 404."""
    ch = amqp.channel()
    expect_passive_missing(ch, entity.declare(ctx.name("missing"), passive=True),
                           f"passive declare of a missing {entity.kind}")


def durable_and_transient(amqp: Any, ctx: Any, cleanup: Any, entity: Entity) -> None:
    """One durable and one transient entity: each declare and a passive declare after it (with the
    same fields; a passive declare ignores them) are answered with declare-ok."""
    ch = amqp.channel()
    results = []
    for durable in (True, False):
        name = entity.register(cleanup, ctx.name(f"{entity.suffix}-durable-{durable}"))
        for passive in (False, True):
            declare = entity.declare(name, durable=durable, passive=passive)
            results.append(outcome(ch, declare, entity.declare_ok)[0])
    ctx.check(results, [f"{entity.kind}.declare-ok"] * 4,
              f"declare + passive declare of a durable and a transient {entity.kind}")


def cases(entity: Entity, passive_rule: str, measured: str) -> list[Any]:
    """The family of declare-rule cases for ``entity``: ``pytest.param``s carrying a scenario.

    The ids are ``<kind>.reserved-name-403``, ``<kind>.name-syntax-406`` and
    ``<kind>.passive-missing-404``; ``passive_rule`` is the spec rule of the passive declare (the
    XML names it differently per class) and ``measured`` says where the RabbitMQ value comes from.
    """
    kind = entity.kind
    a_kind = ("an " if kind[0] in "aeiou" else "a ") + kind
    return [
        param(Case(
            f"{kind}.reserved-name-403", rules=(f"{kind}.declare/reserved",), level=Level.MAY,
            description=f"Declaring a new {kind} whose name starts with 'amq.' (not passive)",
            expectation="channel.close 403 ACCESS_REFUSED",
        ), reserved_name),
        param(Case(
            f"{kind}.name-syntax-406", rules=(f"{kind}.declare/syntax",), level=Level.MAY,
            description=f"Declaring {a_kind} whose name has characters outside letters, digits, - _ . :",
            expectation=(
                "channel.close 406 PRECONDITION_FAILED (RabbitMQ accepts any UTF-8 name: declare-ok)"
            ),
            expected={"spec": "channel.close 406", "rabbitmq": f"{kind}.declare-ok"},
            expected_sources={
                "spec": f"{kind}.declare/syntax (on-failure precondition-failed)",
                "rabbitmq": f"{measured}: 'name with space!*' answered {kind}.declare-ok",
            },
        ), name_syntax),
        param(Case(
            f"{kind}.passive-missing-404", rules=(passive_rule,), level=Level.MUST,
            description=f"Passive declare of {a_kind} that does not exist",
            expectation="channel.close 404 NOT_FOUND",
        ), passive_missing),
    ]


# -- equivalence: redeclaring an existing entity ---------------------------------------------------


def inequivalent_case(kind: str, id_: str, description: str, field_: str, measured: str, **more: Any) -> Case:
    """The case of a redeclare that changes ``field_``: ``<kind>.declare/equivalent`` asks for a
    channel exception and names no code; RabbitMQ answers 406 "inequivalent arg '<field_>'"
    (``measured`` says where that was seen). ``more``: further :class:`Case` fields."""
    return Case(
        id_, rules=(f"{kind}.declare/equivalent",), level=Level.MUST, description=description,
        expectation="a channel exception (RabbitMQ: channel.close 406)", default="channel.close *",
        expected={"rabbitmq": "channel.close 406"},
        expected_sources={
            "rabbitmq": f"{measured}: 406 \"inequivalent arg '{field_}'\"",
            "spec": f"{kind}.declare/equivalent (a channel exception, no code named)",
        },
        **more,
    )


def equivalent_ok_case(kind: str, id_: str, description: str, **more: Any) -> Case:
    """The case of a redeclare with the same fields: ``<kind>.declare-ok``."""
    return Case(
        id_, rules=(f"{kind}.declare/equivalent",), level=Level.MUST, description=description,
        expectation=f"{kind}.declare-ok", default=f"{kind}.declare-ok", **more,
    )


def redeclare(
    ctx: Any, ch: Any, entity: Entity, name: str, first: dict[str, Any], second: dict[str, Any]
) -> None:
    """Declare ``name`` again with the fields ``second`` (it was declared with ``first``) and
    compare the broker's answer with the case's expected outcome."""
    check_outcome(ctx, outcome(ch, entity.declare(name, **second), entity.declare_ok),
                  f"redeclare {first} as {second}")
