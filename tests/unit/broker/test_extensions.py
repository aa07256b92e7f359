"""RabbitMQ extensions on the sans-IO core: single active consumer, the delivery
acknowledgement (consumer) timeout, validated user-id with the impersonator tag, and the
dead-letter details (CC under x-dead-letter-routing-key, the cycle rule)."""

from __future__ import annotations

from pamqp import commands as spec

from conformance.broker.limits import DEFAULT_CONSUMER_TIMEOUT, Limits

from .link import Content, FakeClock, Link, make_broker

SAC = {"x-single-active-consumer": True}


def _consume(link: Link, queue: str, tag: str, channel: int = 1, **kw: object) -> None:
    link.rpc(spec.Basic.Consume(queue=queue, consumer_tag=tag, **kw), spec.Basic.ConsumeOk, channel)


def _delivered(link: Link) -> list[tuple[str, bytes]]:
    return [(o.method.consumer_tag, o.body) for o in link.take_objs() if isinstance(o, Content)]


def test_single_active_consumer_only_the_first_receives(link: Link) -> None:
    link.declare("sac", arguments=SAC)
    _consume(link, "sac", "first")
    _consume(link, "sac", "second")
    for body in (b"1", b"2", b"3"):
        link.publish(body, routing_key="sac")
    assert _delivered(link) == [("first", b"1"), ("first", b"2"), ("first", b"3")]
    assert link.declare("sac", passive=True).consumer_count == 2


def test_single_active_consumer_next_takes_over_after_cancel(link: Link) -> None:
    link.declare("sac", arguments=SAC)
    _consume(link, "sac", "first")
    _consume(link, "sac", "second")
    _consume(link, "sac", "third")
    link.publish(b"1", routing_key="sac")
    assert _delivered(link) == [("first", b"1")]
    link.rpc(spec.Basic.Cancel(consumer_tag="first"), spec.Basic.CancelOk)
    link.publish(b"2", routing_key="sac")
    assert _delivered(link) == [("second", b"2")]
    # the cancelled consumer's unacked delivery stays on its channel (RabbitMQ: until ack or close)
    link.send(spec.Basic.Ack(delivery_tag=1))
    link.nothing()


def test_single_active_consumer_channel_close_requeues_to_the_next(broker: object) -> None:
    link = Link(broker)  # type: ignore[arg-type]
    link.open(2)
    link.declare("sac", arguments=SAC)
    _consume(link, "sac", "first", channel=1)
    _consume(link, "sac", "second", channel=2)
    link.publish(b"1", routing_key="sac")
    link.publish(b"2", routing_key="sac")
    assert _delivered(link) == [("first", b"1"), ("first", b"2")]
    link.send(spec.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), 1)
    frames = link.take()
    assert any(ch == 1 and isinstance(o, spec.Channel.CloseOk) for ch, o in frames)
    got = [o for ch, o in frames if ch == 2]
    assert [(o.method.consumer_tag, o.body, o.method.redelivered) for o in got] == [
        ("second", b"1", True), ("second", b"2", True)]


def test_single_active_consumer_refuses_an_exclusive_consumer(link: Link) -> None:
    link.declare("sac", arguments=SAC)
    link.send(spec.Basic.Consume(queue="sac", consumer_tag="x", exclusive=True))
    close = link.channel_closed(403)
    assert close.reply_text == "ACCESS_REFUSED - queue 'sac' in vhost '/' in exclusive use"


def test_single_active_consumer_argument_must_be_a_boolean(link: Link) -> None:
    link.send(spec.Queue.Declare(queue="sac", arguments={"x-single-active-consumer": "yes"}))
    assert link.channel_closed(406).reply_text == (
        "PRECONDITION_FAILED - invalid arg 'x-single-active-consumer' for queue 'sac' in vhost '/': "
        "{unacceptable_type,longstr}")


