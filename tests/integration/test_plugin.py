"""The pytest plugin end to end, against a scripted peer: verdicts, results, exit codes."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from conformance.targets.base import free_port
from tests.fakebroker import FakeBroker

CASES = '''
from pamqp import commands as spec
from conformance.model.cases import case, Level
from conformance.verify.expect import expect_channel_close
from conformance.verify import Unsupported

DOC = ["003_50388870ec53b6aa.txt#acks"]

@case("demo.pass", description="d", expectation="declare-ok", sources=DOC)
def test_pass(amqp, ctx):
    ch = amqp.channel()
    ctx.check(ch.declare_queue(ctx.name()).message_count, 0, "message_count")

@case("demo.fail", description="d", expectation="406", rules=["basic.ack/exists"])
def test_fail(amqp, ctx):
    ch = amqp.channel()
    ch.send(spec.Queue.Declare(queue="fine"))
    expect_channel_close(ch, 406)

@case("demo.non-strict", description="d", expectation="x", level=Level.SHOULD, sources=DOC)
def test_non_strict(ctx):
    ctx.check(1, 2, "a SHOULD")

@case("demo.timeout", description="d", expectation="declare-ok", sources=DOC)
def test_timeout(amqp):
    amqp.channel().declare_queue("silent-q")

@case("demo.unsupported", description="d", expectation="x", sources=DOC, requires=["basic.nack"])
def test_unsupported():
    raise AssertionError("never runs")

@case("demo.error", description="d", expectation="x", sources=DOC)
def test_error():
    raise RuntimeError("harness bug")

@case("demo.info", description="d", expectation="x", level=Level.INFO, sources=DOC)
def test_info(ctx):
    ctx.informational("same consumer")

def test_not_a_case():
    pass
'''


def _span(recs: dict[str, dict[str, object]]) -> float:
    """Seconds from the first case's start to the last case's end, on the records' own times (each
    written when its case ended): the run's cases, without the interpreters' start-up and the
    collection, which took 31-55 s on a loaded machine (the subprocess's timeout stays the hard
    bound on a hang of the whole run)."""
    ends = [datetime.fromisoformat(str(r["time"]).replace("Z", "+00:00")).timestamp() for r in recs.values()]
    starts = [e - float(r["duration_s"]) for e, r in zip(ends, recs.values(), strict=True)]  # type: ignore[arg-type]
    return max(ends) - min(starts)


def _records(results: Path) -> dict[str, dict[str, object]]:
    files = list(results.glob("*.jsonl"))
    assert len(files) == 1, files
    assert not list(results.glob("*.part.jsonl"))
    return {r["case_id"]: r for r in map(json.loads, files[0].read_text().splitlines())}


EXPECTED = {
    "demo.pass": "PASS",
    "demo.fail": "FAIL",
    "demo.non-strict": "NON_STRICT",
    "demo.timeout": "TIMEOUT",
    "demo.unsupported": "UNSUPPORTED",
    "demo.error": "ERROR",
    "demo.info": "INFORMATIONAL",
}


def test_every_verdict_is_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_demo=CASES)
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess(
            "--broker-url", fb.url, "--case-timeout", "1", "--results", "out", "-v"
        )
    out = res.stdout.str()
    assert res.ret == 1, out
    for word in ("PASS", "FAIL", "NON_STRICT", "TIMEOUT", "UNSUPPORTED", "ERROR", "INFORMATIONAL"):
        assert word in out
    recs = _records(pytester.path / "out")
    assert {k: v["verdict"] for k, v in recs.items()} == EXPECTED
    fail = recs["demo.fail"]
    assert "406" in str(fail["expected"]) and "still open" in str(fail["observed"])
    assert fail["rules"] == ["basic.ack/exists"] and fail["broker_product"] == "fakebroker"
    assert fail["target"] == "url" and "guest:***@" in str(fail["extra"]["url"])  # type: ignore[index]
    assert "amqp-conformance verdicts" in out and "demo" in out
    # UNSUPPORTED is grouped by what would let the case run (the reason names it).
    head = out.index("1 UNSUPPORTED, by what they need:")
    assert "capability 'basic.nack'" in out[head:].splitlines()[1], out[head:]
    assert out[head:].splitlines()[2].strip() == "demo.unsupported", out[head:]
    _assert_trace_evidence(recs)
    _assert_slowest(out, recs)


def _assert_slowest(out: str, recs: dict[str, dict[str, object]]) -> None:
    """The terminal summary lists the slowest cases: seconds, verdict, case id, slowest first;
    the two cases that wait out the 1 s case timeout lead, and each figure covers at least the
    record's call time."""
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("slowest 7 case(s)"))
    rows = [ln.split() for ln in lines[head + 1:head + 8]]
    assert {r[2] for r in rows[:2]} == {"demo.timeout", "demo.fail"}, rows
    assert {r[2]: r[1] for r in rows} == EXPECTED
    secs = [float(r[0].rstrip("s")) for r in rows]
    assert secs == sorted(secs, reverse=True) and secs[1] >= 0.9, secs
    for r, s in zip(rows, secs, strict=True):
        assert s + 0.01 >= float(recs[r[2]]["duration_s"]), (r, recs[r[2]]["duration_s"])  # type: ignore[arg-type]


