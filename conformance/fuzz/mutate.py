"""Frame-aware mutations of valid sessions.

Most operators keep the framing consistent (size matches payload) so the edit reaches the
method, content and state layers; a few break the framing on purpose (size lies, frame-end
octet, truncation, raw byte edits) and a few reorder or move whole frames (content out of
order, on another channel, methods in states where they are not allowed).
"""

from __future__ import annotations

import itertools
import random
import struct
from collections.abc import Callable
from dataclasses import replace

from pamqp import commands as spec

from .sessions import (
    CHANNEL_MAX,
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_MAX,
    FRAME_METHOD,
    Frame,
    Session,
)

#: sizes at and beyond every limit the server announces or the spec fixes
INTERESTING_SIZES = (
    0,
    1,
    3,
    4,
    7,
    8,
    4095,
    4096,
    FRAME_MAX - 9,
    FRAME_MAX - 8,
    FRAME_MAX - 7,
    FRAME_MAX,
    0x7FFFFFFF,
    0xFFFFFFFF,
)
INTERESTING_BODY_SIZES = (0, 1, 2**31, 2**32, 134217728, 134217729, 2**63 - 1, 2**64 - 1)
INTERESTING_CHANNELS = (0, 1, 2, 3, CHANNEL_MAX, CHANNEL_MAX + 1, 65535)
INTERESTING_OCTETS = (0x00, 0x01, 0x7F, 0x80, 0xCE, 0xFF)
FRAME_TYPES = (FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT, 0, 4, 9, 0xCE, 0xFF)
METHOD_INDEXES = tuple(sorted(spec.INDEX_MAPPING))

Mutator = Callable[[random.Random, Session], Session]


def _pick(rng: random.Random, s: Session, *, skip_handshake: bool = True) -> int | None:
    """Index of a frame to edit; mostly after the handshake (its 3 frames) so that edits
    reach the channel layer instead of ending every input at start-ok."""
    n = len(s.frames)
    if n == 0:
        return None
    low = 3 if skip_handshake and n > 3 and rng.random() < 0.9 else 0
    return rng.randrange(low, n)


def _edit(s: Session, i: int, f: Frame) -> Session:
    frames = list(s.frames)
    frames[i] = f
    return s.with_frames(frames)


def _edit_picked(
    rng: random.Random, s: Session, change: Callable[[Frame], Frame], *, needs_payload: bool = False
) -> Session:
    """``s`` with one frame (see :func:`_pick`) replaced by ``change(frame)``; ``s`` itself when
    there is no frame (or, with ``needs_payload``, the picked one has no payload). ``change`` draws
    from ``rng`` after the pick, so a seed gives the same input as ever."""
    i = _pick(rng, s)
    if i is None or (needs_payload and not s.frames[i].payload):
        return s
    return _edit(s, i, change(s.frames[i]))


def flip_payload_byte(rng: random.Random, s: Session) -> Session:
    def flip(f: Frame) -> Frame:
        data = bytearray(f.payload)
        pos = rng.randrange(len(data))
        if rng.random() < 0.5:
            data[pos] = rng.choice(INTERESTING_OCTETS)
        else:
            data[pos] ^= 1 << rng.randrange(8)
        return replace(f, payload=bytes(data))

    return _edit_picked(rng, s, flip, needs_payload=True)


def insert_payload_bytes(rng: random.Random, s: Session) -> Session:
    def insert(f: Frame) -> Frame:
        pos = rng.randint(0, len(f.payload))
        ins = rng.randbytes(rng.choice((1, 2, 4, 8, 32)))
        return Frame(f.type, f.channel, f.payload[:pos] + ins + f.payload[pos:])

    return _edit_picked(rng, s, insert)


def delete_payload_bytes(rng: random.Random, s: Session) -> Session:
    def delete(f: Frame) -> Frame:
        pos = rng.randrange(len(f.payload))
        n = rng.randint(1, max(1, len(f.payload) - pos))
        return Frame(f.type, f.channel, f.payload[:pos] + f.payload[pos + n :])

    return _edit_picked(rng, s, delete, needs_payload=True)


