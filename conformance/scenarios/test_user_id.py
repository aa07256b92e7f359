"""Validated user-id: the ``user-id`` message property.

Document: RabbitMQ's Validated User-ID guide (``rabbitmq-validated-user-id``): "if this property is
set by a publisher, its value must be equal to the name of the connection's user". RabbitMQ 3.10.8
refuses a forged one with channel.close 406 PRECONDITION_FAILED "user_id property set to 'X' but
authenticated user was 'U'" naming basic.publish (measured). A broker that ignores the property
delivers the forged one and FAILs.
"""

from __future__ import annotations

from pamqp import commands as spec

from conformance.model.cases import Level, case
from conformance.verify import expect_channel_close
from conformance.verify import extensions as ext
from conformance.verify.queue_types import declare_fields

VALIDATED = "rabbitmq-validated-user-id#validation"
RMQ = "DESIGN.md#facts-measured-on-rabbitmq-3-10-8"


def _queue(isolated, ctx, queue_type: str):
    """A channel and a queue of the selected type on the case's broker."""
    ch = isolated.channel()
    q = isolated.queue(ctx.name("q"))
    ch.declare_queue(q, **declare_fields(queue_type, {}))
    return ch, q


@case("user_id.forged-refused", wedges=True, sources=[VALIDATED, RMQ], level=Level.EXTENSION,
      description="A publish whose user_id property names another user than the connection's",
      expectation="channel.close 406 PRECONDITION_FAILED naming basic.publish, text \"PRECONDITION_FAILED - "
      "user_id property set to '<forged>' but authenticated user was '<user>'\"; the message is not enqueued")
def test_forged_refused(isolated, ctx, queue_type):
    ch, q = _queue(isolated, ctx, queue_type)
    forged = f"not-{ext.login_user(ch)}"
    ch.publish("", q, b"forged", properties=ext.props(user_id=forged))
    ev = expect_channel_close(ch, 406, what="publish with a forged user_id", method=spec.Basic.Publish)
    ctx.check(ev.method.reply_text, f"PRECONDITION_FAILED - user_id property set to '{forged}' but "
              f"authenticated user was '{ext.login_user(ch)}'", "reply text")
    probe = ch.conn.channel()
    ctx.check(probe.message_count(q), 0, "messages in the queue")


@case("user_id.matching-delivered", wedges=True, sources=[VALIDATED], level=Level.EXTENSION,
      description="A publish whose user_id property is the connection's own user",
      expectation="it is enqueued and got with user_id intact")
def test_matching_delivered(isolated, ctx, queue_type):
    ch, q = _queue(isolated, ctx, queue_type)
    user = ext.login_user(ch)
    ext.send_confirmed(ch, "", [(q, b"mine", ext.props(user_id=user))])
    ev = ch.get(q, no_ack=True)
    ctx.check(None if ev is None else (ev.body, ev.properties.user_id), (b"mine", user),
              "the message got (body, user_id)")
