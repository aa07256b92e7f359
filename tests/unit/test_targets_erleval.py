"""The Erlang-expression transport to a RabbitMQ node (erl_call, rabbitmqctl eval as fallback):
literals, the wrapped expression, and how an answer, an error and a missing answer are told apart.
A fake erl_call stands in for the node."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from conformance.targets import erleval, rabbitnode
from conformance.targets.erleval import MARK, EvalError, erl_bin, evaluate


@pytest.fixture
def fake_erl_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install a fake erl_call printing ``out`` (and exiting ``rc``); returns a setter and the
    file its stdin and argv are saved to."""
    script = tmp_path / "erl_call"
    seen = tmp_path / "seen"

    def install(out: str, rc: int = 0) -> Path:
        (tmp_path / "out").write_text(out)
        script.write_text(f'#!/bin/sh\necho "$@" > {seen}.argv\ncat > {seen}.stdin\n'
                          f'cat {tmp_path / "out"}\nexit {rc}\n')
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        return seen

    monkeypatch.setattr(erleval, "erl_call_path", lambda: str(script))
    return install


def test_erl_bin_escapes_quotes_backslashes_and_non_ascii() -> None:
    assert erl_bin("plain") == '<<"plain"/utf8>>'
    assert erl_bin('a"b\\c') == '<<"a\\x{22}b\\x{5C}c"/utf8>>'
    assert erl_bin("é\n") == '<<"\\x{E9}\\x{A}"/utf8>>'
    assert erl_bin("x é").isascii()


def test_the_answer_is_the_marked_line(fake_erl_call) -> None:
    seen = fake_erl_call(f'noise\n{MARK}{{"ok": ["a@h", "b@h"]}}\n{{ok, ok}}')
    assert evaluate("n@h", {}, "node()", timeout=7) == ["a@h", "b@h"]
    argv = (seen.parent / "seen.argv").read_text().split()
    assert argv[:4] == ["-sname", "n@h", "-timeout", "7"] and "-fetch_stdout" in argv
    sent = (seen.parent / "seen.stdin").read_text()
    assert "node()" in sent and "rabbit:is_running()" in sent and sent.endswith(".\n")


def test_not_running_check_is_optional(fake_erl_call) -> None:
    seen = fake_erl_call(f'{MARK}{{"ok": "ok"}}\n')
    evaluate("n@h", {}, "ok", running=False)
    assert "rabbit:is_running()" not in (seen.parent / "seen.stdin").read_text()


def test_an_error_raised_by_the_expression_is_an_eval_error(fake_erl_call) -> None:
    fake_erl_call(f'{MARK}{{"error": "error: {{badmatch,\\n  {{error_string,\\"no\\"}}}}"}}\n')
    with pytest.raises(EvalError, match=r"n@h: error: \{badmatch, \{error_string"):
        evaluate("n@h", {}, "ok = x")


@pytest.mark.parametrize(("out", "rc", "says"), [
    ("", 1, "exited with 1 and no answer"),
    ('{error, "*** syntax error before: \'end\'"}', 0, "syntax error"),
    (f"{MARK}not json\n", 0, "unreadable answer"),
])
def test_no_answer_is_never_taken_for_one(fake_erl_call, out: str, rc: int, says: str) -> None:
    fake_erl_call(out, rc)
    with pytest.raises(EvalError, match=says):
        evaluate("n@h", {}, "ok")


def test_queue_home_reads_types_as_list_queues_names_them(fake_erl_call) -> None:
    fake_erl_call(f'{MARK}{{"ok": {{"type": "rabbit_classic_queue", "leader": "", "members": [], '
                  f'"master": "a@h", "mirrors": ["b@h", "c@h"]}}}}\n')
    home = rabbitnode.queue_home("a@h", {}, "q")
    assert home == rabbitnode.QueueHome("classic", "", (), "a@h", ("b@h", "c@h"))
    fake_erl_call(f'{MARK}{{"ok": null}}\n')
    assert rabbitnode.queue_home("a@h", {}, "q") is None


def test_without_erl_call_rabbitmqctl_eval_runs_the_same_expression(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctl = tmp_path / "rabbitmqctl"
    ctl.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/argv\necho \'{MARK}{{"ok": 3}}\'\necho ok\n')
    ctl.chmod(0o755)
    monkeypatch.setattr(erleval, "erl_call_path", lambda: None)
    monkeypatch.setattr(erleval, "RABBITMQCTL", str(ctl))
    assert erleval.transport() == "rabbitmqctl eval"
    assert evaluate("n@h", {}, "1 + 2") == 3
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[:5] == ["-n", "n@h", "-t", "30", "eval"] and "1 + 2" in argv[5]


def test_lagging_quorum_queues_are_names(fake_erl_call) -> None:
    seen = fake_erl_call(f'{MARK}{{"ok": ["q1", "q2"]}}\n')
    assert rabbitnode.lagging_quorum_queues("a@h", {}) == ["q1", "q2"]
    assert "rabbit_quorum_queue:status" in (seen.parent / "seen.stdin").read_text()


