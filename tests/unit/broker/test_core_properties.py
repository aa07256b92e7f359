"""Property-based tests (hypothesis) of the sans-IO core's totality (issue 12).

For any input, the core returns promptly, raises nothing, writes well-formed frames with
spec reply codes, keeps at most one frame buffered and, after a client close plus its
timers, is closed with nothing left behind in the shared broker.  The rules are checked by
``conformance.fuzz.inproc.CoreHarness`` (the same code as ``amqp-conformance fuzz
--in-process``); the strategies here aim at the places a fuzzer reaches by luck only.
"""

from __future__ import annotations

import itertools
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pamqp import commands as spec
from pamqp import frame as pframe

from conformance.broker.core import ConnectionCore
from conformance.fuzz import inproc
from conformance.fuzz.inproc import CoreHarness, CoreOutcome, scan_output
from conformance.fuzz.mutate import INTERESTING_BODY_SIZES, INTERESTING_SIZES, MUTATORS, chunks, mutate
from conformance.fuzz.sessions import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_MAX,
    FRAME_METHOD,
    PROTOCOL_HEADER,
    Frame,
    content,
    corpus,
    handshake,
    method,
)

EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
POOL = corpus(seed=12, size=24)


def _default_payload(cls: type) -> bytes:
    """A method with its default arguments where pamqp can encode them, else bare."""
    try:
        return pframe.marshal(cls(), 1)[7:-1]
    except Exception:  # noqa: BLE001 - some methods have no encodable defaults
        return struct.pack(">I", cls.index)


METHOD_PAYLOADS = [_default_payload(cls) for _i, cls in sorted(spec.INDEX_MAPPING.items())]

#: connection/channel states to reach before the method under test, as client frames
_OPEN = [*handshake()]
_CH1 = [*_OPEN, method(spec.Channel.Open(), 1)]
STATES: dict[str, list[Frame]] = {
    "awaiting-header": [],
    "awaiting-start-ok": [],  # (protocol header only)
    "awaiting-tune-ok": _OPEN[:1],
    "awaiting-open": _OPEN[:2],
    "open": _OPEN,
    "channel-open": _CH1,
    "channel-closing": [*_CH1, method(spec.Queue.Declare(queue="q", passive=True), 1)],  # 404: soft error
    "connection-closing": [*_CH1, method(spec.Channel.Open(), 1)],  # 504: hard error
    "frame-error": [*_CH1, Frame(9, 0, b"")],  # 501: input discarded
    "content-header-due": [*_CH1, method(spec.Basic.Publish(routing_key="q"), 1)],
    "content-body-due": [
        *_CH1,
        method(spec.Basic.Publish(routing_key="q"), 1),
        content(1, b"0123456789", spec.Basic.Properties())[0],
    ],
    "confirm-tx": [
        *_CH1,
        method(spec.Confirm.Select(), 1),
        method(spec.Channel.Open(), 2),
        method(spec.Tx.Select(), 2),
    ],
}


def _encode(state: str, frames: list[Frame]) -> bytes:
    header = b"" if state == "awaiting-header" else PROTOCOL_HEADER
    return header + b"".join(f.encode() for f in STATES[state] + frames)


