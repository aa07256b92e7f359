"""``python -m conformance.report report|ingest …`` (and ``spark-submit conformance/report/__main__.py
report …``): the pipeline's own two commands, without the rest of the command line (the report
sits below it)."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command == "report":
        from conformance.report.cli import report_main

        return report_main(rest)
    if command == "ingest":
        from conformance.report.store import ingest_main

        return ingest_main(rest)
    print("usage: python -m conformance.report report|ingest ARGS (every other command: amqp-conformance)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
