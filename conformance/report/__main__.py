"""``python -m conformance.report {report,gate,bench} …`` — the same commands as ``amqp-conformance``."""

from __future__ import annotations

import sys

from conformance.report.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
