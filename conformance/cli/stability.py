"""``amqp-conformance stability --runs N [run options…]``: is a baseline worth committing?

The suite runs N times against one target, each time as ``amqp-conformance run`` would (the same
options; a spawned target is started once per run), all into one results folder
(``reports/stability/<stamp>/`` unless ``--results DIR``). Then every case whose verdict moved
across the runs is listed with its verdict sequence and the observed values that differed, and
so is every failing case whose *form* moved (same verdict, another signature: what the gate's
pinned triage compares, :mod:`conformance.gate.signature`).

Exit 1 when a verdict moved (``--no-fail``: 0), 0 when every verdict held; a run that could not
start its target stops the command with that run's exit code (4), ^C with 130. The results folder
feeds the report's flaky table as it is (``amqp-conformance report <folder>``: same case, same
broker build, different verdicts across runs) and the gate (``gate --candidate <folder>
--update-triage`` pins every form seen).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from conformance.argparsing import command_parser

EXIT_OK = 0
EXIT_MOVED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
ABSENT = "-"  # a case a run has no record of


def _parser() -> argparse.ArgumentParser:
    p = command_parser(
        "stability",
        "Run the suite N times against one target and report every case whose verdict (or failure form) "
        "moved. Every option not listed here is run's (see amqp-conformance run --help).",
        epilog="exit codes: 0 every verdict held; 1 a verdict moved (unless --no-fail); 2 bad arguments; "
        "4 a run could not start or probe its target; 130 interrupted",
    )
    p.add_argument("--runs", type=int, default=None, metavar="N", help="how many runs (at least 2)")
    p.add_argument("--results", default=None, metavar="DIR",
                   help="the folder all runs write into (default reports/stability/<stamp>/)")
    p.add_argument("--no-fail", action="store_true", help="exit 0 even when a verdict moved")
    p.add_argument("--from", dest="from_dir", default=None, metavar="DIR",
                   help="run nothing: read the runs already in DIR (one results file per run, e.g. of "
                        "N CI runs)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the findings as JSON")
    return p


@dataclass
class CaseHistory:
    case_id: str
    verdicts: list[str]  # one per run, ABSENT where the run has no record
    forms: list[str]  # the signature of each run's record ("" for PASS or absent)
    observed: list[str]  # each run's observed value

    @property
    def verdict_moved(self) -> bool:
        return len(set(self.verdicts)) > 1

    @property
    def form_moved(self) -> bool:
        pairs = zip(self.verdicts, self.forms, strict=True)
        failing = {(v, f) for v, f in pairs if v not in ("PASS", ABSENT)}
        return not self.verdict_moved and len(failing) > 1


@dataclass
class Stability:
    folder: str
    run_ids: list[str]
    broker: str
    n_cases: int
    moved: list[CaseHistory] = field(default_factory=list)
    form_moved: list[CaseHistory] = field(default_factory=list)
    run_seconds: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "folder": self.folder, "runs": self.run_ids, "broker": self.broker, "n_cases": self.n_cases,
            "n_moved": len(self.moved), "n_form_moved": len(self.form_moved),
            "moved": [asdict(c) for c in self.moved], "form_moved": [asdict(c) for c in self.form_moved],
            "run_seconds": [round(s, 1) for s in self.run_seconds],
        }


def analyse(files: Sequence[Path], folder: str = "") -> Stability:
    """The runs of ``files`` (a run per file, in the order given) case by case."""
    from conformance.gate.compare import read_rows

    runs: list[dict[str, Any]] = []
    run_ids: list[str] = []
    brokers: set[str] = set()
    for path in files:
        rows = {r.case_id: r for r in read_rows(path)}  # latest line of a case wins (one run per file)
        runs.append(rows)
        run_ids.append(next(iter(rows.values())).run_id if rows else path.stem)
        brokers |= {f"{r.broker_product} {r.broker_version}" for r in rows.values()}
    cases = sorted({c for rows in runs for c in rows})
    res = Stability(folder, run_ids, ", ".join(sorted(brokers)), len(cases))
    for case_id in cases:
        got = [rows.get(case_id) for rows in runs]
        hist = CaseHistory(
            case_id,
            [r.verdict if r else ABSENT for r in got],
            [r.signature if r else "" for r in got],
            [r.observed if r else "" for r in got],
        )
        if hist.verdict_moved:
            res.moved.append(hist)
        elif hist.form_moved:
            res.form_moved.append(hist)
    return res


def _differing(values: Sequence[str], limit: int = 100) -> str:
    """The observed values that differed, each with the runs that saw it."""
    seen: dict[str, list[int]] = {}
    for i, v in enumerate(values, 1):
        seen.setdefault(v.strip().splitlines()[0][:limit] if v.strip() else "(none)", []).append(i)
    if len(seen) == 1:
        return "observed the same each run"
    return "; ".join(f"run {','.join(map(str, idx))}: {v}" for v, idx in seen.items())


def print_stability(res: Stability, out: TextIO) -> None:
    n = len(res.run_ids)
    if res.moved:
        print(f"verdicts moved across {n} runs:", file=out)
        width = max(len(c.case_id) for c in res.moved)
        for c in res.moved:
            print(f"  {c.case_id:<{width}}  {' → '.join(c.verdicts)}", file=out)
            print(f"  {'':<{width}}  {_differing(c.observed)}", file=out)
    if res.form_moved:
        print(f"failure forms moved (same verdict, another signature) across {n} runs:", file=out)
        width = max(len(c.case_id) for c in res.form_moved)
        for c in res.form_moved:
            print(f"  {c.case_id:<{width}}  {c.verdicts[0]}: "
                  + "; ".join(f"run {i}: {f}" for i, f in enumerate(c.forms, 1)), file=out)
    steady = res.n_cases - len(res.moved) - len(res.form_moved)
    print(f"stability {'FAIL' if res.moved else 'PASS'}: {n} runs of {res.n_cases} cases against "
          f"{res.broker}: {len(res.moved)} verdict(s) moved, {len(res.form_moved)} failure form(s) moved, "
          f"{steady} steady; results {res.folder}", file=out)


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _run_once(run_args: list[str], folder: Path, i: int, n: int,
              out: TextIO) -> tuple[int, Path | None, float]:
    """One ``run`` into ``folder``, its output in ``folder/run-<i>.log``; the results file it wrote."""
    before = {p.name for p in folder.glob("*.jsonl")}
    log = folder / f"run-{i}.log"
    cmd = [sys.executable, "-m", "conformance.cli", "run", *run_args, "--results", str(folder),
           "--no-report", "--fail-on", "none"]
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as fh:
        code = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT)
    took = time.perf_counter() - started
    new = sorted(p for p in folder.glob("*.jsonl")
                 if p.name not in before and not p.name.endswith(".part.jsonl"))
    last = ""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    verdict_lines = [x for x in lines if x.startswith("verdicts:")]
    if verdict_lines:
        last = verdict_lines[-1].removeprefix("verdicts: ")
    print(f"run {i}/{n}: exit {code}, {took:.1f} s" + (f", {last}" if last else "") + f" (log {log})",
          file=out, flush=True)
    return code, (new[-1] if new else None), took


OWN_FLAGS = {"--runs": True, "--results": True, "--json": True, "--from": True, "--no-fail": False,
             "-h": False, "--help": False}  # flag → takes a value


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """This command's own options, and the rest (``run``'s options, passed on as given)."""
    own: list[str] = []
    rest: list[str] = []
    words = list(argv)
    i = 0
    while i < len(words):
        flag = words[i].partition("=")[0]
        if flag in OWN_FLAGS:
            takes = OWN_FLAGS[flag] and "=" not in words[i]
            own += words[i:i + 1 + takes]
            i += 1 + takes
        else:
            rest.append(words[i])
            i += 1
    return own, rest


def stability_main(argv: Sequence[str], out: TextIO | None = None) -> int:
    out = out or sys.stdout
    own, run_args = split_argv(argv)
    args = _parser().parse_args(own)
    if not args.from_dir and (args.runs is None or args.runs < 2):
        print("amqp-conformance stability: --runs takes 2 or more (one run shows no movement)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.from_dir:
        if run_args:
            print(f"amqp-conformance stability: --from runs nothing: {' '.join(run_args)} not used",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
        return _report(args, sorted(p for p in Path(args.from_dir).glob("*.jsonl")
                                    if not p.name.endswith(".part.jsonl")), Path(args.from_dir), [], out)
    folder = Path(args.results or f"reports/stability/{_stamp()}").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    seconds: list[float] = []
    code = EXIT_OK
    try:
        for i in range(1, args.runs + 1):
            code, results, took = _run_once(run_args, folder, i, args.runs, out)
            if code in (EXIT_BAD_INPUT, 4, EXIT_INTERRUPTED) or results is None:
                log = (folder / f"run-{i}.log").read_text(encoding="utf-8", errors="replace")
                for line in log.splitlines()[-3:]:
                    print(f"  {line}", file=out)
                break
            files.append(results)
            seconds.append(took)
            code = EXIT_OK
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    if code != EXIT_OK and len(files) < 2:
        return code
    rc = _report(args, files, folder, seconds, out)
    return code if code != EXIT_OK else rc


def _report(args: argparse.Namespace, files: list[Path], folder: Path, seconds: list[float],
            out: TextIO) -> int:
    if len(files) < 2:
        print(f"amqp-conformance stability: {len(files)} results file(s) in {folder}; two runs or more are "
              "compared", file=sys.stderr)
        return EXIT_BAD_INPUT
    from conformance.gate.compare import GateInputError

    try:
        res = analyse(files, str(folder))
    except GateInputError as exc:
        print(f"amqp-conformance stability: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    res.run_seconds = seconds
    print_stability(res, out)
    print(f"the report, with these runs in its flaky table: amqp-conformance report {folder} --out "
          f"{folder / 'report'}", file=out)
    if args.json:
        Path(args.json).write_text(json.dumps(res.to_json(), indent=1, ensure_ascii=False) + "\n",
                                   encoding="utf-8")
    return EXIT_MOVED if res.moved and not args.no_fail else EXIT_OK


if __name__ == "__main__":
    sys.exit(stability_main(sys.argv[1:]))
