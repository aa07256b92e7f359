from pamqp import commands as spec

from .link import Content, Link


def test_publish_get_ack(link: Link) -> None:
    q = link.declare("q1").queue
    link.publish(b"hello", routing_key=q)
    m = link.get(q)
    assert isinstance(m, Content) and m.body == b"hello" and m.method.delivery_tag == 1
    link.send(spec.Basic.Ack(delivery_tag=1))
    link.nothing()
