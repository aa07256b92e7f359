"""The plugin's command-line options (each with an environment twin) and their validation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.gate.triage import Triage, TriageProblem, load_triage
from conformance.model.verdicts import Verdict, parse_fail_on
from conformance.profiles import DEFAULT_PROFILE, PROFILE_DESCRIPTIONS
from conformance.profiles.releases import check_profile
from conformance.protocol.wire import URL
from conformance.targets.kinds import kinds, spellings, tls_capable
from conformance.targets.spec import (
    check_kind,
    parse_url,
    parse_urls,
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
_millis = _number(int, "takes a number of milliseconds", lambda v: v > 0, "must be positive")
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

    names = globs(text.lower())
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
        "consumer-timeout",
        "AMQP_CONFORMANCE_CONSUMER_TIMEOUT",
        None,
        "the --broker-url broker's delivery acknowledgement timeout in ms (RabbitMQ: consumer_timeout); "
        "the consumer_timeout cases are UNSUPPORTED on a url target without it (they hold a delivery "
        "unacknowledged that long)",
        alias=False,
        parse=_millis,
        metavar="MS",
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
        "to prove the checks can fail, a proxy drops this share of confirmed publishes and acks them "
        "itself: run's cluster cases reach every node of local:rabbitmq-cluster through one; faults, "
        "node 0 of its cluster",
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

SWITCH_VALUES = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False,
                 "off": False}


def globs(text: str | None) -> tuple[str, ...]:
    return tuple(g.strip() for g in (text or "").split(",") if g.strip())
