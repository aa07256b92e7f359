"""The plugin's command-line options (each with an environment twin) and their validation."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.profiles import DEFAULT_PROFILE, PROFILE_DESCRIPTIONS
from conformance.triage import Triage, TriageProblem, load_triage
from conformance.verdicts import Verdict, parse_fail_on


@dataclass(frozen=True)
class Option:
    """One setting: ``--amqp-NAME`` on the command line (and ``--NAME`` where that cannot clash with
    another plugin), an environment twin and an ini key ``amqp_NAME``; the command line wins, then
    the environment, then the ini file, then the default."""

    name: str
    env: str
    default: str | None
    help: str
    alias: bool = True  # also accept the short, unprefixed ``--NAME`` (today's spelling)
    switch: bool = False  # a flag without a value (its env twin and ini key take 1/0, true/false, yes/no)

    @property
    def flag(self) -> str:
        return f"--amqp-{self.name}"

    @property
    def dest(self) -> str:
        return "amqp_" + self.name.replace("-", "_")


OPTIONS: tuple[Option, ...] = (
    Option(
        "broker-url",
        "AMQP_CONFORMANCE_BROKER_URL",
        None,
        "run against the broker at this URL (amqp://user:pass@host:port/vhost)",
    ),
    Option(
        "broker",
        "AMQP_CONFORMANCE_BROKER",
        None,
        "target: reference (default) | url | local:rabbitmq | local:garagemq | container:IMAGE",
    ),
    # No unprefixed alias: pytest-profiling (and many conftests) define --profile.
    Option(
        "profile",
        "AMQP_CONFORMANCE_PROFILE",
        DEFAULT_PROFILE,
        f"expectation profile: {' | '.join(PROFILE_DESCRIPTIONS)} (default {DEFAULT_PROFILE})",
        alias=False,
    ),
    Option(
        "case-timeout",
        "AMQP_CONFORMANCE_CASE_TIMEOUT",
        "10",
        "seconds any single wait of a case may take before TIMEOUT (default 10)",
    ),
    Option(
        "case-ceiling",
        "AMQP_CONFORMANCE_CASE_CEILING",
        "6",
        "hard ceiling of one case (setup and body; teardown its own) as a multiple of --case-timeout: "
        "a case still running then is interrupted and recorded TIMEOUT with where it was stuck "
        "(default 6; 0 disables)",
    ),
    Option(
        "results",
        "AMQP_CONFORMANCE_RESULTS",
        "reports/results",
        "folder for the results JSONL (default reports/results)",
    ),
    Option(
        "fail-on",
        "AMQP_CONFORMANCE_FAIL_ON",
        "FAIL,TIMEOUT,ERROR",
        "verdicts that make the exit code non-zero (default FAIL,TIMEOUT,ERROR; 'none' for none)",
    ),
    Option(
        "restricted-url",
        "AMQP_CONFORMANCE_RESTRICTED_URL",
        None,
        "URL of a second user with restricted permissions, for the access cases (the spawned targets "
        "make one; see the scenarios README for the permissions it must have)",
    ),
    Option(
        "restart-cmd",
        "AMQP_CONFORMANCE_RESTART_CMD",
        None,
        "shell command that restarts the --broker-url broker (enables restart cases for url targets)",
    ),
    Option(
        "max-message-size",
        "AMQP_CONFORMANCE_MAX_MESSAGE_SIZE",
        None,
        "the --broker-url broker's max message size in octets (RabbitMQ: max_message_size); the "
        "limits.max-message-size-* cases are UNSUPPORTED on a url target without it",
        alias=False,
    ),
    Option(
        "alarm-cmd",
        "AMQP_CONFORMANCE_ALARM_CMD",
        None,
        "shell command that raises ({state} = on) or clears ({state} = off) the --broker-url broker's "
        'memory alarm, e.g. "rabbitmqctl set_vm_memory_high_watermark ..." (enables the connection.blocked '
        "cases for url targets; do not combine with -n)",
        alias=False,
    ),
    Option(
        "case",
        "AMQP_CONFORMANCE_CASE",
        None,
        "only the cases whose id matches one of these comma separated globs (e.g. 'confirms.*,tx.publish.*')",
    ),
    Option(
        "rule",
        "AMQP_CONFORMANCE_RULE",
        None,
        "only the cases that check a spec rule matching one of these comma separated globs "
        "(e.g. 'basic.ack/*,tx.*')",
    ),
    Option(
        "expected-failures",
        "AMQP_CONFORMANCE_EXPECTED_FAILURES",
        None,
        "triage TOML (the gate's format): a verdict it explains is reported as known and does not "
        "count for --fail-on; a listed case that now passes is reported as fixed",
    ),
    Option(
        "queue-type",
        "AMQP_CONFORMANCE_QUEUE_TYPE",
        "classic",
        "queue type(s) the queue-declaring cases declare: classic (default) | quorum, or several comma "
        "separated (classic,quorum): each case then runs once per type, ids of other types than classic "
        "suffixed [type]",
    ),
    # TLS: no unprefixed aliases (--tls-* names are common enough to clash with other plugins).
    Option(
        "tls",
        "AMQP_CONFORMANCE_TLS",
        None,
        "spawned targets (reference, local:rabbitmq) listen with TLS and the suite connects over amqps "
        "(certificates made in the target's folder)",
        alias=False,
        switch=True,
    ),
    Option(
        "tls-ca",
        "AMQP_CONFORMANCE_TLS_CA",
        None,
        "PEM CA bundle that verifies the broker's certificate (the URL's cacertfile=)",
        alias=False,
    ),
    Option(
        "tls-cert",
        "AMQP_CONFORMANCE_TLS_CERT",
        None,
        "PEM client certificate sent to the broker (the URL's certfile=)",
        alias=False,
    ),
    Option(
        "tls-key",
        "AMQP_CONFORMANCE_TLS_KEY",
        None,
        "PEM private key of --amqp-tls-cert (the URL's keyfile=)",
        alias=False,
    ),
    Option(
        "tls-insecure",
        "AMQP_CONFORMANCE_TLS_INSECURE",
        None,
        "do not verify the broker's certificate (the URL's verify=verify_none)",
        alias=False,
        switch=True,
    ),
)
BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("amqp-conformance", "AMQP 0-9-1 conformance suite")
    for opt in OPTIONS:
        names = [opt.flag, f"--{opt.name}"] if opt.alias else [opt.flag]
        # default None: "not given here" must be told apart from a value (env, ini, default).
        kwargs: dict[str, Any] = (
            {"action": "store_const", "const": "1"} if opt.switch else {"action": "store"}
        )
        group.addoption(
            *names, dest=opt.dest, default=None, help=f"{opt.help} [env {opt.env}; ini {opt.dest}]", **kwargs
        )
        parser.addini(opt.dest, f"{opt.help} (as --amqp-{opt.name})", default=None)


def option(config: pytest.Config, name: str) -> str | None:
    """The value of one setting: command line, else environment, else ini, else default."""
    opt = BY_NAME[name]
    given = config.getoption(opt.dest, None)
    if given is not None:
        return str(given)
    if os.environ.get(opt.env):
        return os.environ[opt.env]
    ini = config.getini(opt.dest)
    if ini:
        return str(ini)
    return opt.default


def asked(config: pytest.Config) -> bool:
    """Was the suite asked for in this session (an option on the command line or an ini key)?

    An exported ``AMQP_CONFORMANCE_*`` variable alone does not count: it must not make an
    unrelated pytest session in the same environment start or probe a broker.
    """
    return any(config.getoption(o.dest, None) is not None or config.getini(o.dest) for o in OPTIONS)


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
    rule_globs: tuple[str, ...]
    asked: bool  # an option or ini key named the suite (not only the environment)
    tls: bool = False  # spawned targets listen with TLS; the suite connects over amqps
    tls_ca: str | None = None  # absolute paths, folded into the target's URL (uri.with_tls_options)
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_insecure: bool = False
    expected_failures: Triage | None = None  # the triage file behind --amqp-expected-failures
    restricted_url: str | None = None  # --amqp-restricted-url: the access cases' restricted user
    max_message_size: int | None = None  # --amqp-max-message-size (url targets)
    alarm_cmd: str | None = None  # --amqp-alarm-cmd (url targets)
    queue_types: tuple[str, ...] = ("classic",)  # --amqp-queue-type, in the order given


def _globs(text: str | None) -> tuple[str, ...]:
    return tuple(g.strip() for g in (text or "").split(",") if g.strip())


SWITCH_VALUES = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False,
                 "off": False}


def _switch(config: pytest.Config, name: str) -> bool:
    text = (option(config, name) or "0").strip().lower()
    if text not in SWITCH_VALUES:
        raise pytest.UsageError(
            f"--amqp-{name} ({BY_NAME[name].env}) takes 1/0, true/false, yes/no or on/off, not {text!r}"
        )
    return SWITCH_VALUES[text]


def _triage(config: pytest.Config) -> Triage | None:
    """The expected-failures file, read once (a missing or malformed file is one usage line)."""
    path = _path(config, "expected-failures")
    if path is None:
        return None
    try:
        return load_triage(Path(path))
    except TriageProblem as exc:
        raise pytest.UsageError(f"--amqp-expected-failures: {exc}") from exc


def _path(config: pytest.Config, name: str) -> str | None:
    """A file option as an absolute path (xdist workers and targets may run elsewhere)."""
    text = option(config, name)
    if not text:
        return None
    path = Path(text).expanduser()
    return str(path if path.is_absolute() else Path(config.invocation_params.dir) / path)


def _restricted_url(config: pytest.Config) -> str | None:
    text = option(config, "restricted-url")
    if not text:
        return None
    from conformance.protocol.wire import URL

    try:
        URL.parse(text)
    except ValueError as exc:
        raise pytest.UsageError(f"--amqp-restricted-url: {exc}") from exc
    return text


def _queue_types(text: str | None) -> tuple[str, ...]:
    from conformance.queue_types import QUEUE_TYPES

    names = _globs((text or "classic").lower())
    unknown = [n for n in names if n not in QUEUE_TYPES]
    if unknown or not names:
        raise pytest.UsageError(f"unknown --amqp-queue-type {', '.join(unknown) or repr(text)} "
                                f"(known: {', '.join(QUEUE_TYPES)})")
    return tuple(dict.fromkeys(names))


def read_settings(config: pytest.Config) -> Settings:
    """Validate the options; bad input is a ``UsageError`` (one line, exit 4, before any case)."""
    try:
        fail_on = parse_fail_on(option(config, "fail-on") or "")
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc
    try:
        case_timeout = float(option(config, "case-timeout") or "")
    except ValueError as exc:
        raise pytest.UsageError("--case-timeout takes a number of seconds") from exc
    if case_timeout <= 0:
        raise pytest.UsageError("--case-timeout must be positive")
    try:
        factor = float(option(config, "case-ceiling") or "")
    except ValueError as exc:
        raise pytest.UsageError("--case-ceiling takes a multiple of --case-timeout (a number)") from exc
    if factor != 0 and factor < 1:
        raise pytest.UsageError("--case-ceiling must be at least 1 (× --case-timeout), or 0 to disable it")
    profile = option(config, "profile") or DEFAULT_PROFILE
    if profile not in PROFILE_DESCRIPTIONS:
        raise pytest.UsageError(
            f"unknown --amqp-profile {profile!r} (known: {', '.join(PROFILE_DESCRIPTIONS)})"
        )
    max_size_text = option(config, "max-message-size")
    try:
        max_message_size = int(max_size_text) if max_size_text else None
    except ValueError as exc:
        raise pytest.UsageError("--amqp-max-message-size takes a number of octets") from exc
    if max_message_size is not None and max_message_size <= 0:
        raise pytest.UsageError("--amqp-max-message-size must be positive")
    alarm_cmd = option(config, "alarm-cmd") or None
    if alarm_cmd is not None and "{state}" not in alarm_cmd:
        raise pytest.UsageError("--amqp-alarm-cmd must contain {state} (replaced by on or off)")
    results = Path(option(config, "results") or "reports/results")
    if not results.is_absolute():
        results = Path(config.invocation_params.dir) / results
    return Settings(
        profile=profile,
        case_timeout=case_timeout,
        case_ceiling=factor * case_timeout,
        fail_on=fail_on,
        results_dir=results,
        broker_kind=option(config, "broker") or "",
        broker_url=option(config, "broker-url"),
        restart_cmd=option(config, "restart-cmd"),
        case_globs=_globs(option(config, "case")),
        rule_globs=_globs(option(config, "rule")),
        asked=asked(config),
        tls=_switch(config, "tls"),
        tls_ca=_path(config, "tls-ca"),
        tls_cert=_path(config, "tls-cert"),
        tls_key=_path(config, "tls-key"),
        tls_insecure=_switch(config, "tls-insecure"),
        expected_failures=_triage(config),
        restricted_url=_restricted_url(config),
        max_message_size=max_message_size,
        alarm_cmd=alarm_cmd,
        queue_types=_queue_types(option(config, "queue-type")),
    )
