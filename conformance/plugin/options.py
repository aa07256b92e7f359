"""The plugin's command-line options (each with an environment twin) and their validation."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.gate.triage import Triage, TriageProblem, load_triage
from conformance.model.verdicts import Verdict, parse_fail_on
from conformance.profiles import DEFAULT_PROFILE, PROFILE_DESCRIPTIONS
from conformance.profiles.releases import check_profile
from conformance.protocol.wire import URL
from conformance.targets.kinds import kinds, spellings, tls_capable
from conformance.targets.spec import (
    CLUSTER_ACTIONS,
    TargetSpec,
    check_kind,
    parse_url,
    parse_urls,
    target_spec,
)

N = TypeVar("N", int, float)

# -- value checks: each option declares its own once; a check raises ValueError with the rest of
# the sentence that follows the option's name ("--case-timeout must be positive").


def _number(convert: Callable[[str], N], takes: str, ok: Callable[[N], bool], otherwise: str
            ) -> Callable[[str], N]:
    """A check for a number: ``convert`` failing says ``takes``, a value ``ok`` refuses says ``otherwise``."""

    def check(text: str) -> N:
        try:
            value = convert(text)
        except ValueError as exc:
            raise ValueError(takes) from exc
        if not ok(value):
            raise ValueError(otherwise)
        return value

    return check


_positive_seconds = _number(float, "takes a number of seconds", lambda v: v > 0, "must be positive")
_ceiling = _number(float, "takes a multiple of --case-timeout (a number)", lambda v: v == 0 or v >= 1,
                   "must be at least 1 (× --case-timeout), or 0 to disable it")
_octets = _number(int, "takes a number of octets", lambda v: v > 0, "must be positive")
_cluster_size = _number(int, "takes a number of nodes", lambda v: v >= 1, "must be at least 1")
_SHARE = "takes a share between 0 and 1 (e.g. 0.02)"
_share = _number(float, _SHARE, lambda v: 0 < v < 1, _SHARE)


_profile = check_profile  # rabbitmq | spec | rabbitmq@RELEASE


def _fail_on(text: str) -> frozenset[Verdict]:
    try:
        return parse_fail_on(text)
    except ValueError as exc:
        known = ",".join(v.value for v in Verdict)
        bad = [p.strip() for p in text.split(",") if p.strip().upper().replace("-", "_") not in
               {v.value for v in Verdict}]
        raise ValueError(f"names an unknown verdict {', '.join(bad) or text!r} (known: {known}, or none)") \
            from exc


def _url(text: str) -> URL:
    try:
        return parse_url(text)
    except ValueError as exc:
        raise ValueError(f"takes amqp://user:pass@host:port/vhost: {exc}") from exc


def _kind(text: str) -> str:
    return check_kind(text)


def _with_placeholder(name: str, replaced_by: str) -> Callable[[str], str]:
    """A check for a command or name template that must contain ``{name}``."""

    def check(text: str) -> str:
        if "{" + name + "}" not in text:
            raise ValueError(f"must contain {{{name}}} (replaced by {replaced_by})")
        return text

    return check


_alarm_cmd = _with_placeholder("state", "on or off")
_node_template = _with_placeholder("node", "the node's name")


def _cluster_urls(text: str) -> tuple[URL, ...]:
    """One URL per node: a comma list (repeating the option adds to it)."""
    return parse_urls(text)


def _node_names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError("takes a comma list of node names")
    return names


def _queue_types(text: str) -> tuple[str, ...]:
    from conformance.verify.queue_types import QUEUE_TYPES

    names = _globs(text.lower())
    unknown = [n for n in names if n not in QUEUE_TYPES]
    if unknown or not names:
        raise ValueError(f"names an unknown queue type {', '.join(unknown) or repr(text)} "
                         f"(known: {', '.join(QUEUE_TYPES)})")
    return tuple(dict.fromkeys(names))


def _triage_file(text: str) -> Triage:
    try:
        return load_triage(Path(text).expanduser())
    except TriageProblem as exc:
        raise ValueError(f"cannot be used: {exc}") from exc


def _pem_file(text: str) -> str:
    path = Path(text).expanduser()
    if not path.is_file():
        raise ValueError(f"names no readable file: {path}")
    return text


@dataclass(frozen=True)
class Option:
    """One setting: ``--amqp-NAME`` on the command line (and ``--NAME`` where that cannot clash with
    another plugin), an environment twin and an ini key ``amqp_NAME``; the command line wins, then
    the environment, then the ini file, then the default. ``amqp-conformance run`` offers each as
    ``--NAME`` and forwards it as ``--amqp-NAME``."""

    name: str
    env: str
    default: str | None
    help: str  # "{kinds}" is replaced by the registered target kinds when shown
    alias: bool = True  # also accept the short, unprefixed ``--NAME`` (today's spelling)
    switch: bool = False  # a flag without a value (its env twin and ini key take 1/0, true/false, yes/no)
    parse: Callable[[str], Any] | None = None  # the value's check and conversion (ValueError: bad)
    group: str | None = None  # options of one group exclude each other (run's --broker | --broker-url)
    metavar: str | None = None
    repeat: bool = False  # may be given several times on the plugin's command line (values joined by ",")

    @property
    def flag(self) -> str:
        return f"--amqp-{self.name}"

    @property
    def short(self) -> str:
        """The spelling a message names: ``--NAME`` where that alias exists, else ``--amqp-NAME``."""
        return f"--{self.name}" if self.alias else self.flag

    @property
    def dest(self) -> str:
        return "amqp_" + self.name.replace("-", "_")

    @property
    def text(self) -> str:
        return self.help.replace("{kinds}", spellings())

    def check(self, value: str, spelled: str | None = None) -> Any:
        """``parse(value)``; a bad value is a ValueError of one line naming the option."""
        if self.parse is None:
            return value
        try:
            return self.parse(value)
        except ValueError as exc:
            raise ValueError(f"{self.short if spelled is None else spelled} {exc}") from exc


OPTIONS: tuple[Option, ...] = (
    Option(
        "broker-url",
        "AMQP_CONFORMANCE_BROKER_URL",
        None,
        "run against the broker at this URL (amqp://user:pass@host:port/vhost)",
        parse=_url,
        group="target",
        metavar="URL",
    ),
    Option(
        "broker",
        "AMQP_CONFORMANCE_BROKER",
        None,
        "target: {kinds}",
        parse=_kind,
        group="target",
        metavar="KIND",
    ),
    # No unprefixed alias: pytest-profiling (and many conftests) define --profile.
    Option(
        "profile",
        "AMQP_CONFORMANCE_PROFILE",
        DEFAULT_PROFILE,
        f"expectation profile: {' | '.join(PROFILE_DESCRIPTIONS)} (default {DEFAULT_PROFILE}); rabbitmq "
        "follows the release the broker reports, rabbitmq@RELEASE (e.g. rabbitmq@3.10) names one",
        alias=False,
        parse=_profile,
        metavar="NAME",
    ),
    Option(
        "case-timeout",
        "AMQP_CONFORMANCE_CASE_TIMEOUT",
        "10",
        "seconds any single wait of a case may take before TIMEOUT (default 10)",
        parse=_positive_seconds,
        metavar="SECONDS",
    ),
    Option(
        "case-ceiling",
        "AMQP_CONFORMANCE_CASE_CEILING",
        "6",
        "hard ceiling of one case (setup and body; teardown its own) as a multiple of --case-timeout: "
        "a case still running then is interrupted and recorded TIMEOUT with where it was stuck "
        "(default 6; 0 disables)",
        parse=_ceiling,
        metavar="FACTOR",
    ),
    Option(
        "results",
        "AMQP_CONFORMANCE_RESULTS",
        "reports/results",
        "folder for the results JSONL (default reports/results)",
        metavar="DIR",
    ),
    Option(
        "fail-on",
        "AMQP_CONFORMANCE_FAIL_ON",
        "FAIL,TIMEOUT,ERROR",
        "verdicts that make the exit code non-zero (default FAIL,TIMEOUT,ERROR; 'none' for none)",
        parse=_fail_on,
        metavar="VERDICTS",
    ),
    Option(
        "restricted-url",
        "AMQP_CONFORMANCE_RESTRICTED_URL",
        None,
        "URL of a second user with restricted permissions, for the access cases (the spawned targets "
        "make one; see the scenarios README for the permissions it must have)",
        parse=_url,
        metavar="URL",
    ),
    Option(
        "restart-cmd",
        "AMQP_CONFORMANCE_RESTART_CMD",
        None,
        "shell command that restarts the --broker-url broker (enables restart cases for url targets)",
        metavar="CMD",
    ),
    Option(
        "max-message-size",
        "AMQP_CONFORMANCE_MAX_MESSAGE_SIZE",
        None,
        "the --broker-url broker's max message size in octets (RabbitMQ: max_message_size); the "
        "limits.max-message-size-* cases are UNSUPPORTED on a url target without it",
        alias=False,
        parse=_octets,
        metavar="OCTETS",
    ),
    Option(
        "alarm-cmd",
        "AMQP_CONFORMANCE_ALARM_CMD",
        None,
        "shell command that raises ({state} = on) or clears ({state} = off) the --broker-url broker's "
        'memory alarm, e.g. "rabbitmqctl set_vm_memory_high_watermark ..." (enables the connection.blocked '
        "cases for url targets; do not combine with -n)",
        alias=False,
        parse=_alarm_cmd,
        metavar="CMD",
    ),
    Option(
        "case",
        "AMQP_CONFORMANCE_CASE",
        None,
        "only the cases whose id matches one of these comma separated globs (e.g. 'confirms.*,tx.publish.*')",
        metavar="GLOBS",
    ),
    Option(
        "rule",
        "AMQP_CONFORMANCE_RULE",
        None,
        "only the cases that check a spec rule matching one of these comma separated globs "
        "(e.g. 'basic.ack/*,tx.*')",
        metavar="GLOBS",
    ),
    Option(
        "expected-failures",
        "AMQP_CONFORMANCE_EXPECTED_FAILURES",
        None,
        "triage TOML (the gate's format): a verdict it explains is reported as known and does not "
        "count for --fail-on; a listed case that now passes is reported as fixed",
        parse=_triage_file,
        metavar="TOML",
    ),
    Option(
        "queue-type",
        "AMQP_CONFORMANCE_QUEUE_TYPE",
        "classic",
        "queue type(s) the queue-declaring cases declare: classic (default) | quorum, or several comma "
        "separated (classic,quorum): each case then runs once per type, ids of other types than classic "
        "suffixed [type]",
        parse=_queue_types,
        metavar="TYPES",
    ),
    # TLS: no unprefixed aliases (--tls-* names are common enough to clash with other plugins).
    Option(
        "tls",
        "AMQP_CONFORMANCE_TLS",
        None,
        f"spawned targets ({', '.join(k.name for k in kinds(tls_capable))}) listen with TLS and the suite "
        "connects over amqps "
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
        parse=_pem_file,
        metavar="PEM",
    ),
    Option(
        "tls-cert",
        "AMQP_CONFORMANCE_TLS_CERT",
        None,
        "PEM client certificate sent to the broker (the URL's certfile=)",
        alias=False,
        parse=_pem_file,
        metavar="PEM",
    ),
    Option(
        "tls-key",
        "AMQP_CONFORMANCE_TLS_KEY",
        None,
        "PEM private key of --amqp-tls-cert (the URL's keyfile=)",
        alias=False,
        parse=_pem_file,
        metavar="PEM",
    ),
    Option(
        "tls-insecure",
        "AMQP_CONFORMANCE_TLS_INSECURE",
        None,
        "do not verify the broker's certificate (the URL's verify=verify_none)",
        alias=False,
        switch=True,
    ),
    # Cluster targets (the cluster area; conformance/cluster/README.md).
    Option(
        "cluster-size",
        "AMQP_CONFORMANCE_CLUSTER_SIZE",
        "3",
        "nodes of --broker local:rabbitmq-cluster (default 3; the cluster cases need 3)",
        parse=_cluster_size,
        metavar="N",
    ),
    Option(
        "cluster-url",
        "AMQP_CONFORMANCE_CLUSTER_URL",
        None,
        "a cluster someone runs: one amqp:// URL per node, repeated or a comma list (the other areas "
        "use the first)",
        parse=_cluster_urls,
        repeat=True,
        metavar="URLS",
    ),
    Option(
        "cluster-inject-loss",
        "AMQP_CONFORMANCE_CLUSTER_INJECT_LOSS",
        None,
        "local:rabbitmq-cluster only, to prove the cluster cases can fail: the cluster cases reach every "
        "node through a proxy that drops this share of confirmed publishes and acks them itself",
        alias=False,
        parse=_share,
        metavar="SHARE",
    ),
    *(
        Option(
            f"cluster-cmd-{action}",
            f"AMQP_CONFORMANCE_CLUSTER_CMD_{action.upper()}",
            None,
            f"shell command that {what} a --cluster-url node ({{node}}: its name, the URL's host), "
            f"e.g. {example!r}",
            parse=_node_template,
            metavar="CMD",
        )
        for action, what, example in (
            ("kill", "kills (kill -9)", "docker kill {node}"),
            ("start", "starts again", "docker start {node}"),
            ("pause", "freezes", "docker pause {node}"),
            ("resume", "unfreezes", "docker unpause {node}"),
            ("partition", "cuts off from the others (faults' partition nemesis)",
             "iptables -A INPUT -s {node} -j DROP"),
        )
    ),
    Option(
        "cluster-cmd-heal",
        "AMQP_CONFORMANCE_CLUSTER_CMD_HEAL",
        None,
        "shell command that heals every partition of a --cluster-url cluster (faults' partition nemesis), "
        "e.g. 'iptables -F'",
        metavar="CMD",
    ),
    Option(
        "cluster-node-names",
        "AMQP_CONFORMANCE_CLUSTER_NODE_NAMES",
        None,
        "comma list of the names {node} stands for in --cluster-cmd-* (default: each --cluster-url's host)",
        parse=_node_names,
        metavar="NAMES",
    ),
)
BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}


def add_command_options(p: argparse.ArgumentParser, names: Sequence[str] | None = None) -> None:
    """The table's options (all, or those ``names``) as a command's ``--NAME``: declared here once,
    with their check; a value left out falls to the env twin, ini key, default. ``run`` takes all
    of them; ``faults``, ``mutate``, ``fuzz`` and ``bench`` the target options they need."""
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for opt in OPTIONS if names is None else [BY_NAME[n] for n in names]:
        where: argparse._ActionsContainer = p
        if opt.group is not None:
            if opt.group not in groups:
                groups[opt.group] = p.add_mutually_exclusive_group()
            where = groups[opt.group]
        if opt.switch:
            where.add_argument(f"--{opt.name}", dest=opt.dest, action="store_true", default=None,
                               help=f"{opt.text} [env {opt.env}]")
        else:
            where.add_argument(f"--{opt.name}", dest=opt.dest, default=None, metavar=opt.metavar,
                               action="append" if opt.repeat else "store",
                               help=f"{opt.text} [env {opt.env}]")


def given(args: argparse.Namespace, name: str) -> tuple[str | None, str]:
    """An option's value given to a command (else its environment twin) and how the user spelled it."""
    opt = BY_NAME[name]
    value = getattr(args, opt.dest, None)
    if isinstance(value, list):  # a repeated option (``repeat``): its values as one comma list
        value = ",".join(value)
    if value is not None:
        return (str(value) if not opt.switch else ("1" if value else None)), f"--{name}"
    env = os.environ.get(opt.env) or None
    return env, opt.env