def test_without_single_active_consumer_consumers_share(link: Link) -> None:
    link.declare("plain")
    _consume(link, "plain", "first")
    _consume(link, "plain", "second")
    link.publish(b"1", routing_key="plain")
    link.publish(b"2", routing_key="plain")
    assert _delivered(link) == [("first", b"1"), ("second", b"2")]


# -- consumer (delivery acknowledgement) timeout ------------------------------------------------

def _timeout_link(ms: int | None) -> tuple[Link, FakeClock]:
    clock = FakeClock()
    limits = Limits() if ms is None else Limits(consumer_timeout=ms)
    return Link(make_broker(clock, limits=limits)), clock


def test_consumer_timeout_default_is_rabbitmqs_30_minutes() -> None:
    assert DEFAULT_CONSUMER_TIMEOUT == 1_800_000 and Limits().consumer_timeout == 1_800_000


def test_consumer_timeout_closes_the_channel_with_rabbitmqs_text() -> None:
    link, clock = _timeout_link(500)
    link.declare("q")
    _consume(link, "q", "c")
    link.publish(b"1", routing_key="q")
    assert _delivered(link) == [("c", b"1")]
    clock.advance(0.4)
    link.core.tick()
    link.nothing()
    clock.advance(0.2)
    link.core.tick()
    close = link.channel_closed(406)
    assert close.reply_text == (
        "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: "
        "500 ms. This timeout value can be configured, see consumers doc guide to learn more")
    assert (close.class_id, close.method_id) == (0, 0)
    # the message went back to the queue
    link.open(1)
    assert link.declare("q", passive=True).message_count == 1


def test_consumer_timeout_spares_acked_deliveries_and_counts_basic_get() -> None:
    link, clock = _timeout_link(500)
    link.declare("q")
    link.publish(b"1", routing_key="q")
    link.publish(b"2", routing_key="q")
    link.get("q")
    clock.advance(0.3)
    link.send(spec.Basic.Ack(delivery_tag=1))
    link.get("q")
    clock.advance(0.3)
    link.core.tick()
    link.nothing()  # tag 2 is 0.3 s old
    clock.advance(0.3)
    link.core.tick()
    assert "channel 1 timed out" in link.channel_closed(406).reply_text


def test_consumer_timeout_off_with_zero() -> None:
    link, clock = _timeout_link(0)
    link.declare("q")
    link.publish(b"1", routing_key="q")
    link.get("q")
    clock.advance(10_000)
    link.core.tick()
    link.nothing()


# -- dead-lettering: rabbit_dead_letter (3.10) ---------------------------------------------------

def test_x_death_routing_keys_name_cc_not_bcc(link: Link) -> None:
    link.declare("dlq")
    link.declare("src", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
    link.declare("cc")
    link.publish(b"m", routing_key="src", headers={"CC": ["cc"], "BCC": ["nowhere"]})
    link.get("src")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=False))
    m = link.get("dlq")
    (death,) = m.properties.headers["x-death"]
    assert death["routing-keys"] == ["src", "cc"]


def test_dead_letter_routing_key_drops_the_cc_header(link: Link) -> None:
    link.declare("dlq")
    link.declare("src", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
    link.declare("cc")
    link.publish(b"m", routing_key="src", headers={"CC": ["cc"]})
    link.get("src")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=False))
    m = link.get("dlq")
    assert "CC" not in m.properties.headers
    assert link.declare("cc", passive=True).message_count == 1  # only the original publish's copy


def test_dead_letter_without_routing_key_keeps_cc_and_routes_by_it(link: Link) -> None:
    link.declare("src", arguments={"x-dead-letter-exchange": ""})
    link.declare("cc")
    link.publish(b"m", routing_key="src", headers={"CC": ["cc"]})
    assert link.get("cc").body == b"m"
    link.get("src")
    link.send(spec.Basic.Reject(delivery_tag=2, requeue=False))
    # back into src (its own routing key; a rejection: no cycle) and into cc by the CC key
    assert link.get("cc").properties.headers["CC"] == ["cc"]
    assert link.get("src").properties.headers["x-death"][0]["reason"] == "rejected"


