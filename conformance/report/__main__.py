"""``python -m conformance.report COMMAND …`` (and ``spark-submit conformance/report/__main__.py
report …``): an alias of ``amqp-conformance``, through the same dispatch."""

from __future__ import annotations

import sys

from conformance.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
