"""The delivery acknowledgement (consumer) timeout.

Document: RabbitMQ's Consumers guide, Delivery Acknowledgement Timeout (``rabbitmq-consumers``): "If
a consumer does not ack its delivery within the timeout value, its channel is closed with a
PRECONDITION_FAILED channel exception"; the channel's unacked deliveries are requeued. RabbitMQ
3.10.8's text (rabbit_channel, evaluate_consumer_timeout) is "PRECONDITION_FAILED - delivery
acknowledgement on channel N timed out. Timeout value used: T ms. This timeout value can be
configured, see consumers doc guide to learn more", class and method 0.

The timeout is broker configuration a client cannot read: spawned reference and local:rabbitmq
targets give the case a broker private to the worker with a 1 s timeout (RabbitMQ's
channel_tick_interval lowered so it is evaluated in time); a url target needs
``--amqp-consumer-timeout MS``, else the case is UNSUPPORTED.
"""

from __future__ import annotations

import time

from conformance.model.cases import Level, case
from conformance.verify import expect_channel_close
from conformance.verify import extensions as ext

TIMEOUT_DOC = "rabbitmq-consumers#acknowledgement-timeout"
TEXT = ("PRECONDITION_FAILED - delivery acknowledgement on channel {ch} timed out. Timeout value "
        "used: {ms} ms. "
        "This timeout value can be configured, see consumers doc guide to learn more")


@case("consumer_timeout.unacked-delivery-closes-channel", sources=[TIMEOUT_DOC], level=Level.EXTENSION,
      description="A consumer (manual acks) takes one delivery and never acknowledges it, on a broker whose "
      "consumer timeout is T ms",
      expectation="no sooner than T ms later the broker closes that channel: 406 PRECONDITION_FAILED, "
      "class/method 0/0, RabbitMQ's text; the connection stays usable; the message is requeued and "
      "got again with redelivered=true")
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
    ev = expect_channel_close(ch, 406, what="the consumer timeout", probe=False,
                              timeout=ms / 1000 + ctx.timeout)
    elapsed = (time.monotonic() - started) * 1000
    ctx.check(elapsed >= ms * 0.9, True, f"channel closed no sooner than the timeout ({elapsed:.0f} ms)")
    ctx.check((ev.method.reply_text, int(ev.method.class_id), int(ev.method.method_id)),
              (TEXT.format(ch=ch.id, ms=ms), 0, 0), "channel.close (text, class-id, method-id)")
    other = conn.channel()
    got = other.get(q, no_ack=True)
    ctx.check(None if got is None else (got.body, bool(got.method.redelivered)), (b"held", True),
              "the held message got again (body, redelivered)")
    if url != broker_url:
        other.delete_queue(q)
