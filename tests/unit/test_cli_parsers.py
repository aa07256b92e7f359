"""Every argparse parser of the CLI refuses abbreviated options (issue: `run --case` once read as
`--case-timeout`): an abbreviation must be an error, never a silent match of a longer option."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "conformance"


def _parser_calls() -> list[tuple[str, int, ast.Call]]:
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("ArgumentParser", "_Parser"):
                calls.append((str(path.relative_to(PACKAGE.parent)), node.lineno, node))
    return calls


def test_every_parser_refuses_abbreviations() -> None:
    calls = _parser_calls()
    assert len(calls) >= 10, "the scan must see the CLI's parsers"
    lax = [f"{file}:{line}" for file, line, call in calls
           if not any(k.arg == "allow_abbrev" and isinstance(k.value, ast.Constant) and k.value.value is False
                      for k in call.keywords)]
    assert not lax, f"parsers that accept abbreviations: {lax}"
