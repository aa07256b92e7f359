"""Documentation pages produced from the code, so a count, an option or a field the docs state is
always the code's.

- ``docs/cases.md``: the case and area counts, from the case registry (also ``amqp-conformance
  cases --markdown``; the table itself is :mod:`conformance.cli.casetable`'s);
- ``docs/options.md``: every option of ``run``, from the option table and ``run``'s parser;
- ``docs/result-record.md``: the result record's fields, from its JSON Schema.

All are checked in; a unit test regenerates them and compares. ``python -m conformance.cli.docpages
DIR`` rewrites them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance.cli.casetable import REGENERATE, cases_markdown, extensions_markdown, md_row


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def options_markdown() -> str:
    """Every option of ``amqp-conformance run``: the plugin's table with its pytest, env and ini twins,
    then run's own."""
    from conformance.cli.run import _run_parser
    from conformance.plugin.options import OPTIONS

    lines = [
        "# Options reference",
        "",
        f"<!-- generated: {REGENERATE} -->",
        "",
        "Every setting of a run has four spellings: `amqp-conformance run --NAME`, the pytest plugin's "
        "`--amqp-NAME` (`pytest --pyargs conformance --amqp-NAME …`), an environment variable and an ini "
        "key. The command line wins, then the environment, then the ini file, then the default. A bad "
        "value is refused before anything starts, in one line naming the option (exit 2).",
        "",
        "```sh",
        "amqp-conformance run --broker-url amqp://guest:guest@127.0.0.1:5672/ --case-timeout 5",
        "AMQP_CONFORMANCE_CASE_TIMEOUT=5 pytest --pyargs conformance --broker-url amqp://guest:guest@127.0.0.1:5672/",
        "```",
        "",
        "| `run` | pytest plugin | environment | ini key | default | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for opt in OPTIONS:
        plugin = f"`{opt.flag}`" + (f", `--{opt.name}`" if opt.alias else "")
        lines.append(md_row([f"`--{opt.name}`", plugin, f"`{opt.env}`", f"`{opt.dest}`",
                           f"`{opt.default}`" if opt.default is not None else "", _cell(opt.text)]))
    table = {opt.dest for opt in OPTIONS}
    lines += ["", "Options of `amqp-conformance run` only:", "", "| option | default | meaning |",
              "| --- | --- | --- |"]
    for action in _run_parser()._actions:
        if not action.option_strings or action.dest in table or isinstance(action, argparse._HelpAction):
            continue
        default = "" if action.default in (None, False, []) else f"`{action.default}`"
        flags = ", ".join(f"`{flag}`" for flag in action.option_strings)
        lines.append(md_row([flags, default, _cell(action.help or "")]))
    lines += ["", "Anything after `--` goes to pytest as it is: "
              "`amqp-conformance run -- -x --maxfail 3`. `run` loads only the pytest plugins it uses "
              "(xdist, allure, its own); name another installed one with `-p`, e.g. "
              "`amqp-conformance run -- -p pytest_timeout --timeout 60`.", ""]
    return "\n".join(lines)


def record_markdown() -> str:
    """The result record's fields, from its JSON Schema (itself made from the dataclass)."""
    from conformance.model.record_schema import enums, record_schema

    schema = record_schema()
    closed = enums()
    required = set(schema["required"])
    lines = [
        "# The result record",
        "",
        f"<!-- generated: {REGENERATE} -->",
        "",
        "A results file (`reports/results/<run>.jsonl`) holds one JSON object per line, one per case "
        "execution. It is the only input of the report, the gate and the results store, and the stable "
        "interface for your own tools.",
        "",
        "```sh",
        "head -1 reports/results/*.jsonl | python -m json.tool",
        "python -m conformance.model.record_schema > result-record.schema.json    # the JSON Schema",
        "```",
        "",
        "The JSON Schema (draft 2020-12) ships with the package as "
        "`conformance/data/result-record.schema.json`; check a file with it:",
        "",
        "```python",
        "import json",
        "from jsonschema import Draft202012Validator",
        "from conformance.model.record_schema import shipped_schema",
        "",
        "check = Draft202012Validator(shipped_schema())",
        "for line in open('fixtures/baselines/garagemq.jsonl', encoding='utf-8'):",
        "    for error in check.iter_errors(json.loads(line)):",
        "        print(error.message)",
        "```",
        "",
        "Required fields are those every reader relies on; the others are written by today's writer "
        "and may be absent from older runs. No other field is allowed.",
        "",
        "| field | type | required | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for name, prop in schema["properties"].items():
        kind = prop["type"] if isinstance(prop["type"], str) else " or ".join(prop["type"])
        if kind == "array":
            kind = f"array of {prop['items']['type']}"
        meaning = prop["description"] + (f"; one of {', '.join(closed[name])}" if name in closed else "")
        lines.append(md_row([f"`{name}`", kind, "yes" if name in required else "", _cell(meaning)]))
    lines += ["", "`verdict` is explained in the [README](../README.md#reading-verdicts); `extra.trace` "
              "is shown in JUnit, allure and the HTML report's drill-down.", ""]
    return "\n".join(lines)


PAGES = {"cases.md": lambda: _all_cases_markdown(), "options.md": options_markdown,
         "result-record.md": record_markdown}


def _all_cases_markdown() -> str:
    from conformance.scenarios import all_cases

    cases = all_cases()
    return cases_markdown(cases) + "\n" + extensions_markdown(cases)


def main(argv: Sequence[str] | None = None) -> int:
    folder = Path((list(sys.argv[1:] if argv is None else argv) or ["docs"])[0])
    for name, page in PAGES.items():
        (folder / name).write_text(page(), encoding="utf-8")
        print(f"wrote {folder / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
