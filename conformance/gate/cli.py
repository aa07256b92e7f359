"""``amqp-conformance gate``: the release gate's command line (:mod:`conformance.gate.compare` compares).

The comparison (:mod:`conformance.gate.compare`) and its GitHub Actions outputs
(:mod:`conformance.gate.github`)
sit below this module, so the dependencies point one way: the command line imports both, neither
imports it. Exit 0 when nothing fails, 1 when the gate fails, 2 on bad input (one line).
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from conformance.argparsing import command_parser
from conformance.gate.compare import (
    DEFAULT_RESULTS,
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    GateInputError,
    GateResult,
    Options,
    Row,
    Selector,
    _selected,
    compare,
    format_table,
    load_side,
    parse_selector,
    read_rows,
    require_one_run,
    resolve_inputs,
    summary_line,
    to_json,
    write_baseline,
)
from conformance.gate.github import github_outputs
from conformance.gate.pin import pin_forms, write_text_atomically
from conformance.gate.triage import EMPTY, Triage, TriageProblem, load_triage, triage_beside


def gate_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "gate",
        "Compare a candidate's verdicts with a baseline's. Exit 1 when the candidate lacks baseline cases, "
        "is another broker product or profile, regresses (PASS → FAIL/TIMEOUT/ERROR/NOT_RUN, FAIL → TIMEOUT, "
        "anything → ERROR) or has untriaged new failures; 0 otherwise; 2 on bad input.",
    )
    p.add_argument(
        "--baseline",
        required=True,
        metavar="SELECTOR",
        help="results file/folder/glob, or run:<run_id> / version:<v> / broker:<product>@<version>",
    )
    p.add_argument("--candidate", required=True, metavar="SELECTOR", help="as --baseline")
    p.add_argument("--results", nargs="+", default=[DEFAULT_RESULTS], metavar="RESULTS",
                   help=f"inputs that run:/version:/broker: selectors apply to (default {DEFAULT_RESULTS})")
    p.add_argument("--triage", "--expected-failures", dest="triage", default=None, metavar="TOML",
                   help="expected failures (default: <baseline>.triage.toml beside a baseline file, if any)")
    p.add_argument("--no-triage", action="store_true", help="ignore any triage file")
    p.add_argument(
        "--allow-missing", action="store_true", help="baseline cases the candidate lacks do not fail"
    )
    p.add_argument("--allow-product-change", action="store_true",
                   help="the candidate is another broker product than the baseline, on purpose")
    p.add_argument("--allow-profile-change", action="store_true",
                   help="the candidate ran under another profile than the baseline, on purpose")
    p.add_argument("--strict", action="store_true", help="also fail on new NON_STRICT verdicts")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the result as JSON to FILE (or stdout: then no table)")
    p.add_argument("--update-baseline", action="store_true",
                   help="after comparing, write the candidate (one run) as the new baseline file")
    p.add_argument("--update-triage", action="store_true",
                   help="after comparing, pin in the triage file the form (verdict and signature) of "
                        "every candidate failure an entry explains (all runs of the candidate: repeated runs "
                        "pin every form seen); reasons, notes and comments are kept")
    p.add_argument("--master", default=None, help=argparse.SUPPRESS)  # accepted from the Spark gate; unused
    return p


def _err(message: str) -> None:
    print(f"amqp-conformance gate: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = gate_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    out = out or sys.stdout
    try:
        return _gate(args, out)
    except (GateInputError, TriageProblem) as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT


def _gate(args: argparse.Namespace, out: TextIO) -> int:
    started = time.perf_counter()
    base_sel, cand_sel = parse_selector(args.baseline), parse_selector(args.candidate)
    shared = resolve_inputs(args.results) if any(s.kind != "path" for s in (base_sel, cand_sel)) else []
    update_target: Path | None = None
    if args.update_baseline:
        if base_sel.kind != "path" or glob.has_magic(base_sel.value) or Path(base_sel.value).is_dir():
            raise GateInputError("--update-baseline needs --baseline to name one results file")
        update_target = Path(base_sel.value)
    cand_files = resolve_inputs([cand_sel.value]) if cand_sel.kind == "path" else shared
    cand = load_side(cand_sel, cand_files)
    if update_target is not None:
        require_one_run(cand)  # before anything is compared or written
    if update_target is not None and not update_target.exists():
        n = write_baseline(cand, update_target)
        print(f"baseline created: {n} cases of run {cand.values('run_id')[0]} → {update_target}", file=out)
        return EXIT_OK
    base = load_side(base_sel, resolve_inputs([base_sel.value]) if base_sel.kind == "path" else shared)
    triage = _triage(args, base_sel)
    if args.update_triage and not triage.path:
        raise GateInputError("--update-triage needs a triage file: --triage FILE, or <baseline>.triage.toml "
                             "beside the baseline (write each entry's cases and reason first)")
    options = Options(args.allow_missing, args.allow_product_change, args.allow_profile_change, args.strict)
    res = compare(base, cand, triage, options)
    _print_result(args, res, out)
    github_outputs(args.json, args.strict, res, out)  # only under GitHub Actions does it act
    print(
        f"gate: {base.n_records + cand.n_records:,} records compared in {time.perf_counter() - started:.2f} s"
        + (f" (triage {triage.path})" if triage.path else ""),
        file=sys.stderr,
    )
    if args.update_triage:
        _update_triage(triage, [r for f in cand_files for r in read_rows(f) if _selected(r, cand_sel)], out)
        if update_target is None:
            return EXIT_OK
    if update_target is not None:
        n = write_baseline(cand, update_target)
        untriaged = [
            c
            for c, r in cand.cases.items()
            if r.verdict != "PASS" and triage.known(c, r.verdict, r.facts) is None
        ]
        print(
            f"baseline updated: {n} cases of run {cand.values('run_id')[0]} → {update_target}"
            + (
                f"; {len(untriaged)} non-PASS case(s) not in the triage file, e.g. {untriaged[0]}"
                if untriaged
                else ""
            ),
            file=out,
        )
        return EXIT_OK
    return EXIT_FAILED if res.failed else EXIT_OK


def _update_triage(triage: Triage, rows: list[Row], out: TextIO) -> None:
    target = Path(triage.path)
    res = pin_forms(target.read_text(encoding="utf-8"), triage, rows)
    write_text_atomically(target, res.text)
    print(
        f"triage updated: {res.pinned} pinned from the candidate, {res.kept} kept, "
        f"{res.entries} entr{'y' if res.entries == 1 else 'ies'} with forms → {target}"
        + (f"; {len(res.untriaged)} failure(s) no entry explains (not pinned: add an entry with its reason), "
           f"e.g. {res.untriaged[0]}" if res.untriaged else ""),
        file=out,
    )


def _print_result(args: argparse.Namespace, res: GateResult, out: TextIO) -> None:
    """The comparison as JSON (``--json``) and/or as the refusals, notes, table and summary line."""
    doc = to_json(res, args.strict)
    if args.json == "-":
        print(json.dumps(doc, indent=1, ensure_ascii=False), file=out)
    else:
        if args.json:
            try:
                Path(args.json).write_text(
                    json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
                )
            except OSError as exc:
                raise GateInputError(f"cannot write --json {args.json}: {exc.strerror or exc}") from exc
        for line in res.refusals:
            print(line, file=out)
        shown = [f for f in res.findings if f.kind != "known" or f.change]
        if shown:
            format_table(shown, out)
        for note in res.notes:  # right above the verdict line (another release: said, not hidden)
            print(f"note: {note}", file=out)
        print(summary_line(res, args.strict), file=out)


def _triage(args: argparse.Namespace, base_sel: Selector) -> Triage:
    if args.no_triage:
        return EMPTY
    if args.triage:
        return load_triage(Path(args.triage))
    if base_sel.kind == "path" and Path(base_sel.value).is_file():
        beside = triage_beside(Path(base_sel.value))
        if beside is not None:
            return load_triage(beside)
    return EMPTY


if __name__ == "__main__":
    sys.exit(main())
