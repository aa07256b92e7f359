"""The one way a subcommand of ``amqp-conformance`` builds its argument parser."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn


def workers(text: str) -> str:
    """``-n``: a number of pytest-xdist workers or ``auto`` (kept as text: pytest reads it)."""
    if text.strip() != "auto" and not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"takes a number of workers or 'auto', not {text!r}")
    return text.strip()


class OneLineErrors(argparse.ArgumentParser):
    """A parser whose usage error is one line, ``<prog>: <message>`` on stderr, and exit 2 -- not
    argparse's usage block (the error contract of every command; ``--help`` shows the usage)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2)


def command_parser(
    command: str,
    description: str | None = None,
    *,
    cls: type[argparse.ArgumentParser] = OneLineErrors,
    **more: Any,
) -> argparse.ArgumentParser:
    """The parser of ``amqp-conformance <command>``: its program name in usage and errors, and no
    abbreviated options (``run --case`` once read as ``--case-timeout``: a prefix must be an error,
    never a silent match of a longer option), and a usage error in one line (:class:`OneLineErrors`,
    the default ``cls``); ``cls``: another parser class;
    ``more``: further ``ArgumentParser`` arguments (``epilog``, ``formatter_class``)."""
    return cls(prog=f"amqp-conformance {command}", description=description, allow_abbrev=False, **more)
