"""Connection class: protocol header, server properties and locales, SASL mechanism, credentials,
virtual hosts, frame-max / channel-max negotiation, the close handshake.

Documents: the spec XML's ``connection`` class rules (``connection.start/*``,
``connection.start-ok/*``, ``connection.tune*``, ``connection.open/*``, ``connection.close/*``)
and its constants (``frame-min-size`` 4096, ``frame-error`` 501, ``invalid-path`` 402). The
handshake is driven by hand on a plain socket (every read has a deadline) where the raw client's
own handshake would hide the behaviour. RabbitMQ 3.10.8 behaviour measured that way is kept as
per-profile data where it differs.

``connection.open/separation`` needs a second virtual host the same credentials can open: give
its name in ``AMQP_CONFORMANCE_SECOND_VHOST`` (RabbitMQ: ``rabbitmqctl add_vhost v2 &&
rabbitmqctl set_permissions -p v2 guest '.*' '.*' '.*'``); without it the case is UNSUPPORTED.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from pamqp import commands as spec
from pamqp import frame as pframe

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import URL, Handshake, HandshakeRefused, describe, publish_unsplit
from conformance.verify import (
    CaseTimeout,
    Mismatch,
    Unsupported,
    aio_pika_connect,
    check,
    expect_passive_missing,
    expected_patterns,
    matches,
    open_again,
    outcome,
    run_async,
)

RMQ = "measured on RabbitMQ 3.10.8 with a hand-driven handshake"
FRAME_MIN_SIZE = 4096
SECOND_VHOST_ENV = "AMQP_CONFORMANCE_SECOND_VHOST"


def wire(broker_url: URL, ctx: Any, request: Any) -> Handshake:
    """The raw client's step-by-step handshake mode on a new socket, closed after the case."""
    w = Handshake.open(broker_url, ctx.timeout)
    request.addfinalizer(w.close)
    return w


# -- protocol header -----------------------------------------------------------------------------


#: the header answers the spec allows: AMQP 0-9-1's own, or a valid header of a lower version the
#: server supports ("e.g. 1.0", the server-support rule's own example; AMQP 1.0 §2.2: protocol id
#: 0 or 3, version 1.0.0), as RabbitMQ 4.0 sends it
VALID_HEADERS = ("AMQP 0-0-9-1", "AMQP 0-1-0-0", "AMQP 3-1-0-0")


def header_text(received: bytes) -> str:
    """``AMQP 0-0-9-1`` for a protocol header, else the bytes as read."""
    if len(received) == 8 and received[:4] == b"AMQP":
        return "AMQP " + "-".join(str(b) for b in received[4:8])
    return repr(received[:16])


@case("connection.bad-protocol-name", rules=["connection.start/protocol-name"], level=Level.MUST,
      description="A protocol header with an invalid protocol name (XMQP 0-9-1)",
      expectation="the broker sends a valid protocol header and closes the socket (rabbitmq: AMQP 0-9-1's; "
                  "from RabbitMQ 4.0 the AMQP 1.0 SASL header, profile data keyed by release)",
      expected={"spec": VALID_HEADERS},
      expected_sources={"spec": "connection.start/protocol-name: a valid protocol header, AMQP 0-9-1's or "
                                "(AMQP 1.0 §2.2) a 1.0 one"},
      default="AMQP 0-0-9-1")
def test_bad_protocol_name(broker_url, ctx, request):
    w = wire(broker_url, ctx, request)
    received = w.header_answer(b"XMQP\x00\x00\x09\x01", "the broker's protocol header and socket close")
    ctx.observe("received", received[:16])
    _check_header(ctx, received, "bytes received before the socket closed")


@case("connection.higher-version-header", rules=["connection.start/server-support"], level=Level.MUST,
      description="A protocol header asking for version 2.0 (AMQP 0-2-0-0)",
      expectation=(
          "the broker answers with its own protocol header (≤ the requested version) and closes the socket "
          "(rabbitmq: AMQP 0-9-1's; from RabbitMQ 4.0 the AMQP 1.0 SASL header)"
      ),
      expected={"spec": VALID_HEADERS},
      expected_sources={"spec": "connection.start/server-support: a version <= the requested one, e.g. 1.0"},
      default="AMQP 0-0-9-1")
