"""RabbitMQ's permission model on the sans-IO core: the access control guide's table, one row at a
time, against a user whose configure / write / read expressions each admit a different prefix."""

from __future__ import annotations

from typing import Any

import pytest
from pamqp import commands as spec

from conformance.broker.access import REQUIRED, Grant, Permissions, Users, parse_user_spec
from conformance.broker.errors import AMQPError
from conformance.broker.model import Broker
from conformance.broker.server import load_users

from .link import FakeClock, Link, make_broker

# ok-* every permission, c-* configure only, w-* write only, r-* read only, no-* none.
RESTRICTED = Permissions(configure="^(ok|c)-", write="^(ok|w)-", read="^(ok|r)-")


@pytest.fixture
def rbroker(clock: FakeClock) -> Broker:
    users = Users.full({"guest": "guest"}, ["/", "v2"])
    users.passwords["bob"] = "pw"
    users.permissions[("bob", "/")] = RESTRICTED
    return make_broker(clock, users=users, vhosts=["/", "v2"])


def admin(broker: Broker) -> Link:
    link = Link(broker)
    return link


def bob(broker: Broker) -> Link:
    link = Link(broker, handshake=False)
    link.handshake(user="bob", password="pw")
    link.open(1)
    return link


def setup_entities(broker: Broker) -> Link:
    a = admin(broker)
    for q in ("ok-q", "c-q", "w-q", "r-q", "no-q"):
        a.declare(q)
    for x in ("ok-x", "c-x", "w-x", "r-x", "no-x"):
        a.rpc(spec.Exchange.Declare(exchange=x, exchange_type="direct"), spec.Exchange.DeclareOk)
    return a


def test_table_has_every_row_of_the_guide() -> None:
    assert set(REQUIRED) == {
        "exchange.declare",
        "exchange.declare/passive",
        "exchange.declare/alternate-exchange",
        "exchange.delete",
        "queue.declare",
        "queue.declare/passive",
        "queue.declare/dead-letter-exchange",
        "queue.delete",
        "exchange.bind",
        "exchange.unbind",
        "queue.bind",
        "queue.unbind",
        "basic.publish",
        "basic.get",
        "basic.consume",
        "queue.purge",
    }


def test_empty_expression_matches_nothing_and_default_exchange_is_amq_default() -> None:
    g = Grant("u", "/", Permissions(configure="", write="^amq\\.default$", read=".*"))
    with pytest.raises(AMQPError) as err:
        g.check("queue.declare", queue="q")
    assert "queue 'q' in vhost '/' refused for user 'u'" in str(err.value)
    g.check("basic.publish", exchange="")  # the default exchange is checked as amq.default
    with pytest.raises(AMQPError):
        Grant("u", "/", Permissions(write="^x$")).check("basic.publish", exchange="")


def test_expressions_are_unanchored_searches() -> None:
    Grant("u", "/", Permissions(read="q")).check("basic.get", queue="my-q-1")


# (method that needs the permission, a name it is refused on, a name it is allowed on)
ROWS: list[tuple[str, Any, str, str]] = [
    ("exchange.declare", lambda n: spec.Exchange.Declare(exchange=n, exchange_type="direct"), "w-x2", "c-x2"),
    ("exchange.delete", lambda n: spec.Exchange.Delete(exchange=n), "w-x", "c-x"),
    ("queue.declare", lambda n: spec.Queue.Declare(queue=n), "r-q2", "c-q2"),
    ("queue.delete", lambda n: spec.Queue.Delete(queue=n), "w-q", "c-q"),
    ("queue.purge", lambda n: spec.Queue.Purge(queue=n), "c-q", "r-q"),
    ("basic.get", lambda n: spec.Basic.Get(queue=n), "w-q", "r-q"),
    ("basic.consume", lambda n: spec.Basic.Consume(queue=n, consumer_tag="t"), "c-q", "r-q"),
    (
        "queue.bind: write on the queue",
        lambda n: spec.Queue.Bind(queue=n, exchange="r-x", routing_key="k"),
        "r-q",
        "w-q",
    ),
    (
        "queue.bind: read on the exchange",
        lambda n: spec.Queue.Bind(queue="w-q", exchange=n, routing_key="k"),
        "w-x",
        "r-x",
    ),
    (
        "queue.unbind: write on the queue",
        lambda n: spec.Queue.Unbind(queue=n, exchange="r-x", routing_key="k"),
        "c-q",
        "w-q",
    ),
    (
        "queue.unbind: read on the exchange",
        lambda n: spec.Queue.Unbind(queue="w-q", exchange=n, routing_key="k"),
        "c-x",
        "r-x",
    ),
    (
        "exchange.bind: write on the destination",
        lambda n: spec.Exchange.Bind(destination=n, source="r-x", routing_key="k"),
        "r-x",
        "w-x",
    ),
    (
        "exchange.bind: read on the source",
        lambda n: spec.Exchange.Bind(destination="w-x", source=n, routing_key="k"),
        "w-x",
        "r-x",
    ),
    (
        "exchange.unbind: read on the source",
        lambda n: spec.Exchange.Unbind(destination="w-x", source=n, routing_key="k"),
        "c-x",
        "r-x",
    ),
]


