"""Mutation testing without sockets: the catalogue's shape, the fault building blocks on decoded
frames, and how a mutant's verdicts are judged against the fault-free baseline."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from conformance.model.spec import load_rules
from conformance.mutate import faults as f
from conformance.mutate.catalogue import CATALOGUE, Mutant, select
from conformance.mutate.runner import RunOutcome, judge, render_summary, summarise
from conformance.protocol.proxy import TO_CLIENT, Fault

CATEGORIES = {
    "confirms",
    "returns",
    "deliveries",
    "counts",
    "tags",
    "errors",
    "tx",
    "qos",
    "cancel",
    "timing",
}


def test_catalogue_has_forty_distinct_mutants_over_every_category() -> None:
    ids = [m.id for m in CATALOGUE]
    assert len(ids) >= 40
    assert len(ids) == len(set(ids))
    assert CATEGORIES <= {m.category for m in CATALOGUE}


@pytest.mark.parametrize("m", CATALOGUE, ids=lambda m: m.id)
def test_every_mutant_is_described_traceable_and_runnable(m: Mutant) -> None:
    assert m.description and m.rule
    for area in m.areas:
        assert importlib.util.find_spec(f"conformance.scenarios.test_{area}") is not None, area
    assert isinstance(m.make(), Fault)


def test_rule_ids_named_by_mutants_exist_in_the_spec() -> None:
    known = {r.id for r in load_rules()}
    named = {word for m in CATALOGUE for word in m.rule.replace(",", " ").split()
             if "/" in word and "." in word.split("/")[0] and not word.endswith(".txt")}
    assert named and named <= known, named - known


def test_select_by_glob_and_area() -> None:
    assert [m.id for m in select(["tx.commit-*"])] == ["tx.commit-rolls-back"]
    assert all("qos" in m.areas or m.category == "qos" for m in select(None, ["qos"]))
    assert select(["no-such.*"]) == []


# -- building blocks --------------------------------------------------------------------------


def _deliver(tag: int) -> spec.Basic.Deliver:
    return spec.Basic.Deliver(
        consumer_tag="c", delivery_tag=tag, redelivered=False, exchange="x", routing_key="k"
    )


def _message(tag: int, body: bytes) -> list[Any]:
    return [
        _deliver(tag),
        ContentHeader(0, len(body), spec.Basic.Properties(headers={"h": 1}, delivery_mode=2)),
        ContentBody(body),
    ]


def _feed(fault: Fault, st: dict[str, Any], frames: list[Any], channel: int = 1) -> list[Any]:
    out: list[Any] = []
    for frm in frames:
        out += [fr for _c, fr in fault.to_client(st, channel, frm)]
    return out


def test_rewrite_changes_only_the_named_field_and_drops_the_raw_bytes() -> None:
    d = _deliver(1)
    d._raw = (1, b"raw")
    (_ch, out), = f.Rewrite("r", spec.Basic.Deliver, lambda m: {"exchange": "y"}).to_client({}, 1, d)
    assert (out.exchange, out.routing_key, out.delivery_tag) == ("y", "k", 1)
    assert not hasattr(out, "_raw") and d.exchange == "x"


def test_rewrite_on_confirm_channels_only() -> None:
    fault = f.Rewrite("r", spec.Basic.Ack, lambda m: {"delivery_tag": 9}, when=f.in_confirm_mode)
    st: dict[str, Any] = {}
    assert fault.to_client(st, 1, spec.Basic.Ack(delivery_tag=1))[0][1].delivery_tag == 1
    fault.to_broker(st, 1, spec.Confirm.Select())
    assert fault.to_client(st, 1, spec.Basic.Ack(delivery_tag=1))[0][1].delivery_tag == 9


def test_edit_message_reframes_body_and_properties() -> None:
    fault = f.EditMessage(
        "e", (spec.Basic.Deliver,), body=lambda b: b[:-1], props=lambda p: spec.Basic.Properties()
    )
    out = _feed(fault, {}, _message(1, b"ab") )
    assert [type(x) for x in out] == [spec.Basic.Deliver, ContentHeader, ContentBody]
    assert (out[1].body_size, out[2].value, out[1].properties.headers) == (1, b"a", None)


def test_messages_wait_for_every_body_frame() -> None:
    fault = f.DuplicateMessage("d", (spec.Basic.Deliver,))
    st: dict[str, Any] = {}
    head = [_deliver(1), ContentHeader(0, 4, spec.Basic.Properties()), ContentBody(b"ab")]
    assert _feed(fault, st, head) == []
    assert len(_feed(fault, st, [ContentBody(b"cd")])) == 8


def test_hold_message_releases_after_the_named_method() -> None:
    fault = f.HoldMessage("h", (spec.Basic.Return,), until=(spec.Basic.Ack,))
    st: dict[str, Any] = {}
    ret = spec.Basic.Return(reply_code=312, reply_text="NO_ROUTE", exchange="x", routing_key="k")
    assert _feed(fault, st, [ret, ContentHeader(0, 0, spec.Basic.Properties())]) == []
    out = _feed(fault, st, [spec.Basic.Ack(delivery_tag=1)])
    assert [type(x) for x in out] == [spec.Basic.Ack, spec.Basic.Return, ContentHeader]


def test_swap_pairs_and_drop_first() -> None:
    acks = [spec.Basic.Ack(delivery_tag=t) for t in (1, 2, 3)]
    out = _feed(f.SwapPairs("s", spec.Basic.Ack), {}, [*acks, spec.Basic.Qos()])
    assert [getattr(x, "delivery_tag", None) for x in out] == [2, 1, 3, None]
    out = _feed(f.Drop("d", spec.Basic.Ack, first=True), {}, acks)
    assert [x.delivery_tag for x in out] == [2, 3]


def test_answer_instead_replies_in_the_brokers_name() -> None:
    fault = f.AnswerInstead("a", spec.Tx.Select, lambda m: spec.Tx.SelectOk())
    st: dict[str, Any] = {}
    assert fault.to_broker(st, 1, spec.Tx.Select()) == []
    assert [type(fr) for _c, fr in st[TO_CLIENT]] == [spec.Tx.SelectOk]


def test_escalation_turns_channel_close_into_connection_close() -> None:
    fault = f.EscalateChannelClose()
    st: dict[str, Any] = {}
    ((ch, frm),) = fault.to_client(
        st, 3, spec.Channel.Close(reply_code=404, reply_text="NOT_FOUND", class_id=60, method_id=40)
    )
    assert (ch, type(frm), frm.reply_code, frm.class_id, frm.method_id) == (
        0,
        spec.Connection.Close,
        404,
        60,
        40,
    )
    assert fault.to_broker(st, 0, spec.Connection.CloseOk()) == []


def test_consistent_tags_rename_both_ways() -> None:
    fault = f.ConsistentTags()
    st: dict[str, Any] = {}
    fault.to_broker(st, 1, spec.Basic.Consume(queue="q", consumer_tag=""))
    (_c, ok), = fault.to_client(st, 1, spec.Basic.ConsumeOk(consumer_tag="amq.ctag-1"))
    assert ok.consumer_tag == "mutated.amq.ctag-1"
    (_c, cancel), = fault.to_broker(st, 1, spec.Basic.Cancel(consumer_tag=ok.consumer_tag))
    assert cancel.consumer_tag == "amq.ctag-1"
    (_c, chosen), = fault.to_client(st, 1, spec.Basic.ConsumeOk(consumer_tag="mine"))
    assert chosen.consumer_tag == "mine"


def test_in_order_ack_as_multiple_only_when_lower_tags_are_confirmed() -> None:
    fault = f.InOrderAckAsMultiple()
    st: dict[str, Any] = {}
    fault.to_broker(st, 1, spec.Confirm.Select())
    out = [fault.to_client(st, 1, spec.Basic.Ack(delivery_tag=t))[0][1].multiple for t in (1, 3, 2)]
    assert out == [False, False, True]


# -- judging ----------------------------------------------------------------------------------


def _mutant(should: bool = False, equivalent: str = "") -> Mutant:
    return Mutant("tx.x", "d", "tx.commit/transacted", ("tx",), Fault, equivalent=equivalent, should=should)


def test_judge_counts_fail_and_timeout_new_against_the_baseline() -> None:
    base = {"a": "PASS", "b": "FAIL", "c": "PASS", "d": "PASS", "e": "PASS"}
    got = {"a": "FAIL", "b": "FAIL", "c": "ERROR", "d": "TIMEOUT", "e": "NON_STRICT"}
    r = judge(_mutant(), RunOutcome(got, "", 1.0), base)
    assert [(k.case_id, k.verdict) for k in r.kills] == [("a", "FAIL"), ("d", "TIMEOUT")]
    assert r.errors == ("c",) and r.outcome == "KILLED"


def test_judge_non_strict_kills_only_a_should_mutant() -> None:
    assert judge(_mutant(), RunOutcome({"e": "NON_STRICT"}, "", 1.0), {"e": "PASS"}).outcome == "SURVIVED"
    assert (
        judge(_mutant(should=True), RunOutcome({"e": "NON_STRICT"}, "", 1.0), {"e": "PASS"}).outcome
        == "KILLED"
    )
    assert (
        judge(_mutant(should=True), RunOutcome({"e": "NON_STRICT"}, "", 1.0), {"e": "NON_STRICT"}).outcome
        == "SURVIVED"
    )


def test_error_only_never_kills_and_equivalents_are_not_scored() -> None:
    results = [judge(_mutant(), RunOutcome({"a": "ERROR"}, "", 1.0), {"a": "PASS"}),
               judge(_mutant(equivalent="why"), RunOutcome({"a": "PASS"}, "", 1.0), {"a": "PASS"}),
               judge(_mutant(), RunOutcome({"a": "FAIL"}, "", 1.0), {"a": "PASS"}),
               judge(_mutant(), RunOutcome({}, "no results", 1.0), {})]
    assert [r.outcome for r in results] == ["SURVIVED", "EQUIVALENT", "KILLED", "NO-RESULT"]
    summary = summarise(results, 12.0)
    assert summary["total"] == {"mutants": 4, "killed": 1, "survived": 1, "equivalent": 1, "no_result": 1}
    assert "33.3%" in render_summary(summary)


def test_a_stopped_run_kills_by_its_finished_cases_and_a_failed_fault_kills_nothing() -> None:
    stopped = RunOutcome({"a": "FAIL"}, "the run passed its 300s deadline and was stopped; hung in x", 300.0)
    assert judge(_mutant(), stopped, {"a": "PASS"}).outcome == "KILLED"
    assert (
        judge(_mutant(), RunOutcome({"a": "PASS"}, "deadline", 300.0), {"a": "PASS"}).outcome == "NO-RESULT"
    )
    tainted = RunOutcome({"a": "FAIL"}, "the proxy's fault failed", 1.0, tainted=True)
    assert judge(_mutant(), tainted, {"a": "PASS"}).outcome == "NO-RESULT"


def test_frames_pamqp_would_refuse_are_still_encoded() -> None:
    from pamqp import frame as pframe

    from conformance.protocol.proxy import _encode

    ok = spec.Queue.DeclareOk(queue="q", message_count=1, consumer_count=0)
    ok.queue = "a name pamqp refuses!"  # as a broker may send; the client judges it, not the proxy
    _n, ch, back = pframe.unmarshal(_encode(3, ok))
    assert (ch, back.queue, back.message_count) == (3, "a name pamqp refuses!", 1)


def _fault_of(mutant_id: str) -> Fault:
    (m,) = select([mutant_id])
    return m.make()


def _publish(fault: Fault, st: dict[str, Any], props: spec.Basic.Properties) -> spec.Basic.Properties:
    out = [fr for frm in (spec.Basic.Publish(exchange="x", routing_key="k"), ContentHeader(0, 1, props),
                          ContentBody(b"m")) for _c, fr in fault.to_broker(st, 1, frm)]
    return next(fr for fr in out if isinstance(fr, ContentHeader)).properties


def test_extension_mutants_strip_the_argument_and_keep_the_rest() -> None:
    fault = _fault_of("extensions.dead-letter-exchange-ignored")
    declare = spec.Queue.Declare(queue="q", arguments={"x-dead-letter-exchange": "d",
                                                       "x-dead-letter-routing-key": "k", "x-max-length": 1})
    ((_c, out),) = fault.to_broker({}, 1, declare)
    assert out.arguments == {"x-max-length": 1}
    props = _publish(_fault_of("extensions.expiration-ignored"), {},
                     spec.Basic.Properties(expiration="5", app_id="a"))
    assert (props.expiration, props.app_id) == (None, "a")
    props = _publish(_fault_of("extensions.cc-ignored"), {},
                     spec.Basic.Properties(headers={"CC": ["c"], "h": 1}))
    assert props.headers == {"h": 1}


def test_smuggled_bcc_and_user_id_come_back_as_published() -> None:
    fault, st = _fault_of("extensions.bcc-kept"), {}
    sent = _publish(fault, st, spec.Basic.Properties(headers={"BCC": ["b"]}))
    assert sent.headers["BCC"] == ["b"]  # still routes
    out = _feed(fault, st, [_deliver(1), ContentHeader(0, 1, sent), ContentBody(b"m")])
    assert out[1].properties.headers == {"BCC": ["b"]}  # the broker removed BCC: the copy is shown
    fault, st = _fault_of("extensions.user-id-unchecked"), {}
    fault.to_broker(st, 0, spec.Connection.StartOk(mechanism="PLAIN", response="\0guest\0guest"))
    sent = _publish(fault, st, spec.Basic.Properties(user_id="mallory"))
    assert sent.user_id == "guest"
    out = _feed(fault, st, [_deliver(1), ContentHeader(0, 1, sent), ContentBody(b"m")])
    assert (out[1].properties.user_id, out[1].properties.headers) == ("mallory", None)


def test_consumer_timeout_mutant_drops_only_the_timeouts_close() -> None:
    fault = _fault_of("extensions.consumer-timeout-ignored")
    timeout = spec.Channel.Close(reply_code=406, reply_text="t", class_id=0, method_id=0)
    refusal = spec.Channel.Close(reply_code=406, reply_text="x", class_id=50, method_id=10)
    assert _feed(fault, {}, [timeout]) == [] and _feed(fault, {}, [refusal]) == [refusal]
