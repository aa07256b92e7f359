"""RabbitMQ's AMQP 0-9-1 extensions, listed once: the Protocol Extensions page's list and the
0-9-1 behaviours documented elsewhere (single active consumer, the delivery acknowledgement
timeout, quorum delivery limits, …), each with the documents (:mod:`conformance.model.sources`)
whose citation marks a case as covering it. docs/cases.md's extension table is generated from
this list and the cases' ``sources``; a row without a case fails the docs test."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Extension:
    """One RabbitMQ AMQP 0-9-1 extension: its name and the sources whose citation by a case makes
    the case one of its cases (``key`` for a whole document, ``key#anchor`` for one section)."""

    name: str
    sources: tuple[str, ...]


#: The extensions of RabbitMQ's Protocol Extensions page (in its order) and the 0-9-1 behaviours
#: documented elsewhere that the suite counts as extensions: the table in docs/cases.md is drawn
#: from this list and the case declarations.
EXTENSIONS: tuple[Extension, ...] = (
    Extension("Publisher confirms", ("000_cd470977c809f5f5.txt",)),
    Extension("Blocked connection notifications", ("rabbitmq-connection-blocked",)),
    Extension("Consumer cancel notifications", ("003_50388870ec53b6aa.txt#consumer-cancellation",)),
    Extension("basic.nack", ("003_50388870ec53b6aa.txt#basic-nack",)),
    Extension("Consumer priorities", ("rabbitmq-consumer-priority",)),
    Extension("Direct reply-to", ("rabbitmq-direct-reply-to",)),
    Extension("Exchange-to-exchange bindings", ("amqp0-9-1.stripped.extended.xml#exchange.bind",)),
    Extension("Auto-delete and internal exchanges", ("amqp0-9-1.stripped.extended.xml#exchange.declare",)),
    Extension("Exclusive consumers", ("rabbitmq-consumers#exclusivity",)),
    Extension("Alternate exchanges", ("rabbitmq-ae",)),
    Extension("Sender-selected distribution (CC, BCC)", ("rabbitmq-sender-selected",)),
    Extension("Per-queue message TTL", ("rabbitmq-ttl#per-queue-message-ttl", "rabbitmq-ttl#ttl-zero")),
    Extension("Per-message TTL", ("rabbitmq-ttl#per-message-ttl-in-publishers",)),
    Extension("Queue TTL (x-expires)", ("rabbitmq-ttl#queue-ttl",)),
    Extension("Dead letter exchanges", ("rabbitmq-dlx",)),
    Extension("Queue length limit, x-overflow", ("rabbitmq-maxlength",)),
    Extension("Priority queues", ("rabbitmq-priority",)),
    Extension("Validated user-id", ("rabbitmq-validated-user-id",)),
    Extension("Authentication failure notification", ("rabbitmq-auth-notification",)),
    Extension("update-secret", ("amqp0-9-1.stripped.extended.xml#connection.update-secret",)),
    Extension("Single active consumer", ("rabbitmq-consumers#single-active-consumer",)),
    Extension("Delivery acknowledgement (consumer) timeout", ("rabbitmq-consumers#acknowledgement-timeout",)),
    Extension("Quorum queue delivery limit", ("rabbitmq-quorum-queues#poison-message-handling",)),
)


def cited_by(extension: Extension, sources: Iterable[str]) -> list[str]:
    """The ``sources`` (a case's) that cite ``extension``'s documents or sections."""
    out = []
    for source in sources:
        key, _, anchor = source.partition("#")
        for wanted in extension.sources:
            wkey, _, wanchor = wanted.partition("#")
            if key == wkey and (not wanchor or anchor == wanchor):
                out.append(source)
                break
    return out
