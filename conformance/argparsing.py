"""The one way a subcommand of ``amqp-conformance`` builds its argument parser."""

from __future__ import annotations

import argparse
from typing import Any


def command_parser(
    command: str,
    description: str | None = None,
    *,
    cls: type[argparse.ArgumentParser] = argparse.ArgumentParser,
    **more: Any,
) -> argparse.ArgumentParser:
    """The parser of ``amqp-conformance <command>``: its program name in usage and errors, and no
    abbreviated options (``run --case`` once read as ``--case-timeout``: a prefix must be an error,
    never a silent match of a longer option). ``cls``: a parser subclass (one-line errors);
    ``more``: further ``ArgumentParser`` arguments (``epilog``, ``formatter_class``)."""
    return cls(prog=f"amqp-conformance {command}", description=description, allow_abbrev=False, **more)
