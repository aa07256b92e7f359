"""``amqp-conformance mutate``: run the suite through each mutant of the catalogue.

For each mutant a fault-injecting proxy is put in front of the target and the scenario modules
that can observe the mutant run through it (a pytest subprocess with ``--broker-url`` at the
proxy). A mutant is killed when a case ends FAIL or TIMEOUT (NON_STRICT too for a SHOULD/MAY
promise) where the same case through a fault-free proxy did not: the baseline run makes sure a
kill is the mutant's doing, not the target's or the proxy's. ERROR never kills: it is the
harness's own fault.

Results: every case record of every run goes to ``<results>/<session>.jsonl`` with
``extra.mutant`` (``none`` for the baseline); ``<session>.summary.json`` has the per-mutant and
per-category figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.argparsing import command_parser, workers
from conformance.model.verdicts import HarnessError
from conformance.mutate.catalogue import CATALOGUE, Mutant, select
from conformance.plugin.commandline import add_command_options, checked_as, target_of
from conformance.protocol.handshake import connect
from conformance.protocol.proxy import Fault, FaultProxy
from conformance.protocol.wire import URL

EXIT_SURVIVORS = 1
EXIT_BAD_INPUT = 2
EXIT_TARGET = 3
KILLING = frozenset({"FAIL", "TIMEOUT"})
BASELINE = "none"


def _err(message: str) -> None:
    print(f"amqp-conformance mutate: {message}", file=sys.stderr)


@dataclass(frozen=True)
class Kill:
    case_id: str
    verdict: str
    baseline: str  # the case's verdict without the mutant ("-" if it did not run there)


@dataclass(frozen=True)
class MutantResult:
    mutant: str
    category: str
    areas: tuple[str, ...]
    equivalent: bool
    kills: tuple[Kill, ...]
    cases: int  # cases that ran through the mutant
    errors: tuple[str, ...]  # cases that ended ERROR (never a kill: the harness's fault)
    seconds: float
    problem: str = ""  # the run itself failed (no results): neither killed nor survived

    @property
    def killed(self) -> bool:
        return bool(self.kills)

    @property
    def outcome(self) -> str:
        if self.problem and not self.kills:
            return "NO-RESULT"
        if self.equivalent:
            return "EQUIVALENT-KILLED" if self.killed else "EQUIVALENT"
        return "KILLED" if self.killed else "SURVIVED"


@dataclass(frozen=True)
class Upstream:
    host: str
    port: int
    user: str
    password: str
    vhost: str
    tls: URL | None = None  # the broker's amqps:// URL: the proxy connects to it with TLS


@dataclass
class Session:
    upstream: Upstream
    results: Path
    session_id: str
    workers: str
    case_timeout: str
    run_timeout: float
    extra_pytest: list[str] = field(default_factory=list)
    # the target's restricted user (the access cases), reached through the proxy like the admin
    restricted: tuple[str, str, str] | None = None  # (user, password, vhost)
    # (upstream, ms): a broker of the target's kind with a short consumer timeout, for the
    # consumer_timeout area alone (the target's own keeps its default: other cases hold deliveries)
    timeout_upstream: tuple[Upstream, int] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def out_file(self) -> Path:
        return self.results / f"{self.session_id}.jsonl"


#: the option table's target options mutate takes (a single broker behind the proxy)
TARGET = ("broker-url", "broker", "tls")


def _parser() -> argparse.ArgumentParser:
    p = command_parser(
        "mutate",
        "Run the suite through injected broker faults (mutants) and report "
        "which cases kill each one.",
    )
    # The good broker behind the proxy, named as `run` names a target (the option table's options);
    # with --tls the proxy connects to it over TLS (it listens plain itself).
    add_command_options(p, TARGET)
    p.add_argument(
        "--mutant", action="append", default=[],
        help="only mutants whose id matches these globs (repeatable, or a comma list)"
    )
    p.add_argument(
        "--area",
        action="append",
        default=[],
        help="only mutants observed by these areas (scenario modules) or of these categories (repeatable, "
        "or a comma list)",
    )
    p.add_argument("-n", "--workers", default="0", type=workers,
                   help="pytest-xdist workers per mutant run (default 0)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="mutants run at the same time (default 1)")
    p.add_argument("--case-timeout", default="5", type=checked_as("case-timeout"),
                   help="seconds per wait before TIMEOUT (default 5)")
    p.add_argument("--run-timeout", type=float, default=150.0, help="deadline of one mutant's run in seconds")
    p.add_argument("--case", default=None,
                   help="only the cases whose id matches these comma separated globs (the suite's --case)")
    p.add_argument("--results", default="reports/mutate", help="results folder (default reports/mutate)")
    p.add_argument("--list", action="store_true", help="print the catalogue and exit")
    p.add_argument("--json", action="store_true", help="with --list: machine-readable")
    return p


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if args.jobs < 1:
        _err("--jobs must be at least 1")
        return EXIT_BAD_INPUT
    # repeatable, and each may be a comma list (as everywhere a list is taken)
    args.mutant = [g.strip() for item in args.mutant for g in item.split(",") if g.strip()]
    args.area = [a.strip() for item in args.area for a in item.split(",") if a.strip()]
    mutants = select(args.mutant or None, args.area or None)
    if not mutants:
        _err(f"no mutant matches --mutant {args.mutant or '*'} --area {args.area or '*'} "
             f"(see amqp-conformance mutate --list)")
        return EXIT_BAD_INPUT
    if args.list:
        return _print_catalogue(mutants, as_json=args.json)
    from conformance.targets import TargetError, open_target

    try:
        spec = target_of(args)
        if spec.is_cluster:
            raise ValueError(f"--broker {spec.kind}: mutate puts its proxy in front of one broker")
    except ValueError as exc:
        _err(str(exc).splitlines()[0])
        return EXIT_BAD_INPUT

    started = time.monotonic()
    try:
        target = open_target(spec)  # a spawned target makes (and removes) its own temp folder
    except (TargetError, OSError, ValueError) as exc:
        _err(f"cannot start the target: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        return EXIT_TARGET
    # a stopped mutate run must not leave its broker and its pytest runs behind
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        upstream = _upstream(target.url)
        try:
            if upstream.tls is not None:
                connect(upstream.tls, timeout=5).close()  # TLS settings checked once, in one line
            else:
                socket.create_connection((upstream.host, upstream.port), timeout=5).close()
        except HarnessError as exc:
            _err(f"cannot reach the broker at {upstream.host}:{upstream.port}: {exc.message}")
            return EXIT_TARGET
        except OSError as exc:
            _err(f"cannot reach the broker at {upstream.host}:{upstream.port}: {exc.strerror or exc}")
            return EXIT_TARGET
        session = Session(
            upstream=upstream,
            results=Path(args.results).resolve(),
            session_id=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-mutate-{os.getpid()}",
            workers=args.workers,
            case_timeout=args.case_timeout,
            run_timeout=args.run_timeout,
            extra_pytest=(["--case", args.case] if args.case else []) + limits_options(target),
            restricted=_restricted(target.restricted_url),
        )
        session.results.mkdir(parents=True, exist_ok=True)
        timeout_target = _timeout_target(mutants, target.name, spec.tls)
        if timeout_target is None:
            return _run_all(session, mutants, args.jobs, target.name, started)
        try:
            session.timeout_upstream = (_upstream(timeout_target[0].url), timeout_target[1])
            return _run_all(session, mutants, args.jobs, target.name, started)
        finally:
            timeout_target[0].close()
    finally:
        for proc in list(_ACTIVE):
            _kill_group(proc)
        target.close()
        signal.signal(signal.SIGTERM, previous)


_ACTIVE: set[subprocess.Popen[bytes]] = set()


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _restricted(u: URL | None) -> tuple[str, str, str] | None:
    if u is None:
        return None
    return u.user, u.password, u.vhost


def limits_options(target: object) -> list[str]:
    """The pytest options that tell the limits cases, run against the proxy's url, what the
    upstream target knows: its max message size and how to raise its memory alarm."""
    out: list[str] = []
    size = getattr(target, "limits", {}).get("max_message_size")
    if size:
        out += ["--amqp-max-message-size", str(size)]
    cmd = getattr(target, "alarm_cmd", None)
    if cmd:
        out += ["--amqp-alarm-cmd", cmd]
    return out


def _upstream(u: URL) -> Upstream:
    return Upstream(u.host, u.port, u.user, u.password, u.vhost, u if u.tls else None)


def _run_all(session: Session, mutants: list[Mutant], jobs: int, target_name: str, started: float) -> int:
    areas = sorted({a for m in mutants for a in m.areas})
    print(f"mutate: {len(mutants)} mutants over areas {', '.join(areas)}; target {target_name}; "
          f"baseline run first", flush=True)
    baseline = run_areas(session, areas, Fault(), BASELINE)
    base, base_secs = baseline.verdicts, baseline.seconds
    if baseline.problem:
        _err(f"the baseline run (no fault) did not finish cleanly: {baseline.problem}")
        return EXIT_TARGET
    not_clean = {c: v for c, v in base.items() if v in KILLING or v == "ERROR"}
    print(f"baseline: {len(base)} cases in {base_secs:.1f}s; not PASS-like without a fault: "
          f"{', '.join(f'{c}={v}' for c, v in sorted(not_clean.items())) or 'none'}", flush=True)

    def one(m: Mutant) -> MutantResult:
        res = judge(m, run_areas(session, list(m.areas), m.make(), m.id), base)
        with session.lock:
            print(_line(res), flush=True)
        return res

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, mutants))
    wall = time.monotonic() - started
    summary = summarise(results, wall)
    print(render_summary(summary))
    summary_file = session.results / f"{session.session_id}.summary.json"
    summary_file.write_text(
        json.dumps({"target": target_name, **summary, "mutants": [_as_dict(r) for r in results]}, indent=1))
    print(f"results: {session.out_file}", file=sys.stderr)
    print(f"suite-power report: amqp-conformance report {summary_file} --out DIR", file=sys.stderr)
    survivors = [r for r in results if r.outcome in ("SURVIVED", "NO-RESULT")]
    return EXIT_SURVIVORS if survivors else 0


def judge(m: Mutant, run: RunOutcome, base: dict[str, str]) -> MutantResult:
    """Which cases killed ``m``: FAIL/TIMEOUT (NON_STRICT for a SHOULD/MAY mutant) where the
    fault-free run did not end so. A run stopped at its deadline still kills by the cases that
    finished; a run whose fault failed kills nothing."""
    verdicts = {} if run.tainted else run.verdicts
    kills: list[Kill] = []
    for case_id, v in sorted(verdicts.items()):
        was = base.get(case_id, "-")
        if v in KILLING and was not in KILLING:
            kills.append(Kill(case_id, v, was))
        elif v == "NON_STRICT" and m.should and was not in KILLING | {"NON_STRICT"}:
            kills.append(Kill(case_id, v, was))
    errors = tuple(sorted(c for c, v in verdicts.items() if v == "ERROR"))
    return MutantResult(m.id, m.category, m.areas, bool(m.equivalent), tuple(kills), len(verdicts), errors,
                        run.seconds, run.problem)


@dataclass(frozen=True)
class RunOutcome:
    verdicts: dict[str, str]  # case id -> verdict, of every case that finished
    problem: str  # "" or why the run did not finish cleanly (deadline, no results, proxy failure)
    seconds: float
    tainted: bool = False  # the fault itself failed: no verdict of the run may count as a kill


TIMEOUT_AREA = "consumer_timeout"


def _timeout_target(mutants: list[Mutant], kind: str, tls: bool) -> tuple[Any, int] | None:
    """(target, ms): a broker of ``kind`` with a short consumer timeout when a mutant's areas take
    in the consumer_timeout cases and the suite can start one (as the plugin does for them);
    None otherwise (those cases are then UNSUPPORTED through the proxy)."""
    from conformance.targets import TargetError, spawn_private
    from conformance.verify.fixtures import CONSUMER_TIMEOUT_KINDS, PRIVATE_CONSUMER_TIMEOUT

    if kind not in CONSUMER_TIMEOUT_KINDS or not any(TIMEOUT_AREA in m.areas for m in mutants):
        return None
    try:
        made = spawn_private(kind, tls=tls, restricted=False, consumer_timeout=PRIVATE_CONSUMER_TIMEOUT)
    except TargetError as exc:
        _err(f"no {kind} broker with a consumer timeout ({str(exc).splitlines()[0]}): "
             f"the {TIMEOUT_AREA} cases run without one")
        return None
    return made, PRIVATE_CONSUMER_TIMEOUT


def run_areas(session: Session, areas: list[str], fault: Fault, mutant_id: str,
              cases: str | None = None) -> RunOutcome:
    """Run ``areas`` (only ``cases``, comma separated globs, if given) through a proxy with ``fault``;
    the consumer_timeout area through its own proxy to the broker with a short timeout, if any."""
    if session.timeout_upstream is None or TIMEOUT_AREA not in areas:
        return _run_through(session, session.upstream, areas, fault, mutant_id, cases)
    up, ms = session.timeout_upstream
    rest = [a for a in areas if a != TIMEOUT_AREA]
    runs = [_run_through(session, up, [TIMEOUT_AREA], fault, mutant_id, cases,
                         ["--amqp-consumer-timeout", str(ms)])]
    if rest:
        runs.append(_run_through(session, session.upstream, rest, fault, mutant_id, cases))
    problems = [r.problem for r in runs if r.problem]
    return RunOutcome({k: v for r in runs for k, v in r.verdicts.items()}, "; ".join(problems),
                      sum(r.seconds for r in runs), any(r.tainted for r in runs))


def _run_through(session: Session, up: Upstream, areas: list[str], fault: Fault, mutant_id: str,
                 cases: str | None = None, extra: Sequence[str] = ()) -> RunOutcome:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="amqpc-mut-run-") as tmp, \
            FaultProxy(up.host, up.port, fault, upstream_tls=up.tls) as proxy:
        run_id = f"{session.session_id}-{mutant_id}"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            # Only the plugins a run uses, as `run` loads them (cli.RUN_PLUGINS, and no autoload in
            # env below): every other installed pytest11 plugin (hypothesis's from a dev install:
            # ~0.7 s of imports) would be loaded by each pytest process of each mutant's run.
            "-p",
            "conformance.plugin",
            "-p",
            "no:cacheprovider",
            # a pytest config where mutate starts (e.g. this checkout's -n 4) must not change how
            # each mutant's run goes, as for `run`
            "-o",
            "addopts=",
            # no conftest.py, as for `run` (conformance.cli.run: pytest would load the starting
            # folder's and its test* subfolders', here this checkout's tests/conftest.py)
            "--noconftest",
            "-v",
            "--no-header",
            "-rN",
            "--pyargs",
            *[f"conformance.scenarios.test_{a}" for a in areas],
            "--broker-url",
            str(proxy.url(up.user, up.password, up.vhost)),
            "--case-timeout",
            session.case_timeout,
            "--results",
            tmp,
            "--fail-on",
            "none",
            *session.extra_pytest,
            *extra,
        ]
        if session.restricted is not None:
            cmd += ["--amqp-restricted-url", str(proxy.url(*session.restricted))]
        if cases:
            cmd += ["--case", cases]
        if session.workers not in ("0", ""):
            cmd += ["-p", "xdist.plugin", "-n", session.workers]
        env = {**os.environ, "AMQP_CONFORMANCE_RUN_ID": run_id, "AMQP_CONFORMANCE_MUTANT": mutant_id,
               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        env.pop("AMQP_CONFORMANCE_CASE", None)
        problem = _run_bounded(cmd, env, session.run_timeout)
        tainted = bool(proxy.errors)
        if tainted:
            # the mutant was not what the catalogue says during this run: no verdict of it counts
            problem = f"the proxy's fault failed {len(proxy.errors)} time(s): {proxy.errors[0]}"
        # the merged file, or (a run stopped at its deadline) the parts its workers wrote so far
        files = [Path(tmp) / f"{run_id}.jsonl"]
        if not files[0].exists():
            files = sorted(Path(tmp).glob(f"{run_id}.*.part.jsonl"))
        records = [json.loads(line) for fp in files for line in fp.read_text(encoding="utf-8").splitlines()
                   if line.strip()]
    if not records:
        return RunOutcome(
            {}, problem or "the pytest run wrote no results", time.monotonic() - started, tainted
        )
    verdicts = {r["case_id"]: r["verdict"] for r in records}
    with session.lock, session.out_file.open("a", encoding="utf-8") as fh:
        for r in records:
            # the plugin knows nothing of mutants: the record says which one was active here
            r.setdefault("extra", {}).update({"mutant": mutant_id, "mutate_session": session.session_id})
            if problem:
                # what the report needs to judge the mutant as this command does (NO-RESULT, taint)
                r["extra"]["mutant_problem"] = problem
            if tainted:
                r["extra"]["mutant_tainted"] = "true"
            fh.write(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n")
    return RunOutcome(verdicts, problem, time.monotonic() - started, tainted)


def _run_bounded(cmd: list[str], env: dict[str, str], deadline: float) -> str:
    """Run ``cmd`` in its own process group; on the deadline end the group. '' or the problem."""
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    _ACTIVE.add(proc)
    try:
        output, _ = proc.communicate(timeout=deadline)
        return _exit_problem(proc.returncode, output)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        output, _ = proc.communicate()
    finally:
        _ACTIVE.discard(proc)
    lines = [ln for ln in output.decode(errors="replace").splitlines() if "::" in ln]
    hung = lines[-1].split()[0].rsplit("::", 1)[-1] if lines else "?"
    # pytest -v names a test before it runs it: the last one named never finished
    return f"the run passed its {deadline:.0f}s deadline and was stopped; hung in {hung}"


def _exit_problem(code: int, output: bytes) -> str:
    if code in (0, 1):
        return ""
    tail = output.decode(errors="replace").strip().splitlines()[-3:]
    return f"pytest exited {code}: {' | '.join(tail)}"


def _line(r: MutantResult) -> str:
    head = f"{r.outcome:<17} {r.mutant:<44} {r.seconds:6.1f}s"
    if r.problem and not r.kills:
        return f"{head}  {r.problem}"
    if r.kills:
        shown = ", ".join(f"{k.case_id}={k.verdict}" for k in r.kills[:4])
        more = f" (+{len(r.kills) - 4})" if len(r.kills) > 4 else ""
        body = f"  by {shown}{more}"
    else:
        body = f"  {r.cases} cases of {', '.join(r.areas)} all unaffected"
    if r.errors:
        body += f"; ERROR (not a kill): {', '.join(r.errors[:3])}"
    if r.problem:
        body += f"; {r.problem}"
    return head + body


class Summary(TypedDict):
    categories: dict[str, dict[str, int]]  # category → mutants / killed / survived / equivalent / no_result
    total: dict[str, int]
    wall_seconds: float


def summarise(results: list[MutantResult], wall: float) -> Summary:
    cats: dict[str, dict[str, int]] = {}
    for r in results:
        c = cats.setdefault(
            r.category, {"mutants": 0, "killed": 0, "survived": 0, "equivalent": 0, "no_result": 0}
        )
        c["mutants"] += 1
        key = {"KILLED": "killed", "SURVIVED": "survived", "NO-RESULT": "no_result"}.get(
            r.outcome, "equivalent"
        )
        c[key] += 1
    total = {
        k: sum(c[k] for c in cats.values())
        for k in ("mutants", "killed", "survived", "equivalent", "no_result")
    }
    return {"categories": cats, "total": total, "wall_seconds": round(wall, 1)}


def _score(c: dict[str, int]) -> str:
    counted = c["mutants"] - c["equivalent"]
    return f"{100 * c['killed'] / counted:5.1f}%" if counted else "    -"


def render_summary(summary: Summary) -> str:
    cats, total = summary["categories"], summary["total"]
    lines = ["", f"{'category':<16} {'mutants':>7} {'killed':>6} {'survived':>8} {'equiv.':>6} {'score':>6}"]
    for name, c in sorted(cats.items()):
        lines.append(f"{name:<16} {c['mutants']:>7} {c['killed']:>6} {c['survived'] + c['no_result']:>8} "
                     f"{c['equivalent']:>6} {_score(c):>6}")
    lines.append(f"{'total':<16} {total['mutants']:>7} {total['killed']:>6} "
                 f"{total['survived'] + total['no_result']:>8} {total['equivalent']:>6} {_score(total):>6}")
    lines.append(f"mutation score = killed / (mutants - equivalent); wall time {summary['wall_seconds']}s")
    return "\n".join(lines)


def _as_dict(r: MutantResult) -> dict[str, object]:
    d = asdict(r)
    d["outcome"] = r.outcome
    return d


def _print_catalogue(mutants: list[Mutant], *, as_json: bool) -> int:
    if as_json:
        print(json.dumps([{"id": m.id, "description": m.description, "rule": m.rule, "areas": list(m.areas),
                           "equivalent": m.equivalent, "should": m.should} for m in mutants], indent=1))
        return 0
    width = max(len(m.id) for m in mutants)
    for m in mutants:
        tag = " [equivalent]" if m.equivalent else ""
        print(
            f"{m.id:<{width}}  {m.description}{tag}\n{'':<{width}}  rule: {m.rule}; areas: "
            f"{', '.join(m.areas)}"
        )
    print(f"{len(mutants)} mutants ({sum(1 for m in mutants if m.equivalent)} documented as equivalent) "
          f"of {len(CATALOGUE)} in the catalogue")
    return 0

