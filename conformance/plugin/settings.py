"""The option table inside pytest: the plugin's ``--amqp-NAME`` options (:func:`add_options`), a
value by precedence (command line, environment, ini, default: :func:`option`), and one session's
validated :class:`Settings` (:func:`read_settings`)."""


from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.gate.triage import Triage
from conformance.model.verdicts import Verdict
from conformance.plugin.options import BY_NAME, OPTIONS, SWITCH_VALUES, globs
from conformance.profiles import DEFAULT_PROFILE
from conformance.protocol.wire import URL
from conformance.targets.spec import CLUSTER_ACTIONS, TargetSpec, target_spec


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("amqp-conformance", "AMQP 0-9-1 conformance suite")
    for opt in OPTIONS:
        names = [opt.flag, f"--{opt.name}"] if opt.alias else [opt.flag]
        # default None: "not given here" must be told apart from a value (env, ini, default).
        kwargs: dict[str, Any] = (
            {"action": "store_const", "const": "1"} if opt.switch
            else {"action": "append"} if opt.repeat else {"action": "store"}
        )
        group.addoption(
            *names, dest=opt.dest, default=None, help=f"{opt.text} [env {opt.env}; ini {opt.dest}]", **kwargs
        )
        parser.addini(opt.dest, f"{opt.text} (as --amqp-{opt.name})", default=None)


def option(config: pytest.Config, name: str) -> str | None:
    """The value of one setting: command line, else environment, else ini, else default."""
    opt = BY_NAME[name]
    given = config.getoption(opt.dest, None)
    if isinstance(given, list):
        return ",".join(given)  # a repeated option (``repeat``): its values as one comma list
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
    target: TargetSpec  # --broker / --broker-url / TLS / cluster options, parsed and checked once
    case_globs: tuple[str, ...]
    rule_globs: tuple[str, ...]
    asked: bool  # an option or ini key named the suite (not only the environment)
    tls_ca: str | None = None  # absolute paths, folded into the target's URL (targets.spec)
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_insecure: bool = False
    expected_failures: Triage | None = None  # the triage file behind --amqp-expected-failures
    restricted_url: URL | None = None  # --amqp-restricted-url: the access cases' restricted user
    max_message_size: int | None = None  # --amqp-max-message-size (url targets)
    consumer_timeout: int | None = None  # --amqp-consumer-timeout (url targets), ms
    alarm_cmd: str | None = None  # --amqp-alarm-cmd (url targets)
    queue_types: tuple[str, ...] = ("classic",)  # --amqp-queue-type, in the order given
    release: str | None = None  # the RabbitMQ release --profile rabbitmq@RELEASE names

    @property
    def restart_cmd(self) -> str | None:
        return self.target.restart_cmd




def _switch(config: pytest.Config, name: str) -> bool:
    text = (option(config, name) or "0").strip().lower()
    if text not in SWITCH_VALUES:
        raise pytest.UsageError(
            f"--amqp-{name} ({BY_NAME[name].env}) takes 1/0, true/false, yes/no or on/off, not {text!r}"
        )
    return SWITCH_VALUES[text]


def _checked(config: pytest.Config, name: str) -> Any:
    """The option's value through its declared check (None when unset); bad → one usage line."""
    opt = BY_NAME[name]
    text = option(config, name)
    if text is None or (text == "" and opt.default is None):
        return None
    try:
        return opt.check(text)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def _path(config: pytest.Config, name: str) -> str | None:
    """A file option as an absolute path (xdist workers and targets may run elsewhere)."""
    text = option(config, name)
    if not text:
        return None
    path = Path(text).expanduser()
    return str(path if path.is_absolute() else Path(config.invocation_params.dir) / path)


def _checked_path(config: pytest.Config, name: str) -> Any:
    path = _path(config, name)
    if path is None:
        return None
    try:
        return BY_NAME[name].check(path)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def read_settings(config: pytest.Config) -> Settings:
    """Validate the options with the checks the table declares; bad input is a ``UsageError`` (one
    line, before any case)."""
    fail_on = _checked(config, "fail-on")
    case_timeout = _checked(config, "case-timeout")
    factor = _checked(config, "case-ceiling")
    profile, _, named_release = (_checked(config, "profile") or DEFAULT_PROFILE).partition("@")
    results = Path(option(config, "results") or "reports/results")
    if not results.is_absolute():
        results = Path(config.invocation_params.dir) / results
    return Settings(
        profile=profile,
        release=named_release or None,
        case_timeout=case_timeout,
        case_ceiling=factor * case_timeout,
        fail_on=fail_on if fail_on is not None else frozenset(),
        results_dir=results,
        target=_target(config),
        case_globs=globs(option(config, "case")),
        rule_globs=globs(option(config, "rule")),
        asked=asked(config),
        tls_ca=_checked_path(config, "tls-ca"),
        tls_cert=_checked_path(config, "tls-cert"),
        tls_key=_checked_path(config, "tls-key"),
        tls_insecure=_switch(config, "tls-insecure"),
        expected_failures=_checked_path(config, "expected-failures"),
        restricted_url=_checked(config, "restricted-url"),
        max_message_size=_checked(config, "max-message-size"),
        consumer_timeout=_checked(config, "consumer-timeout"),
        alarm_cmd=_checked(config, "alarm-cmd"),
        queue_types=_checked(config, "queue-type") or ("classic",),
    )


def _target(config: pytest.Config) -> TargetSpec:
    """The target options as one :class:`TargetSpec` (the rules: :func:`target_spec`); bad input
    or a combination that cannot work → one usage line."""
    try:
        return target_spec(
            broker=_checked(config, "broker"), broker_url=_checked(config, "broker-url"),
            tls=_switch(config, "tls"), tls_ca=_checked_path(config, "tls-ca"),
            tls_cert=_checked_path(config, "tls-cert"), tls_key=_checked_path(config, "tls-key"),
            tls_insecure=_switch(config, "tls-insecure"), restart_cmd=option(config, "restart-cmd"),
            cluster_size=_checked(config, "cluster-size"), cluster_urls=_checked(config, "cluster-url") or (),
            cluster_templates={a: t for a in CLUSTER_ACTIONS if (t := _checked(config, f"cluster-cmd-{a}"))},
            cluster_node_names=_checked(config, "cluster-node-names") or (),
            cluster_inject_loss=_checked(config, "cluster-inject-loss"),
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc).splitlines()[0]) from exc


def pytest_refuses(pyargs: list[str]) -> str | None:
    """pytest's own complaint about the command line (an unknown option after ``--``, a bad value),
    or None: parsed as pytest.main would, but nothing is configured, collected or started."""
    try:
        from _pytest.config import _prepareconfig  # no public API parses without running
    except ImportError:
        return None  # another pytest: pytest.main reports it (exit 4)
    try:
        config = _prepareconfig(list(pyargs))
    except pytest.UsageError as exc:
        text = " ".join(str(exc).split())  # "usage: … error: <what> inifile: … rootdir: …"
        return text.rpartition("error: ")[2].partition(" inifile:")[0] or text
    try:
        read_settings(config)  # the option table's checks, on ini values too (exit 2, not pytest's 4)
    except pytest.UsageError as exc:
        return str(exc).splitlines()[0]
    finally:
        config._ensure_unconfigure()
    return None