def test_x_death_order_is_rabbitmq_3_10s(link: Link, clock: FakeClock, broker: object) -> None:
    # measured on RabbitMQ 3.10.8: rejected in o1, then expired in o2, o3, o4 -> o4, o2, o1, o3
    link.declare("o5")
    for name, nxt in (("o4", "o5"), ("o3", "o4"), ("o2", "o3")):
        link.declare(name, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": nxt,
                                      "x-message-ttl": 10})
    link.declare("o1", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "o2"})
    link.publish(b"m", routing_key="o1")
    link.get("o1")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=False))
    for _ in range(3):
        clock.advance(0.02)
        broker.tick()  # type: ignore[attr-defined]
    deaths = link.get("o5").properties.headers["x-death"]
    assert [(d["queue"], d["reason"], d["count"]) for d in deaths] == [
        ("o4", "expired", 1), ("o2", "expired", 1), ("o1", "rejected", 1), ("o3", "expired", 1)]


def test_cycle_rule_with_a_rejection_in_the_history(link: Link, clock: FakeClock, broker: object) -> None:
    # a rejected in a, expired in b, back in a (a rejection in the cycle: allowed); expired in a:
    # RabbitMQ 3.10.8's x-death order then puts a's rejection between a and b, so the message
    # goes on to b (measured: it keeps cycling), where an expiry-only cycle is dropped
    link.declare("a", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "b",
                                 "x-message-ttl": 1000})
    link.declare("b", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "a",
                                 "x-message-ttl": 10_000})
    link.publish(b"m", routing_key="a")
    link.get("a")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=False))  # a -> b: [a/rejected]
    assert link.declare("b", passive=True).message_count == 1
    clock.advance(10.01)
    broker.tick()  # type: ignore[attr-defined]  # b -> a: [b/expired, a/rejected]
    assert link.declare("a", passive=True).message_count == 1
    clock.advance(1.01)
    broker.tick()  # type: ignore[attr-defined]  # a -> b: [a/expired, a/rejected, b/expired]
    assert link.declare("b", passive=True).message_count == 1


def test_cycle_rule_drops_an_automatic_cycle(link: Link, clock: FakeClock, broker: object) -> None:
    link.declare("a", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "b",
                                 "x-message-ttl": 10})
    link.declare("b", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "a",
                                 "x-message-ttl": 10})
    link.publish(b"m", routing_key="a")
    for _ in range(3):
        clock.advance(0.02)
        broker.tick()  # type: ignore[attr-defined]
    assert link.declare("a", passive=True).message_count == 0
    assert link.declare("b", passive=True).message_count == 0


def test_first_death_headers_only_with_the_first_x_death(link: Link) -> None:
    link.declare("dlq")
    link.declare("src", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
    old = [{"count": 1, "reason": "expired", "queue": "elsewhere", "exchange": "", "routing-keys": ["x"]}]
    link.publish(b"m", routing_key="src", headers={"x-death": old})
    link.get("src")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=False))
    h = link.get("dlq").properties.headers
    assert "x-first-death-reason" not in h and [d["queue"] for d in h["x-death"]] == ["src", "elsewhere"]


# -- TTL arguments and the expiration property: rabbit_basic:parse_expiration, check_expiry ------

def test_expiration_property_errors_as_rabbitmq_words_them(link: Link) -> None:
    link.declare("q")
    for value, said in (("10abc", '{leftover_string,"abc"}'), ("-5", "{value_negative,-5}"),
                        ("315360000001", "{value_too_large,315360000001}"), ("x", "no_integer")):
        link.publish(b"m", routing_key="q", expiration=value)
        close = link.channel_closed(406)
        assert close.reply_text == f"PRECONDITION_FAILED - invalid expiration '{value}': {said}"
        link.open(1)
    link.publish(b"m", routing_key="q", expiration="+5")  # string:to_integer takes a sign
    link.publish(b"m", routing_key="q", expiration="0")
    link.nothing()


