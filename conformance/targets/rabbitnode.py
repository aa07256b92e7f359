"""What the suite asks of a RabbitMQ node it started: the rabbitmqctl commands it needs, as the calls
rabbitmqctl of the node's release makes for them (3.10 to 4.3: where a release moved a call, the
expression picks the one the node has), evaluated through :mod:`conformance.targets.erleval` (erl_call:
milliseconds, where rabbitmqctl boots an Erlang VM per command).

Every function takes the node's name and the environment its rabbitmqctl would run with (``HOME``
holding the cookie, ``ERL_EPMD_PORT``) and raises :class:`~conformance.targets.erleval.EvalError`
(one line) when the node does not do it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.targets.base import RESTRICTED, SECOND_VHOST
from conformance.targets.erleval import EvalError, erl_bin, evaluate, transport

__all__ = [
    "EvalError", "QueueHome", "add_restricted_user", "add_second_vhost", "add_user", "add_vhost",
    "await_quorum_leaders", "await_running", "boot_plugins_dir", "clear_policy", "join_cluster",
    "lagging_quorum_queues", "memory_alarm", "queue_home", "running_nodes", "set_permissions", "set_policy",
    "transport",
]

#: who the node's audit events name for these changes (rabbitmqctl says ``rmq-cli``)
ACTING_USER = erl_bin("amqp-conformance")
Env = Mapping[str, str]


#: the status rabbitmqctl cluster_status of the node's release prints:
#: ``rabbit_db_cluster:cli_cluster_status/0`` where it exists (3.13, 4.x: Mnesia's
#: ``rabbit_mnesia:status/0`` on a node still using Mnesia, else the Khepri members that run
#: ``rabbit``; 4.3 has only Khepri and no ``rabbit_mnesia:status/0``), ``rabbit_mnesia:status/0``
#: before (3.10-3.12)
_CLUSTER_STATUS = ("case code:ensure_loaded(rabbit_db_cluster) of "
                   "{module, _} -> rabbit_db_cluster:cli_cluster_status(); "
                   "_ -> rabbit_mnesia:status() end")


def running_nodes(node: str, env: Env, timeout: float = 30.0) -> list[str]:
    """The running nodes ``node`` sees: ``running_nodes`` of the cluster status ``rabbitmqctl
    cluster_status`` prints (:data:`_CLUSTER_STATUS`; it needs the rabbit application running, so
    does this)."""
    got = evaluate(node, env, f"proplists:get_value(running_nodes, {_CLUSTER_STATUS})", timeout=timeout)
    return [str(n) for n in got or []]


_LAGGING = """
[N || Q <- rabbit_amqqueue:list_by_type(quorum),
      {resource, V, queue, N} <- [amqqueue:get_name(Q)],
      Rows <- [catch rabbit_quorum_queue:status(V, N)], is_list(Rows),
      I <- [[{proplists:get_value(<<"Raft State">>, R), proplists:get_value(<<"Commit Index">>, R)}
             || R <- Rows, is_list(R)]],
      lists:any(fun({leader, C}) -> is_integer(C) andalso C > 0; (_) -> false end, I),
      lists:member(0, [C || {_, C} <- I])]"""


def lagging_quorum_queues(node: str, env: Env, timeout: float = 30.0) -> list[str]:
    """The quorum queues (names) with a member that has not heard from its leader: commit index 0
    where the leader's is above it (``rabbit_quorum_queue:status``, what ``rabbitmq-queues
    quorum_status`` prints). A member restarted after a kill stays there until the leader's next
    tick (``quorum_tick_interval``, 5 s) contacts it; a queue.delete meanwhile waits for it."""
    return [str(n) for n in evaluate(node, env, _LAGGING, timeout=timeout) or []]


#: rabbitmqctl's join_cluster: ``rabbit_db_cluster:join/2`` where it exists (3.13, 4.x: it also
#: stops the feature-flag controller and Ra systems and copies the cluster's feature-flag states),
#: ``rabbit_mnesia:join_cluster/2`` before (3.10-3.12)
_JOIN = ("case code:ensure_loaded(rabbit_db_cluster) of "
         "{{module, _}} -> rabbit_db_cluster:join({first}, disc); "
         "_ -> rabbit_mnesia:join_cluster({first}, disc) end")
#: where the node keeps the outcome of the join it runs for the suite: pending, ok or the error's text
_JOIN_KEY = "amqpc_join_outcome"
_JOIN_SPAWN = (
    "persistent_term:put({key}, pending), "
    "_ = spawn(fun() -> group_leader(whereis(user), self()), "
    "O__ = try case rabbit:is_running() of true -> ok = rabbit:stop(); false -> ok end, "
    "case {join} of ok -> ok; {{ok, already_member}} -> ok end, ok = rabbit:start(), ok "
    "catch JC__:JE__ -> iolist_to_binary(io_lib:format(\"~p: ~P\", [JC__, JE__, 12])) end, "
    "persistent_term:put({key}, O__) end), ok")


def join_cluster(node: str, env: Env, first: str, timeout: float = 120.0) -> None:
    """``rabbitmqctl stop_app; join_cluster FIRST; start_app`` (``rabbit:stop/0``, the join
    rabbitmqctl of the node's release calls, as a disc node, ``rabbit:start/0``), run by a process
    of the node's own, whose outcome is then asked for every 0.2 s within ``timeout``.

    Not one long call: a join resets the node's database and restarts parts of it, and erl_call
    lost the answer of that call now and then on RabbitMQ 4.0.5 ("evaluating input failed",
    exit 1: the join went on, the suite did not know how it ended). A question about the outcome
    that gets no answer is asked again; only the deadline ends the wait."""
    deadline = time.monotonic() + timeout
    evaluate(node, env, _JOIN_SPAWN.format(key=_JOIN_KEY, join=_JOIN.format(first=_atom(first))),
             timeout=timeout, running=False)
    last = "pending"
    while True:
        try:
            last = evaluate(node, env, f"persistent_term:get({_JOIN_KEY}, pending)",
                            timeout=max(1.0, deadline - time.monotonic()), running=False)
        except EvalError as exc:
            last = str(exc)
        else:
            if last == "ok":
                return
            if last != "pending":
                raise EvalError(f"{node}: join_cluster {first}: {' '.join(str(last).split())[:300]}")
        if time.monotonic() + 0.2 >= deadline:
            raise EvalError(f"{node}: join_cluster {first} not done within {timeout:.0f} s (last: {last})")
        time.sleep(0.2)


def await_running(node: str, env: Env, timeout: float = 60.0) -> None:
    """Wait until ``node`` has finished booting: ``rabbit:is_booted/0`` (the boot state reached
    ``ready``) and the boot process's marker (the process registered as ``rabbit_boot`` while
    ``rabbit:start_it/1`` runs) gone; polled in the node every 50 ms, within ``timeout``.

    A node accepts AMQP connections before its boot has finished, and the calls that need the
    application (add_vhost, add_user, …) fail until then with ``rabbit_app_not_running``. Neither
    ``rabbit:is_running()`` nor ``is_booted()`` is enough before a ``stop_app`` (a join): the boot
    process still waits for the state it has already seen pass, reads "stopping" and ends the VM
    (RabbitMQ 4.0.5: "Runtime terminating during boot ({N, normal})", in 1 of ~4 cluster starts)."""
    polls = max(1, int(timeout * 0.9 / 0.05))
    evaluate(node, env,
             "(fun W__(0) -> erlang:error(rabbit_app_not_running); "
             "W__(N__) -> case rabbit:is_booted() andalso whereis(rabbit_boot) =:= undefined of true -> ok; "
             f"false -> timer:sleep(50), W__(N__ - 1) end end)({polls})", timeout=timeout, running=False)


#: the quorum queues (names) whose member on this node knows no leader, polled every 50 ms until
#: there is none or ``{polls}`` polls passed (``ra:members/2`` of the queue's server id, what
#: ``rabbitmq-queues quorum_status`` reads)
_LEADERLESS = """
(fun W__(N__) ->
    L__ = [Nm__ || Q__ <- rabbit_amqqueue:list_by_type(quorum),
                   {{resource, _, queue, Nm__}} <- [amqqueue:get_name(Q__)],
                   case catch ra:members(amqqueue:get_pid(Q__), 500) of
                       {{ok, _, Ld__}} when Ld__ =/= undefined -> false;
                       _ -> true
                   end],
    case L__ =:= [] orelse N__ =< 0 of
        true -> L__;
        false -> timer:sleep(50), W__(N__ - 1)
    end
 end)({polls})"""


def await_quorum_leaders(node: str, env: Env, timeout: float = 30.0) -> list[str]:
    """Wait until every quorum queue's member on ``node`` knows its leader; the queues that still
    know none when ``timeout`` passes (empty: all have one). Polled in the node every 50 ms.

    Part of "started" after a restart: a command a RabbitMQ 3.8 quorum queue member receives
    before it knows a leader is rejected (``{not_leader, undefined, _}``), and the channel's
    ``rabbit_fifo_client`` resends it only when its 10 s timer fires (``TIMER_TIME``, v3.8.9
    ``src/rabbit_fifo_client.erl``): a publish right after the restart is confirmed about 10 s
    late, exactly as long as a case waits. Seen in fresh-clone CI runs on 3.8.9 quorum queues
    (``confirms.persistent-durable-survives-restart``, ``durability.topology-survives-restart``:
    the basic.ack 10.05 s after the publish; the queue's leader elected about 0.1 s after it)."""
    polls = max(1, int(timeout * 0.8 / 0.05))
    got = evaluate(node, env, _LEADERLESS.format(polls=polls), timeout=timeout)
    return [str(n) for n in got or []]


def add_second_vhost(node: str, env: Env) -> None:
    """The second vhost the vhost cases need (:data:`~conformance.targets.base.SECOND_VHOST`),
    guest allowed everything in it."""
    add_vhost(node, env, SECOND_VHOST)
    set_permissions(node, env, SECOND_VHOST, "guest", ".*", ".*", ".*")


def add_restricted_user(node: str, env: Env) -> None:
    """The access cases' restricted user (:data:`~conformance.targets.base.RESTRICTED`):
    permissions in "/" only."""
    add_user(node, env, RESTRICTED.name, RESTRICTED.password)
    set_permissions(node, env, "/", RESTRICTED.name, RESTRICTED.configure, RESTRICTED.write, RESTRICTED.read)


def add_vhost(node: str, env: Env, vhost: str) -> None:
    """``rabbitmqctl add_vhost``: ``rabbit_vhost:add/2``."""
    evaluate(node, env, f"ok = rabbit_vhost:add({erl_bin(vhost)}, {ACTING_USER})")


def set_permissions(node: str, env: Env, vhost: str, user: str, configure: str, write: str,
                    read: str) -> None:
    """``rabbitmqctl set_permissions -p VHOST USER CONF WRITE READ``."""
    args = ", ".join(erl_bin(s) for s in (user, vhost, configure, write, read))
    evaluate(node, env, f"ok = rabbit_auth_backend_internal:set_permissions({args}, {ACTING_USER})")


def add_user(node: str, env: Env, user: str, password: str) -> None:
    """``rabbitmqctl add_user``: ``rabbit_auth_backend_internal:add_user/3``."""
    args = f"{erl_bin(user)}, {erl_bin(password)}"
    evaluate(node, env, f"ok = rabbit_auth_backend_internal:add_user({args}, {ACTING_USER})")


def set_policy(node: str, env: Env, vhost: str, name: str, pattern: str, definition: str,
               apply_to: str = "queues") -> None:
    """``rabbitmqctl set_policy -p VHOST --apply-to APPLY_TO NAME PATTERN DEFINITION`` (priority 0):
    ``rabbit_policy:parse_set/7``, which reads the definition as JSON."""
    args = ", ".join(erl_bin(s) for s in (vhost, name, pattern, definition))
    evaluate(node, env, f"ok = rabbit_policy:parse_set({args}, 0, {erl_bin(apply_to)}, {ACTING_USER})")


def clear_policy(node: str, env: Env, vhost: str, name: str) -> None:
    """``rabbitmqctl clear_policy -p VHOST NAME``: ``rabbit_policy:delete/3``."""
    evaluate(node, env, f"ok = rabbit_policy:delete({erl_bin(vhost)}, {erl_bin(name)}, {ACTING_USER})")


def memory_alarm(node: str, env: Env, on: bool) -> None:
    """``rabbitmqctl set_vm_memory_high_watermark absolute 1`` (on: the alarm goes off whatever the
    node uses) or ``0.4`` (RabbitMQ's default: cleared)."""
    value = "{absolute, 1}" if on else "0.4"
    evaluate(node, env, f"ok = vm_memory_monitor:set_vm_memory_high_watermark({value})")


@dataclass(frozen=True)
class QueueHome:
    """Where a queue lives, as ``rabbitmqctl list_queues name type leader members pid slave_pids``
    shows it: ``leader``/``members`` of a quorum queue or stream, ``master`` (the node of ``pid``)
    and ``mirrors`` (the nodes of ``slave_pids``) of a classic one."""

    queue_type: str  # classic | quorum | stream
    leader: str  # "" for a classic queue
    members: tuple[str, ...]
    master: str
    mirrors: tuple[str, ...]


# RabbitMQ 4.0 removed classic mirroring, and amqqueue:get_slave_pids/1 with it: no mirrors there.
_QUEUE_HOME = """
case rabbit_amqqueue:lookup(rabbit_misc:r({vhost}, queue, {queue})) of
  {{error, not_found}} -> null;
  {{ok, Q}} ->
    T = amqqueue:get_type(Q),
    I = case T of rabbit_classic_queue -> #{{}};
                  _ -> maps:from_list(rabbit_amqqueue:info(Q, [leader, members])) end,
    P = amqqueue:get_pid(Q),
    M = if is_pid(P) -> node(P); is_tuple(P) -> element(2, P); true -> '' end,
    Sl = case erlang:function_exported(amqqueue, get_slave_pids, 1) of
           true -> apply(amqqueue, get_slave_pids, [Q]); false -> [] end,
    #{{type => T, leader => maps:get(leader, I, ''), members => maps:get(members, I, []),
      master => M, mirrors => [node(S) || S <- Sl, is_pid(S)]}}
end"""
#: queue type modules as rabbitmqctl list_queues names them
_TYPES = {"rabbit_classic_queue": "classic", "rabbit_quorum_queue": "quorum", "rabbit_stream_queue": "stream"}


def queue_home(node: str, env: Env, queue: str, vhost: str = "/", timeout: float = 30.0) -> QueueHome | None:
    """Where ``queue`` lives, from ``node``'s view of the queue's record (``rabbit_amqqueue:lookup``;
    ``leader`` and ``members`` from ``rabbit_amqqueue:info``, as list_queues reads them); None when
    ``node`` does not know the queue."""
    got = evaluate(node, env, _QUEUE_HOME.format(vhost=erl_bin(vhost), queue=erl_bin(queue)), timeout=timeout)
    if got is None:
        return None
    qtype = str(got.get("type", ""))
    return QueueHome(
        queue_type=_TYPES.get(qtype, qtype),
        leader=str(got.get("leader") or ""),
        members=tuple(map(str, got.get("members") or ())),
        master=str(got.get("master") or ""),
        mirrors=tuple(map(str, got.get("mirrors") or ())),
    )


def _atom(text: str) -> str:
    """``text`` as an Erlang expression of that atom (a node name)."""
    return f"binary_to_atom({erl_bin(text)}, utf8)"


#: where Debian's rabbitmq-server keeps its release (``rabbitmq_server-<version>/plugins``)
RABBITMQ_LIB = Path("/usr/lib/rabbitmq/lib")
#: what rabbitmq-server boots: the rabbit application, after its prelaunch
BOOT_APPS = ("rabbit", "rabbitmq_prelaunch")


def boot_plugins_dir(folder: Path, enabled: Sequence[str] = (), lib: Path = RABBITMQ_LIB,
                     rebase: Path | None = None) -> Path | None:
    """``folder`` made a plugins directory (``RABBITMQ_PLUGINS_DIR``) holding links to only the
    applications the node boots — rabbit, its prelaunch, the plugins in ``enabled`` and what their
    ``.app`` files need — instead of the release's ~70. The node runs the same code: a plugin that
    is not enabled is never started, but at boot RabbitMQ reads the config schema of every plugin
    in the directory and the modules of every application there, ~1 s of CPU per boot here (2.8-3.3
    s instead of 3.8-5.1 s for a node restart). None (the node then uses the release's directory)
    when the release is not found or not unpacked (``.ez`` archives). ``rebase``: the root
    filesystem ``lib`` lies in (a node run under chroot there): the links point where that node
    sees the applications, the path below ``rebase``."""
    releases = sorted(lib.glob("rabbitmq_server-*/plugins"))
    if not releases:
        return None
    apps = {d.name.rsplit("-", 1)[0]: d for d in releases[-1].iterdir() if (d / "ebin").is_dir()}
    need: set[str] = set()
    todo = [*BOOT_APPS, *enabled]
    while todo:
        name = todo.pop()
        if name in apps and name not in need:
            need.add(name)
            todo += _app_dependencies(apps[name] / "ebin" / f"{name}.app")
    if not need.issuperset([*BOOT_APPS, *enabled]):
        return None
    folder.mkdir(parents=True, exist_ok=True)
    for name in sorted(need):
        link = apps[name] if rebase is None else Path("/") / apps[name].relative_to(rebase)
        (folder / apps[name].name).symlink_to(link)
    return folder


def _app_dependencies(app_file: Path) -> list[str]:
    """The ``applications`` an Erlang ``.app`` file lists (OTP's own are not in the plugins directory)."""
    try:
        found = re.search(r"\{\s*applications\s*,\s*\[([^\]]*)\]", app_file.read_text(errors="replace"))
    except OSError:
        return []
    return re.findall(r"[a-z][A-Za-z0-9_]*", found.group(1)) if found else []