def test_running_nodes_asks_the_status_of_the_nodes_release(fake_erl_call) -> None:
    """rabbitmqctl cluster_status's call: rabbit_db_cluster:cli_cluster_status/0 where the module
    exists (3.13, 4.x; 4.3 has no rabbit_mnesia:status/0, Khepri being its only store), else
    rabbit_mnesia:status/0 (3.10-3.12); chosen in the node, not by the suite."""
    seen = fake_erl_call(f'{MARK}{{"ok": ["a@h", "b@h"]}}\n')
    assert rabbitnode.running_nodes("a@h", {}) == ["a@h", "b@h"]
    sent = (seen.parent / "seen.stdin").read_text()
    assert "code:ensure_loaded(rabbit_db_cluster)" in sent
    assert sent.index("rabbit_db_cluster:cli_cluster_status()") < sent.index("rabbit_mnesia:status()")


@pytest.mark.parametrize("name", erleval.WRAPPER_VARS)
def test_an_expression_binding_a_wrapper_variable_is_refused_before_any_call(fake_erl_call, name) -> None:
    # Binding one of them too fails to compile on the node ('unsafe_var'): an error a caller polling
    # for a state takes for "not yet" (steady.py's registration sync did, all 30 s of its bound).
    seen = fake_erl_call(f"{MARK}" + '{"ok": 1}\n')
    with pytest.raises(ValueError, match=name):
        evaluate("rabbit@h", {}, f"case foo() of {name} -> {name} end")
    assert not Path(f"{seen}.argv").exists()  # nothing was sent to the node


def test_the_wrapper_binds_exactly_its_declared_variables() -> None:
    wrapped = erleval._WRAP.format(check="", expr="1", mark=MARK)
    by_value = erleval._WRAP_VALUE.format(check="", expr="1", mark=MARK)
    found = set(re.findall(r"\b[A-Z]\w*__\b", wrapped)) | set(re.findall(r"\b[A-Z]\w*__\b", by_value))
    assert found == set(erleval.WRAPPER_VARS)
    # the helpers' own expressions pass (the stream coordinator's save, the cluster join)
    from conformance.cluster.steady import SAVE_MEMBER
    assert not erleval._CLASH.search(SAVE_MEMBER)
    assert not erleval._CLASH.search(rabbitnode._JOIN_SPAWN)


_OLD_RPC_OUT = ("{badrpc, {'EXIT', {function_clause, [{rpc, set_group_leader, [send_stdout_to_caller], "
                "[{file, \"rpc.erl\"}, {line, 250}]}]}}}")


@pytest.mark.parametrize("printed", [
    lambda text: '{ok, "' + MARK + text.encode().hex().upper() + '"}',  # a string
    lambda text: "{ok, [" + ", ".join(str(ord(c)) for c in MARK + text.encode().hex()) + "]}",  # a long one
])
def test_a_node_of_an_old_erlang_is_asked_for_the_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        printed) -> None:
    # OTP 23 (RabbitMQ 3.8.9, Debian 11): its rpc has no send_stdout_to_caller, so -fetch_stdout
    # fails with a function_clause; the answer then comes as the expression's value, hex-encoded
    answer = '{"ok": ["a\\"b", "é"]}'
    script, calls = tmp_path / "erl_call", tmp_path / "calls"
    (tmp_path / "old").write_text(_OLD_RPC_OUT + "\n")
    (tmp_path / "value").write_text(printed(answer) + "\n")
    script.write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncat > {tmp_path}/stdin\ncase "$*" in '
                      f'*-fetch_stdout*) cat {tmp_path}/old ;; *) cat {tmp_path}/value ;; esac\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(erleval, "erl_call_path", lambda: str(script))
    monkeypatch.setattr(erleval, "_VALUE_NODES", set())
    assert evaluate("old@h", {}, "x()") == ['a"b', "é"]
    assert evaluate("old@h", {}, "y()") == ['a"b', "é"]
    argvs = calls.read_text().splitlines()
    # asked once with -fetch_stdout, then (remembered) by value only
    assert ["-fetch_stdout" in a for a in argvs] == [True, False, False]
    sent = (tmp_path / "stdin").read_text()
    assert "y()" in sent and "rabbit_json:encode" in sent


def test_an_old_nodes_error_is_an_eval_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    error = '{"error": "error: undef"}'
    script = tmp_path / "erl_call"
    script.write_text(f'#!/bin/sh\ncat >/dev/null\necho \'{{ok, "{MARK}{error.encode().hex()}"}}\'\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(erleval, "erl_call_path", lambda: str(script))
    monkeypatch.setattr(erleval, "_VALUE_NODES", {"old@h"})
    with pytest.raises(EvalError, match="old@h: error: undef"):
        evaluate("old@h", {}, "x()")
