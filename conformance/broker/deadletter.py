"""Dead-lettering as RabbitMQ 3.10 does it (deps/rabbit/src/rabbit_dead_letter.erl): the
message republished to a queue's x-dead-letter-exchange, with its ``x-death`` history and
``x-first-death-*`` headers, and the cycle rule. The broker (``model.Broker.dead_letter``)
routes what ``dead_letter_message`` builds to the queues ``is_cycle`` does not veto."""

from __future__ import annotations

import datetime
from typing import Any

from .messages import Message, decode_properties

#: the reasons rabbit_dead_letter knows (RabbitMQ's dead-lettering guide)
REASONS = ("rejected", "expired", "maxlen", "delivery_limit")


def _header_routes(headers: dict[str, Any]) -> list[str]:
    """rabbit_basic:header_routes: the CC and BCC keys a message's headers carry."""
    keys: list[str] = []
    for name in ("CC", "BCC"):
        value = headers.get(name)
        if isinstance(value, list):
            keys.extend(k for k in value if isinstance(k, str))
    return keys


def _grouped(tables: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """rabbit_dead_letter:group_by_queue_and_reason, as 3.10 runs it: one entry per (queue,
    reason), the first of each kept (with the number of its duplicates as count when it has
    none); its fold prepends, so two or more entries come out in reverse order (measured on
    RabbitMQ 3.10.8: o1 rejected, then expired in o2, o3, o4 gives x-death o4, o2, o1, o3)."""
    if len(tables) < 2:
        return tables
    seen: set[tuple[Any, Any]] = set()
    out: list[dict[str, Any]] = []
    for t in tables:
        key = (t.get("queue"), t.get("reason"))
        if out and key in seen:
            continue
        same = sum(1 for x in tables if (x.get("queue"), x.get("reason")) == key)
        out.insert(0, t if "count" in t else {"count": same, **t})
        seen.add(key)
    return out


def _update_x_death(headers: dict[str, Any], info: dict[str, Any]) -> None:
    """rabbit_dead_letter:update_x_death_header: the first death also sets the x-first-death-*
    headers; an entry for the same queue and reason counts up (its other fields stay) and moves
    to the front, ahead of the others as ``_grouped`` leaves them; an x-death that is not an
    array is reset."""
    deaths = headers.get("x-death")
    if deaths is None:
        headers["x-first-death-reason"] = info["reason"]
        headers["x-first-death-queue"] = info["queue"]
        headers["x-first-death-exchange"] = info["exchange"]
        headers["x-death"] = [{"count": 1, **info}]
        return
    if not isinstance(deaths, list):
        headers["x-death"] = [{"count": 1, **info}]
        return
    others = _grouped([d for d in deaths if isinstance(d, dict)])
    entry: dict[str, Any] = {"count": 1, **info}
    for i, d in enumerate(others):
        if isinstance(d, dict) and d.get("queue") == info["queue"] and d.get("reason") == info["reason"]:
            entry = dict(others.pop(i))
            entry["count"] = int(entry.get("count", 0)) + 1
            break
    headers["x-death"] = [entry, *others]


def dead_letter_message(old: Message, queue: str, reason: str, dlx: str, dlrk: str | None,
                        now: float) -> Message:
    """rabbit_dead_letter:make_msg: ``old`` as it leaves ``queue`` for ``dlx``. With a
    dead-letter routing key the message is routed by that key alone and loses its CC header;
    without one it keeps its routing keys (CC and BCC ones included). The per-message TTL is
    removed (kept in x-death as original-expiration)."""
    props = decode_properties(old.props)
    headers: dict[str, Any] = dict(props.headers or {})
    info: dict[str, Any] = {
        "reason": reason,
        "queue": queue,
        "time": datetime.datetime.fromtimestamp(int(now), datetime.UTC),
        "exchange": old.exchange,
        # "The first routing key is the one specified in the basic.publish; all others are CC
        # or BCC keys" (BCC is gone from the headers by now)
        "routing-keys": [old.routing_keys[0] if old.routing_keys else old.routing_key,
                         *_header_routes(headers)],
    }
    if props.expiration:
        info["original-expiration"] = props.expiration
    _update_x_death(headers, info)
    if dlrk is not None:
        headers.pop("CC", None)
    props.headers = headers
    props.expiration = None
    return Message(
        exchange=dlx,
        routing_key=dlrk if dlrk is not None else old.routing_key,
        props=props.marshal(),
        body=old.body,
        persistent=old.persistent,
        expiration=None,
        routing_keys=(dlrk,) if dlrk is not None else old.routing_keys,
        headers=headers,
        priority=old.priority,
    )


def is_cycle(reason: str, target: str, headers: dict[str, Any] | None) -> bool:
    """rabbit_dead_letter:detect_cycles/is_cycle: a dead-lettered message is dropped for a
    target queue already in its x-death history when every death since (and including) that
    queue's latest entry was automatic (no ``rejected``); a rejection is never a cycle."""
    if reason == "rejected" or not headers:
        return False
    deaths = headers.get("x-death")
    if not isinstance(deaths, list):
        return False
    automatic = True
    for d in deaths:
        if not isinstance(d, dict) or d.get("reason") == "rejected":
            automatic = False  # something a client put there, or a rejection: not automatic
        if isinstance(d, dict) and d.get("queue") == target:
            return automatic
    return False