TARGET_OPTIONS = ("broker-url", "broker", "tls", "tls-ca", "tls-cert", "tls-key", "tls-insecure",
                  "restart-cmd", "cluster-size", "cluster-url", "cluster-inject-loss",
                  *(f"cluster-cmd-{a}" for a in CLUSTER_ACTIONS), "cluster-node-names")


def target_of(args: argparse.Namespace, *, default: str = "reference") -> TargetSpec:
    """The target a command's options name (parsed by :func:`add_command_options`, env twins included):
    each value through its declared check, then :func:`conformance.targets.spec.target_spec`'s
    rules. ValueError of one line."""
    values: dict[str, Any] = {}
    for name in TARGET_OPTIONS:
        if BY_NAME[name].dest not in vars(args) and not os.environ.get(BY_NAME[name].env):
            continue
        text, spelled = given(args, name)
        if text is None:
            continue
        opt = BY_NAME[name]
        if opt.switch:
            if text.strip().lower() not in SWITCH_VALUES:
                raise ValueError(f"{spelled} takes 1/0, true/false, yes/no or on/off, not {text!r}")
            values[name] = SWITCH_VALUES[text.strip().lower()]
        else:
            values[name] = opt.check(text, spelled)
    return target_spec(
        broker=values.get("broker"), broker_url=values.get("broker-url"), tls=values.get("tls", False),
        tls_ca=values.get("tls-ca"), tls_cert=values.get("tls-cert"), tls_key=values.get("tls-key"),
        tls_insecure=values.get("tls-insecure", False), restart_cmd=values.get("restart-cmd"),
        cluster_size=values.get("cluster-size"), cluster_urls=values.get("cluster-url") or (),
        cluster_templates={a: values[f"cluster-cmd-{a}"] for a in CLUSTER_ACTIONS
                           if values.get(f"cluster-cmd-{a}")},
        cluster_node_names=values.get("cluster-node-names") or (),
        cluster_inject_loss=values.get("cluster-inject-loss"), default=default,
    )


def checked_as(name: str) -> Callable[[str], str]:
    """An argparse ``type=`` for a command that forwards the plugin option ``name`` to pytest
    (``mutate --case-timeout``): the option's own check, the text kept."""

    def check(text: str) -> str:
        try:
            BY_NAME[name].check(text, "")
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).strip()) from exc
        return text

    return check


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
    alarm_cmd: str | None = None  # --amqp-alarm-cmd (url targets)
    queue_types: tuple[str, ...] = ("classic",)  # --amqp-queue-type, in the order given
    release: str | None = None  # the RabbitMQ release --profile rabbitmq@RELEASE names

    @property
    def restart_cmd(self) -> str | None:
        return self.target.restart_cmd


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
        case_globs=_globs(option(config, "case")),
        rule_globs=_globs(option(config, "rule")),
        asked=asked(config),
        tls_ca=_checked_path(config, "tls-ca"),
        tls_cert=_checked_path(config, "tls-cert"),
        tls_key=_checked_path(config, "tls-key"),
        tls_insecure=_switch(config, "tls-insecure"),
        expected_failures=_checked_path(config, "expected-failures"),
        restricted_url=_checked(config, "restricted-url"),
        max_message_size=_checked(config, "max-message-size"),
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
