"""Direct reply-to: RabbitMQ's ``amq.rabbitmq.reply-to`` pseudo-queue (RabbitMQ docs, "Direct
Reply-to").

A channel consumes from ``amq.rabbitmq.reply-to`` in no-ack mode; a request it publishes with
``reply-to: amq.rabbitmq.reply-to`` leaves with that property rewritten to a name of the form
``amq.rabbitmq.reply-to.<opaque>``, and a message published to the default exchange with that
name as routing key is delivered straight to the consumer: no queue is involved. The broker keeps
the names it handed out here; a name whose channel is gone routes nowhere.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Protocol

from .messages import Message

REPLY_QUEUE = "amq.rabbitmq.reply-to"
REPLY_PREFIX = REPLY_QUEUE + "."


class ReplyTarget(Protocol):
    """What a reply name leads to: the channel holding the reply consumer."""

    def deliver_reply(self, msg: Message) -> bool: ...


@dataclass(frozen=True)
class ReplyConsumer:
    tag: str  # the consumer tag replies are delivered with
    name: str  # the reply-to name requests carry


class ReplyRoutes:
    """The reply-to names handed out, each with the channel its replies go to."""

    def __init__(self) -> None:
        self._routes: dict[str, ReplyTarget] = {}

    def register(self, target: ReplyTarget) -> str:
        name = REPLY_PREFIX + secrets.token_urlsafe(24)
        self._routes[name] = target
        return name

    def unregister(self, name: str) -> None:
        self._routes.pop(name, None)

    def __contains__(self, name: str) -> bool:
        return name in self._routes

    def deliver(self, routing_key: str, msg: Message) -> bool:
        """Deliver a reply published to ``routing_key``; False when nothing takes it (unroutable)."""
        target = self._routes.get(routing_key)
        return target is not None and target.deliver_reply(msg)
