"""The delivery acknowledgement (consumer) timeout.

Document: RabbitMQ's Consumers guide, Delivery Acknowledgement Timeout (``rabbitmq-consumers``): "If
a consumer does not ack its delivery within the timeout value, its channel is closed with a
PRECONDITION_FAILED channel exception"; the channel's unacked deliveries are requeued. RabbitMQ
3.10.8's text (rabbit_channel, evaluate_consumer_timeout) is "PRECONDITION_FAILED - delivery
acknowledgement on channel N timed out. Timeout value used: T ms. This timeout value can be
configured, see consumers doc guide to learn more", class and method 0. The text, and whether a
classic queue's consumer is timed out at all, are release data (``rabbitmq_releases.toml``: the
text before 3.8.17; RabbitMQ 4.3 no longer evaluates consumer timeouts on classic queues).

The timeout is broker configuration a client cannot read: spawned reference and local:rabbitmq
targets give the case a broker private to the worker with a 1 s timeout (RabbitMQ's
channel_tick_interval lowered so it is evaluated in time); a url target needs
``--amqp-consumer-timeout MS``, else the case is UNSUPPORTED.
"""

from __future__ import annotations

import time

from conformance.model.cases import Level, case
from conformance.model.sources import cite_text
from conformance.protocol import Mismatch, Strictness
from conformance.verify import CaseTimeout, expect_channel_close
from conformance.verify import extensions as ext

TIMEOUT_DOC = "rabbitmq-consumers#acknowledgement-timeout"
TEXT = ("PRECONDITION_FAILED - delivery acknowledgement on channel {ch} timed out. Timeout value "
        "used: {ms} ms. "
        "This timeout value can be configured, see consumers doc guide to learn more")
#: what the case observes when the broker does not time the consumer out (RabbitMQ 4.3, classic)
NOT_TIMED_OUT = "no channel.close: the delivery stays with the consumer"


def _judge(ctx, observed: str, expected: str, what: str) -> None:
    """``ctx.check_profile`` against the expected value formatted with this run's channel and timeout."""
    ctx.observed[what] = observed
    if observed != expected:
        raise Mismatch(f"{what} (profile {ctx.profile}: {cite_text(ctx.expected_source)})", expected=expected,
                       observed=observed, strictness=Strictness.BINDING)


@case("consumer_timeout.unacked-delivery-closes-channel", sources=[TIMEOUT_DOC], level=Level.EXTENSION,
      description="A consumer (manual acks) takes one delivery from a classic queue and never acknowledges "
      "it, on a broker whose consumer timeout is T ms",
      expectation="no sooner than T ms later the broker closes that channel: 406 PRECONDITION_FAILED, "
      "class/method 0/0, RabbitMQ's text; the connection stays usable; the message is requeued and "
      "got again with redelivered=true (RabbitMQ 4.3: classic queues never time a consumer out, the "
      "delivery stays with it: release row classic-consumer-timeout-not-evaluated)",
      default=f"channel.close 406 0/0: {TEXT}")
def test_unacked_delivery_closes_channel(amqp, ctx, cleanup, broker_url, consumer_timeout_broker):
    url, ms = consumer_timeout_broker
    ctx.observe("consumer timeout (ms)", ms)
    conn = amqp(url)
    ch = conn.channel()
    # on a url target the broker is the shared one: cleanup deletes the queue there after the case
    q = cleanup.queue(ctx.name("q")) if url == broker_url else ctx.name("q")
    ext.declare_queue_ext(ch, q, {}, "a plain queue")
    ext.send_confirmed(ch, "", [(q, b"held", None)])
    ch.consume(q)
    started = time.monotonic()
    ch.next_delivery(what="the delivery the consumer holds")
    within = ms / 1000 + ctx.timeout  # the timeout, then the case's own answer bound
    try:
        ev = expect_channel_close(ch, 406, what="the consumer timeout", probe=False, timeout=within)
    except CaseTimeout:
        ev = None
    expected = str(ctx.expected).format(ch=ch.id, ms=ms)
    if ev is None:
        _judge(ctx, NOT_TIMED_OUT, expected, f"the broker's answer within {within:.1f} s")
        ch.barrier()  # the consumer's channel is still open ...
        ctx.check(conn.channel().get(q, no_ack=True), None, "basic.get on another channel (the message is "
                  "held by the consumer, not requeued)")
        if url != broker_url:
            ch.close()
            conn.channel().delete_queue(q)
        return
    elapsed = (time.monotonic() - started) * 1000
    ctx.check(elapsed >= ms * 0.9, True, f"channel closed no sooner than the timeout ({elapsed:.0f} ms)")
    m = ev.method
    observed = f"channel.close {int(m.reply_code)} {int(m.class_id)}/{int(m.method_id)}: {m.reply_text}"
    _judge(ctx, observed, expected, "channel.close (code, class/method, text)")
    other = conn.channel()
    got = other.get(q, no_ack=True)
    ctx.check(None if got is None else (got.body, bool(got.method.redelivered)), (b"held", True),
              "the held message got again (body, redelivered)")
    if url != broker_url:
        other.delete_queue(q)
