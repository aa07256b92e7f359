"""``amqp-conformance diff RUNS…``: the upgrade comparison of runs of one broker product at two or more
releases, every hop at once (:mod:`conformance.model.release_history`, each hop
:mod:`conformance.model.upgrade`), in the terminal, without a JVM.

Exit codes: 0 compared (``--fail-on-undocumented``: and no undocumented change); 1 an undocumented
change with ``--fail-on-undocumented``; 2 bad input (one line).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from conformance.argparsing import command_parser
from conformance.model.release_history import history, history_rows, render_history

EXIT_UNDOCUMENTED = 1
EXIT_BAD_INPUT = 2


def main(argv: Sequence[str]) -> int:
    p = command_parser(
        "diff",
        "What changed between runs of one broker product at two or more releases: every hop (3.8.9 -> "
        "3.10.8 -> 4.0.5 -> 4.3.6) case by case, old vs new verdict and observed value (normalised), each "
        "change documented (with its source, from conformance/profiles/rabbitmq_releases.toml), "
        "UNDOCUMENTED, or not stable (it varies between runs of one release: measured in "
        "conformance/profiles/unstable.toml, or by runs of one release among the inputs). Runs of one "
        "release show no change.")
    p.add_argument("runs", nargs="+", metavar="RUNS",
                   help="results of each release: JSONL files, folders of them, or globs, in any order (the "
                        "runs are ordered by release; several runs of one release measure what varies by "
                        "itself)")
    p.add_argument("--fail-on-undocumented", action="store_true",
                   help="exit 1 when a change is not documented by a cited source")
    p.add_argument("--all", action="store_true", help="every common case, changed or not")
    p.add_argument("--json", action="store_true", help="the rows as JSON lines, each naming its hop")
    args = p.parse_args(list(argv))
    try:
        h = history(args.runs, everything=args.all)
    except (ValueError, OSError) as exc:
        print(f"amqp-conformance diff: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        for row in history_rows(h):
            print(json.dumps(row, ensure_ascii=False))
    else:
        for line in render_history(h):
            print(line)
    if args.fail_on_undocumented and h.undocumented:
        return EXIT_UNDOCUMENTED
    return 0