def _assert_trace_evidence(recs: dict[str, dict[str, object]]) -> None:
    """A non-PASS record carries its case's frames, both directions, in order; a PASS none."""
    trace = recs["demo.fail"]["extra"]["trace"]  # type: ignore[index]
    frames = [(f["dir"], f["ch"], f["frame"].split()[0]) for f in trace]
    assert ("C->S", 0, "protocol") in frames and ("S->C", 0, "connection.start") in frames, frames
    sent = frames.index(("C->S", 1, "queue.declare"))
    assert frames.index(("S->C", 1, "channel.open-ok")) < sent, frames
    assert all(float(f["t"]) >= 0 and f["conn"] == "raw#1" for f in trace), trace
    assert [float(f["t"]) for f in trace] == sorted(float(f["t"]) for f in trace)
    assert "trace" in recs["demo.timeout"]["extra"]  # type: ignore[operator]
    assert "trace" not in recs["demo.pass"]["extra"]  # type: ignore[operator]


def test_fail_on_decides_the_exit_code(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_demo=CASES)
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess("--broker-url", fb.url, "--case-timeout", "1", "--results", "out",
                                            "--fail-on", "none")
    assert res.ret == 0, res.stdout.str()
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess(
            "--broker-url",
            fb.url,
            "--case-timeout",
            "1",
            "--results",
            "out2",
            "--fail-on",
            "NON_STRICT",
            "-k",
            "non_strict or pass",
        )
    assert res.ret == 1


def test_xdist_workers_merge_into_one_results_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_demo=CASES)
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess("--broker-url", fb.url, "--case-timeout", "1", "--results", "out",
                                            "-n", "2", "--fail-on", "none")
    assert res.ret == 0, res.stdout.str()
    recs = _records(pytester.path / "out")
    assert {k: v["verdict"] for k, v in recs.items()} == EXPECTED
    assert {r["worker"] for r in recs.values()} <= {"gw0", "gw1"}
    _assert_trace_evidence(recs)
    _assert_slowest(res.stdout.str(), recs)
    assert len({r["run_id"] for r in recs.values()}) == 1


@pytest.mark.parametrize(("mode", "needle"), [(None, "unreachable"), ("refuse-login", "login refused"),
                                              ("refuse-vhost", "vhost"), ("silent", "no AMQP answer")])
def test_unusable_target_is_one_line_and_nonzero_fast(pytester: pytest.Pytester, mode: str | None,
                                                      needle: str) -> None:
    # Fast means: the probe ends the run before any case starts (no case waits out its timeout; the
    # silent broker costs one probe deadline). The subprocess timeout is only the bound on a hang.
    pytester.makepyfile(test_demo=CASES)
    if mode is None:
        res = pytester.runpytest_subprocess("--broker-url", f"amqp://guest:guest@127.0.0.1:{free_port()}/",
                                            "--case-timeout", "3", timeout=60)
    else:
        with FakeBroker(mode) as fb:
            res = pytester.runpytest_subprocess("--broker-url", fb.url, "--case-timeout", "3", timeout=60)
    assert res.ret == 4
    assert "test_demo.py::" not in res.stdout.str()  # not one case started
    text = res.stdout.str() + res.stderr.str()
    assert needle in text, text
    assert "passed" not in text and "skipped" not in text
    lines = [ln for ln in text.splitlines() if "amqp-conformance:" in ln]
    assert len(lines) == 1, text