def set_frame_type(rng: random.Random, s: Session) -> Session:
    return _edit_picked(rng, s, lambda f: replace(f, type=rng.choice(FRAME_TYPES)))


def set_channel(rng: random.Random, s: Session) -> Session:
    return _edit_picked(
        rng,
        s,
        lambda f: replace(
            f, channel=rng.choice(INTERESTING_CHANNELS) if rng.random() < 0.8 else rng.randrange(65536)
        ),
    )


def lie_about_size(rng: random.Random, s: Session) -> Session:
    def lie(f: Frame) -> Frame:
        size = (
            rng.choice(INTERESTING_SIZES)
            if rng.random() < 0.7
            else len(f.payload) + rng.choice((-2, -1, 1, 2))
        )
        return replace(f, size=max(0, size))

    return _edit_picked(rng, s, lie)


def bad_frame_end(rng: random.Random, s: Session) -> Session:
    return _edit_picked(rng, s, lambda f: replace(f, end=rng.choice((0x00, 0xCD, 0xCF, 0xFF))))


def payload_at_limit(rng: random.Random, s: Session) -> Session:
    """A frame whose payload is exactly at, or one octet beyond, the negotiated frame-max."""

    def at_limit(f: Frame) -> Frame:
        size = rng.choice((FRAME_MAX - 8, FRAME_MAX - 7, 4088, 4089))
        return Frame(f.type, f.channel, (f.payload + bytes(size))[:size])

    return _edit_picked(rng, s, at_limit)


def body_size_field(rng: random.Random, s: Session) -> Session:
    """Rewrite the body-size of a content header (too big, too small, at the message limit)."""
    idx = [i for i, f in enumerate(s.frames) if f.type == FRAME_HEADER and len(f.payload) >= 12]
    if not idx:
        return s
    i = rng.choice(idx)
    f = s.frames[i]
    size = rng.choice(INTERESTING_BODY_SIZES) if rng.random() < 0.6 else rng.randrange(0, 1000)
    payload = f.payload[:4] + struct.pack(">Q", size) + f.payload[12:]
    return _edit(s, i, Frame(f.type, f.channel, payload))


def random_method(rng: random.Random, s: Session) -> Session:
    """Any method index (server-to-client ones included) with random or empty arguments."""
    i = _pick(rng, s)
    if i is None:
        return s
    f = s.frames[i]
    index = rng.choice(METHOD_INDEXES) if rng.random() < 0.9 else rng.getrandbits(32)
    args = b"" if rng.random() < 0.3 else rng.randbytes(rng.choice((1, 2, 4, 8, 16, 64)))
    frame = Frame(FRAME_METHOD, f.channel, struct.pack(">I", index) + args)
    frames = list(s.frames)
    if rng.random() < 0.5:
        frames[i] = frame
    else:
        frames.insert(i, frame)
    return s.with_frames(frames)


def drop_frame(rng: random.Random, s: Session) -> Session:
    i = _pick(rng, s)
    if i is None:
        return s
    return s.with_frames(s.frames[:i] + s.frames[i + 1 :])


def duplicate_frame(rng: random.Random, s: Session) -> Session:
    i = _pick(rng, s)
    if i is None:
        return s
    frames = list(s.frames)
    frames.insert(rng.randint(0, len(frames)), frames[i])
    return s.with_frames(frames)


def move_frame(rng: random.Random, s: Session) -> Session:
    """Reorders: content before its method, methods before channel.open, after close…"""
    i = _pick(rng, s)
    if i is None:
        return s
    frames = list(s.frames)
    f = frames.pop(i)
    frames.insert(rng.randint(0, len(frames)), f)
    return s.with_frames(frames)


def content_to_other_channel(rng: random.Random, s: Session) -> Session:
    idx = [i for i, f in enumerate(s.frames) if f.type in (FRAME_HEADER, FRAME_BODY)]
    if not idx:
        return s
    i = rng.choice(idx)
    f = s.frames[i]
    return _edit(s, i, Frame(f.type, rng.choice((0, 2, 3, 7)), f.payload))