@pytest.mark.parametrize(("what", "make", "refused", "allowed"), ROWS, ids=[r[0] for r in ROWS])
def test_table_row(rbroker: Broker, what: str, make: Any, refused: str, allowed: str) -> None:
    setup_entities(rbroker)
    b = bob(rbroker)
    b.send(make(refused))
    close = b.channel_closed(403)
    index = make(refused).index
    assert (close.class_id, close.method_id) == (index >> 16, index & 0xFFFF)
    assert close.reply_text.startswith("ACCESS_REFUSED - access to ")
    assert close.reply_text.endswith("in vhost '/' refused for user 'bob'")
    b.open(1)
    b.send(make(allowed))
    reply = b.take_objs()
    assert reply and not isinstance(reply[0], spec.Channel.Close), reply


def test_publish_needs_write_on_the_exchange(rbroker: Broker) -> None:
    a = setup_entities(rbroker)
    a.rpc(spec.Queue.Bind(queue="ok-q", exchange="w-x", routing_key="k"), spec.Queue.BindOk)
    a.rpc(spec.Queue.Bind(queue="ok-q", exchange="r-x", routing_key="k"), spec.Queue.BindOk)
    b = bob(rbroker)
    b.publish(b"refused", exchange="r-x", routing_key="k")
    close = b.channel_closed(403)
    assert (close.class_id, close.method_id) == (60, 40)
    assert close.reply_text == "ACCESS_REFUSED - access to exchange 'r-x' in vhost '/' refused for user 'bob'"
    b.open(1)
    b.publish(b"routed", exchange="w-x", routing_key="k")
    b.publish(b"default", exchange="", routing_key="ok-q")  # no write on amq.default
    close = b.channel_closed(403)
    assert "exchange 'amq.default'" in close.reply_text
    assert [m.body for m in [a.get("ok-q")] if m] == [b"routed"]
    assert a.get("ok-q") is None  # neither refused message was routed


def test_passive_declares_need_nothing(rbroker: Broker) -> None:
    setup_entities(rbroker)
    b = bob(rbroker)
    b.rpc(spec.Queue.Declare(queue="no-q", passive=True), spec.Queue.DeclareOk)
    b.rpc(spec.Exchange.Declare(exchange="no-x", passive=True), spec.Exchange.DeclareOk)


def test_redeclare_of_an_existing_queue_needs_configure(rbroker: Broker) -> None:
    setup_entities(rbroker)
    b = bob(rbroker)
    b.send(spec.Queue.Declare(queue="r-q"))
    b.channel_closed(403)


def test_server_named_queue_needs_configure_on_amq_gen(rbroker: Broker) -> None:
    b = bob(rbroker)
    b.send(spec.Queue.Declare(queue=""))
    close = b.channel_closed(403)
    assert "queue 'amq.gen-" in close.reply_text


