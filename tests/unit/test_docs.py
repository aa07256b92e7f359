"""The user guide: a short README that a newcomer can act on from its first screen, docs/ pages
whose counts and options come from the code, and whose commands parse as written."""

from __future__ import annotations

import argparse
import glob
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance import cli
from conformance.cli import docpages
from conformance.gate.cli import main as gate_main
from conformance.scenarios import all_cases

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GENERATED = set(docpages.PAGES)
MAIN = "pip install -e '.[report]' && amqp-conformance run"
TESTS = "pip install -e '.[dev]' && python -m pytest"
SCREEN = 60  # lines: the first screenful of a terminal or a browser window
VERDICTS = ("PASS", "FAIL", "NON_STRICT", "UNSUPPORTED", "INFORMATIONAL", "TIMEOUT", "ERROR", "NOT_RUN")


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def hand_written() -> list[Path]:
    return [README, *(p for p in pages() if p.name not in GENERATED)]


# -- the README ---------------------------------------------------------------------------------


def test_readme_is_at_most_150_lines() -> None:
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= 150, f"README.md has {n} lines; move detail to docs/"


def test_the_first_screenful_has_setup_url_verdicts_and_gate() -> None:
    first = "\n".join(README.read_text(encoding="utf-8").splitlines()[:SCREEN])
    assert MAIN in first and TESTS in first
    assert "Java 17" in first
    assert "amqp://user:pass@host:5672/vhost" in first  # the URL form, as a command to copy
    assert all(f"`{v}`" in first for v in VERDICTS)
    assert "amqp-conformance gate --baseline" in first


def test_the_readme_screenshot_is_there_and_small() -> None:
    png = DOCS / "report.png"
    assert "](docs/report.png)" in README.read_text(encoding="utf-8")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 300 * 1024


# -- docs/ --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_pages_match_the_code(name: str) -> None:
    written = (DOCS / name).read_text(encoding="utf-8")
    assert written == docpages.PAGES[name](), f"docs/{name} is stale: {docpages.REGENERATE}"


def test_every_page_is_linked_from_the_readme_and_the_index() -> None:
    readme = README.read_text(encoding="utf-8")
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    for page in pages():
        if page.name != "README.md":
            assert f"(docs/{page.name})" in readme, page.name
            assert f"({page.name})" in index, page.name


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_local_links_resolve() -> None:
    broken = []
    for page in [README, *pages()]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} → {target}")
    assert not broken


def test_no_lab_notes_in_the_user_guide() -> None:
    # Figures measured on one loaded machine are no guide for a user's machine.
    for page in hand_written():
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"load average|measured (on|while)|Measured \(|on the 2-core", text), page.name


def _counts() -> tuple[set[int], dict[str, int]]:
    cases = all_cases()
    selected = [c for c in cases if c.queue_types != ("quorum",)]
    areas = {c.area for c in cases}
    per_area = {a: sum(c.area == a for c in selected) for a in areas}
    return {len(cases), len(areas), len(selected)}, per_area


COUNT = re.compile(r"\b(\d[\d,]*) (?:cases?|areas)\b")
TABLE_ROW = re.compile(r"^(\w+)\s+\d+\s+\d+\s+\d+\s+(\d+)$")
ITEMS = re.compile(r"\[(\d+) items\]")


def test_counts_the_docs_state_are_the_codes() -> None:
    totals, per_area = _counts()
    wrong = []
    for page in hand_written():
        for line in page.read_text(encoding="utf-8").splitlines():
            for n in COUNT.findall(line):
                value = int(n.replace(",", ""))
                if value not in totals and not any(a in line and per_area[a] == value for a in per_area):
                    wrong.append(f"{page.name}: {line.strip()}")
            for n in ITEMS.findall(line):
                if int(n) not in totals:
                    wrong.append(f"{page.name}: {line.strip()}")
            row = TABLE_ROW.match(line)
            if row and row[1] in (*per_area, "total"):
                want = per_area.get(row[1]) if row[1] != "total" else sum(per_area.values())
                if int(row[2]) != want:
                    wrong.append(f"{page.name}: {line.strip()} (the code: {want})")
    assert not wrong, "counts that differ from the case registry:\n" + "\n".join(wrong)


def test_the_count_check_can_fail() -> None:
    totals, _ = _counts()
    # The counts an older README stated side by side: at most one of them can be the code's.
    assert COUNT.findall("289 cases in 19 areas, 300 cases in 21 areas") == ["289", "19", "300", "21"]
    assert len({289, 300, 264, 314} & totals) <= 2
    assert TABLE_ROW.match("access                24             0             0     24")


# -- commands in the docs parse as written ------------------------------------------------------


def shell_commands(text: str) -> Iterator[list[str]]:
    """Each ``amqp-conformance …`` call in the page's sh blocks, as argv after the program name."""
    for block in re.findall(r"```(?:sh|bash)\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            for i, word in enumerate(words):
                if word == "amqp-conformance" and (i == 0 or words[i - 1] in ("&&", ";", "|")
                                                   or "=" in words[i - 1]):
                    rest = words[i + 1:]
                    cut = [j for j, w in enumerate(rest) if w in ("&&", ";", "|", "||")]
                    yield rest[: cut[0]] if cut else rest


def all_commands() -> list[tuple[str, list[str]]]:
    return [(page.name, argv) for page in hand_written()
            for argv in shell_commands(page.read_text(encoding="utf-8"))]


class Parsed(Exception):
    """Raised instead of running the command once its arguments parsed."""


@pytest.mark.parametrize(("page", "argv"), all_commands(), ids=lambda v: v if isinstance(v, str) else None)
def test_documented_commands_parse(page: str, argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    def parse_only(self: argparse.ArgumentParser, args: list[str] | None = None,
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        original(self, args, namespace)
        raise Parsed

    original = argparse.ArgumentParser.parse_args
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    try:
        code = cli.main(argv)
    except Parsed:
        return
    except SystemExit as exc:
        code = int(exc.code or 0)
    pytest.fail(f"{page}: amqp-conformance {shlex.join(argv)} did not parse (exit {code}): "
                f"{capsys.readouterr().err.strip()}")


def test_the_parse_check_can_fail(monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(pytest.fail.Exception, match="did not parse"):
        test_documented_commands_parse("x.md", ["run", "--no-such-option"], monkeypatch, capsys)
    with pytest.raises(pytest.fail.Exception, match="did not parse"):
        test_documented_commands_parse("x.md", ["nosuch"], monkeypatch, capsys)


def test_commands_are_found() -> None:
    commands = {argv[0] for _, argv in all_commands() if argv}
    assert {"run", "gate", "report", "ingest", "fuzz", "mutate", "bench"} <= commands


def test_the_gate_examples_run_on_the_committed_fixtures(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    ran = 0
    for _, argv in all_commands():
        paths = [a for a in argv if a.startswith("fixtures/")]
        if argv[:1] == ["gate"] and paths and all(glob.glob(a) for a in paths):
            expected = 1 if "version:3.13.0" in argv else 0  # the page says: exit 1, a regression
            assert gate_main(argv[1:]) == expected, shlex.join(argv)
            ran += 1
    capsys.readouterr()
    assert ran >= 2
