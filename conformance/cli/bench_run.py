"""``amqp-conformance bench run``: the main job (``run``) with the time of each phase printed, so a
regression in one of them shows: the suite, the JVM's start (overlapping the suite; what of it the
suite did not hide), the report as a whole and its stages (parse, the wait for Spark, read,
tables, the Parquet writes, the page's collects, the HTML), and the whole command.

Takes every option of ``run`` and exits with its code. The phases go to stdout as one table, and
as one JSON object with ``--json``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    from conformance.cli.run import run_main

    args = list(argv)
    as_json = "--json" in args
    if as_json:
        args.remove("--json")
    if any(a in ("-h", "--help") for a in args):
        print("usage: amqp-conformance bench run [--json] [RUN OPTIONS]\n\n" + (__doc__ or "").strip())
        return 0
    phases: dict[str, float] = {}
    t0 = time.monotonic()
    code = run_main(args, phases=phases)
    phases["total"] = time.monotonic() - t0
    print(render(phases, as_json=as_json))
    sys.stdout.flush()
    return code


def render(phases: dict[str, float], *, as_json: bool = False) -> str:
    rounded = {name: round(secs, 2) for name, secs in phases.items()}
    if as_json:
        return json.dumps(rounded)
    width = max(len(n) for n in rounded)
    return "\n".join(["phase".ljust(width) + "  seconds"]
                     + [f"{name.ljust(width)}  {secs:7.2f}" for name, secs in rounded.items()])
