"""What real client libraries rely on beyond the spec's rules: reserved fields sent empty, RabbitMQ's
connection-class extensions, the close handshake as RabbitMQ runs it, the AMQP 0-9 protocol header,
the server version clients compare, and exchange.unbind of an exchange that is already gone.

Documents: the spec XML (``channel.open-ok`` / ``connection.open-ok`` reserved fields, whose comments
say "must be zero": an empty string for a string field; ``connection.close-ok``), RabbitMQ's
extended XML (``connection.update-secret``, ``exchange.unbind``), and RabbitMQ 3.10.8 measured with
the raw client where no document states the behaviour. Each case reproduces a behaviour where a
widely used client stops working when a broker differs (a client that skips four octets for the
empty reserved string loses frame sync; a client waiting for update-secret-ok hangs; a client that
closes ahead of buffered publishes gets a broken pipe; a client speaking the 0-9 header cannot
connect; a client tearing down bindings of an auto-deleted exchange ends in an error).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import Handshake, HandshakeError, UnexpectedClose, describe
from conformance.protocol.wire import URL
from conformance.verify import CaseTimeout, Mismatch, check_outcome, outcome, quiet_window

RMQ = "DESIGN.md#facts-measured-on-rabbitmq-3-10-8"
SPEC_XML = "amqp0-9-1.xml"
EXTENDED_XML = "amqp0-9-1.stripped.extended.xml"



def wire(broker_url: URL, ctx: Any, request: Any) -> Handshake:
    """The raw client's step-by-step handshake mode on a new socket, closed after the case."""
    w = Handshake.open(broker_url, ctx.timeout)
    request.addfinalizer(w.close)
    return w


# -- reserved fields -------------------------------------------------------------------------------

RESERVED = [
    param(Case(
        "interop.channel-open-ok-reserved-empty", sources=(f"{SPEC_XML}#channel.open-ok (reserved-1)", RMQ),
        level=Level.MUST, description="channel.open-ok's reserved-1 field (longstr, formerly channel-id)",
        expectation="an empty long string (4 zero octets), as RabbitMQ 3.10.8 sends it", default="",
    ), "channel"),
    param(Case(
        "interop.connection-open-ok-reserved-empty",
        sources=(f"{SPEC_XML}#connection.open-ok (reserved-1)", RMQ), level=Level.MUST,
        description="connection.open-ok's reserved-1 field (shortstr, formerly known-hosts)",
        expectation="an empty short string, as RabbitMQ 3.10.8 sends it", default="",
    ), "connection"),
]


@pytest.mark.parametrize("which", RESERVED)
def test_reserved_field_empty(broker_url, ctx, request, which: str) -> None:
    w = wire(broker_url, ctx, request)
    w.tune_ok_open(w.login())
    ok = w.next_frame("connection.open-ok")
    if not isinstance(ok, spec.Connection.OpenOk):
        raise Mismatch("connection.open", expected="connection.open-ok", observed=w.unexpected("open-ok", ok))
    if which == "connection":
        ctx.check(repr(ok.known_hosts), repr(ctx.expected), "connection.open-ok reserved-1")
        return
    w.send_method(spec.Channel.Open(), 1)
    got = w.next_channel_frame("channel.open-ok")
    frm = None if got is None else got[1]
    if not isinstance(frm, spec.Channel.OpenOk):
        raise Mismatch("channel.open", expected="channel.open-ok", observed=w.unexpected("open-ok", frm))
    ctx.check(repr(frm.channel_id), repr(ctx.expected), "channel.open-ok reserved-1")


# -- connection.update-secret ---------------------------------------------------------------------


# wedges: garagemq 0.1 goes down on connection.update-secret (its process ends): a private broker
# where the suite can spawn one, else the case runs after all others
@case("interop.update-secret-ok", sources=[f"{EXTENDED_XML}#connection.update-secret", RMQ],
      level=Level.EXTENSION, wedges=True,
      description="connection.update-secret with the connection's own (valid) password, then channel.open",
      expectation="connection.update-secret-ok; the connection stays open (a channel opens after it)")
