"""The cluster cases' bookkeeping: repeated deliveries without the redelivered flag, and first
deliveries out of publish order — pure functions over what consumers saw, so they are tested
here without a cluster (each must be able to find a fault)."""

from __future__ import annotations

import pytest
from pamqp import commands as spec

from conformance.protocol.rawevents import Event, UnexpectedClose
from conformance.verify.cluster import (
    DESTRUCTIVE,
    MIRRORED,
    REPLICATED,
    STREAM,
    Seen,
    _declare_stream,
    consumer_arguments,
    out_of_order,
    unflagged_repeats,
)
from conformance.verify.unsupported import Unsupported


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


# -- streams: a target that does not offer them says so; a stream consumer reads from the start ---


class _RefusingChannel:
    """A channel whose queue.declare is answered with channel.close ``code`` ``text``."""

    def __init__(self, code: int, text: str) -> None:
        self.close = Event(seq=1, channel=1, method=spec.Channel.Close(reply_code=code, reply_text=text))
        self.declared: list[dict[str, object]] = []

    def declare_queue(self, name: str, **fields: object) -> None:
        self.declared.append({"name": name, **fields})
        raise UnexpectedClose("queue.declare-ok", self.close)


class _Cleanup:
    def queue(self, name: str) -> str:
        return name


def test_a_target_refusing_the_stream_type_makes_the_case_unsupported_with_its_answer() -> None:
    # RabbitMQ 3.10.8's answer to a queue type it does not know (measured with x-queue-type: bogus)
    ch = _RefusingChannel(406, "PRECONDITION_FAILED - invalid arg 'x-queue-type' for queue 'q' in vhost '/': "
                               "\"unsupported queue type 'stream'\"")
    with pytest.raises(Unsupported) as got:
        _declare_stream(ch, "q", _Cleanup())  # type: ignore[arg-type]
    assert "does not offer stream queues" in str(got.value) and "unsupported queue type" in str(got.value)
    assert ch.declared == [{"name": "q", "durable": True, "arguments": {"x-queue-type": "stream"}}]


def test_any_other_refusal_of_the_stream_declaration_is_the_cases_to_report() -> None:
    ch = _RefusingChannel(406, "PRECONDITION_FAILED - invalid property 'non-durable' for queue 'q'")
    with pytest.raises(UnexpectedClose):
        _declare_stream(ch, "q", _Cleanup())  # type: ignore[arg-type]
    with pytest.raises(UnexpectedClose):
        _declare_stream(_RefusingChannel(403, "ACCESS_REFUSED - unsupported queue type"), "q",  # type: ignore[arg-type]
                        _Cleanup())


def test_stream_consumers_read_from_the_first_offset_and_only_streams_skip_destructive_cases() -> None:
    assert consumer_arguments(STREAM) == {"x-stream-offset": "first"}
    assert consumer_arguments("quorum") is None and consumer_arguments(MIRRORED) is None
    assert STREAM in REPLICATED and STREAM not in DESTRUCTIVE
    assert set(DESTRUCTIVE) == set(REPLICATED) - {STREAM}


def test_an_unflagged_delivery_simultaneous_with_a_flagged_one_elsewhere_has_no_order() -> None:
    # two nodes delivering the same message at once after a pause: flagged to C2, unflagged to C1
    # 2 ms later on another connection — the unflagged one may have been the first
    tied = [seen(102, True, "C2", 12.710), seen(102, False, "C1", 12.712)]
    assert unflagged_repeats(tied) == []
    # received clearly later, or on the same connection, or twice unflagged: a repeat without the flag
    assert [s.who for s in unflagged_repeats([seen(7, True, "C2", 1.0), seen(7, False, "C1", 1.5)])] == ["C1"]
    assert [s.at for s in unflagged_repeats([seen(8, True, "C1", 1.0), seen(8, False, "C1", 1.01)])] == [1.01]
    twice = [seen(9, False, "C2", 1.0), seen(9, False, "C1", 1.001)]
    assert [s.who for s in unflagged_repeats(twice)] == ["C1"]
