"""Optional parts of the install: ``pip install amqp-conformance`` gives the suite and the gate;
``[report]`` adds PySpark (the compliance report, ``bench report``), ``[containers]`` adds
testcontainers (``--broker container:IMAGE``). A command that needs a missing extra says so in
one line, naming the extra to install."""

from __future__ import annotations

import importlib.util

DISTRIBUTION = "amqp-conformance"
# extra -> the import that proves it is installed
EXTRAS: dict[str, str] = {"report": "pyspark", "containers": "testcontainers"}


def missing_extra(extra: str, what: str) -> str | None:
    """None when ``extra`` is installed, else one line: what needs it and the pip command."""
    module = EXTRAS[extra]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-removed install counts as missing
        found = False
    if found:
        return None
    return (
        f"{what} needs the [{extra}] extra ({module} is not installed): pip install '{DISTRIBUTION}[{extra}]'"
    )
