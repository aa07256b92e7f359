"""docs/layout.md draws the package's top level in the order of the layers contract (the house):
every top-level package and module of conformance/ appears once, on the line of its layer, top to
bottom as ``lint-imports`` enforces it. A package added, moved or re-layered without the page (or
the page without the contract) fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "conformance"
HOUSE = "the house"


def house_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (house,) = [c for c in contracts if c["name"].startswith(HOUSE)]
    assert house["containers"] == ["conformance"]
    return [[name.strip() for name in re.split(r"[|:]", layer)] for layer in house["layers"]]


def page_layers() -> list[list[str]]:
    text = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    block = text.split("\n## Layout\n", 1)[1].split("```", 2)[1]
    out = []
    for line in block.splitlines():
        m = re.match(r"^  (\S+(?: \| \S+)*)", line)  # an entry of conformance/ (two spaces in)
        if m:
            out.append([n.removesuffix("/").removesuffix(".py") for n in m.group(1).split(" | ")])
    return out


def top_level() -> set[str]:
    names = set()
    for entry in PACKAGE.iterdir():
        if entry.is_dir() and (entry / "__init__.py").is_file():
            names.add(entry.name)
        elif entry.suffix == ".py" and entry.name != "__init__.py":
            names.add(entry.stem)
    return names


def test_the_page_draws_the_contract_in_order() -> None:
    assert page_layers() == house_layers()


def test_every_top_level_package_and_module_has_a_layer() -> None:
    layered = {name for layer in house_layers() for name in layer}
    assert top_level() == layered, "a top-level package or module outside the layers contract"


def test_the_top_level_holds_packages_and_at_most_two_modules() -> None:
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert modules == ["argparsing.py", "extras.py"]
