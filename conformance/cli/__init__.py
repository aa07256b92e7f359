"""``amqp-conformance``: one table of commands, each a module of its own (imported on use).

``run`` (:mod:`conformance.cli.run`) is the main job; ``cases`` (:mod:`conformance.cli.cases`) lists
the catalogue; the other commands live with what they drive (the broker, the report, the gate,
mutate, fuzz, bench, faults). The docs pages made from the code: :mod:`conformance.cli.docpages`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance import __version__

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def _err(message: str) -> None:
    print(f"amqp-conformance: {message}", file=sys.stderr)


# -- dispatch --------------------------------------------------------------------------------
# One table of commands; a command with ``sub`` dispatches on its next word the same way
# (``bench broker|report|crash|flood``). Entry points are imported on use.


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    entry: str  # "module:function", the function takes the remaining argv and returns the exit code
    extra: str | None = None  # the pip extra it needs ("report": pyspark), checked before import
    sub: tuple[Command, ...] = ()
    checkout_only: bool = False  # lives in the source checkout's benchmarks/, not in the package


COMMANDS: tuple[Command, ...] = (
    Command("run", "run the suite (default: against the built-in reference broker) and build its report",
            "conformance.cli.run:run_main"),
    Command("cases", "list cases; --rules prints spec-rule coverage", "conformance.cli.cases:cases_main"),
    Command("broker", "run the reference broker", "conformance.broker.cli:main"),
    Command("report", "build the compliance report from results", "conformance.report.cli:report_main"),
    Command("ingest", "append results runs to a Parquet results store (--store DIR)",
            "conformance.report.store:ingest_main", extra="report"),
    Command("gate", "release gate: a candidate run against a baseline (no JVM)", "conformance.gate.cli:main"),
    Command("stability", "run the suite N times against one target; list every case whose verdict moved",
            "conformance.cli.stability:stability_main"),
    Command("diff", "upgrade report: what changed between runs of two versions of one broker (no JVM)",
            "conformance.cli.diff:main"),
    Command("mutate", "run the suite through injected broker faults (mutants)",
            "conformance.mutate.runner:main"),
    Command("bench", "benchmarks: broker (load generator), run (the main job's phases), report (pipeline "
            "at scale), crash (kill -9 soak), flood (memory watermark)", "", sub=(
                Command("broker", "measure brokers side by side (load generator)",
                        "conformance.bench.cli:broker_main"),
                Command("run", "time the main job's phases: suite, JVM start, report compute, writes",
                        "conformance.cli.bench_run:main"),
                # These three measure this project's own code: benchmarks/ of a source checkout.
                Command("report", "the report pipeline at scale on synthetic results",
                        "benchmarks.report:main", extra="report", checkout_only=True),
                Command("crash", "kill -9 soak of a broker with publisher confirms",
                        "benchmarks.crash:main", checkout_only=True),
                Command("flood", "the reference broker's memory watermark under a publisher flood",
                        "benchmarks.flood:main", checkout_only=True),
            )),
    Command("routing", "the routing oracle: generated bindings and messages compared with the routing model",
            "conformance.cli.routing:main"),
    Command("fuzz", "frame-aware fuzzing of a broker (or the reference core)", "conformance.fuzz.cli:main"),
    Command("faults", "Jepsen-style workload on a cluster: confirms and acks while a nemesis kills, "
            "pauses and partitions nodes", "conformance.faults.command:main"),
)


def _usage(table: Sequence[Command], prog: str) -> str:
    lines = [f"usage: {prog} COMMAND [options]   (version {__version__})", "", "commands:"]
    width = max(len(c.name) for c in table)
    lines += [f"  {c.name:<{max(8, width)}} {c.help}" for c in table]
    lines += ["", f"{prog} COMMAND --help for a command's options"]
    return "\n".join(lines)


def _call(command: Command, argv: list[str], prog: str) -> int:
    if command.extra is not None and "-h" not in argv and "--help" not in argv:
        from conformance.extras import missing_extra

        problem = missing_extra(command.extra, "this command")
        if problem is not None:
            _err(problem)
            return EXIT_BAD_INPUT
    module, _, func = command.entry.partition(":")
    if command.checkout_only:
        checkout = Path(__file__).resolve().parents[2]
        if not (checkout / "benchmarks" / "__init__.py").is_file():
            _err(f"{prog.removeprefix('amqp-conformance ')} measures this project's own code and runs from a "
                 "source checkout only (benchmarks/ is not installed with the package)")
            return EXIT_BAD_INPUT
        if str(checkout) not in sys.path:
            sys.path.insert(0, str(checkout))
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        _err(f"{prog} is not available: {exc}")
        return 1
    return int(getattr(mod, func)(argv) or 0)


def dispatch(table: Sequence[Command], argv: Sequence[str], prog: str = "amqp-conformance") -> int:
    """Run the command ``argv`` names in ``table`` (and, for a command with ``sub``, its subcommand)."""
    args = list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage(table, prog))
        return 0 if args else EXIT_BAD_INPUT
    by_name = {c.name: c for c in table}
    command = by_name.get(args[0])
    if command is None:
        label = " ".join([*prog.split()[1:], args[0]])
        _err(f"unknown command {label!r} (known: {', '.join(by_name)}; {prog} --help)")
        return EXIT_BAD_INPUT
    if command.sub:
        return dispatch(command.sub, args[1:], f"{prog} {command.name}")
    return _call(command, args[1:], f"{prog} {command.name}")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--version"]:
        print(__version__)
        return 0
    try:
        code = dispatch(COMMANDS, args)
        sys.stdout.flush()  # a closed stdout shows here, inside the handler, not at exit
        return code
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``cases | head``): stop quietly; point stdout at nothing so the
        # interpreter's own flush at exit does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