def test_higher_version(broker_url, ctx, request):
    w = wire(broker_url, ctx, request)
    received = w.header_answer(b"AMQP\x00\x02\x00\x00", "the broker's protocol header and socket close")
    ctx.observe("received", received[:16])
    _check_header(ctx, received, "the protocol header received before the socket closed")


def _check_header(ctx: Any, received: bytes, what: str) -> None:
    """The header received against the expected one (a tuple: any of them)."""
    got = header_text(received)
    ctx.keep_release_value(got)
    expected = ctx.expected
    allowed = tuple(expected) if isinstance(expected, (tuple, list)) else (expected,)
    if got not in allowed:
        ctx.check_profile(got, what)  # raises, naming the profile's source
    ctx.observe(what, got)


# -- connection.start ----------------------------------------------------------------------------


@case("connection.server-properties", rules=["connection.start/required-fields"], level=Level.SHOULD,
      description="connection.start's server-properties",
      expectation="contain host, product, version and platform")
def test_server_properties(broker_url, ctx, request):
    start = wire(broker_url, ctx, request).start()
    keys = sorted((start.server_properties or {}).keys())
    ctx.observe("server-properties keys", keys)
    missing = [k for k in ("host", "product", "version", "platform") if k not in keys]
    ctx.check(missing, [], "required server-properties fields missing")


@case("connection.locale-en-us", rules=["connection.start/required-support"], level=Level.MUST,
      description="connection.start's locales", expectation="include en_US")
def test_locale(broker_url, ctx, request):
    start = wire(broker_url, ctx, request).start()
    locales = str(start.locales).split()
    ctx.check("en_US" in locales, True, f"en_US in locales {locales}")


#: the spec's expectation of connection.start's mechanisms: any non-empty list (assert notnull)
ANY_MECHANISMS = "a non-empty list"


@case("connection.mechanisms-offered", sources=["rabbitmq-access-control#mechanisms"], level=Level.EXTENSION,
      description="connection.start's mechanisms: the SASL mechanisms the broker offers, as a sorted list",
      expectation="spec: a non-empty space-delimited list (assert notnull); rabbitmq: its default "
                  "auth_mechanisms, AMQPLAIN and PLAIN, and from RabbitMQ 4.0 ANONYMOUS as well (profile "
                  "data keyed by release)",
      expected={"spec": ANY_MECHANISMS}, default="AMQPLAIN PLAIN",
      expected_sources={"spec": "connection.start mechanisms: <assert check=\"notnull\"/>"})
def test_mechanisms_offered(broker_url, ctx, request):
    start = wire(broker_url, ctx, request).start()
    offered = " ".join(sorted(str(start.mechanisms or "").split()))
    ctx.check(bool(offered), True, f"mechanisms not empty ({start.mechanisms!r})")
    if ctx.expected != ANY_MECHANISMS:
        ctx.check_profile(offered, "the mechanisms offered, sorted")
    ctx.observe("the mechanisms offered, sorted", offered)


@case("connection.invalid-mechanism", rules=["connection.start-ok/validity"], level=Level.MUST,
      description="connection.start-ok naming a mechanism the server did not offer",
      expectation="the broker closes the socket without sending anything (no connection.close)")
def test_invalid_mechanism(broker_url, ctx, request):
    w = wire(broker_url, ctx, request)
    w.start()
    w.start_ok(mechanism="X-AMQPC-NO-SUCH-MECHANISM")
    received = w.until_end("the socket to close after an invalid mechanism")
    ctx.check(received, "nothing", "frames sent by the broker before closing the socket")


