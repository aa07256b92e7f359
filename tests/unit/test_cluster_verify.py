"""The cluster cases' bookkeeping: repeated deliveries without the redelivered flag, and first
deliveries out of publish order — pure functions over what consumers saw, so they are tested
here without a cluster (each must be able to find a fault)."""

from __future__ import annotations

from conformance.verify.cluster import Seen, out_of_order, unflagged_repeats


def seen(number: int, redelivered: bool, who: str, at: float) -> Seen:
    return Seen(number, redelivered, {}, who, at)


def test_a_repeat_without_the_flag_is_found_whoever_gets_it() -> None:
    history = [seen(1, False, "C2", 0.1), seen(2, False, "C1", 0.2), seen(1, False, "C1", 0.3),
               seen(2, True, "drain", 0.4)]
    assert [(s.number, s.who) for s in unflagged_repeats(history)] == [(1, "C1")]


def test_repeats_are_judged_in_receipt_order_not_list_order() -> None:
    # the flagged delivery came later: the unflagged one is the first, which is allowed
    history = [seen(3, True, "C1", 0.5), seen(3, False, "C2", 0.1)]
    assert unflagged_repeats(history) == []
    assert unflagged_repeats([seen(4, False, "C1", 0.1)]) == []


def test_first_deliveries_out_of_order_per_consumer() -> None:
    history = [seen(1, False, "C1", 0.1), seen(3, False, "C1", 0.2), seen(2, False, "C1", 0.3),
               seen(0, True, "C1", 0.4),  # a redelivery may come out of order
               seen(2, False, "C2", 0.15), seen(5, False, "C2", 0.25)]  # interleaved consumers: fine
    assert out_of_order(history) == ["C1: 3 before 2"]
    assert out_of_order([s for s in history if s.number != 2]) == []