def test_update_secret(amqp, ctx, private_broker):
    url, health = private_broker
    conn = amqp(url)
    conn.send_method(0, spec.Connection.UpdateSecret(new_secret=conn.url.password, reason="rotation"))
    ev = conn.wait_event(0, lambda e: isinstance(e.method, spec.Connection.UpdateSecretOk),
                         "connection.update-secret-ok")
    ctx.observe("reply", ev.describe())
    ch = conn.channel()  # UnexpectedClose (a FAIL) if the broker ended the connection after all
    ctx.check(ch.id > 0, True, "a channel opens after update-secret-ok")
    if health is not None:
        health["healthy"] = True


# -- the close handshake ---------------------------------------------------------------------------

CLOSE_AFTER = 20  # publishes a client had buffered behind its connection.close


@case("interop.close-ok-then-client-closes", sources=[f"{SPEC_XML}#connection.close-ok", RMQ],
      level=Level.EXTENSION,
      description="The client sends connection.close, reads close-ok, then frames it had buffered "
      "(publishes with content, a queue.declare)",
      expectation="rabbitmq: the broker leaves the socket open for the client to close (nothing is sent "
      "after close-ok, the frames are discarded); spec: close-ok tells the recipient it may close",
      expected={"rabbitmq": "socket open, nothing sent", "spec": "*"},
      expected_sources={
          "rabbitmq": "measured on RabbitMQ 3.10.8: close-ok, then the socket stays open (over 3 s) and "
          "later frames get no answer until the client closes",
          "spec": "connection.close-ok: 'tells the recipient that it is safe to release resources for the "
          "connection and close the socket' -- the recipient, the client, closes",
      })