@case(
    "connection.bad-credentials", rules=["connection.open/security"], level=Level.SHOULD,
    description="connection.start-ok with a wrong password (client advertises authentication_failure_close)",
    expectation=(
        "the connection is refused: no connection.tune; RabbitMQ: connection.close 403 ACCESS_REFUSED"
    ),
    expected={"rabbitmq": "connection.close 403", "spec": ("connection.close *", "socket ended")},
    expected_sources={
        "rabbitmq": f"{RMQ}: connection.close 403 'Login was refused' (authentication_failure_close)",
        "spec": "connection.open/security (no reply code named for failed authentication)",
    },
)
def test_bad_credentials(broker_url, ctx, request):
    w = wire(broker_url, ctx, request)
    w.start()
    w.start_ok(password="amqpc-wrong-password")
    frm = w.next_frame("the broker's answer to a wrong password")
    observed = "socket ended" if frm is None else (
        f"connection.close {frm.reply_code}" if isinstance(frm, spec.Connection.Close) else describe(frm))
    ctx.observe("answer", describe(frm))
    patterns = expected_patterns(ctx.expected)
    if not matches(observed, patterns):
        raise Mismatch("answer to a wrong password", expected=" or ".join(patterns), observed=describe(frm))


@case("connection.unknown-vhost", rules=["connection.open/security"], level=Level.SHOULD,
      description="connection.open of a virtual host that does not exist",
      expectation="spec: connection.close 402 INVALID_PATH; RabbitMQ: connection.close 530 NOT_ALLOWED",
      expected={"spec": 402, "rabbitmq": 530},
      expected_sources={"spec": "amqp0-9-1.xml#constants (invalid-path 402: 'an unknown virtual host')",
                        "rabbitmq": f"{RMQ}: connection.close 530 'vhost … not found'"})
def test_unknown_vhost(broker_url, ctx, request):
    w = wire(broker_url, ctx, request)
    w.tune_ok_open(w.login(), vhost="amqpc-no-such-vhost")
    frm = w.next_frame("the answer to connection.open of an unknown vhost")
    if not isinstance(frm, spec.Connection.Close):
        raise Mismatch(
            "connection.open of an unknown vhost", expected="connection.close", observed=describe(frm)
        )
    ctx.observe("close", describe(frm))
    ctx.check_profile(frm.reply_code, "connection.close reply code")


@case("connection.vhost-separation", rules=["connection.open/separation"], level=Level.MUST,
      description="A queue declared in one virtual host is invisible in another",
      expectation=f"passive declare of it in the second vhost ({SECOND_VHOST_ENV}) → channel.close 404")
def test_vhost_separation(declared_queue, amqp, ctx):
    other = os.environ.get(SECOND_VHOST_ENV)
    if not other:
        raise Unsupported(f"needs a second virtual host: set {SECOND_VHOST_ENV} (see the module docstring)")
    _, q = declared_queue()
    ch2 = amqp.channel(vhost=other)
    what = f"passive declare in vhost {other!r} of a queue from the first vhost"
    expect_passive_missing(ch2, spec.Queue.Declare(queue=q, passive=True), what)


# -- tune ----------------------------------------------------------------------------------------


def _above_limit_case(field: str) -> Case:
    return Case(
        id=f"connection.{field}-above-server", rules=(f"connection.tune-ok.{field}/upper-limit",),
        level=Level.MUST,
        description=f"connection.tune-ok with {field} above the server's connection.tune value",
        expectation=(
            "the broker closes the socket without a negotiated close (no connection.close, no open-ok)"
        ),
    )


@pytest.mark.parametrize(("field", "unlimited"), [
    param(_above_limit_case("frame-max"), "frame-max", 2**32 - 1),
    param(_above_limit_case("channel-max"), "channel-max", 65535),
])
def test_tune_ok_above_server_limit(broker_url, ctx, request, field: str, unlimited: int):
    w = wire(broker_url, ctx, request)
    tune = w.login()
    attr = field.replace("-", "_")
    limit = getattr(tune, attr)
    if not limit or limit >= unlimited:
        raise Unsupported(f"the server imposes no {field} limit", observed=f"{field} {limit}")
    w.tune_ok_open(tune, **{attr: limit + 1})
    received = w.until_end(f"the socket to close after tune-ok above the server's {field}")
    ctx.check(received, "nothing", "frames sent before closing the socket")


@case("connection.frame-min-size-before-tune", rules=["connection.tune/minimum"], level=Level.MUST,
      description="A connection.start-ok frame of exactly frame-min-size (4096) octets, before tuning",
      expectation="the broker accepts it and answers connection.tune")
