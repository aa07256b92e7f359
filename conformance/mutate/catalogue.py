"""The mutant catalogue: one broken promise per mutant, with the rule or document it violates.

A mutant's id is ``category.slug``; the category is the kind of promise (confirms, returns,
deliveries, counts, tags, errors, tx, qos, cancel, timing, connection, client-methods,
routing, access, extensions: a RabbitMQ extension accepted and ignored) and is what the
mutation score is given per. ``areas`` are the scenario modules whose
cases can observe the mutant: the runner runs only those, so the catalogue stays affordable.
An ``equivalent`` mutant carries the reason no client can tell it from a correct broker; it is
run too (a kill would mean a case asserts something the documents do not promise).

Rules are ids from ``python -m conformance.model.spec``; ``field:`` names a method field whose meaning
the spec XML defines; other sources are the reference documents (see
/work/shared/reference/README.md) by topic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pamqp import commands as spec

from conformance.mutate import faults as f
from conformance.mutate import routing_faults as rf
from conformance.protocol.proxy import (
    DoubleConfirm,
    ExclusiveIgnored,
    Fault,
    NackMultipleIgnored,
    NoRedeliveredFlag,
    RejectRequeueDropped,
    RollbackCommits,
    SwapDeliveries,
    replace,
)

CONFIRMS_DOC = "RabbitMQ guide: publisher confirms (000_cd470977c809f5f5.txt)"
ACKS_DOC = "consumer acknowledgements chapter (003_50388870ec53b6aa.txt): delivery tags, redelivered"
SEMANTICS_DOC = "RabbitMQ broker semantics (001_27f7ea2622bbc99f.txt): tx table, ordering"
ACCESS_DOC = "RabbitMQ access control guide (rabbitmq-access-control): how permissions work"
AUTH_NOTIFY_DOC = "RabbitMQ authentication failure notifications (rabbitmq-auth-notification)"
TTL_DOC = "RabbitMQ Time-To-Live and Expiration (rabbitmq-ttl)"
DLX_DOC = "RabbitMQ Dead Letter Exchanges (rabbitmq-dlx)"
SENDER_DOC = "RabbitMQ Sender-selected Distribution (rabbitmq-sender-selected)"
CONSUMERS_DOC = "RabbitMQ Consumers guide (rabbitmq-consumers)"
TOPIC_DOC = "AMQP 0-9-1 (PDF) 3.1.3.3 the topic exchange type: * is exactly one word, # zero or more"
HEADERS_DOC = "AMQP 0-9-1 (PDF) 3.1.3.4 the headers exchange type: x-match all (AND) / any (OR)"
D, G, R = spec.Basic.Deliver, spec.Basic.GetOk, spec.Basic.Return


@dataclass(frozen=True)
class Mutant:
    id: str
    description: str
    rule: str  # the spec rule id, field or document the mutant violates
    areas: tuple[str, ...]  # scenario modules (test_<area>.py) whose cases can observe it
    make: Callable[[], Fault]
    equivalent: str = ""  # why no client can observe it ("" = it must be killed)
    should: bool = False  # the promise is a SHOULD/MAY: a NON_STRICT verdict kills it too

    @property
    def category(self) -> str:
        return self.id.split(".", 1)[0]


def _plus_one(field: str) -> Callable[[object], dict[str, object]]:
    return lambda frm: {field: getattr(frm, field) + 1}


def _suffix(field: str) -> Callable[[object], dict[str, object]]:
    return lambda frm: {field: (getattr(frm, field) or "") + "-mutated"}


def _flip_last(body: bytes) -> bytes:
    return body[:-1] + bytes([body[-1] ^ 0x01]) if body else b"\x01"


def _no_headers(props: object) -> object:
    from conformance.protocol.proxy import replace

    return replace(props, headers=None)


def _other_mode(props: object) -> object:
    from conformance.protocol.proxy import replace

    mode = getattr(props, "delivery_mode", None)
    return replace(props, delivery_mode=1 if mode == 2 else 2)


# A plausible wrong code of the same class for each soft / hard error the suite provokes.
SOFT_SWAP = {403: 404, 404: 406, 405: 406, 406: 404}
HARD_SWAP = {501: 502, 502: 501, 503: 505, 504: 503, 505: 503, 506: 541, 530: 540, 540: 530, 541: 540,
             402: 530, 403: 530, 320: 541}

M = Mutant
# fmt: off
# (a hand-laid table: one mutant per entry, kept compact so the catalogue reads as a list)
CATALOGUE: tuple[Mutant, ...] = (
    # -- confirms ------------------------------------------------------------------------------
    M("confirms.ack-as-nack", "every publisher confirm is basic.nack instead of basic.ack", CONFIRMS_DOC
      + ": nack only when the broker could not take responsibility", ("confirms",),
      lambda: _AckAsNack()),
    M("confirms.first-ack-lost", "the first confirm on each channel is never sent", CONFIRMS_DOC
      + ": every publish on a confirm channel is confirmed", ("confirms",),
      lambda: f.Drop("first-ack-lost", spec.Basic.Ack, when=f.in_confirm_mode, first=True)),
    M("confirms.ack-duplicated", "every confirm is sent twice",
      CONFIRMS_DOC + ": each publish is confirmed once",
      ("confirms",), lambda: f.Duplicate("ack-duplicated", spec.Basic.Ack, when=f.in_confirm_mode)),
    M("confirms.ack-and-nack", "every basic.ack is followed by a basic.nack of the same tag",
      CONFIRMS_DOC + ": a message is either acked or nacked, never both", ("confirms",), DoubleConfirm),
    M("confirms.tags-renumbered", "confirm delivery tags are off by one (seq + 1)",
      CONFIRMS_DOC + ": the confirm's delivery-tag is the publish's sequence number", ("confirms",),
      lambda: f.Rewrite("tags-renumbered", spec.Basic.Ack, _plus_one("delivery_tag"),
      when=f.in_confirm_mode)),
    M("confirms.first-ack-covers-all",
      "the first confirm is multiple=true up to the last publish sent so far",
      CONFIRMS_DOC + ": multiple=true confirms only messages the broker has taken responsibility for",
      ("confirms",), f.FirstAckCoversAll),
    M("confirms.acks-reordered", "two consecutive single confirms on a channel arrive in swapped order",
      CONFIRMS_DOC + ": for one queue, confirms follow publish order (the suite's "
      "confirms.invariant-tags-never-backwards expectation)", ("confirms",),
      lambda: f.SwapPairs("acks-reordered", spec.Basic.Ack, when=f.in_confirm_mode)),
    M("confirms.in-order-ack-as-multiple", "a confirm whose lower tags are all confirmed gets multiple=true",
      CONFIRMS_DOC, ("confirms",), f.InOrderAckAsMultiple,
      equivalent="multiple=true on tag n covers tags <= n; when all of them are already confirmed the "
                 "set of confirmed messages is identical, so no client can tell"),
    # -- returns -------------------------------------------------------------------------------
    M("returns.dropped", "basic.return for an unroutable mandatory message is never sent",
      "basic.publish.mandatory/01", ("returns", "confirms"),
      lambda: f.DropMessage("returns-dropped", (R,)), should=True),
    M("returns.after-ack", "on a confirm channel, basic.return is sent after the publish's basic.ack",
      CONFIRMS_DOC + ": for unroutable mandatory messages basic.return is sent before basic.ack",
      ("confirms", "replies"),
      lambda: f.HoldMessage("return-after-ack", (R,), until=(spec.Basic.Ack,), when=f.in_confirm_mode)),
    M("returns.reply-code-313", "basic.return carries 313 NO_CONSUMERS instead of 312 NO_ROUTE",
      "basic.publish.mandatory/01 + constant no-route (312)", ("returns", "replies"),
      lambda: f.Rewrite("return-313", R, lambda m: {"reply_code": 313}), should=True),
    M("returns.exchange-rewritten", "basic.return names another exchange than the publish's",
      "field:basic.return.exchange", ("returns", "replies"),
      lambda: f.Rewrite("return-exchange", R, _suffix("exchange")), should=True),
    M("returns.routing-key-rewritten", "basic.return carries another routing key than the publish's",
      "field:basic.return.routing-key", ("returns", "replies"),
      lambda: f.Rewrite("return-rk", R, _suffix("routing_key")), should=True),
    M("returns.body-corrupted", "the returned message's last body byte is flipped",
      "basic.return: 'returns an undeliverable message' (content unchanged)", ("returns", "replies"),
      lambda: f.EditMessage("return-body", (R,), body=_flip_last), should=True),
    M("returns.headers-dropped", "the returned message loses its headers table",
      "basic.return: the returned content carries the published properties", ("returns", "replies"),
      lambda: f.EditMessage("return-headers", (R,), props=_no_headers), should=True),
    # -- deliveries ----------------------------------------------------------------------------
    M("deliveries.deliver-redelivered-set", "every basic.deliver has redelivered=true",
      "field:basic.deliver.redelivered + " + ACKS_DOC, ("replies", "acks"),
      lambda: f.Rewrite("deliver-redelivered", D, lambda m: {"redelivered": True})),
    M("deliveries.redelivered-cleared", "requeued messages come back with redelivered=false",
      "basic.recover/01, redelivered/implementation", ("reject", "recover", "nack"), NoRedeliveredFlag),
    M("deliveries.deliver-exchange-rewritten", "basic.deliver names another exchange than the publish's",
      "field:basic.deliver.exchange", ("replies",), lambda: f.Rewrite("deliver-exchange", D,
      _suffix("exchange"))),
    M("deliveries.deliver-routing-key-rewritten", "basic.deliver carries another routing key",
      "field:basic.deliver.routing-key", ("replies",), lambda: f.Rewrite("deliver-rk", D,
      _suffix("routing_key"))),
    M("deliveries.deliver-tag-offset", "delivery tags of basic.deliver start at 2 (tag + 1)",
      "delivery-tag/non-zero + " + ACKS_DOC, ("acks",),
      lambda: f.Rewrite("deliver-tag", D, _plus_one("delivery_tag"))),
    M("deliveries.get-ok-redelivered-set", "every basic.get-ok has redelivered=true",
      "field:basic.get-ok.redelivered", ("replies",), lambda: f.Rewrite("get-redelivered", G,
                                                                         lambda m: {"redelivered": True})),
    M("deliveries.get-ok-exchange-rewritten", "basic.get-ok names another exchange than the publish's",
      "field:basic.get-ok.exchange", ("replies",), lambda: f.Rewrite("get-exchange", G, _suffix("exchange"))),
    M("deliveries.get-ok-routing-key-rewritten", "basic.get-ok carries another routing key",
      "field:basic.get-ok.routing-key", ("replies",), lambda: f.Rewrite("get-rk", G, _suffix("routing_key"))),
    M("deliveries.get-ok-as-get-empty",
      "basic.get on a non-empty queue answers basic.get-empty (message lost)",
      "field:basic.get-empty (only for an empty queue)", ("acks",),
      lambda: f.DropMessage("get-empty", (G,), instead=lambda m: spec.Basic.GetEmpty())),
    M("deliveries.body-byte-flipped", "the last body byte of every delivered message is flipped",
      "basic class: content is delivered as published", ("replies", "acks"),
      lambda: f.EditMessage("body-flip", (D, G), body=_flip_last)),
    M("deliveries.body-truncated", "every delivered body loses its last byte (header body-size adjusted)",
      "basic class: content is delivered as published", ("replies", "limits"),
      lambda: f.EditMessage("body-trunc", (D, G), body=lambda b: b[:-1])),
    M("deliveries.properties-dropped", "delivered messages lose all their properties",
      "basic class properties: delivered as published", ("replies",),
      lambda: f.EditMessage("props-drop", (D, G), props=lambda p: spec.Basic.Properties())),
    M("deliveries.headers-dropped", "delivered messages lose their headers table only",
      "basic class property headers: delivered as published", ("replies",),
      lambda: f.EditMessage("headers-drop", (D, G), props=_no_headers)),
    M("deliveries.delivery-mode-flipped", "delivered messages carry the other delivery-mode (1 <-> 2)",
      "basic class property delivery-mode: delivered as published", ("replies",),
      lambda: f.EditMessage("mode-flip", (D, G), props=_other_mode)),
    # -- counts --------------------------------------------------------------------------------
    M("counts.declare-ok-message-count", "queue.declare-ok reports one message more than the queue holds",
      "field:queue.declare-ok.message-count", ("queue", "replies"),
      lambda: f.Rewrite("declare-count", spec.Queue.DeclareOk, _plus_one("message_count"))),
    M("counts.declare-ok-consumer-count", "queue.declare-ok reports one consumer more than the queue has",
      "field:queue.declare-ok.consumer-count", ("queue", "replies"),
      lambda: f.Rewrite("declare-consumers", spec.Queue.DeclareOk, _plus_one("consumer_count"))),
    M("counts.get-ok-message-count", "basic.get-ok reports one message more left in the queue",
      "field:basic.get-ok.message-count", ("acks", "replies"),
      lambda: f.Rewrite("get-count", G, _plus_one("message_count"))),
    M("counts.purge-ok-message-count", "queue.purge-ok reports one message more than were purged",
      "field:queue.purge-ok.message-count", ("queue", "replies"),
      lambda: f.Rewrite("purge-count", spec.Queue.PurgeOk, _plus_one("message_count"))),
    M("counts.delete-ok-message-count", "queue.delete-ok reports one message more than were deleted",
      "field:queue.delete-ok.message-count", ("replies",),
      lambda: f.Rewrite("delete-count", spec.Queue.DeleteOk, _plus_one("message_count"))),
    # -- consumer tags -------------------------------------------------------------------------
    M("tags.consume-ok-tag-rewritten", "basic.consume-ok names another tag than the one the client chose",
      "field:basic.consume-ok.consumer-tag", ("replies",),
      lambda: f.Rewrite("consume-ok-tag", spec.Basic.ConsumeOk, _suffix("consumer_tag"))),
    M("tags.deliver-tag-rewritten", "basic.deliver names another consumer tag than the consumer's",
      "field:basic.deliver.consumer-tag", ("replies",),
      lambda: f.Rewrite("deliver-ctag", D, _suffix("consumer_tag"))),
    M("tags.cancel-ok-tag-rewritten", "basic.cancel-ok names another consumer tag than the one cancelled",
      "field:basic.cancel-ok.consumer-tag", ("replies",),
      lambda: f.Rewrite("cancel-ok-tag", spec.Basic.CancelOk, _suffix("consumer_tag"))),
    M("tags.server-tags-renamed-consistently", "server-generated consumer tags get another (unique) name, "
      "used consistently in consume-ok, deliver, cancel and cancel-ok", "field:basic.consume.consumer-tag",
      ("replies", "acks"), f.ConsistentTags,
      equivalent="a server-generated tag is any name unique on the channel; renaming it consistently in "
                 "both directions is a different but equally valid choice of name"),
    # -- error scope and codes -----------------------------------------------------------------
    M("errors.channel-close-code-shifted", "channel errors carry another 4xx code (403->404, 404->406, "
      "405->406, 406->404)", "the spec's on-failure codes (e.g. basic.publish/must-exist 404)",
      ("errors", "returns", "exchange", "limits"),
      lambda: f.Rewrite("soft-code", spec.Channel.Close,
                        lambda m: {"reply_code": SOFT_SWAP.get(m.reply_code, m.reply_code)})),
    M("errors.connection-close-code-shifted", "connection errors carry another 5xx code of the same class",
      "the spec's on-failure codes (e.g. channel.open/state 504)", ("errors", "channel", "connection",
      "limits"),
      lambda: f.Rewrite("hard-code", spec.Connection.Close,
                        lambda m: {"reply_code": HARD_SWAP.get(m.reply_code, m.reply_code)})),
    M("errors.channel-error-escalated", "a channel error closes the whole connection (same reply code)",
      "channel.close/stability + the spec's soft-error definition (channel exceptions close the channel)",
      ("errors",), f.EscalateChannelClose),
    M("errors.channel-error-then-connection-close",
      "a channel error is reported with channel.close, then the "
      "connection is closed too (504)", "the spec's soft-error definition (a channel exception closes the "
      "channel only) + channel.close/stability", ("errors", "acks"), lambda: f.CloseThenEscalate()),
    M("errors.channel-error-silences-connection", "after a channel error the connection goes silent (nothing "
      "more reaches the client)", "the spec's soft-error definition (the connection carries on)",
      ("errors", "acks"), lambda: f.CloseThenEscalate(silent=True)),
    M("errors.channel-close-method-zeroed",
      "channel.close names class 0 / method 0 instead of the failing method",
      "field:channel.close.class-id / method-id", ("errors",),
      lambda: f.Rewrite("close-ids", spec.Channel.Close, lambda m: {"class_id": 0, "method_id": 0})),
    M("errors.connection-close-method-zeroed", "connection.close names class 0 / method 0",
      "field:connection.close.class-id / method-id", ("errors",),
      lambda: f.Rewrite("conn-close-ids", spec.Connection.Close, lambda m: {"class_id": 0, "method_id": 0})),
    M("errors.soft-error-silent", "a channel error is never reported: the broker's channel.close is lost",
      "channel.close/stability (the broker discards the channel's later methods)", ("returns", "errors"),
      lambda: f.Drop("close-lost", spec.Channel.Close)),
    M("errors.close-ok-lost", "the broker never answers the client's channel.close with close-ok",
      "channel.close (synchronous: answered by close-ok)", ("channel",),
      lambda: f.Drop("close-ok-lost", spec.Channel.CloseOk)),
    M("errors.reply-text-reworded", "every channel.close carries other reply text (same code, class, method)",
      "field:channel.close.reply-text", ("errors", "returns"),
      lambda: f.Rewrite("reply-text", spec.Channel.Close,
      lambda m: {"reply_text": "MUTATED " + m.reply_text}),
      equivalent="reply-text is localised free text: the spec defines only the code's meaning, so any text "
                 "is as correct as the original"),
    # -- access control ------------------------------------------------------------------------
    M("access.refusal-code-shifted", "an operation outside the user's permissions is refused with 406 "
      "PRECONDITION_FAILED instead of 403 ACCESS_REFUSED", "constant access-refused (403) + " + ACCESS_DOC,
      ("access",), lambda: f.Rewrite("access-code", spec.Channel.Close,
                                     lambda m: {"reply_code": 406} if m.reply_code == 403 else {})),
    M("access.login-failure-not-notified", "a failed login is not told with connection.close 403: the socket "
      "just closes, although the client announced authentication_failure_close", AUTH_NOTIFY_DOC, ("access",),
      lambda: f.Drop("login-close-lost", spec.Connection.Close,
                     when=lambda st, channel, frm: frm.reply_code == 403)),
    # -- tx ------------------------------------------------------------------------------------
    M("tx.rollback-commits", "tx.rollback is carried out as tx.commit", "tx.rollback + " + SEMANTICS_DOC,
      ("tx",), RollbackCommits),
    M("tx.commit-rolls-back", "tx.commit is carried out as tx.rollback", "tx.commit + " + SEMANTICS_DOC,
      ("tx",), lambda: _CommitRollsBack()),
    M("tx.select-faked", "tx.select is acknowledged but the channel never becomes transactional",
      "tx.select + tx.commit/transacted", ("tx",),
      lambda: f.AnswerInstead("select-faked", spec.Tx.Select, lambda m: spec.Tx.SelectOk())),
    M("tx.return-after-commit-ok", "in a tx, basic.return of an unroutable mandatory publish comes after "
      "tx.commit-ok", SEMANTICS_DOC + " (RabbitMQ 3.10: the return arrives on commit, before commit-ok)",
      ("tx",), lambda: f.HoldMessage("return-after-commit", (R,), until=(spec.Tx.CommitOk,),
      when=f.in_tx_mode)),
    # -- qos / flow ----------------------------------------------------------------------------
    M("qos.prefetch-ignored", "basic.qos prefetch-count is carried out as 0 (unlimited)",
      "basic.qos.prefetch-count/01", ("qos",),
      lambda: f.Rewrite("prefetch-0", spec.Basic.Qos, lambda m: {"prefetch_count": 0}, to_client=False)),
    M("qos.prefetch-plus-one", "basic.qos prefetch-count is carried out one higher",
      "basic.qos.prefetch-count/01", ("qos",),
      lambda: f.Rewrite("prefetch+1", spec.Basic.Qos, lambda m: {"prefetch_count": m.prefetch_count + 1}
                        if m.prefetch_count else {}, to_client=False)),
    M("qos.global-flipped", "basic.qos global is carried out inverted", "field:basic.qos.global (RabbitMQ: "
      "per-consumer vs per-channel)", ("qos",),
      lambda: f.Rewrite("global-flip", spec.Basic.Qos, lambda m: {"global_": not m.global_},
      to_client=False)),
    M("qos.flow-ok-inverted", "channel.flow-ok reports the opposite of the flow state requested",
      "channel.flow-ok.active (confirms the new flow state)", ("channel",),
      lambda: f.Rewrite("flow-ok", spec.Channel.FlowOk, lambda m: {"active": not m.active})),
    # -- cancel notifications ------------------------------------------------------------------
    M("cancel.broker-cancel-lost", "the broker's basic.cancel (consumer cancel notification) is never sent",
      "RabbitMQ consumer cancel notification (capability consumer_cancel_notify) + " + ACKS_DOC, ("acks",),
      lambda: f.Drop("broker-cancel-lost", spec.Basic.Cancel)),
    M("cancel.cancel-ok-lost", "basic.cancel is never answered with cancel-ok", "basic.cancel (synchronous)",
      ("acks",), lambda: f.Drop("cancel-ok-lost", spec.Basic.CancelOk)),
    M("cancel.cancel-ignored", "basic.cancel is acknowledged but the consumer keeps receiving",
      "basic.cancel: 'the server will not send any more messages for that consumer'", ("acks",),
      lambda: f.AnswerInstead("cancel-ignored", spec.Basic.Cancel,
                              lambda m: spec.Basic.CancelOk(consumer_tag=m.consumer_tag))),
    # -- timing --------------------------------------------------------------------------------
    M("timing.deliveries-swapped", "every two consecutive deliveries on a channel arrive swapped",
      "basic/08 + " + SEMANTICS_DOC + " (ordering)", ("ordering",), SwapDeliveries),
    M("timing.delivery-held", "each delivery is held until the broker next sends a method on its channel",
      "basic.consume: messages are delivered as they arrive (no unbounded delay)", ("acks", "replies"),
      lambda: f.HoldMessage("delivery-held", (D,))),
    M("timing.delivery-duplicated", "every basic.deliver (with its content) is sent twice",
      ACKS_DOC + " (one delivery tag per delivery)", ("acks",), lambda: f.DuplicateMessage("deliver-twice",
      (D,))),
    M("timing.first-delivery-lost", "the first delivery on each channel is never sent",
      "basic.consume: every message routed to the queue is delivered", ("acks",),
      lambda: f.DropMessage("first-lost", (D,), first=True)),
    # -- connection ----------------------------------------------------------------------------
    M("connection.nack-capability-hidden",
      "server-properties no longer advertise basic.nack / publisher_confirms",
      "connection.start server-properties capabilities (RabbitMQ extensions)", ("connection", "nack"),
      lambda: f.Rewrite("caps", spec.Connection.Start, _hide_caps)),
    M("connection.exclusive-ignored", "queue.declare's exclusive flag is dropped", "queue.declare/exclusive",
      ("exclusive",), ExclusiveIgnored),
    # -- limits --------------------------------------------------------------------------------
    M("limits.blocked-never-sent", "connection.blocked and connection.unblocked never reach the client",
      "RabbitMQ Blocked Connection Notifications (capability connection.blocked)", ("limits",),
      lambda: f.Drop("blocked-lost", (spec.Connection.Blocked, spec.Connection.Unblocked))),
    M("limits.unblocked-lost", "connection.unblocked never reaches the client (connection.blocked does)",
      "RabbitMQ Blocked Connection Notifications: unblocked when all alarms clear", ("limits",),
      lambda: f.Drop("unblocked-lost", spec.Connection.Unblocked)),
    M("limits.blocked-capability-forced", "every client is treated as announcing the connection.blocked "
      "capability", "RabbitMQ Blocked Connection Notifications: only clients announcing the capability are "
      "told", ("limits",),
      lambda: f.Rewrite("blocked-cap", spec.Connection.StartOk, _with_blocked_cap, to_client=False)),
    M("limits.max-length-ignored", "queue.declare loses x-max-length and x-max-length-bytes",
      "RabbitMQ Queue Length Limit (x-max-length, x-max-length-bytes)", ("limits", "confirms"),
      lambda: f.Rewrite("maxlen-off", spec.Queue.Declare,
                        lambda m: _without_args(m, "x-max-length", "x-max-length-bytes"), to_client=False)),
    M("limits.overflow-ignored", "queue.declare loses x-overflow (the queue drops its head instead)",
      "RabbitMQ Queue Length Limit: Queue Overflow Behaviour", ("limits", "confirms"),
      lambda: f.Rewrite("overflow-off", spec.Queue.Declare, lambda m: _without_args(m, "x-overflow"),
                        to_client=False)),
    # -- extensions: accepted and ignored -----------------------------------------------------
    M("extensions.expiration-ignored", "published messages lose their expiration property (no per-message "
      "TTL)", TTL_DOC + ": per-message TTL in publishers", ("ttl", "dead_letter"),
      lambda: f.EditPublished("expiration-off", lambda p: replace(p, expiration=None))),
    M("extensions.message-ttl-ignored", "queue.declare loses x-message-ttl", TTL_DOC + ": per-queue message "
      "TTL", ("ttl", "dead_letter"), lambda: _strip(spec.Queue.Declare, "x-message-ttl")),
    M("extensions.queue-expires-ignored", "queue.declare loses x-expires (unused queues stay)",
      TTL_DOC + ": queue TTL", ("ttl",), lambda: _strip(spec.Queue.Declare, "x-expires")),
    M("extensions.internal-exchange-ignored", "exchange.declare loses internal (publishers may use the "
      "exchange directly)", "AMQP 0-9-1 with RabbitMQ's extensions (XML), exchange.declare internal",
      ("exchange",), lambda: f.Rewrite("internal-off", spec.Exchange.Declare,
                                       lambda m: {"internal": False} if m.internal else {}, to_client=False)),
    M("extensions.auto-delete-exchange-ignored", "exchange.declare loses auto-delete (the exchange outlives "
      "its bindings)", "AMQP 0-9-1 with RabbitMQ's extensions (XML), exchange.declare auto-delete",
      ("exchange",), lambda: f.Rewrite("auto-delete-off", spec.Exchange.Declare,
                                       lambda m: {"auto_delete": False} if m.auto_delete else {},
                                       to_client=False)),
    M("extensions.alternate-exchange-ignored", "exchange.declare loses alternate-exchange",
      "RabbitMQ Alternate Exchanges (rabbitmq-ae)", ("alternate_exchange",),
      lambda: _strip(spec.Exchange.Declare, "alternate-exchange")),
    M("extensions.cc-ignored", "published messages lose their CC header (no extra routing keys, nothing "
      "kept)", SENDER_DOC, ("sender_selected", "dead_letter"), lambda: _without_header("cc-off", "CC")),
    M("extensions.bcc-ignored", "published messages lose their BCC header (no extra routing keys)",
      SENDER_DOC, ("sender_selected",), lambda: _without_header("bcc-off", "BCC")),
    M("extensions.bcc-kept", "BCC routes but is not removed before delivery", SENDER_DOC + ": the BCC key "
      "and value will be removed from the message prior to delivery", ("sender_selected",),
      lambda: f.Smuggle("bcc-kept", _hide_bcc, _show_bcc)),
    M("extensions.dead-letter-exchange-ignored", "queue.declare loses x-dead-letter-exchange and "
      "x-dead-letter-routing-key (nothing is dead-lettered)", DLX_DOC, ("dead_letter", "reject", "nack"),
      lambda: _strip(spec.Queue.Declare, "x-dead-letter-exchange", "x-dead-letter-routing-key")),
    M("extensions.dead-letter-routing-key-ignored", "queue.declare loses x-dead-letter-routing-key (dead "
      "letters keep their own keys)", DLX_DOC + ": routing dead-lettered messages", ("dead_letter",),
      lambda: _strip(spec.Queue.Declare, "x-dead-letter-routing-key")),
    M("extensions.single-active-consumer-ignored", "queue.declare loses x-single-active-consumer (every "
      "consumer gets deliveries)", CONSUMERS_DOC + ": single active consumer", ("single_active_consumer",),
      lambda: _strip(spec.Queue.Declare, "x-single-active-consumer")),
    M("extensions.delivery-limit-ignored", "queue.declare loses x-delivery-limit (poison messages requeued "
      "forever)", "RabbitMQ Quorum Queues: poison message handling (rabbitmq-quorum-queues)",
      ("dead_letter", "queue_types"), lambda: _strip(spec.Queue.Declare, "x-delivery-limit")),
    M("extensions.max-length-bytes-ignored", "queue.declare loses x-max-length-bytes (x-max-length kept)",
      "RabbitMQ Queue Length Limit (x-max-length-bytes)", ("max_length", "limits"),
      lambda: _strip(spec.Queue.Declare, "x-max-length-bytes")),
    M("extensions.user-id-unchecked", "a publish's user_id naming another user is accepted and delivered "
      "as published", "RabbitMQ Validated User-ID (rabbitmq-validated-user-id)", ("user_id",),
      lambda: f.Smuggle("user-id-unchecked", _hide_user_id, _show_user_id)),
    M("extensions.consumer-timeout-ignored", "a delivery left unacknowledged past the consumer timeout "
      "never closes its channel", CONSUMERS_DOC + ": delivery acknowledgement timeout",
      ("consumer_timeout",),
      lambda: f.Drop("timeout-close-lost", spec.Channel.Close, when=_timeout_close)),
    # -- client methods carried out wrongly ----------------------------------------------------
    M("client-methods.ack-multiple-ignored", "basic.ack(multiple=true) settles only the tag it names",
      "field:basic.ack.multiple", ("acks", "replies"),
      lambda: f.Rewrite("ack-multi", spec.Basic.Ack,
      lambda m: {"multiple": False} if m.multiple and m.delivery_tag
                        else {}, to_client=False)),
    M("client-methods.ack-lost", "the client's basic.ack never reaches the queue", "basic/10", ("acks",),
      lambda: _ClientAckLost()),
    M("client-methods.reject-requeue-dropped", "basic.reject(requeue=true) discards the message",
      "basic.reject.requeue/01 + 002_4ef6b84472723893.txt", ("reject",), RejectRequeueDropped),
    M("client-methods.nack-multiple-ignored", "basic.nack(multiple=true) settles only the tag it names",
      "field:basic.nack.multiple", ("nack",), NackMultipleIgnored),
    M("client-methods.nack-requeue-dropped", "basic.nack(requeue=true) discards the message",
      "field:basic.nack.requeue", ("nack",),
      lambda: f.Rewrite("nack-drop", spec.Basic.Nack, lambda m: {"requeue": False} if m.requeue else {},
                        to_client=False)),
    M("client-methods.recover-requeue-dropped",
      "basic.recover(requeue=true) is carried out with requeue=false",
      "basic.recover/01", ("recover",),
      lambda: f.Rewrite("recover-flip", spec.Basic.Recover, lambda m: {"requeue": False} if m.requeue else {},
                        to_client=False)),
    # -- routing -------------------------------------------------------------------------------
    M("routing.bind-key-rewritten", "queue.bind is carried out with another routing key",
      "queue.bind/direct-exchange-key-matching", ("queue",),
      lambda: f.Rewrite("bind-key", spec.Queue.Bind, _suffix("routing_key"), to_client=False)),
    M("routing.mandatory-ignored", "basic.publish's mandatory flag is ignored", "basic.publish.mandatory/01",
      ("returns",), lambda: f.Rewrite("mandatory-off", spec.Basic.Publish,
                                      lambda m: {"mandatory": False} if m.mandatory else {}, to_client=False),
      should=True),
    M("routing.topic-hash-as-star", "a topic binding's # matches exactly one word (as *)", TOPIC_DOC,
      ("routing",), lambda: rf.BindRewrite("hash-as-star", "topic", words={"#": "*"})),
    M("routing.topic-star-as-hash", "a topic binding's * matches zero or more words (as #)", TOPIC_DOC,
      ("routing",), lambda: rf.BindRewrite("star-as-hash", "topic", words={"*": "#"})),
    M("routing.headers-all-as-any", "a headers binding with x-match all (or none) matches as any",
      HEADERS_DOC, ("routing",), lambda: rf.BindRewrite("all-as-any", "headers", x_match={"all": "any"})),
    M("routing.headers-any-as-all", "a headers binding with x-match any matches as all", HEADERS_DOC,
      ("routing",), lambda: rf.BindRewrite("any-as-all", "headers", x_match={"any": "all"})),
    M("routing.direct-wildcards", "a direct exchange matches * and # in binding keys as wildcards",
      "queue.bind/direct-exchange-key-matching", ("routing",), rf.DirectAsTopic),
)
# fmt: on


class _AckAsNack(f.Tracking):
    """confirms: a basic.ack on a confirm channel goes out as basic.nack (requeue=false)."""

    name = "ack-as-nack"

    def to_client(self, st: dict, channel: int, frm: object) -> list[f.Frame]:
        if isinstance(frm, spec.Basic.Ack) and f.in_confirm_mode(st, channel, frm):
            return [
                (
                    channel,
                    spec.Basic.Nack(delivery_tag=frm.delivery_tag, multiple=frm.multiple, requeue=False),
                )
            ]
        return [(channel, frm)]


class _CommitRollsBack(f.Tracking):
    """tx: tx.commit is carried out as tx.rollback (its rollback-ok shown as commit-ok)."""

    name = "commit-rolls-back"

    def broker_frame(self, st: dict, channel: int, frm: object) -> list[f.Frame]:
        if isinstance(frm, spec.Tx.Commit):
            st.setdefault("swapped", set()).add(channel)
            return [(channel, spec.Tx.Rollback())]
        return [(channel, frm)]

    def to_client(self, st: dict, channel: int, frm: object) -> list[f.Frame]:
        if isinstance(frm, spec.Tx.RollbackOk) and channel in st.get("swapped", set()):
            st["swapped"].discard(channel)
            return [(channel, spec.Tx.CommitOk())]
        return [(channel, frm)]


class _ClientAckLost(f.Tracking):
    """The client's basic.ack on a channel that is not in confirm mode is dropped (a confirm
    channel's basic.ack from the client does not exist: acks there come from the broker)."""

    name = "client-ack-lost"

    def broker_frame(self, st: dict, channel: int, frm: object) -> list[f.Frame]:
        return [] if isinstance(frm, spec.Basic.Ack) else [(channel, frm)]


