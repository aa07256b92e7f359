"""Access control: who may do what (RabbitMQ's permission model).

Documents: RabbitMQ's access control guide (``rabbitmq-access-control``): a user has, per
virtual host, three regular expressions — configure, write, read — and its table says which
AMQP 0-9-1 operation needs which of them on which resource; a user with no permissions in a
vhost cannot open it; the default exchange is checked as ``amq.default``. RabbitMQ's
authentication failure notifications guide (``rabbitmq-auth-notification``): a client that
announces the ``authentication_failure_close`` capability is told about a failed login with
connection.close 403 ACCESS_REFUSED, any other just loses the socket. The spec XML names the
reply code (``access-refused`` 403, a soft error: "The client attempted to work with a server
entity to which it has no access due to security settings") and ``connection.open/security``.

Most cases need a second, restricted user (``restricted_url``): the spawned targets make one;
for ``--broker-url`` give ``--restricted-url`` for a user whose permissions in its vhost are
configure ``^acc-(ok|c)-``, write ``^acc-(ok|w)-``, read ``^(acc-(ok|r)-|amq[.]direct$)``
(``targets.base``: acc-ok-* everything, acc-c-* configure only, acc-w-* write only, acc-r-* read
only, any other name nothing; read on amq.direct for the harness's round-trip probe, which RabbitMQ
4.3.1+ refuses to a user without any permission on it). The admin connection (the suite's own
URL, full permissions) prepares entities and checks that a refused operation left no effect.
Without a restricted user the cases that need one are UNSUPPORTED once (the first; the others are
not run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from pamqp import commands as spec
from pamqp.base import Frame

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import Handshake, RawChannel, UnexpectedClose, describe
from conformance.verify import Mismatch, Unsupported, expect_channel_close, publish_confirmed, short

ACL = "rabbitmq-access-control#how-permissions-work"
VHOST_ACCESS = "rabbitmq-access-control#vhost-access"
DEFAULT_X = "rabbitmq-access-control#default-exchange"
NOTIFY = "rabbitmq-auth-notification#authentication-failure-close"
REFUSED_403 = "amqp0-9-1.xml#constants (access-refused 403, soft error)"
SECOND_VHOST_ENV = "AMQP_CONFORMANCE_SECOND_VHOST"
restricted = pytest.mark.restricted_user
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def acc(ctx: Any, perm: str, suffix: str) -> str:
    """A resource name the restricted user's permissions classify: ``perm`` is ok (everything),
    c (configure only), w (write only), r (read only) or no (nothing)."""
    return f"acc-{perm}-{ctx.name(suffix)}"


# -- what the admin sees -------------------------------------------------------------------------


def _admin_passive(amqp: Any, what: str, declare: Callable[[RawChannel], T]) -> T | None:
    """A passive declare (``declare``) on a fresh admin channel: its declare-ok, or None on 404."""
    ch = amqp.channel()
    try:
        return declare(ch)
    except UnexpectedClose as exc:
        if exc.reply_code == 404:
            return None
        raise Mismatch(f"admin passive {what}", expected="declare-ok or 404",
                       observed=short(exc.event)) from exc
    finally:
        ch.conn.close(timeout=1.0)


def queue_state(amqp: Any, name: str) -> str:
    """``absent`` or ``N ready, M consumers`` (a passive declare on a fresh admin channel)."""
    ok = _admin_passive(amqp, f"queue.declare of {name}", lambda ch: ch.declare_queue(name, passive=True))
    return "absent" if ok is None else f"{ok.message_count} ready, {ok.consumer_count} consumers"


def exchange_state(amqp: Any, name: str) -> str:
    """``absent`` or ``exists`` (a passive declare on a fresh admin channel)."""
    ok = _admin_passive(amqp, f"exchange.declare of {name}",
                        lambda ch: ch.declare_exchange(name, passive=True))
    return "absent" if ok is None else "exists"


def routed(amqp: Any, exchange: str, routing_key: str) -> str:
    """``routed`` or ``returned`` for a mandatory publish by the admin (the confirm proves the
    broker decided; a return precedes it)."""
    ch = amqp.channel()
    try:
        ch.confirm_select()
        ch.publish(exchange, routing_key, b"admin-probe", mandatory=True)
        ch.wait((spec.Basic.Ack, spec.Basic.Nack), "the confirm of the admin's probe publish")
        returned = any(isinstance(e.method, spec.Basic.Return) for e in ch.history())
    finally:
        ch.conn.close(timeout=1.0)
    return "returned" if returned else "routed"


def refused(ctx: Any, ch: RawChannel, method: type[Frame], what: str) -> None:
    """403 ACCESS_REFUSED on the channel (not the connection), naming ``method``; the reply-text
    (the spec says nothing of it) only has to be there."""
    ev = expect_channel_close(ch, 403, method=method, what=what)
    text = str(ev.method.reply_text or "")
    ctx.observe("reply-text", text)
    ctx.check(bool(text.strip()), True, "the close carries a reply-text")


# -- the restricted user (first: without one, this is the case that says so) ---------------------


@restricted
@case("access.restricted-user-opens-its-vhost", sources=[VHOST_ACCESS], level=Level.EXTENSION,
      description="The restricted user logs in and opens the vhost it has permissions in",
      expectation="connection.open-ok, then a channel opens and answers a round trip")
def test_restricted_login(amqp, ctx, restricted_url):
    ch = amqp.channel(restricted_url)
    ch.barrier()
    ctx.observe("user", restricted_url.user)



# -- operations outside the permissions: refused, channel scope, no effect -----------------------

# What a setup declared, by role: "q" the queue, "x" the exchange (the one the admin's probe publish
# goes to), "d" the destination exchange of an exchange binding.
Names = dict[str, str]
Setup = Callable[[Any, RawChannel, Any], Names]  # (ctx, admin channel, cleanup) -> names
Sees = tuple[Callable[[Any, Names], str], str]  # what the admin reads afterwards, the state it must be


def _queue(perm: str, messages: int = 0) -> Setup:
    def setup(ctx: Any, admin: RawChannel, cleanup: Any) -> Names:
        q = cleanup.queue(acc(ctx, perm, "q"))
        admin.declare_queue(q)
        if messages:
            publish_confirmed(admin, "", q, [f"m{i}".encode() for i in range(1, messages + 1)])
        return {"q": q}
    return setup


def _exchange(perm: str) -> Setup:
    def setup(ctx: Any, admin: RawChannel, cleanup: Any) -> Names:
        x = cleanup.exchange(acc(ctx, perm, "x"))
        admin.declare_exchange(x, "direct")
        return {"x": x}
    return setup


def _queue_and_exchange(qperm: str, xperm: str, *, bound: bool = False) -> Setup:
    def setup(ctx: Any, admin: RawChannel, cleanup: Any) -> Names:
        q = cleanup.queue(acc(ctx, qperm, "q"))
        x = cleanup.exchange(acc(ctx, xperm, "x"))
        admin.declare_queue(q)
        admin.declare_exchange(x, "direct")
        if bound:
            admin.bind(q, x, "k")
        return {"q": q, "x": x}
    return setup


def _two_exchanges(dperm: str, sperm: str) -> Setup:
    """A destination exchange "d" with a queue behind it (so a binding shows as routing) and a
    source "x"."""
    def setup(ctx: Any, admin: RawChannel, cleanup: Any) -> Names:
        d = cleanup.exchange(acc(ctx, dperm, "xd"))
        s = cleanup.exchange(acc(ctx, sperm, "xs"))
        q = cleanup.queue(acc(ctx, "ok", "q"))
        admin.declare_exchange(d, "fanout")
        admin.declare_exchange(s, "direct")
        admin.declare_queue(q)
        admin.bind(q, d, "")
        return {"d": d, "x": s, "q": q}
    return setup


def _new(kind: str, perm: str) -> Setup:
    def setup(ctx: Any, admin: RawChannel, cleanup: Any) -> Names:
        name = acc(ctx, perm, kind)
        (cleanup.queue if kind == "q" else cleanup.exchange)(name)  # in case a broker creates it
        return {kind: name}
    return setup


def _nothing(ctx: Any, admin: RawChannel, cleanup: Any) -> Names:
    """A server-named queue: there is no name to prepare."""
    return {}


def queue_is(state: str) -> Sees:
    return (lambda amqp, n: queue_state(amqp, n["q"])), state


def exchange_is(state: str) -> Sees:
    return (lambda amqp, n: exchange_state(amqp, n["x"])), state


def routing_is(state: str) -> Sees:
    """``routed`` or ``returned``: a mandatory publish by the admin to "x" with routing key k."""
    return (lambda amqp, n: routed(amqp, n["x"], "k")), state


BROKERS_NAME = "nothing to inspect (the name is the broker's)"
NOTHING_TO_SEE: Sees = (lambda amqp, n: BROKERS_NAME), BROKERS_NAME


def _c(
    slug: str,
    description: str,
    expectation: str,
    *,
    sources: tuple[str, ...] = (ACL, REFUSED_403),
    requires: tuple[str, ...] = (),
) -> Case:
    """A case of this area (EXTENSION: RabbitMQ's permission model)."""
    return Case(
        id=f"access.{slug}", rules=(), sources=sources, level=Level.EXTENSION, description=description,
        expectation=expectation, requires=requires,
    )


@dataclass(frozen=True)
class Refusal:
    """One operation the restricted user may not do: ``setup`` (admin) declares what it needs and
    names it; ``operation`` is the frame the restricted user sends (a basic.publish goes with a
    body); ``sees``: what the admin reads afterwards and the state it must still be in."""

    setup: Setup
    operation: Callable[[Names], Frame]
    sees: Sees


def refusal(slug: str, setup: Setup, description: str, expectation: str, operation: Callable[[Names], Frame],
            sees: Sees, sources: tuple[str, ...] = (ACL, REFUSED_403)) -> Any:
    """One row of REFUSALS: its case and what ``test_refused`` does."""
    return param(_c(slug, description, expectation, sources=sources), Refusal(setup, operation, sees))


# A binding needs two permissions (write on the destination, read on the source): one case for each
# missing one, with the same operation and the same expectation.
QUEUE_BIND_REFUSED = "channel.close 403 naming queue.bind; no binding (a mandatory publish is returned)"
EXCHANGE_BIND_REFUSED = (
    "channel.close 403 naming exchange.bind; no binding (a mandatory publish to the source is returned)"
)


def _queue_bind(n: Names) -> Frame:
    return spec.Queue.Bind(queue=n["q"], exchange=n["x"], routing_key="k")


def _exchange_bind(n: Names) -> Frame:
    return spec.Exchange.Bind(destination=n["d"], source=n["x"], routing_key="k")


# fmt: off
# (a hand-laid table, one refused operation per entry: case slug and what the admin declares;
#  description; expectation; the frame the restricted user sends and what the admin must see after)
REFUSALS = [
    refusal("queue-declare-without-configure", _new("q", "r"),
            "queue.declare of a queue the user has no configure permission on",
            "channel.close 403 naming queue.declare; the queue is not created",
            lambda n: spec.Queue.Declare(queue=n["q"]), queue_is("absent")),
    refusal("exchange-declare-without-configure", _new("x", "w"),
            "exchange.declare of an exchange the user has no configure permission on",
            "channel.close 403 naming exchange.declare; the exchange is not created",
            lambda n: spec.Exchange.Declare(exchange=n["x"], exchange_type="direct"), exchange_is("absent")),
    refusal("queue-redeclare-without-configure", _queue("r", messages=1),
            "queue.declare (not passive) of an existing queue the user has no configure permission on",
            "channel.close 403 naming queue.declare; the queue and its message stay",
            lambda n: spec.Queue.Declare(queue=n["q"]), queue_is("1 ready, 0 consumers")),
    refusal("server-named-queue-without-configure", _nothing,
            "queue.declare with an empty name when configure does not match amq.gen-*",
            "channel.close 403 naming queue.declare (a server-named queue is checked under its "
            "amq.gen-* name)",
            lambda n: spec.Queue.Declare(queue="", exclusive=True), NOTHING_TO_SEE),
    refusal("queue-delete-without-configure", _queue("w", messages=1),
            "queue.delete of a queue the user has no configure permission on",
            "channel.close 403 naming queue.delete; the queue and its message stay",
            lambda n: spec.Queue.Delete(queue=n["q"]), queue_is("1 ready, 0 consumers")),
    refusal("exchange-delete-without-configure", _exchange("r"),
            "exchange.delete of an exchange the user has no configure permission on",
            "channel.close 403 naming exchange.delete; the exchange stays",
            lambda n: spec.Exchange.Delete(exchange=n["x"]), exchange_is("exists")),
    refusal("queue-bind-without-write-on-queue", _queue_and_exchange("r", "ok"),
            "queue.bind of a queue the user has no write permission on (read on the exchange granted)",
            QUEUE_BIND_REFUSED, _queue_bind, routing_is("returned")),
    refusal("queue-bind-without-read-on-exchange", _queue_and_exchange("ok", "w"),
            "queue.bind to an exchange the user has no read permission on (write on the queue granted)",
            QUEUE_BIND_REFUSED, _queue_bind, routing_is("returned")),
    refusal("queue-unbind-without-write-on-queue", _queue_and_exchange("r", "ok", bound=True),
            "queue.unbind of an existing binding whose queue the user has no write permission on",
            "channel.close 403 naming queue.unbind; the binding stays (a mandatory publish is routed)",
            lambda n: spec.Queue.Unbind(queue=n["q"], exchange=n["x"], routing_key="k"),
            routing_is("routed")),
    refusal("exchange-bind-without-write-on-destination", _two_exchanges("r", "ok"),
            "exchange.bind to a destination exchange the user has no write permission on",
            EXCHANGE_BIND_REFUSED, _exchange_bind, routing_is("returned")),
    refusal("exchange-bind-without-read-on-source", _two_exchanges("ok", "w"),
            "exchange.bind from a source exchange the user has no read permission on",
            EXCHANGE_BIND_REFUSED, _exchange_bind, routing_is("returned")),
    refusal("publish-without-write", _queue_and_exchange("ok", "r", bound=True),
            "basic.publish to an exchange the user has no write permission on (bound to a queue)",
            "channel.close 403 naming basic.publish; nothing is routed to the queue",
            lambda n: spec.Basic.Publish(exchange=n["x"], routing_key="k"), queue_is("0 ready, 0 consumers")),
    refusal("publish-default-exchange-without-write", _queue("ok"),
            "basic.publish to the default exchange when write does not match amq.default",
            "channel.close 403 naming basic.publish; nothing reaches the queue the routing key names",
            lambda n: spec.Basic.Publish(exchange="", routing_key=n["q"]), queue_is("0 ready, 0 consumers"),
            sources=(DEFAULT_X, ACL, REFUSED_403)),
    refusal("get-without-read", _queue("w", messages=1),
            "basic.get from a queue the user has no read permission on",
            "channel.close 403 naming basic.get; the message stays ready",
            lambda n: spec.Basic.Get(queue=n["q"]), queue_is("1 ready, 0 consumers")),
    refusal("consume-without-read", _queue("c", messages=1),
            "basic.consume from a queue the user has no read permission on",
            "channel.close 403 naming basic.consume; no consumer, the message stays ready",
            lambda n: spec.Basic.Consume(queue=n["q"], consumer_tag="acc-refused"),
            queue_is("1 ready, 0 consumers")),
    refusal("purge-without-read", _queue("w", messages=2),
            "queue.purge of a queue the user has no read permission on",
            "channel.close 403 naming queue.purge; the messages stay",
            lambda n: spec.Queue.Purge(queue=n["q"]), queue_is("2 ready, 0 consumers")),
]
# fmt: on


@restricted
@pytest.mark.parametrize("row", REFUSALS)
def test_refused(amqp, cleanup, ctx, restricted_url, row: Refusal) -> None:
    admin = amqp.channel()
    names = row.setup(ctx, admin, cleanup)
    ch = amqp.channel(restricted_url)
    frame = row.operation(names)
    if isinstance(frame, spec.Basic.Publish):  # with its content header and body
        ch.publish(frame.exchange, frame.routing_key, b"refused")
    else:
        ch.send(frame)
    refused(ctx, ch, type(frame), f"{ctx.case.id.split('.', 1)[1]}")
    seen, unchanged = row.sees
    ctx.check(seen(amqp, names), unchanged, "what the admin sees afterwards")


# -- what the permissions allow works -----------------------------------------------------------


def allowed(slug: str, description: str, expectation: str) -> Callable[[F], F]:
    """A case of operations the restricted user's permissions allow (it needs the restricted user)."""
    def mark(fn: F) -> F:
        found = case(
            f"access.{slug}", sources=[ACL], level=Level.EXTENSION, description=description,
            expectation=expectation,
        )(fn)
        return restricted(found)
    return mark


@allowed("permitted-operations-work",
         "Every operation on resources all three permissions match (acc-ok-*)",
         "exchange.declare, queue.declare, queue.bind, basic.publish, basic.get, queue.purge, "
         "queue.unbind, queue.delete and exchange.delete all succeed with their usual replies")
def test_permitted(amqp, cleanup, ctx, restricted_url):
    ch = amqp.channel(restricted_url)
    q, x = cleanup.queue(acc(ctx, "ok", "q")), cleanup.exchange(acc(ctx, "ok", "x"))
    ch.declare_exchange(x, "direct")
    ok = ch.declare_queue(q)
    ctx.check((ok.queue, ok.message_count, ok.consumer_count), (q, 0, 0), "queue.declare-ok")
    ch.bind(q, x, "k")
    publish_confirmed(ch, x, "k", [b"a", b"b"])
    got = ch.get(q, no_ack=True)
    ctx.check(None if got is None else (got.body, got.method.exchange, got.method.routing_key),
              (b"a", x, "k"), "basic.get-ok (body, exchange, routing key)")
    ctx.check(ch.purge(q).message_count, 1, "queue.purge-ok message-count")
    ch.rpc(spec.Queue.Unbind(queue=q, exchange=x, routing_key="k"))
    ctx.check(ch.delete_queue(q).message_count, 0, "queue.delete-ok message-count")
    ch.rpc(spec.Exchange.Delete(exchange=x))
    ctx.check((queue_state(amqp, q), exchange_state(amqp, x)), ("absent", "absent"), "after the deletes")


@allowed("write-and-read-are-separate",
         "Publish through an exchange the user may only write to, into a queue it may only read",
         "the publish is routed (write on the exchange suffices) and basic.get returns it "
         "(read on the queue suffices)")
def test_write_read_split(amqp, cleanup, ctx, restricted_url):
    names = _queue_and_exchange("r", "w", bound=True)(ctx, amqp.channel(), cleanup)
    ch = amqp.channel(restricted_url)
    publish_confirmed(ch, names["x"], "k", [b"through-w"])
    got = ch.get(names["q"], no_ack=True)
    ctx.check(None if got is None else got.body, b"through-w", "basic.get from the read-only queue")


@restricted
@case("access.passive-declare-needs-no-permission", sources=[ACL], level=Level.EXTENSION,
      description="Passive queue.declare and exchange.declare of resources no permission matches (acc-no-*)",
      expectation="queue.declare-ok (with the queue's message count) and exchange.declare-ok; from RabbitMQ "
                  "4.2.6 a passive declare needs a permission on the resource, and both are refused with "
                  "channel.close 403 (release row passive-declare-permission)",
      default="queue.declare-ok, exchange.declare-ok")
def test_passive(amqp, cleanup, ctx, restricted_url):
    admin = amqp.channel()
    names = _queue_and_exchange("no", "no")(ctx, admin, cleanup)
    q, x = names["q"], names["x"]
    publish_confirmed(admin, "", q, [b"m1"])
    conn = amqp(restricted_url)
    answers = []
    for what, declare in (("queue", lambda ch: ch.declare_queue(q, passive=True)),
                          ("exchange", lambda ch: ch.declare_exchange(x, passive=True))):
        ch = conn.channel()  # each on its own channel: a refusal closes the channel only
        try:
            ok = declare(ch)
        except UnexpectedClose as exc:
            ctx.observe(f"passive {what}.declare", exc.event.describe())
            answers.append(short(exc.event, names=False))
            continue
        answers.append(f"{what}.declare-ok")
        if what == "queue":
            ctx.check((ok.queue, ok.message_count, ok.consumer_count), (q, 1, 0), "passive queue.declare-ok")
    ctx.check_profile(", ".join(answers), "the answers to the passive queue.declare and exchange.declare")


# -- connection level ---------------------------------------------------------------------------


def _handshake(url: Any, ctx: Any, request: Any) -> Handshake:
    """A step-by-step handshake to ``url`` (closed after the case), connection.start received."""
    w = Handshake.open(url, ctx.timeout)
    request.addfinalizer(w.close)
    w.start()
    return w


def _connection_close(ctx: Any, frm: Frame | None, what: str, code: int) -> spec.Connection.Close:
    """The broker's answer, recorded; it has to be a connection.close (``code`` is expected)."""
    ctx.observe("answer", describe(frm))
    if not isinstance(frm, spec.Connection.Close):
        raise Mismatch(what, expected=f"connection.close {code}", observed=describe(frm))
    return frm


@restricted
@case("access.vhost-without-permissions-530", rules=["connection.open/security"], sources=[VHOST_ACCESS],
      level=Level.EXTENSION,
      description="connection.open of an existing vhost the user has no permissions in",
      expectation="connection.close 530 NOT_ALLOWED naming connection.open (RabbitMQ refuses the vhost)")
def test_vhost_without_permissions(broker_url, ctx, request, restricted_url):
    import os

    other = os.environ.get(SECOND_VHOST_ENV)
    if not other:
        raise Unsupported(f"needs a vhost the restricted user has no permissions in: {SECOND_VHOST_ENV}")
    w = _handshake(restricted_url, ctx, request)
    w.start_ok()
    w.tune_ok_open(w.tune(), vhost=other)
    frm = w.next_frame(f"the answer to connection.open of {other}")
    frm = _connection_close(ctx, frm, f"connection.open of {other}", 530)
    ctx.check((frm.reply_code, frm.class_id, frm.method_id), (530, 10, 40),
              "connection.close reply-code, class-id, method-id")


WRONG = {"password": "A wrong password", "user": "An unknown user"}


def _login(slug: str, wrong: str, announce: bool) -> Any:
    """A failed login (``wrong``: the password or the user) from a client that does or does not
    announce authentication_failure_close: told with a connection.close 403 only if it does."""
    announces = "announces" if announce else "does not announce"
    return param(
        _c(
            slug,
            f"{WRONG[wrong]} from a client that {announces} authentication_failure_close",
            "connection.close 403 ACCESS_REFUSED (no connection.tune)"
            if announce
            else "the socket closes with nothing sent (no connection.close, no connection.tune)",
            sources=(NOTIFY, REFUSED_403) if announce else (NOTIFY,),
            requires=("authentication_failure_close",),
        ),
        wrong,
        announce,
    )


LOGIN_FAILURES = [
    _login("bad-password-closes-403", "password", announce=True),
    _login("unknown-user-closes-403", "user", announce=True),
    _login("bad-password-without-capability", "password", announce=False),
]


@pytest.mark.parametrize(("wrong", "announce"), LOGIN_FAILURES)
def test_login_failure(broker_url, ctx, request, wrong: str, announce: bool):
    url = broker_url
    if wrong == "user":
        url = url.with_(user=f"amqpc-no-such-user-{ctx.name('u')[-12:]}")
    w = _handshake(url, ctx, request)
    caps = {"authentication_failure_close": True} if announce else {}
    w.start_ok(password="amqpc-wrong-password",
               client_properties={"product": "amqp-conformance wire", "capabilities": caps})
    frm = w.next_frame("the broker's answer to a failed login")
    if not announce:
        ctx.check(
            "socket closed, nothing sent" if frm is None else describe(frm),
            "socket closed, nothing sent",
            "what the broker did after the failed login",
        )
        return
    frm = _connection_close(ctx, frm, "answer to a failed login", 403)
    ctx.check(frm.reply_code, 403, "connection.close reply-code")
    ctx.check(bool(str(frm.reply_text or "").strip()), True, "the close carries a reply-text")