def test_frame_min_before_tune(broker_url, ctx, request):
    w = wire(broker_url, ctx, request)
    w.start()
    props: dict[str, Any] = {"product": "amqp-conformance wire",
                             "capabilities": {"authentication_failure_close": True}, "pad": ""}
    base = len(pframe.marshal(w.start_ok_method(client_properties=props), 0))
    props["pad"] = "p" * (FRAME_MIN_SIZE - base)
    data = pframe.marshal(w.start_ok_method(client_properties=props), 0)
    assert len(data) == FRAME_MIN_SIZE, f"start-ok frame is {len(data)} octets"
    w.send(data)
    frm = w.next_frame("connection.tune after a 4096-octet start-ok")
    ctx.check(describe(frm), "connection.tune", "answer to a frame-min-size start-ok")


@case("connection.frame-max-minimum-negotiated", rules=["connection.tune-ok/minimum"], level=Level.MUST,
      description=(
          "frame-max negotiated down to frame-min-size (4096); a message body frame of exactly 4096 octets"
      ),
      expectation="the broker accepts the connection (connection.open-ok) and the message is routed intact "
                  "(rabbitmq from 4.1.0: a frame_max below 8192 is refused, profile data keyed by release)",
      default="connection.open-ok",
      expected_sources={"spec": "connection.tune-ok/minimum: 'the minimum negotiated value for frame-max is "
                                "also frame-min-size' (amqp0-9-1.xml#constants: frame-min-size 4096)"})
def test_frame_max_minimum(amqp, ctx, cleanup):
    what = f"answer to tune-ok frame_max={FRAME_MIN_SIZE}"
    try:
        conn = amqp(frame_max=FRAME_MIN_SIZE)
    except HandshakeRefused as refused:
        # The broker's answer to what this case negotiated: judged, with the close or reset as evidence.
        ctx.observe("refusal", refused.observed)
        ctx.check_profile("refused", what, evidence=refused.observed)
        return
    ctx.check_profile("connection.open-ok", what)
    ctx.check(conn.frame_max, FRAME_MIN_SIZE, "negotiated frame-max")
    ch = conn.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    body = b"b" * (FRAME_MIN_SIZE - 8)  # body frame = 7 header octets + payload + frame-end
    ch.publish("", q, body)
    ch.barrier()
    ev = ch.get(q, no_ack=True)
    ctx.check(len(ev.body) if ev and ev.body is not None else None, len(body), "routed body length")


#: the frame-max the 501 case negotiates: at or above every broker's minimum (the spec's frame-min-size
#: 4096; RabbitMQ 4.1+: 8192) and below every default, so the case tests the 501 and nothing else
FRAME_TOO_LARGE_NEGOTIATED = 8192


@case("connection.frame-too-large-501",
      sources=["amqp0-9-1.xml#constants (frame-error 501)",
               "amqp0-9-1.xml#connection.tune (frame-max)"],
      level=Level.MUST,
      description=f"A body frame larger than the negotiated frame-max ({FRAME_TOO_LARGE_NEGOTIATED})",
      expectation="connection.close 501 FRAME_ERROR")
def test_frame_too_large(amqp, ctx, cleanup):
    conn = amqp(frame_max=FRAME_TOO_LARGE_NEGOTIATED)
    ch = conn.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    got = outcome(ch, None, (), raw=publish_unsplit(ch.id, "", q, b"x" * 3 * FRAME_TOO_LARGE_NEGOTIATED))
    ctx.observe("answer", got[1])
    ctx.check(got[0], "connection.close 501", "answer to a frame above frame-max")


# -- close ---------------------------------------------------------------------------------------