def test_machinery_tests_do_not_start_a_target(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    res = pytester.runpytest_subprocess()
    assert res.ret == 0
    assert "amqp-conformance verdicts" not in res.stdout.str()


STUCK = '''
import socket, threading, time
from conformance.model.cases import case

DOC = ["003_50388870ec53b6aa.txt#acks"]

@case("demo.a-stuck-socket", description="d", expectation="x", sources=DOC)
def test_stuck_socket(broker_url):
    # A read with no deadline on a peer that never answers (the fake broker's silent mode).
    s = socket.create_connection(("127.0.0.1", int(broker_url.rsplit(":", 1)[1].strip("/"))))
    s.sendall(b"AMQP\\x00\\x00\\x09\\x01")
    s.recv(1)

@case("demo.b-stuck-swallowing", description="d", expectation="x", sources=DOC)
def test_stuck_swallowing():
    # A library that catches every Exception and waits again, on a lock nobody releases.
    lock = threading.Lock()
    lock.acquire()
    while True:
        try:
            lock.acquire()
        except Exception:
            pass

@case("demo.c-stuck-event-loop", description="d", expectation="x", sources=DOC)
def test_stuck_event_loop():
    # An aio-pika style wait: an event loop waiting on something that never happens.
    import asyncio

    async def forever():
        await asyncio.Event().wait()

    asyncio.run(forever())

@case("demo.d-after", description="d", expectation="x", sources=DOC)
def test_after():
    pass
'''


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_case_that_blocks_forever_ends_at_its_ceiling(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_stuck=STUCK)
    with FakeBroker() as fb, FakeBroker("silent") as silent:
        probe_url = fb.url
        pytester.makeconftest(f'''
import pytest
@pytest.fixture
def broker_url():
    return "{silent.url}"
''')
        res = pytester.runpytest_subprocess(
            "--broker-url",
            probe_url,
            "--case-timeout",
            "1",
            "--case-ceiling",
            "2",
            "--results",
            "out",
            "--fail-on",
            "none",
            *workers,
            timeout=60,
        )
    assert res.ret == 0, res.stdout.str()
    recs = _records(pytester.path / "out")
    assert {k: v["verdict"] for k, v in recs.items()} == {
        "demo.a-stuck-socket": "TIMEOUT", "demo.b-stuck-swallowing": "TIMEOUT",
        "demo.c-stuck-event-loop": "TIMEOUT", "demo.d-after": "PASS"}
    stuck = recs["demo.a-stuck-socket"]
    assert "hard ceiling of 2.0s" in str(stuck["message"]) and "s.recv(1)" in str(stuck["message"]), stuck
    assert any("test_stuck.py" in line for line in stuck["extra"]["stuck_stack"])  # type: ignore[index]
    assert "lock.acquire()" in str(recs["demo.b-stuck-swallowing"]["message"])
    # Stuck inside the standard library: the message also names the case's own line.
    assert "called from test_stuck.py" in str(recs["demo.c-stuck-event-loop"]["message"])
    assert "asyncio.run(forever())" in str(recs["demo.c-stuck-event-loop"]["message"])
    # three cases at a 2 s ceiling each, one after the other on one worker at worst
    assert _span(recs) < 20, _span(recs)


def test_case_ceiling_is_validated(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_demo=CASES)
    res = pytester.runpytest_subprocess(
        "--broker-url", "amqp://guest:guest@127.0.0.1:1/", "--case-ceiling", "0.5"
    )
    assert res.ret == 4 and "--case-ceiling must be at least 1" in res.stderr.str()


WEDGE = '''
from conformance.model.cases import case

DOC = ["003_50388870ec53b6aa.txt#acks"]

@case("demo.a-wedges", description="d", expectation="declare-ok", sources=DOC, wedges=True)
def test_wedges(amqp, ctx):
    amqp.channel().declare_queue("wedge-q")

@case("demo.b-before", description="d", expectation="declare-ok", sources=DOC)
def test_before(amqp, ctx):
    ctx.check(amqp.channel().declare_queue(ctx.name()).message_count, 0, "message_count")

@case("demo.c-before", description="d", expectation="declare-ok", sources=DOC)
def test_before_too(amqp, ctx):
    ctx.check(amqp.channel().declare_queue(ctx.name()).message_count, 0, "message_count")

@case("demo.d-after", description="d", expectation="declare-ok", sources=DOC, wedges=True)
def test_after(amqp, ctx):
    amqp.channel().declare_queue(ctx.name())

@case("demo.e-after", description="d", expectation="declare-ok", sources=DOC, wedges=True)
def test_after_too(amqp, ctx):
    amqp.channel().declare_queue(ctx.name())
'''


RESTORED_IN_TEARDOWN = '''
import pytest
from conformance.model.cases import case
from conformance.protocol import RawConnection

DOC = ["003_50388870ec53b6aa.txt#acks"]

@pytest.fixture
def restart_in_teardown(broker_url):
    yield
    conn = RawConnection.open(broker_url, timeout=5)
    try:
        conn.channel().declare_queue("unwedge-q")
    finally:
        conn.close(timeout=1)

@case("demo.a-stops-the-broker", description="d", expectation="declare-ok", sources=DOC)
def test_stops(amqp, ctx, restart_in_teardown):
    amqp.channel().declare_queue("wedge-q")

@case("demo.b-after", description="d", expectation="declare-ok", sources=DOC)
def test_after(amqp, ctx):
    ctx.check(amqp.channel().declare_queue(ctx.name()).message_count, 0, "message_count")
'''


def test_the_liveness_check_runs_after_the_teardown_of_the_case_that_timed_out(
        pytester: pytest.Pytester) -> None:
    """A case that stops (part of) the target and starts it again in its teardown (a cluster case
    killing node 0) and times out: the broker is asked whether it answers once that teardown ran,
    so the next case runs instead of being NOT_RUN for a node the harness itself had not restarted."""
    pytester.makepyfile(test_restored=RESTORED_IN_TEARDOWN)
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess("--broker-url", fb.url, "--case-timeout", "1", "--results", "out",
                                            "--fail-on", "none", "-p", "no:randomly", timeout=60)
    verdicts = {k: v["verdict"] for k, v in _records(pytester.path / "out").items()}
    assert verdicts == {"demo.a-stops-the-broker": "TIMEOUT", "demo.b-after": "PASS"}, res.stdout.str()
    assert res.ret == 0, res.stdout.str()


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_wedged_broker_stops_the_run_without_cascading(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_wedge=WEDGE)
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess("--broker-url", fb.url, "--case-timeout", "1", "--results", "out",
                                            "--junitxml", "junit.xml", "--fail-on", "none", "-v", *workers,
                                            timeout=60)
    out = res.stdout.str()
    assert res.ret == 6, out
    recs = _records(pytester.path / "out")
    verdicts = {k: v["verdict"] for k, v in recs.items()}
    # The wedging case ran after every other case (a URL target cannot be isolated) ...
    assert verdicts["demo.b-before"] == verdicts["demo.c-before"] == "PASS", verdicts
    assert verdicts["demo.a-wedges"] == "TIMEOUT"
    # ... and what was left was recorded NOT_RUN at once, naming the cause, not waited out.
    not_run = [k for k, v in verdicts.items() if v == "NOT_RUN"]
    assert not_run and set(not_run) <= {"demo.d-after", "demo.e-after"}, verdicts
    if not workers:
        assert not_run == ["demo.d-after", "demo.e-after"]
        assert out.index("test_before_too") < out.index("test_wedges")
    msg = str(recs[not_run[0]]["message"])
    assert "stopped answering after case" in msg and "queue.declare" in msg, msg
    assert "the broker stopped answering after case" in out and "exit code 6" in out
    junit = (pytester.path / "junit.xml").read_text()
    assert junit.count("<skipped") >= len(not_run)
    # Bounded: from the first case's record to the last NOT_RUN one, the wedge costs its own
    # TIMEOUT (1 s), the liveness check (at most 2 s here) and nothing per case left. Measured on
    # the records' own times, not the wall clock around pytest: interpreter and xdist start-up on
    # a loaded machine took 31-55 s of a 25 s wall-clock bound (the subprocess's timeout=60 stays
    # the hard bound on the whole run).
    times = sorted(datetime.fromisoformat(str(r["time"]).replace("Z", "+00:00")) for r in recs.values())
    span = (times[-1] - times[0]).total_seconds()
    assert span < 12, (span, verdicts)


def test_junit_names_cases_by_id_and_fails_them_whatever_fail_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_demo=CASES)
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess("--amqp-broker-url", fb.url, "--amqp-case-timeout", "1",
                                            "--amqp-results", "out", "--amqp-fail-on", "none",
                                            "--junitxml", "junit.xml")
    assert res.ret == 0, res.stdout.str()  # --fail-on none: the exit code says so ...
    import xml.etree.ElementTree as ET

    cases = {tc.get("name"): tc for tc in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    assert set(EXPECTED) <= set(cases), sorted(cases)
    assert {cases[k].get("classname") for k in EXPECTED} == {"demo"}
    # ... but JUnit tells the truth: FAIL/TIMEOUT/ERROR are failures, UNSUPPORTED is skipped.
    for cid in ("demo.fail", "demo.timeout", "demo.error"):
        assert cases[cid].find("failure") is not None or cases[cid].find("error") is not None, cid
    assert cases["demo.unsupported"].find("skipped") is not None
    props = {p.get("name"): p.get("value") for p in cases["demo.non-strict"].iter("property")}
    assert props.get("verdict") == "NON_STRICT" and props.get("case_id") == "demo.non-strict", props
    for cid in ("demo.pass", "demo.non-strict", "demo.info"):
        assert len(cases[cid]) == 0 or all(e.tag in ("properties", "system-out", "system-err")
                                           for e in cases[cid]), cid
    # The frame trace is the failing case's system-out; a PASS has none.
    out = "".join(e.text or "" for e in cases["demo.fail"].iter("system-out"))
    assert "frame trace" in out and "C->S queue.declare" in out, out
    assert cases["demo.pass"].find("system-out") is None


def test_selection_by_id_rule_and_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_demo=CASES)
    with FakeBroker() as fb:
        base = ["--broker-url", fb.url, "--case-timeout", "1", "--fail-on", "none", "--collect-only", "-q"]
        by_k = pytester.runpytest_subprocess(*base, "-k", "demo.non-strict or demo.info")
        by_rule = pytester.runpytest_subprocess(*base, "--rule", "basic.ack/*")
        by_marker = pytester.runpytest_subprocess(*base, "-m", "should or info", "-p", "no:randomly")
    assert "2/8 tests collected" in by_k.stdout.str(), by_k.stdout.str()
    assert "test_fail" in by_rule.stdout.str() and "1/8 tests collected" in by_rule.stdout.str()
    assert "2/8 tests collected" in by_marker.stdout.str(), by_marker.stdout.str()