def _without_args(m: spec.Queue.Declare | spec.Exchange.Declare, *names: str) -> dict[str, object]:
    args = dict(m.arguments or {})
    if not any(n in args for n in names):
        return {}
    return {"arguments": {k: v for k, v in args.items() if k not in names}}


def _strip(method: type, *names: str) -> Fault:
    """``method`` (queue.declare or exchange.declare) reaches the broker without the arguments ``names``."""
    return f.Rewrite("strip-" + "+".join(names), method, lambda m: _without_args(m, *names), to_client=False)


def _headers_without(props: Any, *names: str) -> Any:
    headers = {k: v for k, v in dict(props.headers or {}).items() if k not in names}
    return replace(props, headers=headers or None)


def _without_header(name: str, header: str) -> Fault:
    return f.EditPublished(name, lambda p: _headers_without(p, header) if header in (p.headers or {}) else p)


BCC_SHADOW, USER_SHADOW = "x-amqpc-mutant-bcc", "x-amqpc-mutant-user-id"


def _hide_bcc(props: Any, st: dict[str, Any]) -> Any:
    headers = dict(props.headers or {})
    if "BCC" not in headers:
        return props
    return replace(props, headers={**headers, BCC_SHADOW: headers["BCC"]})  # BCC itself still routes


def _show_bcc(props: Any) -> Any:
    headers = dict(props.headers or {})
    if BCC_SHADOW not in headers:
        return props
    headers["BCC"] = headers.pop(BCC_SHADOW)
    return replace(props, headers=headers)


