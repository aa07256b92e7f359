"""The layout page (docs/layout.md) names only paths that exist: every entry of its name column, and
every ``*.py`` / ``*.toml`` file its descriptions mention (e.g. a ``rules.py`` that is not there)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILE = re.compile(r"(?<![\w/.-])([\w/-]+\.(?:py|toml|xml))\b")
# An entry: a name, or siblings "a | b" (docs/layout.md); the rest of the line describes it.
ENTRY = re.compile(r"^( {0,2})(\S+(?: \| \S+)*)")


def _layout_lines() -> list[str]:
    text = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1]
    block = section.split("```", 2)[1]
    return [line for line in block.splitlines()[1:] if line.strip()]


def _named_paths() -> list[tuple[str, Path, list[str]]]:
    """(line, the folder its entry names or sits in, the names to find there)."""
    out: list[tuple[str, Path, list[str]]] = []
    top = ROOT
    for line in _layout_lines():
        entry = ENTRY.match(line)
        names = entry.group(2).split(" | ") if entry else []
        description = line[entry.end():] if entry else line
        if "(not committed)" in description:
            continue
        indented = line.startswith(" ")
        base = top if indented else ROOT
        if not indented and names and names[0].endswith("/"):
            top = ROOT / names[0]
        folder = base / names[0] if len(names) == 1 and names[0].endswith("/") else base
        out.append((line, base, names))
        out.append((line, folder, FILE.findall(description)))
    return out


def test_the_layout_section_is_found() -> None:
    lines = _layout_lines()
    assert len(lines) > 10 and lines[0].startswith("conformance/")


def test_every_path_the_layout_section_names_exists() -> None:
    missing = []
    for line, folder, names in _named_paths():
        for name in names:
            # a file a description mentions may sit below the entry's folder (core.py in plugin/)
            found = (folder / name).exists() or any(folder.rglob(name.rsplit("/", 1)[-1]))
            if not found:
                missing.append(f"{name} (in {folder.relative_to(ROOT)}/): {line.strip()[:60]}")
    assert not missing, "docs/layout.md names paths that do not exist:\n" + "\n".join(missing)


def test_the_check_can_fail(tmp_path: Path) -> None:
    assert FILE.findall("spec rules in rules.py and data/amqp0-9-1.xml") == ["rules.py", "data/amqp0-9-1.xml"]
    assert not any((ROOT / "conformance").rglob("rules.py"))  # the name the old layout gave