def test_collect_only_needs_no_broker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_demo=CASES)
    res = pytester.runpytest_subprocess("--broker-url", f"amqp://guest:guest@127.0.0.1:{free_port()}/",
                                        "--collect-only", "-q")
    assert res.ret == 0, res.stdout.str() + res.stderr.str()


def test_an_exported_url_does_not_make_an_unrelated_session_probe(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    monkeypatch.setenv("AMQP_CONFORMANCE_BROKER_URL", f"amqp://guest:guest@127.0.0.1:{free_port()}/")
    res = pytester.runpytest_subprocess()
    assert res.ret == 0, res.stdout.str() + res.stderr.str()
    text = res.stdout.str() + res.stderr.str()
    assert "amqp-conformance:" not in text and "amqp-conformance verdicts" not in text, text


def test_a_conftest_defining_profile_does_not_clash(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "def pytest_addoption(parser):\n    parser.addoption('--profile', action='store_true')\n"
    )
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    res = pytester.runpytest_subprocess("--profile")
    assert res.ret == 0, res.stdout.str() + res.stderr.str()


def test_unwritable_results_is_one_line_before_the_target_starts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_demo=CASES)
    (pytester.path / "blocked").write_text("a file, not a folder")
    res = pytester.runpytest_subprocess("--broker-url", f"amqp://guest:guest@127.0.0.1:{free_port()}/",
                                        "--results", "blocked/out")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == 4 and "INTERNALERROR" not in text and "Traceback" not in text, text
    assert "cannot write results to" in text