def _hide_user_id(props: Any, st: dict[str, Any]) -> Any:
    user = st.get("login_user")
    if not props.user_id or user is None or props.user_id == user:
        return props
    return replace(props, user_id=user, headers={**dict(props.headers or {}), USER_SHADOW: props.user_id})


def _show_user_id(props: Any) -> Any:
    headers = dict(props.headers or {})
    if USER_SHADOW not in headers:
        return props
    forged = headers.pop(USER_SHADOW)
    return replace(props, user_id=forged, headers=headers or None)


def _timeout_close(st: dict[str, Any], channel: int, frm: Any) -> bool:
    """The consumer timeout's channel.close: 406 naming no method (no client method failed)."""
    return bool((frm.reply_code, frm.class_id, frm.method_id) == (406, 0, 0))


def _with_blocked_cap(m: spec.Connection.StartOk) -> dict[str, object]:
    props = dict(m.client_properties or {})
    caps = props.get("capabilities")
    props["capabilities"] = {**(caps if isinstance(caps, dict) else {}), "connection.blocked": True}
    return {"client_properties": props}


def _hide_caps(start: spec.Connection.Start) -> dict[str, object]:
    props = dict(start.server_properties or {})
    offered = props.get("capabilities")
    caps = {k: v for k, v in (offered.items() if isinstance(offered, dict) else ())
            if k not in ("basic.nack", "publisher_confirms")}
    props["capabilities"] = caps
    return {"server_properties": props}


def select(globs: list[str] | None = None, areas: list[str] | None = None) -> list[Mutant]:
    """Mutants whose id matches one of ``globs`` and, with ``areas``, that one of those areas observes."""
    import fnmatch

    out = [m for m in CATALOGUE if not globs or any(fnmatch.fnmatchcase(m.id, g) for g in globs)]
    if areas:
        out = [m for m in out if set(m.areas) & set(areas) or m.category in areas]
    return out
