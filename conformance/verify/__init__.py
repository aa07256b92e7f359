"""The verifier kit: the only code outside ``scenarios/`` that turns broker behaviour into a verdict.

A scenario module imports its helpers from here (and the raw client from
``conformance.protocol``). The modules behind these names, by concern:

- ``fences``: silence proven by the protocol (basic.cancel-ok, channel.close-ok) instead of a window;
- ``expect``: expectations on the broker's answer (a close and its scope, silence, an ok, a
  reply or the probe's answer) and the known errors provoked as a step;
- ``outcomes``: an answer classified against per-profile patterns, and the one place a protocol
  client exception becomes a verdict (:func:`as_outcome`);
- ``steps``: setup steps (publish confirmed, fill, drain, get, consume, route, pipeline,
  dead-letter target) and how long silence is listened for;
- ``confirms``, ``settle``, ``tx``, ``declare_rules``, ``restarts``: the bookkeeping and the
  shared bodies of a few areas;
- ``libs``: pika / aio-pika under the case deadline (library bounds, fills, consumer loops);
- ``fixtures``, ``fresh_channel``: the declared-queue fixture and a channel outside a case;
- ``unsupported``: ``Unsupported``, a pytest skip the verdict model reads as UNSUPPORTED.

The verdict exceptions a case raises (``Mismatch``, ``CaseTimeout``, ``Unsupported``) are
re-exported too.
"""

from conformance.model.verdicts import CaseTimeout, Mismatch
from conformance.profiles import load_table
from conformance.verify import declare_rules, extensions, settle
from conformance.verify.confirms import CONFIRM_TYPES, Settlement, settle_all, short_seqs
from conformance.verify.expect import (
    check,
    drain_confirms,
    expect_channel_close,
    expect_connection_close,
    expect_no_delivery,
    expect_ok,
    expect_passive_missing,
    expect_second_open,
    open_again,
    quiet_window,
    reply_or_probe,
    summarize,
)
from conformance.verify.fences import (
    close_fence,
    deliveries_until_cancelled,
    expect_no_delivery_until_cancelled,
    frames_before,
    settle_and_close,
)
from conformance.verify.fixtures import DeclareQueue
from conformance.verify.libs import (
    aio_pika_connect,
    aio_pika_fill,
    aio_pika_session,
    pika_bound,
    pika_deliveries,
    pika_fill,
    pika_queue_channel,
    pika_session,
    received_connection_closes,
    run_async,
    tls_failure,
)
from conformance.verify.outcomes import answer, check_outcome, expected_patterns, matches, outcome, short
from conformance.verify.queue_types import QUORUM
from conformance.verify.restarts import controller_did_nothing, restarted
from conformance.verify.settle import x_death_reason
from conformance.verify.steps import (
    body_list,
    competing_consumers,
    consume_published,
    dead_letter_target,
    drain,
    fill,
    get_n,
    get_one,
    get_tags,
    passive_answer,
    pipelined,
    publish_confirmed,
    routed_body,
    tx_select,
)
from conformance.verify.tx import Env, closes_with, committed_only, counted
from conformance.verify.unsupported import Unsupported

__all__ = [
    "CONFIRM_TYPES",
    "QUORUM",
    "CaseTimeout",
    "DeclareQueue",
    "Env",
    "Mismatch",
    "Settlement",
    "Unsupported",
    "aio_pika_connect",
    "aio_pika_fill",
    "aio_pika_session",
    "answer",
    "body_list",
    "check",
    "check_outcome",
    "close_fence",
    "closes_with",
    "committed_only",
    "competing_consumers",
    "consume_published",
    "controller_did_nothing",
    "counted",
    "dead_letter_target",
    "declare_rules",
    "deliveries_until_cancelled",
    "drain",
    "drain_confirms",
    "expect_channel_close",
    "expect_connection_close",
    "expect_no_delivery",
    "expect_no_delivery_until_cancelled",
    "expect_ok",
    "expect_passive_missing",
    "expect_second_open",
    "expected_patterns",
    "extensions",
    "fill",
    "frames_before",
    "get_n",
    "get_one",
    "get_tags",
    "load_table",
    "matches",
    "open_again",
    "outcome",
    "passive_answer",
    "pika_bound",
    "pika_deliveries",
    "pika_fill",
    "pika_queue_channel",
    "pika_session",
    "pipelined",
    "publish_confirmed",
    "quiet_window",
    "received_connection_closes",
    "reply_or_probe",
    "restarted",
    "routed_body",
    "run_async",
    "settle",
    "settle_all",
    "settle_and_close",
    "short",
    "short_seqs",
    "summarize",
    "tls_failure",
    "tx_select",
    "x_death_reason",
]
