"""The small-input report plans its tables in lanes (threads): each table and derived input of
:class:`Frames` is built once, by the first thread asking, whoever else asks meanwhile."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from conformance.report.tables import Frames


def bare_frames() -> Frames:
    f = Frames.__new__(Frames)  # only the memo: no session, no input
    f._memo, f._locks, f._locks_lock = {}, {}, threading.Lock()
    return f


def test_each_key_is_made_once_whatever_the_threads() -> None:
    frames = bare_frames()
    made: list[str] = []
    inside = threading.Barrier(2)  # two makers of different keys are inside at once

    def make(key: str) -> object:
        def build() -> object:
            made.append(key)
            if key in ("a", "b"):
                inside.wait(timeout=10)
            return object()
        return build

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda k: (k, frames._once(k, make(k))), ["a", "b"] + ["a", "b", "c"] * 20))
    assert sorted(made) == ["a", "b", "c"]
    for key in "abc":
        assert len({id(obj) for k, obj in got if k == key}) == 1


def test_a_key_made_from_another_waits_for_it() -> None:
    frames = bare_frames()
    order: list[str] = []

    def base() -> str:
        order.append("base")
        return "B"

    def derived() -> str:
        return frames._once("base", base) + "+D"

    with ThreadPoolExecutor(max_workers=4) as pool:
        out = list(pool.map(lambda i: frames._once("derived", derived) if i % 2
                            else frames._once("base", base), range(20)))
    assert order == ["base"]
    assert set(out) == {"B", "B+D"}