def test_close_ok_then_client_closes(amqp, ctx):
    conn = amqp()
    ch = conn.channel()
    conn.send_method(0, spec.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    ok = conn.wait_event(0, lambda e: isinstance(e.method, spec.Connection.CloseOk), "connection.close-ok",
                         close_is_error=False)
    try:
        for i in range(CLOSE_AFTER):
            conn.send_content(ch.id, spec.Basic.Publish(exchange="", routing_key=ctx.name("none")),
                              f"after-close-{i}".encode())
        ch.send(spec.Queue.Declare(queue=ctx.name("after-close")))
    except UnexpectedClose as exc:
        observed = ("socket closed", f"the send after close-ok failed: {exc.event.describe()}")
    else:
        window = quiet_window(ctx.timeout)
        try:
            ended = conn.wait_connection_close(timeout=window, what="the socket to stay open")
        except CaseTimeout:
            later = [e.describe() for c in (0, ch.id) for e in conn.history(c) if e.seq > ok.seq]
            observed = (("socket open, sent after close-ok", "; ".join(later)) if later
                        else ("socket open, nothing sent", f"socket open {window:.1f}s after close-ok"))
        else:
            observed = ("socket closed", f"{ended.describe()} within {window:.1f}s of close-ok")
    conn.abort()  # the client closes, as the scenario says (no second close handshake)
    check_outcome(ctx, observed, "after connection.close-ok")


# -- the AMQP 0-9 protocol header ------------------------------------------------------------------

HEADER_0_9 = b"AMQP\x01\x01\x00\x09"  # AMQP 0-9's header: class 1, instance 1, version 0-9


@case("interop.amqp-0-9-header", sources=[RMQ], level=Level.EXTENSION,
      description="A client opens with the AMQP 0-9 protocol header (AMQP 1 1 0 9), then logs in and opens "
      "a channel",
      expectation="connection.start with version 0-9 and the same mechanisms and locales as for the 0-9-1 "
      "header; the handshake completes and channel.open gets open-ok (RabbitMQ 3.10.8 speaks 0-9-1 to it)")
def test_amqp_0_9_header(broker_url, ctx, request):
    ref = wire(broker_url, ctx, request).start()
    w = wire(broker_url, ctx, request)
    w.send(HEADER_0_9)
    try:
        start = w.next_frame("connection.start")
    except HandshakeError as exc:
        raise Mismatch("answer to the AMQP 0-9 header", expected="connection.start",
                       observed=str(exc)) from exc
    if not isinstance(start, spec.Connection.Start):
        raise Mismatch("answer to the AMQP 0-9 header", expected="connection.start",
                       observed=w.unexpected("connection.start", start))
    got = (start.version_major, start.version_minor, str(start.mechanisms), str(start.locales))
    want = (0, 9, str(ref.mechanisms), str(ref.locales))
    ctx.check(got, want, "connection.start (version-major, version-minor, mechanisms, locales)")
    w.start_ok()
    w.tune_ok_open(w.tune())
    ok = w.next_frame("connection.open-ok")
    if not isinstance(ok, spec.Connection.OpenOk):
        raise Mismatch("connection.open", expected="connection.open-ok", observed=w.unexpected("open-ok", ok))
    w.send_method(spec.Channel.Open(), 1)
    reply = w.next_channel_frame("channel.open-ok")
    ctx.check(describe(reply[1]) if reply else w.unexpected("open-ok", None),
              describe(spec.Channel.OpenOk()), "channel.open on the 0-9 connection")


# -- server-properties' version --------------------------------------------------------------------

RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")
VERSION_GATE = (3, 3, 5)


@case("interop.server-version-release-number", sources=[RMQ], level=Level.EXTENSION,
      description="connection.start's server-properties version, as clients that branch on the RabbitMQ "
      "release read it",
      expectation="a release number major.minor.patch at or above 3.3.5 (RabbitMQ 3.10.8 sends '3.10.8'); "
      "below it, such clients take the code path of RabbitMQ before 3.3.5", default=True)
def test_server_version(broker_url, ctx, request):
    props = wire(broker_url, ctx, request).start().server_properties or {}
    version = props.get("version")
    ctx.observe("product", props.get("product"))
    ctx.observe("version", version)
    text = version.decode() if isinstance(version, bytes) else str(version)
    m = RELEASE.match(text)
    ok = m is not None and tuple(int(g) for g in m.groups()) >= VERSION_GATE
    ctx.check(ok, ctx.expected, f"version {text!r} is a release number >= 3.3.5")


# -- exchange.unbind of an exchange that is gone ---------------------------------------------------

UNBIND_SPEC = f"{EXTENDED_XML}#exchange.unbind (source / destination: must-exist, on-failure not-found)"
UNBIND_RMQ = ("measured on RabbitMQ 3.10.8: exchange.unbind-ok whether the source, the destination or "
              "both are gone (queue.unbind of a missing queue or exchange is unbind-ok too)")

UNBIND_GONE = [
    param(Case(
        "interop.exchange-unbind-deleted-source", sources=(UNBIND_SPEC, RMQ), level=Level.EXTENSION,
        description="exchange.unbind of a binding whose source exchange has been deleted (as an auto-delete "
        "exchange is)",
        expectation="spec: channel.close 404 NOT_FOUND; RabbitMQ 3.10.8: exchange.unbind-ok",
        expected={"spec": "channel.close 404", "rabbitmq": "exchange.unbind-ok"},
        expected_sources={"spec": UNBIND_SPEC, "rabbitmq": UNBIND_RMQ},
    ), "source"),
    param(Case(
        "interop.exchange-unbind-deleted-destination", sources=(UNBIND_SPEC, RMQ), level=Level.EXTENSION,
        description="exchange.unbind of a binding whose destination exchange has been deleted",
        expectation="spec: channel.close 404 NOT_FOUND; RabbitMQ 3.10.8: exchange.unbind-ok",
        expected={"spec": "channel.close 404", "rabbitmq": "exchange.unbind-ok"},
        expected_sources={"spec": UNBIND_SPEC, "rabbitmq": UNBIND_RMQ},
    ), "destination"),
]


@pytest.mark.parametrize("gone", UNBIND_GONE)
def test_exchange_unbind_gone(declared_exchange, ctx, gone: str) -> None:
    ch, src = declared_exchange("direct", "src")
    _, dst = declared_exchange("direct", "dst", ch=ch)
    ch.rpc(spec.Exchange.Bind(destination=dst, source=src, routing_key="k"))
    ch.rpc(spec.Exchange.Delete(exchange=src if gone == "source" else dst))
    unbind = spec.Exchange.Unbind(destination=dst, source=src, routing_key="k")
    got = outcome(ch, unbind, spec.Exchange.UnbindOk)
    check_outcome(ctx, got, f"exchange.unbind after its {gone} was deleted")
