"""``amqp-conformance fuzz``: frame-aware mutational fuzzing of an AMQP 0-9-1 broker.

    amqp-conformance fuzz                          # the built-in broker, on a free port
    amqp-conformance fuzz --broker-url amqp://guest:guest@127.0.0.1:5672/ --inputs 5000
    amqp-conformance fuzz --broker local:rabbitmq --inputs 3000 --seed 7
    amqp-conformance fuzz --in-process --inputs 1000000   # the reference core, no sockets
    amqp-conformance fuzz --replay reports/fuzz/reproducers-1.jsonl

Inputs are reproducible from ``--seed``; every input that killed or hung the broker (or,
in process, made the core raise, stick, leak or write a malformed frame) is written to a
reproducer file that ``--replay`` sends again.  Exit 0: no finding; 1: findings; 2: bad
input.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.argparsing import command_parser
from conformance.plugin.commandline import add_command_options, target_of
from conformance.protocol.wire import URL
from conformance.targets.spec import TargetSpec

from .mutate import chunks, mutate
from .sessions import corpus

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2
CORPUS_SIZE = 64


@dataclass(frozen=True)
class Reproducer:
    """One input that broke a broker, as written to (and read back from) the JSONL file."""

    kind: str  # wire: dead | hang; in-process: exception | stuck | malformed | leak
    mode: str  # wire | in-process
    seed: int
    index: int
    ops: tuple[str, ...]
    pieces: tuple[str, ...]  # base64 of each piece, sent in order
    detail: str

    def raw_pieces(self) -> list[bytes]:
        return [base64.b64decode(p) for p in self.pieces]

    @classmethod
    def from_json(cls, line: str) -> Reproducer:
        data = json.loads(line)
        return cls(
            kind=str(data["kind"]),
            mode=str(data["mode"]),
            seed=int(data["seed"]),
            index=int(data["index"]),
            ops=tuple(data.get("ops", ())),
            pieces=tuple(data["pieces"]),
            detail=str(data.get("detail", "")),
        )


@dataclass(frozen=True)
class Input:
    index: int
    ops: tuple[str, ...]
    pieces: list[bytes]


def inputs(
    seed: int, count: int, *, user: str = "guest", password: str = "guest", vhost: str = "/"
) -> Iterator[Input]:
    """The same ``count`` inputs for the same seed and login, whatever the target."""
    pool = corpus(seed, CORPUS_SIZE, user=user, password=password, vhost=vhost)
    rng = random.Random(seed)
    for index in range(count):
        mutant, ops = mutate(rng, rng.choice(pool), pool)
        yield Input(index, tuple(ops), chunks(rng, mutant.encode()))


@dataclass
class Tally:
    """Running counts of one fuzz run (mutable: it is the progress state)."""

    mode: str
    tried: int = 0
    findings: Counter[str] = field(default_factory=Counter)
    codes: Counter[int] = field(default_factory=Counter)
    ended: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)

    def rate(self) -> float:
        return self.tried / max(1e-9, time.monotonic() - self.started)

    def codes_text(self) -> str:
        return " ".join(f"{c}×{n}" for c, n in sorted(self.codes.items())) or "none"


class ReproducerFile:
    """Opened on the first finding only, so a clean run leaves no file behind."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self._fh: TextIO | None = None

    def write(self, rec: Reproducer) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(json.dumps(asdict(rec)) + "\n")
        self._fh.flush()
        self.count += 1

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def _encode(pieces: list[bytes]) -> tuple[str, ...]:
    return tuple(base64.b64encode(p).decode("ascii") for p in pieces)


class Progress:
    def __init__(self, total: int, every: float, out: TextIO) -> None:
        self.total = total
        self.every = every
        self.out = out
        self.next_at = time.monotonic() + every

    def maybe(self, t: Tally, extra: str) -> None:
        now = time.monotonic()
        if now < self.next_at and t.tried != self.total:
            return
        self.next_at = now + self.every
        print(
            f"[fuzz] {t.tried}/{self.total} inputs, {t.rate():.0f}/s, {extra}, reply codes {t.codes_text()}",
            file=self.out,
            flush=True,
        )


# -- in process ----------------------------------------------------------------------------------