STUCK_TEARDOWN = '''
import threading
import pytest
from conformance.model.cases import case

DOC = ["003_50388870ec53b6aa.txt#acks"]

@pytest.fixture
def stuck_cleanup():
    yield
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # a clean-up that never finishes

@case("demo.a-stuck-teardown", description="d", expectation="x", sources=DOC)
def test_stuck_teardown(stuck_cleanup):
    pass

@case("demo.b-after", description="d", expectation="x", sources=DOC)
def test_after():
    pass
'''


def test_a_stuck_teardown_is_bounded_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stuck=STUCK_TEARDOWN)
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess(
            "--broker-url",
            fb.url,
            "--case-timeout",
            "1",
            "--case-ceiling",
            "2",
            "--results",
            "out",
            "--fail-on",
            "none",
            timeout=60,
        )
    out = res.stdout.str()
    recs = _records(pytester.path / "out")
    assert {k: v["verdict"] for k, v in recs.items()} == {
        "demo.a-stuck-teardown": "PASS",
        "demo.b-after": "PASS",
    }
    assert "hard ceiling of 2.0s" in out and res.ret == 1, out  # the teardown error stays visible
    assert _span(recs) < 10, _span(recs)  # the stuck teardown ended at its 2 s ceiling


def test_allure_gets_description_rule_text_and_url_links(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_demo=CASES)
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess("--broker-url", fb.url, "--case-timeout", "1", "--results", "out",
                                            "--fail-on", "none", "--alluredir", "allure", "-k", "demo.fail")
    assert res.ret == 0, res.stdout.str()
    results = [json.loads(p.read_text()) for p in (pytester.path / "allure").glob("*-result.json")]
    (fail,) = [r for r in results if r.get("name") == "demo.fail"]  # titled by the case id
    assert fail["status"] == "failed"  # the broker's FAIL, whatever --fail-on says
    assert "Expectation: 406" in fail["description"] and "Rule basic.ack/exists:" in fail["description"]
    assert all(link["url"].startswith("https://") for link in fail["links"]), fail["links"]
    (attached,) = [a for a in fail.get("attachments", []) if a["name"] == "frame trace"]
    assert "C->S queue.declare" in (pytester.path / "allure" / attached["source"]).read_text()
    env = (pytester.path / "allure" / "environment.properties").read_text()
    assert "broker.product=fakebroker" in env and "profile=rabbitmq" in env and "client.pika=" in env, env


