"""Target kinds are declared once (conformance.targets.kinds): a kind registered there is offered
and accepted by every command that takes ``--broker``, with no other edit."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.targets import Target, TargetError, spawn_private
from conformance.targets.kinds import TargetKind, register, spellings, unregister
from conformance.targets.spec import parse_url

DUMMY = "local:dummymq"


def _start(arg: str, *, workdir: Path | None = None, tls: bool = False, restricted: bool = True) -> Target:
    return Target(name=DUMMY, url=parse_url("amqp://guest:guest@127.0.0.1:1/"))


@pytest.fixture
def dummy_kind() -> Iterator[TargetKind]:
    kind = register(TargetKind(DUMMY, "a test broker", _start, restart=True))
    try:
        yield kind
    finally:
        unregister(DUMMY)


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from conformance.bench.cli import broker_parser
    from conformance.cli import run as cli
    from conformance.fuzz.cli import build_parser
    from conformance.mutate.runner import _parser as mutate_parser

    return {"run": cli._run_parser(), "mutate": mutate_parser(), "fuzz": build_parser(),
            "bench broker": broker_parser()}


def test_a_registered_kind_is_offered_and_accepted_everywhere(
    dummy_kind: TargetKind, capsys: pytest.CaptureFixture[str]
) -> None:
    from conformance import cli
    from conformance.bench.cli import _check
    from conformance.cli import run

    assert DUMMY in spellings()
    for name, parser in _parsers().items():
        assert DUMMY in parser.format_help(), name
        args = parser.parse_args(["--broker", DUMMY])
        if name == "bench broker":
            _check(args)  # its own validation after parsing
            assert [t.kind for t in args.targets] == [DUMMY]
        else:
            assert DUMMY in vars(args).values(), name
        if name == "run":
            assert run.bad_run_input(args) is None  # run's own checks after parsing
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--help"])
    assert exc.value.code == 0 and DUMMY in capsys.readouterr().out
    assert spawn_private(DUMMY).name == DUMMY  # the registry's start function is what runs


def test_an_unregistered_kind_is_refused_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    from conformance import cli
    from conformance.bench.cli import _check
    from conformance.plugin.commandline import target_of

    assert cli.main(["run", "--broker", DUMMY, "--no-report"]) == 2  # before anything starts
    assert DUMMY in capsys.readouterr().err
    for name, parser in _parsers().items():
        if name == "run":
            continue
        if name == "bench broker":
            with pytest.raises(ValueError, match=DUMMY):
                _check(parser.parse_args(["--broker", DUMMY]))
            continue
        # the option table's --broker: checked with the other target options, before anything starts
        with pytest.raises(ValueError, match=DUMMY):
            target_of(parser.parse_args(["--broker", DUMMY]))
    with pytest.raises(TargetError, match=f"unknown --broker '{DUMMY}'"):
        spawn_private(DUMMY)


def test_capabilities_gate_tls_and_prefix_arguments() -> None:
    with pytest.raises(TargetError, match="--tls is available for reference and local:rabbitmq"):
        spawn_private("local:garagemq", tls=True)
    with pytest.raises(TargetError, match="names no IMAGE"):
        spawn_private("container:")