def heartbeat(rng: random.Random, s: Session) -> Session:
    frames = list(s.frames)
    frames.insert(
        rng.randint(0, len(frames)),
        Frame(FRAME_HEARTBEAT, rng.choice((0, 0, 1)), b"" if rng.random() < 0.8 else b"x"),
    )
    return s.with_frames(frames)


def splice(rng: random.Random, s: Session, donors: list[Session]) -> Session:
    """Frames of another valid session inserted here (methods of other templates, in the
    wrong state or on the wrong channel)."""
    donor = rng.choice(donors)
    if not donor.frames:
        return s
    a = rng.randrange(len(donor.frames))
    b = min(len(donor.frames), a + rng.randint(1, 4))
    frames = list(s.frames)
    at = rng.randint(0, len(frames))
    frames[at:at] = donor.frames[a:b]
    return s.with_frames(frames)


def truncate(rng: random.Random, s: Session) -> Session:
    """Cut the stream somewhere (inside a frame, mostly): the rest goes to ``tail``."""
    raw = b"".join(f.encode() for f in s.frames)
    if not raw:
        return s
    cut = rng.randrange(len(raw))
    return Session(s.header, (), raw[:cut], s.name)


def raw_byte_edit(rng: random.Random, s: Session) -> Session:
    """A few random byte edits anywhere in the encoded stream (not frame-aware)."""
    raw = bytearray(b"".join(f.encode() for f in s.frames) + s.tail)
    if not raw:
        return s
    for _ in range(rng.randint(1, 4)):
        if not raw:
            break
        pos = rng.randrange(len(raw))
        op = rng.random()
        if op < 0.6:
            raw[pos] = rng.randrange(256)
        elif op < 0.8:
            del raw[pos]
        else:
            raw[pos:pos] = rng.randbytes(rng.randint(1, 8))
    return Session(s.header, (), bytes(raw), s.name)


def protocol_header(rng: random.Random, s: Session) -> Session:
    header = bytearray(s.header)
    if not header:
        return s
    pos = rng.randrange(len(header))
    header[pos] = rng.randrange(256)
    return Session(bytes(header[: rng.choice((8, 8, 8, pos))]), s.frames, s.tail, s.name)


#: (weight, operator)
MUTATORS: tuple[tuple[int, Mutator], ...] = (
    (10, flip_payload_byte),
    (5, insert_payload_bytes),
    (5, delete_payload_bytes),
    (4, set_frame_type),
    (5, set_channel),
    (4, lie_about_size),
    (2, bad_frame_end),
    (2, payload_at_limit),
    (5, body_size_field),
    (8, random_method),
    (5, drop_frame),
    (5, duplicate_frame),
    (6, move_frame),
    (4, content_to_other_channel),
    (2, heartbeat),
    (2, truncate),
    (2, raw_byte_edit),
    (1, protocol_header),
)
_OPS = [m for _w, m in MUTATORS]
_WEIGHTS = [w for w, _m in MUTATORS]


def mutate(rng: random.Random, s: Session, donors: list[Session]) -> tuple[Session, list[str]]:
    """One to four stacked edits; returns the mutant and the operators' names."""
    names: list[str] = []
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        if rng.random() < 0.08:
            s, name = splice(rng, s, donors), "splice"
        else:
            op = rng.choices(_OPS, _WEIGHTS)[0]
            s, name = op(rng, s), op.__name__
        names.append(name)
    return s, names


def chunks(rng: random.Random, data: bytes) -> list[bytes]:
    """Split an input the way TCP might deliver it: whole, in 2 or 3 pieces, or in small pieces."""
    r = rng.random()
    if r < 0.5 or len(data) < 2:
        return [data]
    if r < 0.9:
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 2))))
    else:
        step = rng.choice((1, 3, 7, 64))
        cuts = list(range(step, len(data), step))[:200]
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]
