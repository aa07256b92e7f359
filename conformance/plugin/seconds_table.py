"""Re-record the table of measured seconds the suite's order reads (``conformance/plugin/schedule.py``)
from one run's records, against the reference broker::

    python -m conformance.plugin.seconds_table reports/results/<run>.jsonl
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance.plugin.schedule import TABLE, table_from_records


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m conformance.plugin.seconds_table RESULTS.jsonl", file=sys.stderr)
        return 2
    records = [json.loads(line) for line in Path(argv[0]).read_text(encoding="utf-8").splitlines() if line]
    out = Path(__file__).resolve().parent.parent / "data" / TABLE
    out.write_text(json.dumps(table_from_records(records), indent=1) + "\n", encoding="utf-8")
    print(f"{out}: {len(records)} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
