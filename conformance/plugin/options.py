"""The plugin's command-line options (each with an environment twin) and their validation."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance.profiles import DEFAULT_PROFILE, PROFILE_DESCRIPTIONS
from conformance.verdicts import Verdict, parse_fail_on


@dataclass(frozen=True)
class Option:
    name: str
    env: str
    default: str | None
    help: str


OPTIONS: tuple[Option, ...] = (
    Option("--broker-url", "AMQP_CONFORMANCE_BROKER_URL", None,
           "run against the broker at this URL (amqp://user:pass@host:port/vhost)"),
    Option("--broker", "AMQP_CONFORMANCE_BROKER", None,
           "target: reference (default) | url | local:rabbitmq | local:garagemq | container:IMAGE"),
    Option("--profile", "AMQP_CONFORMANCE_PROFILE", DEFAULT_PROFILE,
           f"expectation profile: {' | '.join(PROFILE_DESCRIPTIONS)} (default {DEFAULT_PROFILE})"),
    Option("--case-timeout", "AMQP_CONFORMANCE_CASE_TIMEOUT", "10",
           "seconds any single wait of a case may take before TIMEOUT (default 10)"),
    Option("--case-ceiling", "AMQP_CONFORMANCE_CASE_CEILING", "6",
           "hard ceiling of one case (setup, body, and teardown each) as a multiple of --case-timeout: "
           "a case still running then is interrupted and recorded TIMEOUT with where it was stuck "
           "(default 6; 0 disables)"),
    Option("--results", "AMQP_CONFORMANCE_RESULTS", "reports/results",
           "folder for the results JSONL (default reports/results)"),
    Option("--fail-on", "AMQP_CONFORMANCE_FAIL_ON", "FAIL,TIMEOUT,ERROR",
           "verdicts that fail the run (default FAIL,TIMEOUT,ERROR; 'none' for none)"),
    Option("--restart-cmd", "AMQP_CONFORMANCE_RESTART_CMD", None,
           "shell command that restarts the --broker-url broker (enables restart cases for url targets)"),
    Option("--case", "AMQP_CONFORMANCE_CASE", None,
           "only the cases whose id matches one of these comma separated globs (e.g. 'confirms.*,tx.publish.*')"),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("amqp-conformance", "AMQP 0-9-1 conformance suite")
    for opt in OPTIONS:
        group.addoption(opt.name, action="store", default=os.environ.get(opt.env, opt.default),
                        help=f"{opt.help} [env {opt.env}]")


@dataclass(frozen=True)
class Settings:
    """The validated options of one pytest session."""

    profile: str
    case_timeout: float
    case_ceiling: float  # seconds; 0 when disabled
    fail_on: frozenset[Verdict]
    results_dir: Path
    broker_kind: str
    broker_url: str | None
    restart_cmd: str | None
    case_globs: tuple[str, ...]


def read_settings(config: pytest.Config) -> Settings:
    """Validate the options; bad input is a ``UsageError`` (one line, exit 4, before any case)."""
    try:
        fail_on = parse_fail_on(config.getoption("--fail-on") or "")
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc
    try:
        case_timeout = float(config.getoption("--case-timeout"))
    except ValueError as exc:
        raise pytest.UsageError("--case-timeout takes a number of seconds") from exc
    if case_timeout <= 0:
        raise pytest.UsageError("--case-timeout must be positive")
    try:
        factor = float(config.getoption("--case-ceiling"))
    except ValueError as exc:
        raise pytest.UsageError("--case-ceiling takes a multiple of --case-timeout (a number)") from exc
    if factor != 0 and factor < 1:
        raise pytest.UsageError("--case-ceiling must be at least 1 (× --case-timeout), or 0 to disable it")
    profile = config.getoption("--profile")
    if profile not in PROFILE_DESCRIPTIONS:
        raise pytest.UsageError(f"unknown --profile {profile!r} (known: {', '.join(PROFILE_DESCRIPTIONS)})")
    results = Path(config.getoption("--results"))
    if not results.is_absolute():
        results = Path(config.invocation_params.dir) / results
    globs = tuple(g.strip() for g in (config.getoption("--case") or "").split(",") if g.strip())
    return Settings(
        profile=profile, case_timeout=case_timeout, case_ceiling=factor * case_timeout, fail_on=fail_on, results_dir=results,
        broker_kind=config.getoption("--broker") or "", broker_url=config.getoption("--broker-url"),
        restart_cmd=config.getoption("--restart-cmd"), case_globs=globs,
    )
