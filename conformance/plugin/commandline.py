"""The option table on a command's own command line: ``run``, ``faults``, ``mutate`` and ``fuzz``
add the table's options as ``--NAME`` (:func:`add_command_options`), read a value given or its
environment twin (:func:`given`) and turn the target options into one checked
:class:`~conformance.targets.spec.TargetSpec` (:func:`target_of`)."""


from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.plugin.options import BY_NAME, OPTIONS, SWITCH_VALUES
from conformance.targets.spec import CLUSTER_ACTIONS, TargetSpec, target_spec


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
