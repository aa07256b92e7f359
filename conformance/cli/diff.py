"""``amqp-conformance diff OLD NEW``: the upgrade comparison of two runs of one broker product at two
versions (:mod:`conformance.model.upgrade`), in the terminal, without a JVM.

Exit codes: 0 compared (``--fail-on-undocumented``: and no undocumented change); 1 an undocumented
change with ``--fail-on-undocumented``; 2 bad input (one line).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from conformance.argparsing import command_parser
from conformance.model.upgrade import compare_paths, render, rows_as_dicts

EXIT_UNDOCUMENTED = 1
EXIT_BAD_INPUT = 2


def main(argv: Sequence[str]) -> int:
    p = command_parser("diff", "What changed between two runs of one broker product at two versions: case by "
                       "case, old vs new verdict and observed value (normalised), each change documented "
                       "(with its source, from conformance/profiles/rabbitmq_releases.toml) or UNDOCUMENTED.")
    p.add_argument("old", help="the old version's results: a JSONL file, a folder of them, or a glob")
    p.add_argument("new", help="the new version's results, likewise")
    p.add_argument("--fail-on-undocumented", action="store_true",
                   help="exit 1 when a change is not documented by a cited source")
    p.add_argument("--all", action="store_true", help="every common case, changed or not")
    p.add_argument("--json", action="store_true", help="the rows as JSON lines")
    args = p.parse_args(list(argv))
    try:
        cmp = compare_paths(args.old, args.new, everything=args.all)
    except (ValueError, OSError) as exc:
        print(f"amqp-conformance diff: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        for row in rows_as_dicts(cmp):
            print(json.dumps(row, ensure_ascii=False))
    else:
        for line in render(cmp):
            print(line)
    if args.fail_on_undocumented and cmp.undocumented:
        return EXIT_UNDOCUMENTED
    return 0
