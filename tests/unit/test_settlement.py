"""The confirm bookkeeping of the verifier kit (conformance/verify/confirms.py), no sockets:
which seqs a stream of basic.ack / basic.nack settles, with the confirms guide's semantics."""

from __future__ import annotations

import random

from pamqp import commands as spec

from conformance.protocol.raw import Event
from conformance.verify.confirms import Settlement


def confirm(tag: int, *, multiple: bool = False, nack: bool = False) -> Event:
    method = spec.Basic.Nack(tag, multiple) if nack else spec.Basic.Ack(tag, multiple)
    return Event(0, 1, method)


def reference(published: int, frames: list[tuple[int, bool, bool]]) -> tuple[dict[int, int], dict[int, int]]:
    """The same rules, written as plainly as possible: a multiple confirm settles every seq <= tag
    that no earlier confirm settled."""
    acked: dict[int, int] = {}
    nacked: dict[int, int] = {}
    for tag, multiple, nack in frames:
        kind = nacked if nack else acked
        if not 1 <= tag <= published:
            continue
        if multiple:
            covered = [s for s in range(1, tag + 1) if s not in acked and s not in nacked]
            for s in covered or [tag]:
                kind[s] = kind.get(s, 0) + 1
        else:
            kind[tag] = kind.get(tag, 0) + 1
    return acked, nacked


def test_multiple_settles_the_outstanding_range_only() -> None:
    st = Settlement(10)
    for frame in (confirm(2), confirm(5, multiple=True), confirm(7, nack=True)):
        st.add(frame)
    assert sorted(st.acked) == [1, 2, 3, 4, 5]
    assert sorted(st.nacked) == [7]
    assert st.missing() == [6, 8, 9, 10]
    assert not st.complete
    st.add(confirm(10, multiple=True))
    assert st.complete and st.missing() == [] and st.settled == set(range(1, 11))
    assert st.twice() == [] and st.anomalies == []


def test_duplicates_and_strays_are_counted_not_lost() -> None:
    st = Settlement(3)
    for frame in (confirm(3, multiple=True), confirm(2), confirm(3, multiple=True), confirm(4)):
        st.add(frame)
    assert st.twice() == ["seq 2: 2 ack(s), 0 nack(s)", "seq 3: 2 ack(s), 0 nack(s)"]
    assert len(st.anomalies) == 2  # the multiple that covered nothing, the tag outside 1..3
    assert st.complete


def test_matches_the_plain_rules_on_random_streams() -> None:
    rng = random.Random(1234)
    for _ in range(200):
        published = rng.randint(1, 40)
        frames = [(rng.randint(0, published + 2), rng.random() < 0.4, rng.random() < 0.2)
                  for _ in range(rng.randint(0, 60))]
        st = Settlement(published)
        for tag, multiple, nack in frames:
            st.add(confirm(tag, multiple=multiple, nack=nack))
        acked, nacked = reference(published, frames)
        assert dict(st.acked) == acked and dict(st.nacked) == nacked
        done = set(acked) | set(nacked)
        assert st.missing() == [s for s in range(1, published + 1) if s not in done]
        assert st.complete == (len(done) == published)
