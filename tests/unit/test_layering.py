"""The scenario modules hold cases only: every shared helper lives in ``conformance.verify``.

A scenario module importing from another scenario module (or any other module importing from a
``conformance.scenarios.test_*`` module) turns a test module into a library, and its helpers start
to drift from the copies written elsewhere. The package itself offers only the catalogue
(``all_cases``, ``known_areas``, ``areas_of``): the command line and the report read it. This test
reads every module's imports (no import is run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import conformance

PACKAGE = Path(conformance.__file__).parent
SCENARIOS = "conformance.scenarios"
CATALOGUE = {f"{SCENARIOS}.{name}" for name in ("all_cases", "known_areas", "areas_of")}


def imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in ``path``, relative imports resolved against the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(("conformance", *path.relative_to(root).parent.parts))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.append((node.lineno, base))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names if base == SCENARIOS)
    return found


def offenders(root: Path) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        for line, module in imports_of(path, root):
            if module in CATALOGUE or (module == SCENARIOS and path.name == "__init__.py"):
                continue
            if module.startswith(SCENARIOS + "."):
                bad.append(f"{path.relative_to(root.parent)}:{line} imports {module}")
    return bad


def test_nothing_imports_from_the_scenario_modules() -> None:
    assert offenders(PACKAGE) == []


def test_the_guard_sees_an_offending_import(tmp_path: Path) -> None:
    """The guard must be able to fail: a module importing a scenario helper is reported."""
    pkg = tmp_path / "conformance"
    (pkg / "scenarios").mkdir(parents=True)
    (pkg / "scenarios" / "test_a.py").write_text("from conformance.scenarios.test_errors import outcome\n")
    (pkg / "clients.py").write_text(
        "from .scenarios import test_errors\nimport conformance.scenarios.test_b\n"
        "from conformance.scenarios import all_cases\n"
    )
    assert offenders(pkg) == [
        "conformance/clients.py:1 imports conformance.scenarios.test_errors",
        "conformance/clients.py:2 imports conformance.scenarios.test_b",
        "conformance/scenarios/test_a.py:1 imports conformance.scenarios.test_errors",
    ]


def test_the_broker_shares_no_code_with_the_suite_that_judges_it() -> None:
    """The reference broker keeps its own wire code (conformance/broker/__init__.py says why)."""
    suite = ("conformance.protocol", "conformance.verify", "conformance.plugin", "conformance.scenarios")
    used = [
        f"{path.name}:{line} imports {module}"
        for path in sorted((PACKAGE / "broker").rglob("*.py"))
        for line, module in imports_of(path, PACKAGE)
        if module.startswith(suite)
    ]
    assert used == []
