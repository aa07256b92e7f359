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
configure ``^acc-(ok|c)-``, write ``^acc-(ok|w)-``, read ``^acc-(ok|r)-`` (``targets.base``:
acc-ok-* everything, acc-c-* configure only, acc-w-* write only, acc-r-* read only, any other
name nothing). The admin connection (the suite's own URL, full permissions) prepares entities
and checks that a refused operation left no effect. Without a restricted user the cases that
need one are UNSUPPORTED once (the first; the others are not run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pamqp import commands as spec
from pamqp.base import Frame

from conformance.cases import Case, Level, case, param
from conformance.clients.expect import expect_channel_close
from conformance.clients.handshake import Handshake
from conformance.clients.outcome import short
from conformance.clients.raw import RawChannel, UnexpectedClose
from conformance.clients.steps import publish_confirmed
from conformance.clients.wire import URL, describe
from conformance.verdicts import Mismatch, Unsupported

ACL = "rabbitmq-access-control#how-permissions-work"
VHOST_ACCESS = "rabbitmq-access-control#vhost-access"
DEFAULT_X = "rabbitmq-access-control#default-exchange"
NOTIFY = "rabbitmq-auth-notification#authentication-failure-close"
REFUSED_403 = "amqp0-9-1.xml#constants (access-refused 403, soft error)"
SECOND_VHOST_ENV = "AMQP_CONFORMANCE_SECOND_VHOST"
restricted = pytest.mark.restricted_user


def acc(ctx: Any, perm: str, suffix: str) -> str:
    """A resource name the restricted user's permissions classify: ``perm`` is ok (everything),
    c (configure only), w (write only), r (read only) or no (nothing)."""
    return f"acc-{perm}-{ctx.name(suffix)}"


# -- what the admin sees -------------------------------------------------------------------------


def queue_state(amqp: Any, name: str) -> str:
    """``absent`` or ``N ready, M consumers`` (a passive declare on a fresh admin channel)."""
    ch = amqp.channel()
    try:
        ok = ch.declare_queue(name, passive=True)
    except UnexpectedClose as exc:
        if exc.reply_code == 404:
            return "absent"
        raise Mismatch(f"admin passive queue.declare of {name}", expected="declare-ok or 404",
                       observed=short(exc.event)) from exc
    finally:
        ch.conn.close(timeout=1.0)
    return f"{ok.message_count} ready, {ok.consumer_count} consumers"


def exchange_state(amqp: Any, name: str) -> str:
    ch = amqp.channel()
    try:
        ch.declare_exchange(name, passive=True)
    except UnexpectedClose as exc:
        if exc.reply_code == 404:
            return "absent"
        raise Mismatch(f"admin passive exchange.declare of {name}", expected="declare-ok or 404",
                       observed=short(exc.event)) from exc
    finally:
        ch.conn.close(timeout=1.0)
    return "exists"


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
@case(
    "access.restricted-user-opens-its-vhost", sources=[VHOST_ACCESS], level=Level.EXTENSION,
    description="The restricted user logs in and opens the vhost it has permissions in",
    expectation="connection.open-ok, then a channel opens and answers a round trip",
)
def test_restricted_login(amqp, ctx, restricted_url):
    ch = amqp.channel(restricted_url)
    ch.barrier()
    ctx.observe("user", URL.parse(restricted_url).user)



# -- operations outside the permissions: refused, channel scope, no effect -----------------------


@dataclass(frozen=True)
class Refusal:
    """One operation the restricted user may not do: ``setup`` (admin) → names; ``act`` sends the
    operation on the restricted channel; ``effect`` (admin) reads the state ``unchanged`` expects."""

    method: type[Frame]
    setup: Callable[[Any, Any, Any], dict[str, str]]  # (ctx, admin channel, cleanup) -> names
    act: Callable[[RawChannel, dict[str, str]], object]  # what it returns is not used
    effect: Callable[[Any, dict[str, str]], str]
    unchanged: str


def _queue(perm: str, messages: int = 0) -> Callable[[Any, Any, Any], dict[str, str]]:
    def setup(ctx: Any, admin: RawChannel, cleanup: Any) -> dict[str, str]:
        q = cleanup.queue(acc(ctx, perm, "q"))
        admin.declare_queue(q)
        if messages:
            publish_confirmed(admin, "", q, [f"m{i}".encode() for i in range(1, messages + 1)])
        return {"q": q}
    return setup


def _exchange(perm: str) -> Callable[[Any, Any, Any], dict[str, str]]:
    def setup(ctx: Any, admin: RawChannel, cleanup: Any) -> dict[str, str]:
        x = cleanup.exchange(acc(ctx, perm, "x"))
        admin.declare_exchange(x, "direct")
        return {"x": x}
    return setup


def _queue_and_exchange(
    qperm: str, xperm: str, *, bound: bool = False
) -> Callable[[Any, Any, Any], dict[str, str]]:
    def setup(ctx: Any, admin: RawChannel, cleanup: Any) -> dict[str, str]:
        q = cleanup.queue(acc(ctx, qperm, "q"))
        x = cleanup.exchange(acc(ctx, xperm, "x"))
        admin.declare_queue(q)
        admin.declare_exchange(x, "direct")
        if bound:
            admin.bind(q, x, "k")
        return {"q": q, "x": x}
    return setup


def _two_exchanges(dperm: str, sperm: str) -> Callable[[Any, Any, Any], dict[str, str]]:
    """A destination exchange with a queue behind it (so a binding shows as routing) and a source."""
    def setup(ctx: Any, admin: RawChannel, cleanup: Any) -> dict[str, str]:
        d = cleanup.exchange(acc(ctx, dperm, "xd"))
        s = cleanup.exchange(acc(ctx, sperm, "xs"))
        q = cleanup.queue(acc(ctx, "ok", "q"))
        admin.declare_exchange(d, "fanout")
        admin.declare_exchange(s, "direct")
        admin.declare_queue(q)
        admin.bind(q, d, "")
        return {"d": d, "s": s, "q": q}
    return setup


def _new(kind: str, perm: str) -> Callable[[Any, Any, Any], dict[str, str]]:
    def setup(ctx: Any, admin: RawChannel, cleanup: Any) -> dict[str, str]:
        name = acc(ctx, perm, kind)
        (cleanup.queue if kind == "q" else cleanup.exchange)(name)  # in case a broker creates it
        return {kind: name}
    return setup


def _c(
    slug: str, description: str, expectation: str, *, sources: tuple[str, ...] = (ACL, REFUSED_403)
) -> Case:
    return Case(id=f"access.{slug}", rules=(), sources=sources, level=Level.EXTENSION,
                description=description, expectation=expectation)


REFUSALS = [
    param(
        _c(
            "queue-declare-without-configure",
            "queue.declare of a queue the user has no configure permission on",
            "channel.close 403 naming queue.declare; the queue is not created",
        ),
        Refusal(
            spec.Queue.Declare,
            _new("q", "r"),
            lambda ch, n: ch.send(spec.Queue.Declare(queue=n["q"])),
            lambda amqp, n: queue_state(amqp, n["q"]),
            "absent",
        ),
    ),
    param(
        _c(
            "exchange-declare-without-configure",
            "exchange.declare of an exchange the user has no configure permission on",
            "channel.close 403 naming exchange.declare; the exchange is not created",
        ),
        Refusal(
            spec.Exchange.Declare,
            _new("x", "w"),
            lambda ch, n: ch.send(spec.Exchange.Declare(exchange=n["x"], exchange_type="direct")),
            lambda amqp, n: exchange_state(amqp, n["x"]),
            "absent",
        ),
    ),
    param(
        _c(
            "queue-redeclare-without-configure",
            "queue.declare (not passive) of an existing queue the user has no configure permission on",
            "channel.close 403 naming queue.declare; the queue and its message stay",
        ),
        Refusal(
            spec.Queue.Declare,
            _queue("r", messages=1),
            lambda ch, n: ch.send(spec.Queue.Declare(queue=n["q"])),
            lambda amqp, n: queue_state(amqp, n["q"]),
            "1 ready, 0 consumers",
        ),
    ),
    param(
        _c(
            "server-named-queue-without-configure",
            "queue.declare with an empty name when configure does not match amq.gen-*",
            (
                "channel.close 403 naming queue.declare (a server-named queue is checked under its "
                "amq.gen-* name)"
            ),
        ),
        Refusal(
            spec.Queue.Declare,
            lambda ctx, admin, cleanup: {},
            lambda ch, n: ch.send(spec.Queue.Declare(queue="", exclusive=True)),
            lambda amqp, n: "nothing to inspect (the name is the broker's)",
            "nothing to inspect (the name is the broker's)",
        ),
    ),
    param(
        _c(
            "queue-delete-without-configure",
            "queue.delete of a queue the user has no configure permission on",
            "channel.close 403 naming queue.delete; the queue and its message stay",
        ),
        Refusal(
            spec.Queue.Delete,
            _queue("w", messages=1),
            lambda ch, n: ch.send(spec.Queue.Delete(queue=n["q"])),
            lambda amqp, n: queue_state(amqp, n["q"]),
            "1 ready, 0 consumers",
        ),
    ),
    param(
        _c(
            "exchange-delete-without-configure",
            "exchange.delete of an exchange the user has no configure permission on",
            "channel.close 403 naming exchange.delete; the exchange stays",
        ),
        Refusal(
            spec.Exchange.Delete,
            _exchange("r"),
            lambda ch, n: ch.send(spec.Exchange.Delete(exchange=n["x"])),
            lambda amqp, n: exchange_state(amqp, n["x"]),
            "exists",
        ),
    ),
    param(
        _c(
            "queue-bind-without-write-on-queue",
            "queue.bind of a queue the user has no write permission on (read on the exchange granted)",
            "channel.close 403 naming queue.bind; no binding (a mandatory publish is returned)",
        ),
        Refusal(
            spec.Queue.Bind,
            _queue_and_exchange("r", "ok"),
            lambda ch, n: ch.send(spec.Queue.Bind(queue=n["q"], exchange=n["x"], routing_key="k")),
            lambda amqp, n: routed(amqp, n["x"], "k"),
            "returned",
        ),
    ),
    param(
        _c(
            "queue-bind-without-read-on-exchange",
            "queue.bind to an exchange the user has no read permission on (write on the queue granted)",
            "channel.close 403 naming queue.bind; no binding (a mandatory publish is returned)",
        ),
        Refusal(
            spec.Queue.Bind,
            _queue_and_exchange("ok", "w"),
            lambda ch, n: ch.send(spec.Queue.Bind(queue=n["q"], exchange=n["x"], routing_key="k")),
            lambda amqp, n: routed(amqp, n["x"], "k"),
            "returned",
        ),
    ),
    param(
        _c(
            "queue-unbind-without-write-on-queue",
            "queue.unbind of an existing binding whose queue the user has no write permission on",
            "channel.close 403 naming queue.unbind; the binding stays (a mandatory publish is routed)",
        ),
        Refusal(
            spec.Queue.Unbind,
            _queue_and_exchange("r", "ok", bound=True),
            lambda ch, n: ch.send(spec.Queue.Unbind(queue=n["q"], exchange=n["x"], routing_key="k")),
            lambda amqp, n: routed(amqp, n["x"], "k"),
            "routed",
        ),
    ),
    param(
        _c(
            "exchange-bind-without-write-on-destination",
            "exchange.bind to a destination exchange the user has no write permission on",
            (
                "channel.close 403 naming exchange.bind; no binding (a mandatory publish to the source "
                "is returned)"
            ),
        ),
        Refusal(
            spec.Exchange.Bind,
            _two_exchanges("r", "ok"),
            lambda ch, n: ch.send(spec.Exchange.Bind(destination=n["d"], source=n["s"], routing_key="k")),
            lambda amqp, n: routed(amqp, n["s"], "k"),
            "returned",
        ),
    ),
    param(
        _c(
            "exchange-bind-without-read-on-source",
            "exchange.bind from a source exchange the user has no read permission on",
            (
                "channel.close 403 naming exchange.bind; no binding (a mandatory publish to the source "
                "is returned)"
            ),
        ),
        Refusal(
            spec.Exchange.Bind,
            _two_exchanges("ok", "w"),
            lambda ch, n: ch.send(spec.Exchange.Bind(destination=n["d"], source=n["s"], routing_key="k")),
            lambda amqp, n: routed(amqp, n["s"], "k"),
            "returned",
        ),
    ),
    param(
        _c(
            "publish-without-write",
            "basic.publish to an exchange the user has no write permission on (bound to a queue)",
            "channel.close 403 naming basic.publish; nothing is routed to the queue",
        ),
        Refusal(
            spec.Basic.Publish,
            _queue_and_exchange("ok", "r", bound=True),
            lambda ch, n: ch.publish(n["x"], "k", b"refused"),
            lambda amqp, n: queue_state(amqp, n["q"]),
            "0 ready, 0 consumers",
        ),
    ),
    param(
        _c(
            "publish-default-exchange-without-write",
            "basic.publish to the default exchange when write does not match amq.default",
            "channel.close 403 naming basic.publish; nothing reaches the queue the routing key names",
            sources=(DEFAULT_X, ACL, REFUSED_403),
        ),
        Refusal(
            spec.Basic.Publish,
            _queue("ok"),
            lambda ch, n: ch.publish("", n["q"], b"refused"),
            lambda amqp, n: queue_state(amqp, n["q"]),
            "0 ready, 0 consumers",
        ),
    ),
    param(
        _c(
            "get-without-read",
            "basic.get from a queue the user has no read permission on",
            "channel.close 403 naming basic.get; the message stays ready",
        ),
        Refusal(
            spec.Basic.Get,
            _queue("w", messages=1),
            lambda ch, n: ch.send(spec.Basic.Get(queue=n["q"])),
            lambda amqp, n: queue_state(amqp, n["q"]),
            "1 ready, 0 consumers",
        ),
    ),
    param(
        _c(
            "consume-without-read",
            "basic.consume from a queue the user has no read permission on",
            "channel.close 403 naming basic.consume; no consumer, the message stays ready",
        ),
        Refusal(
            spec.Basic.Consume,
            _queue("c", messages=1),
            lambda ch, n: ch.send(spec.Basic.Consume(queue=n["q"], consumer_tag="acc-refused")),
            lambda amqp, n: queue_state(amqp, n["q"]),
            "1 ready, 0 consumers",
        ),
    ),
    param(
        _c(
            "purge-without-read",
            "queue.purge of a queue the user has no read permission on",
            "channel.close 403 naming queue.purge; the messages stay",
        ),
        Refusal(
            spec.Queue.Purge,
            _queue("w", messages=2),
            lambda ch, n: ch.send(spec.Queue.Purge(queue=n["q"])),
            lambda amqp, n: queue_state(amqp, n["q"]),
            "2 ready, 0 consumers",
        ),
    ),
]


@restricted
@pytest.mark.parametrize("row", REFUSALS)
def test_refused(amqp, cleanup, ctx, restricted_url, row: Refusal) -> None:
    admin = amqp.channel()
    names = row.setup(ctx, admin, cleanup)
    ch = amqp.channel(restricted_url)
    row.act(ch, names)
    refused(ctx, ch, row.method, f"{ctx.case.id.split('.', 1)[1]}")
    ctx.check(row.effect(amqp, names), row.unchanged, "what the admin sees afterwards")


# -- what the permissions allow works -----------------------------------------------------------


@restricted
@case(
    "access.permitted-operations-work", sources=[ACL], level=Level.EXTENSION,
    description="Every operation on resources all three permissions match (acc-ok-*)",
    expectation="exchange.declare, queue.declare, queue.bind, basic.publish, basic.get, queue.purge, "
                "queue.unbind, queue.delete and exchange.delete all succeed with their usual replies",
)
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


@restricted
@case(
    "access.write-and-read-are-separate", sources=[ACL], level=Level.EXTENSION,
    description="Publish through an exchange the user may only write to, into a queue it may only read",
    expectation="the publish is routed (write on the exchange suffices) and basic.get returns it "
                "(read on the queue suffices)",
)
def test_write_read_split(amqp, cleanup, ctx, restricted_url):
    admin = amqp.channel()
    q, x = cleanup.queue(acc(ctx, "r", "q")), cleanup.exchange(acc(ctx, "w", "x"))
    admin.declare_queue(q)
    admin.declare_exchange(x, "direct")
    admin.bind(q, x, "k")
    ch = amqp.channel(restricted_url)
    publish_confirmed(ch, x, "k", [b"through-w"])
    got = ch.get(q, no_ack=True)
    ctx.check(None if got is None else got.body, b"through-w", "basic.get from the read-only queue")


@restricted
@case(
    "access.passive-declare-needs-no-permission", sources=[ACL], level=Level.EXTENSION,
    description="Passive queue.declare and exchange.declare of resources no permission matches (acc-no-*)",
    expectation="queue.declare-ok (with the queue's message count) and exchange.declare-ok",
)
def test_passive(amqp, cleanup, ctx, restricted_url):
    admin = amqp.channel()
    q, x = cleanup.queue(acc(ctx, "no", "q")), cleanup.exchange(acc(ctx, "no", "x"))
    admin.declare_queue(q)
    admin.declare_exchange(x, "direct")
    publish_confirmed(admin, "", q, [b"m1"])
    ch = amqp.channel(restricted_url)
    ok = ch.declare_queue(q, passive=True)
    ctx.check((ok.queue, ok.message_count, ok.consumer_count), (q, 1, 0), "passive queue.declare-ok")
    ch.declare_exchange(x, passive=True)


# -- connection level ---------------------------------------------------------------------------


@restricted
@case(
    "access.vhost-without-permissions-530", rules=["connection.open/security"], sources=[VHOST_ACCESS],
    level=Level.EXTENSION,
    description="connection.open of an existing vhost the user has no permissions in",
    expectation="connection.close 530 NOT_ALLOWED naming connection.open (RabbitMQ refuses the vhost)",
)
def test_vhost_without_permissions(broker_url, ctx, request, restricted_url):
    import os

    other = os.environ.get(SECOND_VHOST_ENV)
    if not other:
        raise Unsupported(f"needs a vhost the restricted user has no permissions in: {SECOND_VHOST_ENV}")
    w = Handshake.open(restricted_url, ctx.timeout)
    request.addfinalizer(w.close)
    w.start()
    w.start_ok()
    w.tune_ok_open(w.tune(), vhost=other)
    frm = w.next_frame(f"the answer to connection.open of {other}")
    ctx.observe("answer", describe(frm))
    if not isinstance(frm, spec.Connection.Close):
        raise Mismatch(f"connection.open of {other}", expected="connection.close 530", observed=describe(frm))
    ctx.check((frm.reply_code, frm.class_id, frm.method_id), (530, 10, 40),
              "connection.close reply-code, class-id, method-id")


LOGIN_FAILURES = [
    param(
        Case(
            id="access.bad-password-closes-403",
            sources=(NOTIFY, REFUSED_403),
            level=Level.EXTENSION,
            requires=("authentication_failure_close",),
            description="A wrong password from a client that announces authentication_failure_close",
            expectation="connection.close 403 ACCESS_REFUSED (no connection.tune)",
        ),
        "password",
        True,
    ),
    param(
        Case(
            id="access.unknown-user-closes-403",
            sources=(NOTIFY, REFUSED_403),
            level=Level.EXTENSION,
            requires=("authentication_failure_close",),
            description="An unknown user from a client that announces authentication_failure_close",
            expectation="connection.close 403 ACCESS_REFUSED (no connection.tune)",
        ),
        "user",
        True,
    ),
    param(
        Case(
            id="access.bad-password-without-capability",
            sources=(NOTIFY,),
            level=Level.EXTENSION,
            requires=("authentication_failure_close",),
            description="A wrong password from a client that does not announce authentication_failure_close",
            expectation="the socket closes with nothing sent (no connection.close, no connection.tune)",
        ),
        "password",
        False,
    ),
]


@pytest.mark.parametrize(("wrong", "announce"), LOGIN_FAILURES)
def test_login_failure(broker_url, ctx, request, wrong: str, announce: bool):
    url = URL.parse(broker_url)
    if wrong == "user":
        url = url.with_(user=f"amqpc-no-such-user-{ctx.name('u')[-12:]}")
    w = Handshake.open(url, ctx.timeout)
    request.addfinalizer(w.close)
    w.start()
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
    ctx.observe("answer", describe(frm))
    if not isinstance(frm, spec.Connection.Close):
        raise Mismatch("answer to a failed login", expected="connection.close 403", observed=describe(frm))
    ctx.check(frm.reply_code, 403, "connection.close reply-code")
    ctx.check(bool(str(frm.reply_text or "").strip()), True, "the close carries a reply-text")