def run_in_process(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .inproc import CoreHarness

    harness = CoreHarness()
    tally = Tally("in-process")
    repro = ReproducerFile(Path(args.reproducers or f"reports/fuzz/reproducers-inproc-{args.seed}.jsonl"))
    progress = Progress(args.inputs, args.progress, err)
    stopped = ""
    try:
        for item in inputs(args.seed, args.inputs):
            outcome = harness.run(item.pieces)
            tally.tried += 1
            tally.codes.update(outcome.codes)
            if outcome.finding is not None:
                tally.findings[outcome.kind] += 1
                repro.write(
                    Reproducer(
                        outcome.kind,
                        "in-process",
                        args.seed,
                        item.index,
                        item.ops,
                        _encode(item.pieces),
                        outcome.finding,
                    )
                )
            progress.maybe(tally, _inproc_counts(tally))
    except KeyboardInterrupt:
        stopped = "interrupted"  # a long run still reports what it measured
    finally:
        repro.close()
    elapsed = time.monotonic() - tally.started
    lines = [
        ("target", "reference broker core, in process (no sockets)"),
        ("seed", str(args.seed)),
        ("inputs", f"{tally.tried} in {elapsed:.1f} s ({tally.rate():.0f}/s)"),
        ("unhandled exceptions", str(tally.findings["exception"])),
        ("stuck states", str(tally.findings["stuck"])),
        ("malformed output", str(tally.findings["malformed"])),
        ("leaks", str(tally.findings["leak"])),
        ("reply codes", tally.codes_text()),
        ("reproducers", f"{repro.path} ({repro.count})" if repro.count else "none"),
    ]
    if stopped:
        lines.append(("stopped", stopped))
    _print_table(lines, out)
    return EXIT_FINDINGS if repro.count else EXIT_OK


def _inproc_counts(t: Tally) -> str:
    return ", ".join(f"{k} {t.findings[k]}" for k in ("exception", "stuck", "malformed", "leak"))


# -- over the wire ---------------------------------------------------------------------------------


@dataclass
class WireTarget:
    url: URL
    label: str
    restart: Callable[[], None] | None
    close: Callable[[], None]


def open_wire_target(args: argparse.Namespace) -> WireTarget:
    from conformance.targets import open_target
    from conformance.targets.base import TargetError

    spec = _target(args)
    if spec.url is not None:
        return WireTarget(spec.url, "url", None, lambda: None)
    kind = spec.kind
    try:
        target = open_target(spec)
    except TargetError as exc:
        raise SystemExit(_bad(f"cannot start --broker {kind}: {exc}")) from exc
    ctl = target.controller
    restart = (lambda: ctl.restart(kill=True)) if ctl is not None else None
    label = "built-in reference broker" if kind == "reference" else kind
    return WireTarget(target.url, label, restart, target.close)


def run_wire(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .wire import Endpoint, WireError, alive, send_input

    try:
        spec = _target(args)
        if spec.url is not None:
            Endpoint.from_url(spec.url)
    except (WireError, ValueError) as exc:
        return _bad(str(exc).splitlines()[0])
    target = open_wire_target(args)
    try:
        ep = Endpoint.from_url(target.url)
        down = alive(ep, args.bound)
        if down is not None:
            return _bad(f"{ep.display} does not serve a connection before fuzzing: {down}")
        tally = Tally("wire")
        repro = ReproducerFile(Path(args.reproducers or f"reports/fuzz/reproducers-{args.seed}.jsonl"))
        progress = Progress(args.inputs, args.progress, err)
        stopped = ""
        try:
            for item in inputs(args.seed, args.inputs, user=ep.user, password=ep.password, vhost=ep.vhost):
                outcome = send_input(ep, item.pieces, bound=args.bound)
                tally.tried += 1
                tally.codes.update(outcome.codes)
                tally.ended[outcome.ended] += 1
                kind, detail = "", ""
                if outcome.hang:
                    kind, detail = "hang", f"no reply and no close within {args.bound} s"
                dead = alive(ep, args.bound)
                if dead is not None:
                    kind, detail = "dead", f"health check failed after the input: {dead}"
                if kind:
                    tally.findings[kind] += 1
                    repro.write(
                        Reproducer(
                            kind, "wire", args.seed, item.index, item.ops, _encode(item.pieces), detail
                        )
                    )
                    print(f"[fuzz] input {item.index}: {kind}: {detail}", file=err, flush=True)
                if dead is not None:
                    if target.restart is None:
                        stopped = "the broker is dead and cannot be restarted: stopped"
                        break
                    target.restart()
                progress.maybe(tally, f"dead {tally.findings['dead']}, hangs {tally.findings['hang']}")
        except KeyboardInterrupt:
            stopped = "interrupted"
        finally:
            repro.close()
        elapsed = time.monotonic() - tally.started
        lines = [
            ("target", f"{ep.display} ({target.label})"),
            ("seed", str(args.seed)),
            ("inputs", f"{tally.tried} in {elapsed:.1f} s ({tally.rate():.1f}/s)"),
            ("broker-dead", str(tally.findings["dead"])),
            ("hangs", str(tally.findings["hang"])),
            ("reply codes", tally.codes_text()),
            ("connections ended", " ".join(f"{k}×{v}" for k, v in sorted(tally.ended.items()))),
            ("reproducers", f"{repro.path} ({repro.count})" if repro.count else "none"),
        ]
        if stopped:
            lines.append(("stopped", stopped))
        _print_table(lines, out)
        return EXIT_FINDINGS if repro.count else EXIT_OK
    finally:
        target.close()


# -- replay ------------------------------------------------------------------------------------------


def run_replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path = Path(args.replay)
    try:
        records = [
            Reproducer.from_json(line)
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
    except OSError as exc:
        return _bad(f"cannot read {path}: {exc.strerror or exc}")
    except (ValueError, KeyError, TypeError) as exc:
        return _bad(f"{path} is not a reproducer file ({type(exc).__name__}: {exc})")
    if not records:
        return _bad(f"{path} holds no reproducer")
    still = 0
    wire = [r for r in records if r.mode == "wire"]
    target = open_wire_target(args) if wire else None
    try:
        for n, rec in enumerate(records, 1):
            verdict = _replay_one(rec, target, args.bound)
            still += verdict is not None
            label = f"#{n} {rec.kind} (seed {rec.seed}, input {rec.index}, {'+'.join(rec.ops)})"
            print(f"{label}: {'REPRODUCED: ' + verdict if verdict else 'no longer reproduces'}", file=out)
    finally:
        if target is not None:
            target.close()
    print(f"{still} of {len(records)} reproduce", file=out)
    return EXIT_FINDINGS if still else EXIT_OK


def _replay_one(rec: Reproducer, target: WireTarget | None, bound: float) -> str | None:
    if rec.mode == "in-process":
        from .inproc import CoreHarness

        core = CoreHarness().run(rec.raw_pieces())
        return None if core.finding is None else f"{core.kind}: {core.finding}"
    from .wire import Endpoint, alive, send_input

    assert target is not None
    ep = Endpoint.from_url(target.url)
    wire = send_input(ep, rec.raw_pieces(), bound=bound)
    dead = alive(ep, bound)
    if dead is not None:
        if target.restart is not None:
            target.restart()
        return f"dead: {dead}"
    return f"hang: no reply and no close within {bound} s" if wire.hang else None


# -- entry point -------------------------------------------------------------------------------------


#: the option table's target options fuzz takes (one broker, plain amqp://)
TARGET = ("broker-url", "broker")


def _target(args: argparse.Namespace) -> TargetSpec:
    """The broker the options name (ValueError, one line); fuzzing needs a single broker."""
    spec = target_of(args)
    if spec.is_cluster:
        raise ValueError(f"--broker {spec.kind}: fuzz drives one broker")
    return spec


def build_parser() -> argparse.ArgumentParser:
    p = command_parser("fuzz", "Frame-aware mutational fuzzing of an AMQP 0-9-1 broker.")
    add_command_options(p, TARGET)  # the target, named as `run` names one
    p.add_argument(
        "--in-process", action="store_true", help="feed the reference broker's sans-IO core directly "
        "(no --broker, no --broker-url)"
    )
    p.add_argument("--inputs", type=int, default=1000, help="how many inputs (default 1000)")
    p.add_argument("--seed", type=int, default=1, help="inputs are reproducible from the seed (default 1)")
    p.add_argument(
        "--bound", type=float, default=5.0, help="seconds a broker has to answer or close (default 5)"
    )
    p.add_argument(
        "--reproducers", default=None, help="reproducer file (default reports/fuzz/reproducers-SEED.jsonl)"
    )
    p.add_argument(
        "--replay", default=None, metavar="FILE", help="send the inputs of a reproducer file again"
    )
    p.add_argument("--progress", type=float, default=10.0, help="seconds between progress lines (default 10)")
    return p


def _bad(message: str) -> int:
    print(f"amqp-conformance fuzz: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _print_table(lines: list[tuple[str, str]], out: TextIO) -> None:
    width = max(len(k) for k, _v in lines)
    for k, v in lines:
        print(f"{k:<{width}}  {v}", file=out)
    out.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.inputs < 0:
        return _bad("--inputs must be 0 or more")
    if args.bound <= 0 or args.progress <= 0:
        return _bad("--bound and --progress must be positive")
    try:
        if args.replay:
            return run_replay(args, sys.stdout, sys.stderr)
        if args.in_process:
            if args.amqp_broker or args.amqp_broker_url:
                return _bad("--in-process feeds the reference core directly: no --broker or --broker-url")
            return run_in_process(args, sys.stdout, sys.stderr)
        return run_wire(args, sys.stdout, sys.stderr)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("amqp-conformance fuzz: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