@case(
    "connection.close-stability", rules=["connection.close/stability"], level=Level.MUST,
    description="After the broker's connection.close, a method is discarded and a crossing connection.close "
                "is answered with close-ok",
    expectation="after the broker's connection.close only connection.close-ok arrives",
)
def test_close_stability(amqp, ctx, cleanup):
    conn = amqp()
    conn.auto_close_ok = False
    ch = conn.channel()
    q = cleanup.queue(ctx.name("q"))
    open_again(conn, ch)  # 504: a connection exception
    close = conn.wait_connection_close(what="connection.close 504")
    try:
        ch.send(spec.Queue.Declare(queue=q))  # must be discarded
        conn.send_method(
            0, spec.Connection.Close(reply_code=200, reply_text="crossing", class_id=0, method_id=0)
        )
    except Mismatch:
        pass  # the socket is gone: reported below
    try:
        conn.wait_event(0, lambda e: isinstance(e.method, spec.Connection.CloseOk), "connection.close-ok",
                        close_is_error=False)
    except (Mismatch, CaseTimeout):
        pass
    seq = getattr(close, "seq", 0)
    after = [e.name for c in (0, ch.id) for e in conn.history(c) if e.seq > seq]
    ctx.check(after, ["connection.close-ok"], "methods from the broker after its connection.close")


# -- client libraries ----------------------------------------------------------------------------


@case("connection.pika-wrong-password", rules=["connection.open/security"], level=Level.SHOULD, client="pika",
      description="pika: BlockingConnection with a wrong password",
      expectation="raises an authentication / access-refused error (the connection is not opened)")
def test_pika_wrong_password(broker_url, ctx):
    from pika import exceptions as pex

    from conformance.verify import pika_bound, tls_failure

    # The broker's URL (amqps and TLS files included) with only the password wrong.
    wrong = broker_url.with_(password="amqpc-wrong-password")

    # pika_bound closes a connection that wrongly opened, under a deadline of its own.
    with pika_bound(broker_url, ctx.timeout, "pika connect with a wrong password") as pb:
        try:
            pb.connect(wrong)
        except (pex.ProbableAuthenticationError, pex.AuthenticationError, pex.ProbableAccessDeniedError,
                pex.ConnectionClosedByBroker) as exc:
            ctx.observe("raised", f"{type(exc).__name__}: {exc}")
            return
        except pex.AMQPConnectionError as exc:
            if tls_failure(exc) is not None:
                raise  # our TLS settings, not the broker: pika_bound makes it ERROR
            raise Mismatch("pika connect with a wrong password", expected="an authentication error",
                           observed=f"{type(exc).__name__}: {exc}") from exc
    raise Mismatch("pika connect with a wrong password", expected="an authentication error",
                   observed="connection opened")


@case("connection.aio-pika-unknown-vhost", rules=["connection.open/security"], level=Level.SHOULD,
      client="aio-pika", description="aio-pika: connect() to a virtual host that does not exist",
      expectation="connect raises on the broker's connection.close (spec: 402 INVALID_PATH; RabbitMQ: 530 "
                  "NOT_ALLOWED); it does not hang or open",
      expected={"spec": 402, "rabbitmq": 530},
      expected_sources={"spec": "amqp0-9-1.xml#constants (invalid-path 402: 'an unknown virtual host')",
                        "rabbitmq": f"{RMQ}: connection.close 530 'vhost … not found'"})
def test_aio_pika_unknown_vhost(broker_url, ctx):
    from aiormq import exceptions as aex

    from conformance.verify import received_connection_closes

    # The broker's URL (amqps and TLS files included) with only the vhost changed.
    url = broker_url.with_(vhost="amqpc-no-such-vhost")

    async def scenario() -> tuple[str, list[Any]]:
        try:
            conn = await aio_pika_connect(url, ctx.timeout)
        except aex.AMQPError as exc:
            # Only the library's reaction to the broker's frames is a refusal; a TLS or network
            # failure propagates (run_async makes it ERROR, a silence TIMEOUT).
            return f"refused: {type(exc).__name__}: {exc}", received_connection_closes()
        await conn.close()
        return "opened", received_connection_closes()

    got, closes = run_async(scenario(), ctx.timeout * 2, "aio-pika connect to an unknown vhost")
    ctx.observe("aio-pika", got)
    check(got.startswith("refused"), True, f"connect to an unknown vhost refused ({got[:120]})")
    if not closes:
        raise Mismatch(
            "aio-pika connect to an unknown vhost",
            expected="a connection.close refusing the vhost",
            observed=f"no connection.close received ({got[:120]})",
        )
    ctx.observe("close", describe(closes[0]))
    ctx.check_profile(closes[0].reply_code, "connection.close reply code")