def test_ttl_arguments_above_ten_years_are_refused(link: Link) -> None:
    for key in ("x-message-ttl", "x-expires"):
        link.send(spec.Queue.Declare(queue="q", arguments={key: 315_360_000_001}))
        assert link.channel_closed(406).reply_text == (
            f"PRECONDITION_FAILED - invalid arg '{key}' for queue 'q' in vhost '/': "
            "{value_too_large,315360000001}")
        link.open(1)


# -- validated user-id: rabbit_channel:check_user_id_header --------------------------------------

def test_user_id_of_another_user_is_refused_unless_impersonator(tmp_path: object) -> None:
    import json
    from pathlib import Path

    from conformance.broker.server import load_users

    path = Path(str(tmp_path)) / "users.json"
    path.write_text(json.dumps({"users": {
        "guest": "guest",
        "svc": {"password": "pw", "tags": ["impersonator"], "permissions": {"/": {
            "configure": ".*", "write": ".*", "read": ".*"}}}}}))
    users, vhosts = load_users(path)
    broker = make_broker(FakeClock(), users=users, vhosts=vhosts)
    plain = Link(broker)
    plain.declare("uid")
    plain.publish(b"forged", routing_key="uid", user_id="svc")
    assert plain.channel_closed(406).reply_text == (
        "PRECONDITION_FAILED - user_id property set to 'svc' but authenticated user was 'guest'")
    svc = Link(broker, handshake=False)
    svc.handshake(user="svc", password="pw")
    svc.open(1)
    svc.publish(b"on behalf", routing_key="uid", user_id="guest")
    got = svc.get("uid")
    assert got.body == b"on behalf" and got.properties.user_id == "guest"


# -- alternate exchanges: rabbit_exchange:route1 / process_alternate ------------------------------

def _exchange(link: Link, name: str, kind: str = "direct", **args: object) -> None:
    declare = spec.Exchange.Declare(exchange=name, exchange_type=kind, arguments=args)
    link.rpc(declare, spec.Exchange.DeclareOk)


def test_alternate_exchange_of_an_exchange_reached_by_an_exchange_binding(link: Link) -> None:
    _exchange(link, "ae1", "fanout")
    _exchange(link, "ae2", "fanout")
    _exchange(link, "x1", **{"alternate-exchange": "ae1"})
    _exchange(link, "x2", **{"alternate-exchange": "ae2"})
    link.declare("q1")
    link.declare("q2")
    link.rpc(spec.Queue.Bind(queue="q1", exchange="ae1"), spec.Queue.BindOk)
    link.rpc(spec.Queue.Bind(queue="q2", exchange="ae2"), spec.Queue.BindOk)
    link.rpc(spec.Exchange.Bind(destination="x2", source="x1", routing_key="k"), spec.Exchange.BindOk)
    # x1 routes to x2 (so x1's AE is not used); x2 matches nothing: x2's AE takes it
    link.publish(b"m", exchange="x1", routing_key="k", mandatory=True)
    link.nothing()
    assert link.declare("q1", passive=True).message_count == 0
    assert link.get("q2").body == b"m"
    # a key x1 does not route: x1's AE
    link.publish(b"n", exchange="x1", routing_key="other", mandatory=True)
    link.nothing()
    assert link.get("q1").body == b"n"


def test_mandatory_returned_only_when_the_alternate_exchange_fails_too(link: Link) -> None:
    _exchange(link, "ae", "direct")
    _exchange(link, "x", **{"alternate-exchange": "ae"})
    link.declare("caught")
    link.rpc(spec.Queue.Bind(queue="caught", exchange="ae", routing_key="known"), spec.Queue.BindOk)
    link.publish(b"a", exchange="x", routing_key="known", mandatory=True)
    link.nothing()
    link.publish(b"b", exchange="x", routing_key="unknown", mandatory=True)
    ret = link.expect(Content)
    assert isinstance(ret.method, spec.Basic.Return) and ret.method.reply_code == 312 and ret.body == b"b"
