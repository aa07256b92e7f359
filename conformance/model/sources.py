"""The sources registry: what a case's ``sources`` entry refers to, in words a vendor can follow.

Cases cite the reference documents by the file names they are kept under
(``000_cd470977c809f5f5.txt#when-will-messages-be-confirmed``). Those names mean nothing outside
this project, so reports and messages cite through :func:`cite` instead::

    RabbitMQ docs — Publisher Confirms § When will messages be confirmed?,
    https://www.rabbitmq.com/docs/confirms#when-publishes-are-confirmed

Each document has a title, a publisher and, where one exists, a public URL (checked against the
published pages: RabbitMQ's docs and blog). Sections map the anchors cases use to the heading
the document gives them and, where the public page has one, its own fragment. Two documents have
no public address we could find (a book chapter and a blog post kept as text); they are cited by
title and publisher, with no link rather than a wrong one.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass

from conformance.model.documents import Document, Section
from conformance.model.routing_sources import ROUTING_DOCUMENTS

__all__ = ["DOCUMENTS", "REGISTRY", "Citation", "Document", "Section", "cite", "cite_all", "cite_text",
           "resolve"]


DOCUMENTS: tuple[Document, ...] = (
    Document(
        "000_cd470977c809f5f5.txt",
        "Publisher Confirms",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/confirms",
        {
            "confirms": Section(
                "Confirms (aka Publisher Acknowledgements)",
                "publisher-confirms",
                "Confirms (aka Publisher Acknowledgements)",
            ),
            "when-will-messages-be-confirmed": Section(
                "When will messages be confirmed?",
                "when-publishes-are-confirmed",
                "When will messages be confirmed?",
            ),
            "negative-acknowledgment": Section(
                "Negative Acknowledgment", "server-sent-nacks", "Negative Acknowledgment"
            ),
            "ack-latency-for-persistent-messages": Section(
                "Ack Latency for Persistent Messages",
                "publisher-confirms-latency",
                "Ack Latency for Persistent Messages",
            ),
            "confirms-and-guaranteed-delivery": Section(
                "Confirms and Guaranteed Delivery",
                "publisher-confirms-and-guaranteed-delivery",
                "Confirms and Guaranteed Delivery",
            ),
        },
        "confirm.select, broker acks/nacks, multiple, when confirms are sent, confirm latency",
    ),
    Document(
        "001_27f7ea2622bbc99f.txt",
        "Broker Semantics",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/semantics",
        {
            "tx": Section("Semantics of tx", "tx", "Semantics of tx"),
            "ordering": Section("Message ordering guarantees", "ordering", "Message ordering guarantees"),
            "exclusive-durable": Section(
                "Exclusive queues, durability and mirroring",
                "exclusive-durable",
                "Exclusive queues, durability and mirroring",
            ),
        },
        "the tx table per RabbitMQ release, ordering with requeue, exclusive durable queues",
    ),
    Document(
        "002_4ef6b84472723893.txt",
        "Well, I'll let you go ... basic.reject in RabbitMQ",
        "RabbitMQ blog (Michael Bridgen, 2010)",
        "https://www.rabbitmq.com/blog/2010/08/03/well-ill-let-you-go-basicreject-in-rabbitmq",
        {
            # The post has no headings; sections name the passage.
            "requeue-true": Section("requeue=true", None, "if you supply requeue=true"),
            "requeue-false": Section("requeue=false", None, "if you supply requeue=false"),
            "spec-contradictions": Section(
                "the specification's contradictions", None, "seemingly incompatible things about basic.reject"
            ),
        },
        "basic.reject requeue=true re-enqueues as new; requeue=false discards or dead-letters",
    ),
    Document(
        "003_50388870ec53b6aa.txt",
        "Consumer Acknowledgments and Delivery Guarantees",
        "AMQP 0-9-1: The Complete Protocol (book chapter)",
        None,
        {
            anchor: Section(title, None, title)
            for anchor, title in (
                ("auto-acknowledgment-mode", "Auto-Acknowledgment Mode"),
                ("basic-ack", "basic.ack — Acknowledging Messages"),
                ("basic-consume-push-delivery", "basic.consume (Push Delivery)"),
                ("basic-get", "basic.get (Pull/Poll)"),
                ("basic-nack", "basic.nack — Negative Acknowledgment (Bulk)"),
                ("basic-reject", "basic.reject — Single Message Rejection"),
                ("consumer-cancellation", "Consumer Cancellation"),
                ("delivery-guarantee-summary", "Delivery Guarantee Summary"),
                ("the-delivery-tag", "The Delivery Tag"),
                ("what-happens-to-unacknowledged-messages", "What Happens to Unacknowledged Messages"),
                ("acknowledgements", "Consumer Acknowledgments and Delivery Guarantees"),
            )
        },
        "consume vs get, delivery tags, redelivered, ack/nack/reject, multiple, auto-ack, cancel",
    ),
    Document(
        "004_ba6059c7056f3c65.txt",
        "Message lifecycle, Reject vs Nack and basic.recover",
        "blog of Pika's maintainer",
        None,
        {
            "dealing-with-rejection": Section("Dealing with Rejection", None, "Dealing with Rejection"),
            "resurfacing-messages-in-limbo": Section(
                "Resurfacing messages in limbo", None, "Resurfacing messages in limbo"
            ),
        },
        "basic.recover with requeue true/false, passive queue.declare for counts",
    ),
    Document(
        "amqp0-9-1.xml",
        "AMQP 0-9-1 specification (machine-readable XML)",
        "AMQP Working Group",
        "https://github.com/rabbitmq/amqp-0.9.1-spec",
        about="the protocol definition and its rules",
    ),
    Document(
        "amqp0-9-1.stripped.extended.xml",
        "AMQP 0-9-1 with RabbitMQ's extensions (XML)",
        "RabbitMQ",
        "https://github.com/rabbitmq/amqp-0.9.1-spec",
        about="basic.nack, the confirm class, exchange-to-exchange bindings",
    ),
    Document(
        "rabbitmq-access-control",
        "Authentication, Authorisation, Access Control",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/access-control",
        {
            "how-permissions-work": Section(
                "How Permissions Work (the operation / permission / resource table)"
            ),
            "vhost-access": Section(
                "How Permissions Work: a user without permissions in a vhost cannot connect to it"
            ),
            "default-exchange": Section("How Permissions Work: the default exchange is named amq.default"),
            "mechanisms": Section(
                "Authentication Mechanisms: PLAIN and AMQPLAIN are enabled by default (auth_mechanisms); "
                "RabbitMQ 4.0 adds ANONYMOUS, enabled by default, logging in as anonymous_login_user",
                "mechanisms",
            ),
        },
        "per-vhost configure / write / read regular expressions and which AMQP operation needs which",
    ),
    Document(
        "rabbitmq-auth-notification",
        "Authentication Failure Notifications",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/auth-notification",
        {
            "authentication-failure-close": Section("the authentication_failure_close client capability"),
        },
        "connection.close 403 ACCESS_REFUSED on a failed login only for clients announcing the capability",
    ),
    Document(
        "rabbitmq-connection-blocked",
        "Blocked Connection Notifications",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/connection-blocked",
        {
            "capability": Section("Overview: the connection.blocked client capability"),
            "when-sent": Section("When Notifications are Sent"),
        },
        "connection.blocked / unblocked: only to clients announcing the capability, sent to publishing "
        "connections when a resource alarm starts, unblocked when all alarms clear",
    ),
    Document(
        "rabbitmq-maxlength",
        "Queue Length Limit",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/maxlength",
        {
            "default-behaviour": Section("Default Max Queue Length Limit Behaviour"),
            "overflow": Section("Queue Overflow Behaviour"),
        },
        "x-max-length, x-max-length-bytes (bodies of ready messages), x-overflow drop-head / "
        "reject-publish / "
        "reject-publish-dlx with nacks and dead-lettering",
    ),
    Document(
        "rabbitmq-configure",
        "Configuration",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/configure",
        {"config-items": Section("Core Server Variables Configurable in rabbitmq.conf", "config-items")},
        "max_message_size, frame_max, channel_max, vm_memory_high_watermark",
    ),
    Document(
        "rabbitmq-memory",
        "Memory Threshold and Limit",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/memory",
        about="the memory alarm: publishers blocked above vm_memory_high_watermark, set at runtime with "
        "rabbitmqctl set_vm_memory_high_watermark",
    ),
    Document(
        "rabbitmq-channels",
        "Channels",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/channels",
        {"channel-max": Section("Maximum Number of Channels per Connection", "channel-max")},
        "channel_max negotiated per connection; opening more channels is a connection error",
    ),
    Document(
        "rabbitmq-quorum-queues",
        "Quorum Queues",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/quorum-queues",
        {
            "declaring": Section("Declaring", "declaring"),
            "feature-matrix": Section(
                "Feature Matrix (durable only, no exclusivity, no message priority, no global QoS)",
                "feature-matrix",
            ),
            "global-qos": Section("Global QoS", "global-qos"),
            "poison-message-handling": Section(
                "Poison Message Handling (x-delivery-count, delivery-limit)", "poison-message-handling"
            ),
            "data-safety": Section(
                "Data Safety: \"messages are confirmed to the publisher once they have been replicated to a "
                "quorum of replicas\"; \"a quorum queue ... will continue to function as long as a majority "
                "of nodes are available\"", "data-safety"
            ),
            "leader-placement": Section(
                "Queue Leader Location: \"All queue operations go through the leader first and then are "
                "replicated to followers ... This is necessary to guarantee FIFO ordering of messages\"",
                "leader-placement",
            ),
            "leader-election": Section(
                "Leader Election and Failure Handling: when the leader's node is lost a new leader is "
                "elected among the online replicas; consumers are not cancelled; a queue without a quorum "
                "of online replicas is unavailable (publishes are not confirmed)", "leader-election"
            ),
        },
        "what a quorum queue refuses (non-durable, exclusive, x-max-priority, global QoS), x-delivery-count, "
        "x-delivery-limit with dead-lettering",
    ),
    Document(
        "rabbitmq-classic-mirroring",
        "Classic Queue Mirroring",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/3.13/ha",
        {
            "exclusive-queues": Section(
                "Exclusive Queues are Not Mirrored: \"Exclusive queues will be deleted when the connection "
                "that declared them is closed. For this reason, it is not useful for an exclusive queue to "
                "be mirrored\"; \"they will be deleted when the node they are declared on goes down\"",
                "exclusive-queues",
            ),
            "publisher-confirms": Section(
                "Publisher Confirms and Transactions: \"a confirm will only be issued to the publisher once "
                "it has been accepted by all of the mirrors\"", "publisher-confirms-and-transactions"
            ),
            "failover": Section(
                "Unsynchronised Mirrors and master failure: the oldest mirror is promoted; \"messages that "
                "have been delivered to consumers but are pending acknowledgement will be requeued\"",
                "behaviour",
            ),
            "failover-acks": Section(
                "Behaviour on leader failure, item 2: the promoted mirror \"requeues all messages that have "
                "been delivered to clients but are pending acknowledgement. This can include messages for "
                "which a client has issued acknowledgements, say, if an acknowledgement was either lost on "
                "the wire before reaching the node hosting queue leader, or it was lost when broadcast from "
                "the leader to the mirrors\"; item 4: clients that re-consume \"must be aware that they are "
                "likely to subsequently receive messages that they have already received\"",
                "behaviour",
            ),
            "cancellation": Section(
                "Consumer Cancellation: \"clients that are consuming from a mirrored queue may wish to know "
                "that the queue from which they have been consuming has failed over ... set "
                "x-cancel-on-ha-failover to true ... the consumer will be cancelled\"",
                "cancellation",
            ),
            "ha-policy": Section(
                "Queue Arguments that Control Mirroring: a policy with ha-mode all mirrors a matching "
                "classic queue on every node", "mirroring-arguments"
            ),
            "non-mirrored": Section(
                "Non-mirrored Queue Behavior in a Cluster: \"A durable queue will become unavailable until "
                "the node comes back. All operations on a durable queue with unavailable leader node will "
                "fail\" with not_found: \"home node ... of durable queue ... is down or inaccessible\"",
                "non-mirrored-queue-behavior-on-node-failure",
            ),
        },
        "classic mirrored queues: confirms after every mirror, exclusive queues not mirrored, failover "
        "requeues unacked deliveries, x-cancel-on-ha-failover",
    ),
    Document(
        "rabbitmq-streams",
        "Streams",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/streams",
        {
            "overview": Section(
                "What is a Stream: \"Streams model an append-only log of messages that can be "
                "repeatedly read until they expire. Streams are always persistent and replicated\" "
                "(non-destructive consumer semantics)", "overview"
            ),
            "consuming": Section(
                "Consuming: x-stream-offset (first, last, next, an offset, a timestamp); "
                "\"consumption requires QoS prefetch to be set. The acks works as a credit mechanism "
                "to advance the current offset of the consumer\"", "consuming",
            ),
            "feature-matrix": Section(
                "Feature Matrix: no non-durable or exclusive streams, no poison message handling, "
                "no global QoS", "feature-matrix",
            ),
            "leader-election": Section(
                "Leader Election and Failure Handling: \"When a RabbitMQ node hosting a stream's "
                "leader fails or is stopped another node hosting one of that stream's replica will be "
                "elected leader and resume operations\"; \"A stream requires a quorum of the "
                "declared nodes to be available to function\"", "leader-election"
            ),
            "data-safety": Section(
                "Data Safety when using Streams: \"publisher confirms are only issued once the data "
                "has been replicated to a quorum of stream replicas\" (written, not fsynced: an "
                "uncontrolled shutdown of a whole server may lose confirmed data on that node's "
                "replica)", "data-safety"
            ),
        },
        "stream queues over AMQP 0-9-1: declaration, consumption from an offset with a prefetch and "
        "manual acks, confirms after a quorum of replicas, leader election",
    ),
    Document(
        "rabbitmq-clustering",
        "Clustering Guide",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/clustering",
        {
            "node-failure": Section(
                "Node Failure Handling: \"Clients that are connected to a node that goes down will be "
                "disconnected\"; queue contents and leadership follow the queue type", "node-failure-handling"
            ),
            "partitions": Section(
                "Network Partitions: pause_minority (recommended for 3+ nodes) stops a node that finds "
                "itself in a minority", "partitions"
            ),
        },
        "what a node going down means for clients, exclusive and classic queues; partition handling",
    ),
    Document(
        "rabbitmq-direct-reply-to",
        "Direct Reply-to",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/direct-reply-to",
        {
            "use": Section(
                "Use: consume from the amq.rabbitmq.reply-to pseudo-queue in no-ack mode, publish with "
                "reply-to amq.rabbitmq.reply-to; the server's reply to that name is delivered to the consumer"
            ),
            "caveats": Section(
                "Caveats and Limitations: the reply consumer must use automatic acknowledgement mode"
            ),
        },
        "the amq.rabbitmq.reply-to pseudo-queue: no-ack consumer, reply-to rewritten, replies delivered",
    ),
    Document(
        "rabbitmq-consumer-priority",
        "Consumer Priorities",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/consumer-priority",
        {
            "definition": Section(
                "Definition: active consumers with higher priority receive messages first; lower priority "
                "consumers only when the higher ones are blocked (e.g. by their prefetch limit)"
            ),
            "how-to-use": Section("How to Use: the x-priority argument of basic.consume (default 0)"),
        },
        "x-priority on basic.consume: higher-priority consumers first, lower ones when those are blocked",
    ),
    Document(
        "rabbitmq-priority",
        "Classic Queues Support Priorities",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/priority",
        {
            "using-arguments": Section("Using Optional Queue Arguments: x-max-priority"),
            "behaviour": Section(
                "Behaviour: higher priority first; messages without a priority property are treated as "
                "priority 0; a priority above the maximum is treated as the maximum"
            ),
            "maximum": Section("How Many Priorities To Use: values between 1 and 255 are supported"),
        },
        "priority queues declared with x-max-priority: delivery order, the maximum, its limit",
    ),
    Document(
        "rabbitmq-extensions",
        "Protocol Extensions",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/extensions",
        {
            "publishing": Section("Publishing", "publishing"),
            "consuming": Section("Consuming", "consuming"),
            "message-routing": Section("Message Routing", "message-routing"),
            "message-lifecycle": Section("Message Lifecycle", "message-lifecycle"),
            "authentication-and-identity": Section(
                "Authentication and Identity: \"`update-secret` to be able to renew credentials for "
                "an active "
                "connection, when those credentials can expire\"", "authentication-and-identity"
            ),
        },
        "the list of RabbitMQ's AMQP 0-9-1 extensions (the extension table of docs/cases.md starts from it)",
    ),
    Document(
        "rabbitmq-ttl",
        "Time-To-Live and Expiration",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/ttl",
        {
            "per-queue-message-ttl": Section(
                "Per-Queue Message TTL in Queues: \"The server guarantees that expired messages will not be "
                "delivered using basic.deliver (to a consumer) or sent in response to a polling "
                "consumer (in a "
                "basic.get-ok response)\"", "per-queue-message-ttl"
            ),
            "ttl-zero": Section(
                "Per-Queue Message TTL in Queues: \"Setting the TTL to 0 causes messages to be expired upon "
                "reaching a queue unless they can be delivered to a consumer immediately\"",
                "message-ttl-using-x-args",
            ),
            "per-message-ttl-in-publishers": Section(
                "Per-Message TTL in Publishers: \"When both a per-queue and a per-message TTL are "
                "specified, the "
                "lower value between the two will be chosen\"", "per-message-ttl-in-publishers"
            ),
            "message-ttl-dead-lettering": Section(
                "Per-Message TTL and Dead Lettering: classic queues dead letter expired messages \"When the "
                "message reaches the head of the queue\"", "message-ttl-dead-lettering"
            ),
            "queue-ttl": Section(
                "Queue TTL: \"The server guarantees that the queue will be deleted, if unused for "
                "at least the "
                "expiration period\"", "queue-ttl"
            ),
        },
        "x-message-ttl (0 included), the expiration property, the lower of the two, x-expires",
    ),
    Document(
        "rabbitmq-dlx",
        "Dead Letter Exchanges",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/dlx",
        {
            "overview": Section(
                "What is a Dead Letter Exchange: rejected with requeue false, expired, dropped by a length "
                "limit, returned more times than a quorum queue's delivery-limit", "overview"
            ),
            "routing": Section(
                "Routing Dead-Lettered Messages: \"with the routing key specified for the queue "
                "they were on; "
                "or, if this was not set, with the same routing keys they were originally published with\"; "
                "cycles are \"dropped if there was no rejection in the entire cycle\"", "routing"
            ),
            "effects": Section(
                "Dead-Lettered Effects on Messages: the x-death entry (queue, reason, time, exchange, "
                "routing-keys, count, original-expiration) and x-first-death-reason / -queue / -exchange",
                "effects",
            ),
        },
        "x-dead-letter-exchange, x-dead-letter-routing-key, x-death and x-first-death-*, the cycle rule",
    ),
    Document(
        "rabbitmq-ae",
        "Alternate Exchanges",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/ae",
        {
            "define-using-arguments": Section(
                "Configuration Using Client-provided Arguments: the alternate-exchange key of "
                "exchange.declare's arguments", "define-using-arguments"
            ),
            "how-it-works": Section(
                "How Alternate Exchanges Work: \"If a message is routed via an AE it still counts "
                "as routed for the purpose of the 'mandatory' flag, and the message is otherwise "
                "unchanged\"", "how-it-works"
            ),
        },
        "the alternate-exchange argument: unroutable messages go to the AE, mandatory counts them routed",
    ),
    Document(
        "rabbitmq-sender-selected",
        "Sender-selected Distribution",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/sender-selected",
        {
            "cc-bcc": Section(
                "\"The message will be routed to all destinations matching the routing key supplied as a "
                "parameter to the basic.publish method, as well as the routes supplied in the CC and BCC "
                "headers\""
            ),
            "bcc-removed": Section(
                "\"The BCC key and value will be removed from the message prior to delivery\""
            ),
        },
        "the CC and BCC headers add routing keys; BCC is removed before delivery",
    ),
    Document(
        "rabbitmq-validated-user-id",
        "Validated User-ID",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/validated-user-id",
        {
            "validation": Section(
                "\"if this property is set by a publisher, its value must be equal to the name of the "
                "connection's user\""
            ),
        },
        "the user-id property is checked against the connection's user",
    ),
    Document("rabbitmq-deprecated-features", "Deprecated Features", "RabbitMQ docs",
             "https://www.rabbitmq.com/docs/deprecated-features",
             {"configuring": Section("Configuring deprecated features behavior: \"turn a denied by default "
                                     "deprecated feature back on\": deprecated_features.permit.<feature> = "
                                     "true", "configuring-deprecated-features-behavior")},
             "which deprecated features a release denies by default, and the setting that permits each"),
    Document(
        "rabbitmq-consumers",
        "Consumers",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/consumers",
        {
            "acknowledgement-timeout": Section(
                "Delivery Acknowledgement Timeout: \"If a consumer does not ack its delivery within "
                "the timeout "
                "value, its channel is closed with a PRECONDITION_FAILED channel exception\"",
                "acknowledgement-timeout",
            ),
            "exclusivity": Section("Exclusivity", "exclusivity"),
            "single-active-consumer": Section(
                "Single Active Consumer: \"The very first registered consumer become the single active "
                "consumer: messages are dispatched to it and the other consumers are ignored\"; \"If the "
                "active consumer is cancelled or disconnects, another registered consumer takes its place\"",
                "single-active-consumer",
            ),
        },
        "single active consumer (x-single-active-consumer), the delivery acknowledgement timeout, exclusive "
        "consumers",
    ),
    Document(
        "DESIGN.md",
        "amqp-conformance design notes",
        "this project",
        None,
        {
            "facts-measured-on-rabbitmq-3.10.8": Section("Facts measured on RabbitMQ 3.10.8"),
            "facts-measured-on-rabbitmq-3-10-8": Section("Facts measured on RabbitMQ 3.10.8"),
        },
        "behaviour measured on RabbitMQ where no document states it",
    ),
    *ROUTING_DOCUMENTS,
)
REGISTRY: dict[str, Document] = {d.key: d for d in DOCUMENTS}


@dataclass(frozen=True)
class Citation:
    source: str  # as the case cites it
    document: Document | None  # None: not in the registry (cited as given)
    section: str
    url: str | None

    @property
    def label(self) -> str:
        """``RabbitMQ docs — Publisher Confirms § When will messages be confirmed?``"""
        if self.document is None:
            return self.source
        head = f"{self.document.publisher} — {self.document.title}"
        return f"{head} § {self.section}" if self.section else head

    def text(self) -> str:
        """The label and, when there is one, the URL: for messages, JUnit, the terminal."""
        return f"{self.label}, {self.url}" if self.url else self.label

    def html(self) -> str:
        """An ``<a>`` when there is a URL, else the label; escaped for an HTML page."""
        label = html.escape(self.label)
        if not self.url:
            return f"<span class=\"src\">{label}</span>"
        return f'<a class="src" href="{html.escape(self.url, quote=True)}" rel="noopener">{label}</a>'


def _section_title(anchor: str) -> str:
    # An anchor the registry does not list: readable words, never silently dropped.
    return anchor.replace("-", " ").strip()


def resolve(source: str) -> Citation:
    """A case's ``sources`` entry (``file#anchor`` or ``file#free text``) → its citation."""
    key, _, anchor = source.strip().partition("#")
    doc = REGISTRY.get(key)
    if doc is None:
        return Citation(source, None, "", None)
    anchor = anchor.strip()
    section = doc.sections.get(anchor)
    if section is not None:
        url = f"{doc.url}#{section.fragment}" if doc.url and section.fragment else doc.url
        return Citation(source, doc, section.title, url)
    # Spec citations name an element in free text ("connection.tune (frame-max)"): keep it as is.
    title = anchor if (" " in anchor or "." in anchor or not doc.sections) else _section_title(anchor)
    return Citation(source, doc, title, doc.url)


def cite(source: str) -> str:
    """One source as a vendor reads it: ``RabbitMQ docs — Broker Semantics § Semantics of tx, <url>``."""
    return resolve(source).text()


def cite_all(sources: Iterable[str]) -> str:
    """Several sources, ``; `` separated, in the given order, each once (for messages)."""
    return "; ".join(dict.fromkeys(cite(s) for s in sources if s.strip()))


_FILE_REF = re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt(?:#[\w.-]+)?")


def cite_text(text: str) -> str:
    """Free text (a profile's source note, a message) with every reference-document file name in it
    replaced by its citation, so nothing a vendor reads names an internal file."""
    return _FILE_REF.sub(lambda m: cite(m.group(0)), text)
