"""Every argparse parser of the CLI refuses abbreviated options (issue: `run --case` once read as
`--case-timeout`): an abbreviation must be an error, never a silent match of a longer option.

Every subcommand builds its parser with ``conformance.argparsing.command_parser``; a parser built
any other way must say ``allow_abbrev=False`` itself."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

from conformance.argparsing import OneLineErrors, command_parser

PACKAGE = Path(__file__).resolve().parents[2] / "conformance"


def _parser_calls() -> list[tuple[str, int, str, ast.Call]]:
    calls = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "benchmarks").rglob("*.py")]):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("ArgumentParser", "OneLineErrors", "command_parser") or (
                name == "cls" and path.name == "argparsing.py"
            ):
                calls.append((str(path.relative_to(PACKAGE.parent)), node.lineno, name, node))
    return calls


def test_every_parser_refuses_abbreviations() -> None:
    calls = _parser_calls()
    built = sum(name == "command_parser" for _, _, name, _ in calls)
    assert built >= 12, "the scan must see the CLI's parsers"

    def strict(call: ast.Call) -> bool:
        return any(k.arg == "allow_abbrev" and isinstance(k.value, ast.Constant) and k.value.value is False
                   for k in call.keywords)

    lax = [f"{file}:{line}" for file, line, name, call in calls
           if name != "command_parser" and not strict(call)]
    assert not lax, f"parsers that accept abbreviations: {lax}"


@pytest.mark.parametrize("cls", [argparse.ArgumentParser, OneLineErrors])
def test_command_parser_refuses_a_prefix_and_names_the_command(cls: type[argparse.ArgumentParser],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    p = command_parser("run", "Run.", cls=cls)
    p.add_argument("--case-timeout", type=float, default=1.0)
    assert type(p) is cls
    assert p.parse_args(["--case-timeout", "2"]).case_timeout == 2.0
    with pytest.raises(SystemExit) as info:
        p.parse_args(["--case", "2"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    if cls is OneLineErrors:
        assert err == "amqp-conformance run: unrecognized arguments: --case 2\n"
    else:
        assert "amqp-conformance run: error: unrecognized arguments: --case" in err


def test_run_ends_with_verdict_counts_and_what_to_read_first(tmp_path: Path) -> None:
    from conformance.model.results import final_lines

    lines = [{"case_id": f"a.p{i}", "verdict": "PASS"} for i in range(3)] + [
        {"case_id": "a.ns", "verdict": "NON_STRICT"}, {"case_id": "a.u", "verdict": "UNSUPPORTED"},
        {"case_id": "a.t", "verdict": "TIMEOUT"}, {"case_id": "a.f", "verdict": "FAIL"}]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    assert final_lines(path) == ["verdicts: 7 cases: 3 PASS, 1 FAIL, 1 NON_STRICT, 1 TIMEOUT, 1 UNSUPPORTED",
                                 "to read first: a.f FAIL, a.t TIMEOUT, a.ns NON_STRICT"]
    path.write_text(json.dumps(lines[0]) + "\n")
    assert final_lines(path)[1].startswith("nothing failed")


@pytest.mark.parametrize(("argv", "in_process"), [
    (["--broker", "local:rabbitmq-cluster"], True),
    (["--cluster-url", "amqp://a:5672/,amqp://b:5672/,amqp://c:5672/"], True),
    (["--broker", "reference"], False),
])
def test_a_cluster_target_runs_in_process_by_default(argv: list[str], in_process: bool) -> None:
    """The cluster controller lives in the process that started the cluster: workers would only
    get its URL and every cluster case would be UNSUPPORTED."""
    from conformance.cli.run import _resolve_workers, _run_parser

    args = _run_parser().parse_args(argv)
    _resolve_workers(args)
    assert (args.workers == "0") is in_process, args.workers


def test_run_ignores_the_addopts_of_a_pytest_config_where_it_starts(tmp_path: Path) -> None:
    """This checkout's own addopts (-n 4, -m 'not cluster') would deselect the cluster area and
    put in-process runs on workers: run overrides them (a user's -- args still come last)."""
    from conformance.cli.run import _pytest_args, _resolve_workers, _run_parser

    args = _run_parser().parse_args(["--area", "cluster", "--", "-x"])
    _resolve_workers(args)
    argv = _pytest_args(args, tmp_path / "r", tmp_path / "rep", "run1")
    i = argv.index("addopts=")
    assert argv[i - 1] == "-o" and argv[-1] == "-x", argv


def test_run_loads_only_the_plugins_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed pytest plugins a run does not use (hypothesis's, here from the dev extra) are not
    loaded, in the controller or (through the environment) in any worker; the ones run names are."""
    import os

    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)  # the tests' own block of the dev plugins

    from _pytest.config import _prepareconfig

    from conformance.cli.run import (
        NO_AUTOLOAD,
        RUN_PLUGINS,
        _no_plugin_autoload,
        _pytest_args,
        _resolve_workers,
        _run_parser,
    )

    args = _run_parser().parse_args(["--area", "replies", "-n", "2"])
    _resolve_workers(args)
    before = os.environ.get(NO_AUTOLOAD)
    with _no_plugin_autoload():
        assert os.environ[NO_AUTOLOAD] == "1"
        config = _prepareconfig(_pytest_args(args, tmp_path / "r", tmp_path / "rep", "run1"))
        try:
            loaded = {name for name, _ in config.pluginmanager.list_name_plugin()}
        finally:
            config._ensure_unconfigure()
    assert os.environ.get(NO_AUTOLOAD) == before
    assert set(RUN_PLUGINS) <= loaded, loaded
    assert "hypothesispytest" not in loaded and "benchmark" not in loaded, loaded