def test_settings_come_from_the_command_line_then_env_then_ini(pytester: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    pytester.makeini("[pytest]\namqp_case_timeout = -1\n")
    res = pytester.runpytest_subprocess()
    assert res.ret == 4 and "--case-timeout must be positive" in res.stderr.str()  # the ini twin
    monkeypatch.setenv("AMQP_CONFORMANCE_CASE_TIMEOUT", "abc")
    res = pytester.runpytest_subprocess()
    assert res.ret == 4 and "takes a number of seconds" in res.stderr.str()  # env over ini
    res = pytester.runpytest_subprocess("--amqp-case-timeout", "2", "--collect-only")
    assert res.ret == 0, res.stderr.str()  # the command line over both


RESTRICTED_CASES = '''
import pytest
from conformance.model.cases import case

DOC = ["rabbitmq-access-control#how-permissions-work"]

@case("demo.plain", description="d", expectation="x", sources=DOC)
def test_plain(ctx):
    pass

@pytest.mark.restricted_user
@case("demo.restricted-a", description="d", expectation="x", sources=DOC)
def test_a(ctx, restricted_url):
    ctx.check(restricted_url.user == "bob", True, "the restricted URL")

@pytest.mark.restricted_user
@case("demo.restricted-b", description="d", expectation="x", sources=DOC)
def test_b(ctx, restricted_url):
    ctx.check(restricted_url.user == "bob", True, "the restricted URL")

@pytest.mark.restricted_user
@case("demo.restricted-c", description="d", expectation="x", sources=DOC)
def test_c(ctx, restricted_url):
    ctx.check(restricted_url.user == "bob", True, "the restricted URL")
'''


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_restricted_user_cases_are_unsupported_once_without_one(pytester: pytest.Pytester,
                                                                 workers: list[str]) -> None:
    pytester.makepyfile(test_demo=RESTRICTED_CASES)
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess("--broker-url", fb.url, "--results", "out", *workers)
        recs = _records(pytester.path / "out")
        assert {k: v["verdict"] for k, v in recs.items()} == {"demo.plain": "PASS",
                                                              "demo.restricted-a": "UNSUPPORTED"}
        assert "--restricted-url" in str(recs["demo.restricted-a"]["message"])
        assert "2 further case(s)" in str(recs["demo.restricted-a"]["message"])
        assert res.ret == 0, res.stdout.str()
        given = fb.url.replace("guest:guest", "bob:pw")
        res = pytester.runpytest_subprocess(
            "--broker-url", fb.url, "--results", "out2", "--restricted-url", given, *workers
        )
    recs = _records(pytester.path / "out2")
    assert {k: v["verdict"] for k, v in recs.items()} == {
        "demo.plain": "PASS",
        "demo.restricted-a": "PASS",
        "demo.restricted-b": "PASS",
        "demo.restricted-c": "PASS",
    }
    assert res.ret == 0, res.stdout.str()


def test_bad_restricted_url_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_demo=RESTRICTED_CASES)
    res = pytester.runpytest_subprocess("--broker-url", "amqp://127.0.0.1:1/", "--restricted-url", "http://x/")
    assert res.ret == 4
    assert "--restricted-url takes amqp://user:pass@host:port/vhost: unsupported URL scheme 'http'" in (
        res.stderr.str())


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--amqp-max-message-size", "big"], "--amqp-max-message-size takes a number of octets"),
        (["--amqp-max-message-size", "0"], "--amqp-max-message-size must be positive"),
        (
            ["--amqp-alarm-cmd", "rabbitmqctl set_vm_memory_high_watermark 0"],
            "--amqp-alarm-cmd must contain {state}",
        ),
    ],
)
def test_limits_options_are_validated(pytester: pytest.Pytester, args: list[str], said: str) -> None:
    pytester.makepyfile(test_demo=CASES)
    res = pytester.runpytest_subprocess("--broker-url", "amqp://guest:guest@127.0.0.1:1/", *args)
    assert res.ret == 4 and said in res.stderr.str()