@st.composite
def pieces(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut at arbitrary points, as TCP may deliver it."""
    if len(data) < 2:
        return [data]
    cuts = sorted(set(draw(st.lists(st.integers(1, len(data) - 1), max_size=4))))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def check(data: bytes, split: list[bytes] | None = None) -> CoreOutcome:
    outcome = CoreHarness().run(split if split is not None else [data])
    assert outcome.finding is None, f"{outcome.kind}: {outcome.finding}"
    return outcome


@EXAMPLES
@given(st.binary(max_size=600), st.booleans())
def test_arbitrary_bytes(data: bytes, with_header: bool) -> None:
    check((PROTOCOL_HEADER if with_header else b"") + data)


@EXAMPLES
@given(st.data())
def test_arbitrary_bytes_after_handshake(data: st.DataObject) -> None:
    raw = _encode("channel-open", []) + data.draw(st.binary(max_size=400))
    check(raw, data.draw(pieces(raw)))


@EXAMPLES
@given(
    st.sampled_from(POOL),
    st.lists(st.sampled_from([m for _w, m in MUTATORS]), min_size=1, max_size=4),
    st.randoms(use_true_random=False),
)
def test_frame_aware_mutations_of_valid_sessions(session, ops, rnd: random.Random) -> None:  # type: ignore[no-untyped-def]
    for op in ops:
        session = op(rnd, session)
    data = session.encode()
    check(data, chunks(rnd, data))


@EXAMPLES
@given(st.integers(0, 2**32 - 1))
def test_stacked_mutations_with_splices(seed: int) -> None:
    rnd = random.Random(seed)
    mutant, _ops = mutate(rnd, rnd.choice(POOL), POOL)
    check(mutant.encode())


@EXAMPLES
@given(
    st.sampled_from(sorted(STATES)),
    st.sampled_from(METHOD_PAYLOADS),
    st.sampled_from([0, 1, 2, 2047, 2048, 65535]),
    st.binary(max_size=24),
)
def test_every_method_in_every_state(state: str, payload: bytes, channel: int, junk: bytes) -> None:
    frames = [Frame(FRAME_METHOD, channel, payload), Frame(FRAME_METHOD, channel, payload[:4] + junk)]
    check(_encode(state, frames))


@EXAMPLES
@given(
    st.sampled_from(sorted(STATES)),
    st.lists(
        st.tuples(
            st.sampled_from([FRAME_HEADER, FRAME_BODY]), st.sampled_from([0, 1, 2, 3]), st.binary(max_size=40)
        ),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from((*INTERESTING_BODY_SIZES, 0, 3, 10, 11)),
)
def test_content_frames_out_of_order_or_on_other_channels(state: str, parts: list, body_size: int) -> None:  # type: ignore[type-arg]
    frames = []
    for ftype, channel, payload in parts:
        if ftype == FRAME_HEADER:
            payload = struct.pack(">HHQ", 60, 0, body_size) + payload[:2].ljust(2, b"\x00")
        frames.append(Frame(ftype, channel, payload))
    check(_encode(state, frames))


@EXAMPLES
@given(
    st.sampled_from(sorted(STATES)),
    st.sampled_from([FRAME_METHOD, FRAME_HEADER, FRAME_BODY, 8, 9]),
    st.sampled_from(INTERESTING_SIZES),
    st.integers(-2, 2),
    st.sampled_from([0, 1]),
)
def test_sizes_at_and_beyond_every_limit(state: str, ftype: int, size: int, lie: int, channel: int) -> None:
    # payloads up to one octet past frame-max are real; bigger sizes are only claimed
    real = min(size, FRAME_MAX - 7)
    frame = Frame(ftype, channel, bytes(real), size=max(0, size + lie))
    check(_encode(state, [frame]))


@pytest.mark.parametrize("size", [FRAME_MAX, FRAME_MAX + 1])
def test_body_frame_at_and_past_frame_max(size: int) -> None:
    frames = [
        method(spec.Queue.Declare(queue="big", exclusive=True), 1),
        method(spec.Basic.Publish(routing_key="big"), 1),
        Frame(FRAME_HEADER, 1, struct.pack(">HHQ", 60, 0, size) + b"\x00\x00"),
        Frame(FRAME_BODY, 1, bytes(size)),
    ]
    codes = check(_encode("channel-open", frames)).codes
    # a payload of frame_max octets is accepted (RabbitMQ 3.10's FRAME_SIZE_FUDGE of 8 octets
    # over the spec's frame_max - 8); one octet past it is 501 FRAME_ERROR
    assert codes == ((501,) if size > FRAME_MAX else ())


# -- the harness itself can fail ---------------------------------------------------------------


def test_harness_reports_a_core_that_spins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inproc, "FEED_LIMIT", 0.2)

    def spin(self: ConnectionCore, data: bytes) -> None:
        while True:
            pass

    monkeypatch.setattr(ConnectionCore, "receive_data", spin)
    outcome = CoreHarness().run([PROTOCOL_HEADER])
    assert outcome.kind == "stuck"


def test_harness_reports_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: ConnectionCore, data: bytes) -> None:
        raise KeyError("x")

    monkeypatch.setattr(ConnectionCore, "receive_data", boom)
    assert CoreHarness().run([PROTOCOL_HEADER]).kind == "exception"


def test_harness_reports_a_connection_that_never_closes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ConnectionCore, "_on_connection_method", lambda self, m: None)
    monkeypatch.setattr(ConnectionCore, "tick", lambda self: None)  # no handshake timeout either
    outcome = CoreHarness().run([_encode("open", [])])
    assert outcome.kind == "stuck", outcome


def test_scan_output_rejects_malformed_frames() -> None:
    assert scan_output(b"\x01\x00\x00\x00\x00\x00\x00\xce") == ([], None)
    assert scan_output(b"\x09\x00\x00\x00\x00\x00\x00\xce")[1] is not None
    assert scan_output(b"AMQP\x00\x00\x08\x00")[1] is not None
    assert scan_output(b"\x01\x00")[1] is not None
    close = method(spec.Connection.Close(reply_code=504, reply_text="x", class_id=0, method_id=0), 0).encode()
    assert scan_output(PROTOCOL_HEADER + close) == ([504], None)
