"""Queue length in octets: ``x-max-length-bytes`` with the default overflow (drop-head).

Document: RabbitMQ's Queue Length Limit guide (``rabbitmq-maxlength``): by default the oldest
messages are dropped from the head to make room; the byte limit counts the bodies of ready
messages. (The count limit and the overflow modes are the ``limits`` area's; this adds the byte
limit's drop-head, so a broker that ignores x-max-length-bytes FAILs here too.)
"""

from __future__ import annotations

from conformance.model.cases import Level, case
from conformance.verify import extensions as ext

DEFAULT = "rabbitmq-maxlength#default-behaviour"


@case("max_length.bytes-drop-head", sources=[DEFAULT], level=Level.EXTENSION, queue_types=("classic",),
      wedges=True, premise="drop-head by bytes on the classic queue the case declares",
      description="x-max-length-bytes 10 (default overflow); publishes of 6, 3 and 4 body octets, confirmed",
      expectation="all acked; the 6-octet message is dropped from the head (6 + 3 + 4 > 10); the queue holds "
      "the 3- and 4-octet messages in order")
def test_bytes_drop_head(isolated, ctx):
    ch = isolated.channel()
    q = isolated.queue(ctx.name("q"))
    ext.declare_queue_ext(ch, q, {"x-max-length-bytes": 10}, "x-max-length-bytes")
    ext.send_confirmed(ch, "", [(q, b"aaaaaa", None), (q, b"bbb", None), (q, b"cccc", None)])
    got = []
    while (ev := ch.get(q, no_ack=True)) is not None:
        got.append((ev.body or b"").decode())
    ctx.check(got, ["bbb", "cccc"], "messages the queue kept, in order")
