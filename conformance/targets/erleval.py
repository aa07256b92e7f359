"""Evaluate an Erlang expression on a running RabbitMQ node, without booting an Erlang VM per call.

``rabbitmqctl`` boots an Erlang VM for every command (~1-1.5 s of CPU on a 2-core machine);
``erl_call`` (Erlang/OTP's erl_interface: a C node, in Debian's ``erlang-base``, which
``rabbitmq-server`` depends on) connects to the node, evaluates one expression and exits in a few
milliseconds. The expressions are the calls rabbitmqctl makes for the same commands (named where
they are written), so what the node does is the same; only the transport is cheaper.

A node of an Erlang/OTP before 24 (RabbitMQ 3.8.9 of Debian 11 runs on OTP 23) cannot send its
output to the caller (``-fetch_stdout`` calls ``rpc:set_group_leader(send_stdout_to_caller)``, which
its ``rpc`` lacks: a ``function_clause``); for such a node the result is the expression's *value*
instead, the same marked JSON as a binary, which erl_call prints as ``#Bin<123,34,...>``. The first
call that meets the ``function_clause`` asks once more that way, and the node is remembered.

``rabbitmqctl eval`` runs the same expression when ``erl_call`` is not installed (an Erlang built
without erl_interface): every command then costs a VM boot again, but nothing else changes.

The value comes back as one JSON line after :data:`MARK` (``rabbit_json``, part of every RabbitMQ
since 3.7), or the error the expression raised, so a failed call is never mistaken for an answer.
The caller's environment carries ``HOME`` (where the node's ``.erlang.cookie`` is) and
``ERL_EPMD_PORT`` (the node's own epmd), as for rabbitmqctl.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

ERL_CALL = "/usr/lib/erlang/bin/erl_call"
RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
#: the line the result follows (anything the expression prints before it is not the result)
MARK = "amqpc-erleval:"

#: the variables the wrapper binds around the expression: an expression that binds one of them too
#: fails to compile ('unsafe_var'), which a caller polling for a state would take for "not yet"
#: (steady.py's registration sync did, 2026-11-29) -- so :func:`evaluate` refuses it outright
WRAPPER_VARS = ("AmqpcEvalValue__", "AmqpcEvalClass__", "AmqpcEvalReason__", "AmqpcEvalByte__")
_WRAP = (
    "try begin {{check}}begin {{expr}} end end of {0} -> "
    "io:put_chars([<<\"\\n{{mark}}\">>, rabbit_json:encode(#{{{{ok => {0}}}}}), <<\"\\n\">>]) "
    "catch {1}:{2} -> io:put_chars([<<\"\\n{{mark}}\">>, rabbit_json:encode(#{{{{error => "
    "iolist_to_binary(io_lib:format(\"~p: ~P\", [{1}, {2}, 12]))}}}}), <<\"\\n\">>]) end."
).format(*WRAPPER_VARS)
#: the same, the marked JSON as the expression's value (nodes whose rpc cannot send output back),
#: hex-encoded (erl_call prints a binary cut after 30 bytes, a string with quotes unescaped)
_V, _C, _R, _B = WRAPPER_VARS


def _hex_of(term: str) -> str:
    """Erlang: the marked JSON of ``term`` as a string of hex digits (no braces to format later)."""
    return (f'lists:flatten(["{MARK}" | [[hd(integer_to_list({_B} bsr 4, 16)), '
            f'hd(integer_to_list({_B} band 15, 16))] || <<{_B}>> <= '
            f'iolist_to_binary(rabbit_json:encode(#{{{term}}}))]])')


_WRAP_VALUE = (
    "try begin {check}begin {expr} end end of " + _V + " -> " + _hex_of(f"ok => {_V}")
    + " catch " + f"{_C}:{_R} -> "
    + _hex_of(f'error => iolist_to_binary(io_lib:format("~p: ~P", [{_C}, {_R}, 12]))') + " end."
).replace("{", "{{").replace("}", "}}").replace("{{check}}", "{check}").replace("{{expr}}", "{expr}")
#: how erl_call prints such a value: a string, or (65536 characters and more) a list of integers
_VALUE_STRING = re.compile(r'"' + re.escape(MARK) + r'([0-9A-Fa-f]*)"')
_VALUE_LIST = re.compile(r"\{ok, \[([0-9, ]+)\]\}\s*$")
#: nodes whose rpc has no send_stdout_to_caller (Erlang/OTP before 24): asked for the value
_VALUE_NODES: set[str] = set()
_OLD_RPC = "set_group_leader"
_CLASH = re.compile(r"\b(" + "|".join(WRAPPER_VARS) + r")\b")
#: the expression runs only where the rabbit application runs (as rabbitmqctl's commands that
#: need it: list_queues, set_policy, cluster_status, ...)
_RUNNING = "case rabbit:is_running() of false -> erlang:error(rabbit_app_not_running); true -> ok end, "


class EvalError(Exception):
    """The node could not be reached or the expression failed; the message is one line."""


def erl_bin(text: str) -> str:
    """``text`` as an Erlang binary literal (UTF-8), in ASCII: erl_call reads its input as Latin-1."""
    escaped = "".join(
        c if c.isascii() and c.isprintable() and c not in '\\"' else f"\\x{{{ord(c):X}}}" for c in text
    )
    return f'<<"{escaped}"/utf8>>'


@cache
def erl_call_path() -> str | None:
    """Where erl_call is (Erlang puts it in its bin folder, not always on PATH), or None."""
    found = shutil.which("erl_call")
    if found:
        return found
    if Path(ERL_CALL).exists():
        return ERL_CALL
    hits = sorted(Path("/usr/lib/erlang/lib").glob("erl_interface-*/bin/erl_call"))
    return str(hits[-1]) if hits else None


def transport() -> str:
    """``erl_call`` or ``rabbitmqctl eval``: what :func:`evaluate` uses here (for the "how" of answers)."""
    return "erl_call" if erl_call_path() else "rabbitmqctl eval"


def evaluate(node: str, env: Mapping[str, str], expr: str, *, timeout: float = 30.0,
             running: bool = True) -> Any:
    """The value of ``expr`` (an Erlang expression whose value ``rabbit_json`` can encode: maps,
    lists, binaries, atoms, numbers) on ``node``, decoded from JSON. ``running``: fail unless the
    rabbit application runs there. EvalError (one line) when the node cannot be reached, the call
    outlives ``timeout`` or the expression raises."""
    clash = _CLASH.search(expr)
    if clash:  # a fault of the caller's code, not of the node: never polled as "not yet"
        raise ValueError(f"the expression binds {clash.group(1)}, a variable erleval's wrapper binds")
    erl_call = erl_call_path()
    by_value = erl_call is not None and node in _VALUE_NODES
    wrapped = (_WRAP_VALUE if by_value else _WRAP).format(check=_RUNNING if running else "", expr=expr,
                                                          mark=MARK)
    if erl_call:
        # -timeout bounds connect + evaluation on erl_call's side; the subprocess timeout is the backstop
        # the result term erl_call prints last is what it says of an expression that did not parse
        argv = [erl_call, "-sname", node, "-timeout", str(max(1, round(timeout))),
                *([] if by_value else ["-fetch_stdout"]), "-e"]
        stdin = wrapped.encode() + b"\n"  # erl_call reads the expression up to a newline
    else:
        ctl = RABBITMQCTL if Path(RABBITMQCTL).exists() else shutil.which("rabbitmqctl")
        if not ctl:
            raise EvalError("neither erl_call nor rabbitmqctl is installed")
        argv = [ctl, "-n", node, "-t", str(max(1, round(timeout))), "eval", wrapped]
        stdin = b""
    try:
        done = subprocess.run(argv, input=stdin, env=dict(env), capture_output=True, timeout=timeout + 5)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EvalError(f"{transport()} to {node} failed: {exc}") from exc
    if (erl_call and not by_value and MARK not in done.stdout.decode(errors="replace")
            and _OLD_RPC in done.stdout.decode(errors="replace")):
        _VALUE_NODES.add(node)  # an OTP before 24: its rpc cannot send the output back
        return evaluate(node, env, expr, timeout=timeout, running=running)
    return _result(node, done)


def _marked_lines(out: str) -> list[str]:
    """The answers in erl_call's output: the marked lines it fetched, or the marked binaries it
    printed as a value (``#Bin<...>``)."""
    lines = [ln[len(MARK):] for ln in out.splitlines() if ln.startswith(MARK)]
    hexes = [m.group(1) for m in _VALUE_STRING.finditer(out)]
    long = _VALUE_LIST.search(out)
    if long:
        text = "".join(chr(int(c)) for c in long.group(1).split(",") if c.strip())
        if text.startswith(MARK):
            hexes.append(text[len(MARK):])
    for found in hexes:
        try:
            lines.append(bytes.fromhex(found).decode())
        except ValueError:
            continue
    return lines


def _result(node: str, done: subprocess.CompletedProcess[bytes]) -> Any:
    out = done.stdout.decode(errors="replace")
    if done.returncode == -signal.SIGALRM:  # erl_call's -timeout
        raise EvalError(f"erl_call to {node}: no answer within its timeout")
    lines = _marked_lines(out)
    if not lines:
        tail = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()[-1:]
        raise EvalError(f"{transport()} to {node} exited with {done.returncode} and no answer: "
                        f"{' '.join(tail) or '(no output)'}")
    try:
        answer = json.loads(lines[-1])
    except ValueError as exc:
        raise EvalError(f"{transport()} to {node}: unreadable answer {lines[-1][:200]!r}") from exc
    if "error" in answer:
        raise EvalError(f"{node}: {' '.join(str(answer['error']).split())[:300]}")
    return answer.get("ok")
