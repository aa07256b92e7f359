"""The routing model (conformance/model/routing.py) against every row of the routing table."""

from __future__ import annotations

import pytest

from conformance.model import routing as m
from conformance.model.routing_table import expand, rows

ROWS = [r for r in rows() if not r.bind_error]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_model_agrees_with_the_table(row) -> None:
    topo, x, msg = row.build()
    gone = {(b.source, b.destination, b.key) for b in row.unbinds()}
    topo.bindings = [b for b in topo.bindings if (b.source, b.destination, b.key) not in gone]
    sure, random_sets = topo.choices(x, msg)
    if row.one_of:
        assert sure == set() and random_sets == [set(row.one_of)]
    elif any(t.startswith("x-") for t in topo.exchanges.values()) and random_sets:
        assert set().union(sure, *random_sets) == set(row.expect)
    else:
        assert sure == set(row.expect)


def test_rows_are_unique_and_cite_something() -> None:
    ids = [r.id for r in rows()]
    assert len(ids) == len(set(ids))
    assert all(r.rules or r.sources for r in rows())


def test_the_255_byte_rows_are_255_bytes() -> None:
    assert len(expand("{127 words a}.b")) == 255


@pytest.mark.parametrize("pattern,key,hit", [
    ("#", "", True), ("*", "", False), ("", "", True), ("a.#", "a", True), ("#.#.#", "a.b", True),
    ("a.*.#.c", "a.b.c", True), ("a.*.#.c", "a.c", False), ("*.*.*", "a..", True), ("#.a.#", "b.b", False),
])
def test_topic_edges(pattern: str, key: str, hit: bool) -> None:
    assert m.topic_match(pattern, key) is hit


def test_erlang_equality() -> None:
    assert m.erlang_equal(1, 1.0) and not m.erlang_equal(True, 1) and not m.erlang_equal("1", 1)
    assert m.erlang_equal("ab", bytearray(b"ab")) and m.erlang_equal(None, m.VOID)


def test_headers_mode_unknown_is_all() -> None:
    assert m.headers_match({"x-match": "some", "a": 1}, {"a": 1})
    assert not m.headers_match({"x-match": "some", "a": 1, "b": 2}, {"a": 1})


# -- the reference broker's matching (its topic trie, its headers comparison) against the model -----

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from conformance.broker.exchanges import Binding, Exchange  # noqa: E402
from conformance.broker.exchanges import headers_match as broker_headers  # noqa: E402

_PATTERN = st.lists(st.sampled_from(["a", "b", "*", "#", "", "A"]), max_size=5).map(".".join)
_KEY = st.lists(st.sampled_from(["a", "b", "", "A"]), max_size=5).map(".".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PATTERN, min_size=1, max_size=8), _KEY)
def test_broker_topic_trie_agrees_with_the_model(patterns: list[str], key: str) -> None:
    x = Exchange("/", "x", "topic", durable=False)
    bs = [Binding("x", "q", f"q{i}", p, {}) for i, p in enumerate(patterns)]
    for b in bs:
        x.add_binding(b)
    for b in bs[::2]:  # removing some keeps the rest matching
        x.remove_binding(b)
    kept = bs[1::2]
    got = {b.dest for b in x.matches((key,), None)}
    assert got == {b.dest for b in kept if m.topic_match(b.routing_key, key)}


_VALUE = st.sampled_from(["1", 1, True, False, 1.0, "v", 2, None])
_TABLE = st.dictionaries(st.sampled_from(["a", "b", "x-c"]), _VALUE, max_size=3)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([None, "all", "any", "all-with-x", "any-with-x"]), _TABLE, _TABLE)
def test_broker_headers_agrees_with_the_model(mode: str | None, binding: dict, headers: dict) -> None:
    args = dict(binding) if mode is None else {"x-match": mode, **binding}
    model_args = {k: (m.VOID if v is None else v) for k, v in args.items()}
    model_headers = {k: (m.VOID if v is None else v) for k, v in headers.items()}
    assert broker_headers(args, headers) is m.headers_match(model_args, model_headers)


def test_release_data_for_headers_values() -> None:
    from conformance.profiles.releases import expectation

    assert not m.exact_values("3.10.8") and m.exact_values("4.0.5") and not m.exact_values(None)
    row = next(r for r in rows() if r.id == "headers-integer-other-width")
    topo, x, msg = row.build()
    topo.exact = True
    assert topo.route(x, msg) == set()
    assert expectation(row.case_id, None, "4.0.5").value == "not routed"


# -- the oracle's generator and shrinker, against a broken model standing in for a broker ----------

from conformance.model import routing_gen as g  # noqa: E402


def _hash_as_star(pairs: list[g.Pair]) -> list[bool]:
    """A broker whose topic '#' matches exactly one word."""
    return [m.topic_match(".".join("*" if w == "#" else w for w in p.key.split(".")) if p.key else "",
                          p.msg.routing_key) if p.family == "topic" else p.expected() for p in pairs]


def test_the_same_seed_gives_the_same_batches() -> None:
    a = list(g.batches("headers", 7, 5000, bindings=10, messages=20))
    b = list(g.batches("headers", 7, 5000, bindings=10, messages=20))
    other = next(iter(g.batches("headers", 8, 200, bindings=10, messages=20)))
    assert a == b and len(a) == 25 and a[0] != other


def test_the_shrinker_finds_the_smallest_pair() -> None:
    for batch in g.batches("topic", 3, 20000, bindings=20, messages=50, flavour="spec"):
        found = [batch.pair(b, mi) for b in range(20) for mi in range(50)
                 if _hash_as_star([batch.pair(b, mi)])[0] != batch.pair(b, mi).expected()]
        if found:
            break
    assert found, "the generator never meets the broken rule"
    s = g.shrink(max(found, key=lambda p: p.size()), _hash_as_star)
    assert s.alone and s.smallest.size() <= 4 < s.original.size() and "#" in s.smallest.key
    assert _hash_as_star([s.smallest])[0] != s.smallest.expected()


def test_spec_flavour_stays_inside_the_spec() -> None:
    for batch in g.batches("headers", 1, 4000, bindings=20, messages=50, flavour="spec"):
        for _key, args in batch.bindings:
            assert args.get("x-match") in (None, "all", "any") and not any(k.startswith("x-c") for k in args)
            assert len(args) > (1 if "x-match" in args else 0)
        assert not any(isinstance(v, float) for msg in batch.messages for v in msg.headers.values())
