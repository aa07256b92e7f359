"""docs/waits.md lists every silence window and fixed wait of the suite, each with its reason, and
every silence proven by an event instead (conformance/verify/fences.py), each with its rule: a wait
added to a case or a helper without its line in the page fails here, as does a line for a wait
that is gone."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "waits.md"
# where the suite's waits live: the cases and the verifier kit
SOURCES = [*sorted((ROOT / "conformance" / "scenarios").glob("test_*.py")),
           *sorted((ROOT / "conformance" / "verify").glob("*.py"))]
# a call to one of these is a wait by time (a window, a sleep, a TTL's settle)
WAIT_CALLS = {"quiet_window", "sleep", "settle_for", "settle_window", "process_data_events"}
WAIT_NAMES = {"LATE_CLOSE_GRACE", "PROBE_SETTLE"}
FENCE_CALLS = {"expect_no_delivery_until_cancelled", "deliveries_until_cancelled", "settle_and_close",
               "close_fence", "_returns_until_closed"}


def _called(node: ast.AST) -> set[str]:
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            out.add(name)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            out.add(sub.id)
    return out


def functions_with(names: set[str]) -> set[str]:
    """``path::function`` (``path::Class.method``) of every top-level function that uses one of
    ``names`` (nested functions count for the one they are in); every function for no names."""
    found: set[str] = set()
    for path in SOURCES:
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            defs: list[tuple[str, ast.AST]] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defs.append((node.name, node))
            elif isinstance(node, ast.ClassDef):
                defs += [(f"{node.name}.{m.name}", m) for m in node.body
                         if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for name, fn in defs:
                if not names or _called(fn) & names:
                    found.add(f"{rel}::{name}")
    return found


def page_rows(section: str) -> set[str]:
    """The ``path::function`` of each row of the page's table under ``## section``."""
    text = PAGE.read_text(encoding="utf-8")
    part = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+::[^`]+)` \|", part, flags=re.M))


def test_every_wait_is_listed_with_its_reason() -> None:
    waits = functions_with(WAIT_CALLS | WAIT_NAMES)
    listed = page_rows("Windows and waits that remain")
    assert sorted(waits - listed) == [], "waits missing from docs/waits.md"
    assert sorted(listed - waits) == [], "docs/waits.md lists waits that are gone"


def test_every_fence_is_listed_with_its_rule() -> None:
    fences = {f for f in functions_with(FENCE_CALLS) if "/scenarios/" in f}
    listed = page_rows("Silence proven by an event")
    assert sorted(fences - listed) == [], "fences missing from docs/waits.md"
    # a row may name a case whose event is no fence helper (basic.get-ok): it must still exist
    assert sorted(listed - functions_with(set())) == [], "docs/waits.md names functions that are gone"


def test_the_scan_sees_a_wait() -> None:
    assert "conformance/verify/extensions.py::settle_for" in functions_with(WAIT_CALLS)