def test_dead_letter_and_alternate_exchange_rows(rbroker: Broker) -> None:
    b = bob(rbroker)
    # configure on the queue is not enough: read on it and write on the DLX are needed too
    b.send(spec.Queue.Declare(queue="c-q3", arguments={"x-dead-letter-exchange": "ok-x"}))
    assert "queue 'c-q3'" in b.channel_closed(403).reply_text
    b.open(1)
    b.send(spec.Queue.Declare(queue="ok-q3", arguments={"x-dead-letter-exchange": "r-x"}))
    assert "exchange 'r-x'" in b.channel_closed(403).reply_text
    b.open(1)
    b.declare("ok-q3", arguments={"x-dead-letter-exchange": "w-x"})
    b.send(
        spec.Exchange.Declare(
            exchange="ok-x3", exchange_type="fanout", arguments={"alternate-exchange": "r-x"}
        )
    )
    assert "exchange 'r-x'" in b.channel_closed(403).reply_text
    b.open(1)
    b.rpc(
        spec.Exchange.Declare(
            exchange="ok-x3", exchange_type="fanout", arguments={"alternate-exchange": "w-x"}
        ),
        spec.Exchange.DeclareOk,
    )
    assert "ok-q3" in rbroker.vhosts["/"].queues and "ok-x3" in rbroker.vhosts["/"].exchanges


def test_refused_declare_and_bind_leave_nothing(rbroker: Broker) -> None:
    setup_entities(rbroker)
    b = bob(rbroker)
    b.send(spec.Queue.Declare(queue="no-q9"))
    b.channel_closed(403)
    b.open(1)
    b.send(spec.Queue.Bind(queue="no-q", exchange="ok-x", routing_key="k"))
    b.channel_closed(403)
    vh = rbroker.vhosts["/"]
    assert "no-q9" not in vh.queues
    assert not vh.exchanges["ok-x"].bindings


def test_vhost_without_permissions_is_530(rbroker: Broker) -> None:
    link = Link(rbroker, handshake=False)
    link.feed(b"AMQP\x00\x00\x09\x01")
    link.expect(spec.Connection.Start, 0)
    link.send(spec.Connection.StartOk(client_properties={}, mechanism="PLAIN", response="\0bob\0pw"), 0)
    tune = link.expect(spec.Connection.Tune, 0)
    link.send(spec.Connection.TuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0), 0)
    link.send(spec.Connection.Open(virtual_host="v2"), 0)
    close = link.connection_closed(530)
    assert close.reply_text == "NOT_ALLOWED - access to vhost 'v2' refused for user 'bob'"
    assert (close.class_id, close.method_id) == (10, 40)


@pytest.mark.parametrize("caps", [{"authentication_failure_close": True}, {}])
@pytest.mark.parametrize("user", ["bob", "nobody"])
def test_login_failure(rbroker: Broker, caps: dict[str, Any], user: str) -> None:
    link = Link(rbroker, handshake=False)
    link.feed(b"AMQP\x00\x00\x09\x01")
    link.expect(spec.Connection.Start, 0)
    link.send(spec.Connection.StartOk(client_properties={"capabilities": caps}, mechanism="PLAIN",
                                      response=f"\0{user}\0wrong"), 0)
    if caps:
        close = link.connection_closed(403)
        assert close.reply_text.startswith("ACCESS_REFUSED - Login was refused")
    else:
        link.nothing()
    assert link.transport_closed or caps


def test_user_specs_and_file(tmp_path: Any) -> None:
    assert parse_user_spec("a:b") == ("a", "b", None, None)
    assert parse_user_spec("a:b:/:^x:^y:^z:w") == ("a", "b", "/", Permissions("^x", "^y", "^z:w"))
    for bad in ("a", ":b", "a:b:/", "a:b:/:(:x:y"):
        with pytest.raises(ValueError, match="--user"):
            parse_user_spec(bad)
    f = tmp_path / "u.json"
    f.write_text('{"users": {"guest": "guest", "bob": {"password": "pw", "permissions": '
                 '{"/": {"configure": "^c", "write": "^w"}}}}, "vhosts": ["/", "v2"]}')
    users, vhosts = load_users(f, ["eve:pw2:v3:.*:.*:.*"])
    assert vhosts == ["/", "v2", "v3"]
    assert users.grant("guest", "v2") is not None
    assert users.grant("bob", "v2") is None
    assert users.grant("bob", "/") == Grant("bob", "/", Permissions("^c", "^w", ""))
    assert users.passwords["eve"] == "pw2" and users.grant("eve", "v3") is not None
    for text in ("[1]", '{"users": [1]}', '{"users": {"x": 1}}', '{"users": {"x": {"password": "p", '
                                                                    '"permissions": {"/": 1}}}}'):
        f.write_text(text)
        with pytest.raises(ValueError):
            load_users(f)