INTERRUPTIBLE_CASES = '''
import threading
from pathlib import Path
from conformance.model.cases import case

DOC = ["003_50388870ec53b6aa.txt#acks"]

@case("demo.a-first", description="d", expectation="x", sources=DOC)
def test_first(ctx):
    pass

@case("demo.b-blocks", description="d", expectation="x", sources=DOC)
def test_blocks(ctx):
    Path("blocking").write_text("now")
    threading.Event().wait(60)  # until ^C (bounded: the case ceiling)

@case("demo.c-later", description="d", expectation="x", sources=DOC)
def test_later(ctx):
    pass

@case("demo.d-later", description="d", expectation="x", sources=DOC)
def test_later_too(ctx):
    pass
'''


@pytest.mark.parametrize("workers", [["-p", "no:xdist"], ["-n", "2"]], ids=["in-process", "xdist"])
def test_interrupt_records_the_cases_not_run(pytester: pytest.Pytester, workers: list[str]) -> None:
    """^C mid-run: each selected case without a verdict is recorded NOT_RUN and the table says so."""
    import os
    import signal
    import subprocess
    import sys

    pytester.makepyfile(test_demo=INTERRUPTIBLE_CASES)
    with FakeBroker() as fb:
        # The pytest under test gets ^C's usual handler whatever this suite inherited: started in
        # the background of a script (`cmd &`, no job control) it has SIGINT ignored, children
        # inherit that, and a Python started so installs no KeyboardInterrupt handler (the case
        # then waited out its 60 s and the test timed out).
        start = ("import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); "
                 "sys.exit(pytest.main(sys.argv[1:]))")
        proc = subprocess.Popen([sys.executable, "-c", start, "-p", "no:randomly", *workers,
                                 "--broker-url", fb.url, "--case-timeout", "30", "--results", "out"],
                                cwd=pytester.path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            blocking = pytester.path / "blocking"
            # The event: a case is running and blocked (a terminal's ^C reaches the whole group).
            while not blocking.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert blocking.exists(), "the blocking case never started"
            os.killpg(proc.pid, signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    text = out.decode()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, text
    recs = _records(pytester.path / "out")
    verdicts = {k: v["verdict"] for k, v in recs.items()}
    assert set(verdicts) == {"demo.a-first", "demo.b-blocks", "demo.c-later", "demo.d-later"}, text
    assert verdicts["demo.b-blocks"] == "NOT_RUN" and recs["demo.b-blocks"]["message"].startswith(
        "interrupted (^C)"), recs["demo.b-blocks"]
    not_run = sum(v == "NOT_RUN" for v in verdicts.values())
    assert f"INTERRUPTED (^C): {not_run} case(s) not run, recorded NOT_RUN" in text, text
    assert not list((pytester.path / "out").glob("*.collected.json"))


CLEANUP_INTERRUPT_CASES = '''
import sys
import types
from conformance.model.cases import case

DOC = ["003_50388870ec53b6aa.txt#acks"]

def stopped_in_cleanup():
    try:
        pass
    except ValueError as e:  # its clean-up code (e = None; del e) has no source line
        pass
    return sys._getframe()

@case("demo.a-first", description="d", expectation="x", sources=DOC)
def test_first(ctx):
    pass

@case("demo.b-interrupted", description="d", expectation="x", sources=DOC)
def test_interrupted(ctx):
    frame = stopped_in_cleanup()
    lasti = next(start for start, _end, line in frame.f_code.co_lines() if line is None)
    tb = types.TracebackType(None, frame, lasti, -1)
    assert tb.tb_lineno is None
    raise KeyboardInterrupt().with_traceback(tb)  # a ^C that landed on that clean-up code

@case("demo.c-later", description="d", expectation="x", sources=DOC)
def test_later(ctx):
    pass
'''


def test_an_interrupt_at_an_instruction_without_a_line_is_reported(pytester: pytest.Pytester) -> None:
    """Python 3.11 gives a traceback entry no line number where the frame stopped at code the
    compiler added; a ^C there crashed pytest's report of the interrupt (exit 1, nothing recorded
    NOT_RUN). The interrupt is reported as any other."""
    pytester.makepyfile(test_demo=CLEANUP_INTERRUPT_CASES)
    with FakeBroker() as fb:
        res = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:xdist", "--broker-url", fb.url,
                                            "--results", "out")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.INTERRUPTED, text
    assert "TypeError" not in text and "INTERNALERROR" not in text, text
    verdicts = {k: v["verdict"] for k, v in _records(pytester.path / "out").items()}
    expected = {"demo.a-first": "PASS", "demo.b-interrupted": "NOT_RUN", "demo.c-later": "NOT_RUN"}
    assert verdicts == expected, text
    assert "INTERRUPTED (^C): 2 case(s) not run, recorded NOT_RUN" in text, text
    assert "KeyboardInterrupt" in text, text  # pytest's own report of it


def test_a_collection_error_is_reported_as_pytest_reports_it(pytester: pytest.Pytester) -> None:
    """The plugin is loaded into every pytest run of an environment it is installed in (its entry
    point), a client library's own test suite too: a module that fails to import is pytest's
    collection error (exit 2), not an AttributeError of the plugin's status hook."""
    pytester.makepyfile(test_broken="import a_module_that_does_not_exist\n\ndef test_x():\n    pass\n")
    res = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rfE")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.INTERRUPTED, text
    assert "error during collection" in text and "AttributeError" not in text, text
