"""The Java check before a report's JVM starts: asked once per binary, remembered after."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from conformance.report.session import EnvironmentProblem, check_java


def _java(folder: Path, version: str, calls: Path) -> str:
    java = folder / "java"
    java.write_text(f"#!/bin/sh\necho x >> {calls}\necho 'openjdk version \"{version}\" 2021-09-14' >&2\n",
                    encoding="utf-8")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return str(java)


def _asked(calls: Path) -> int:
    return len(calls.read_text(encoding="utf-8").split()) if calls.exists() else 0


def test_a_passed_check_is_remembered_per_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = tmp_path / "calls"
    java = _java(tmp_path, "17.0.8", calls)
    assert check_java(java) == 17
    assert check_java(java) == 17
    assert _asked(calls) == 1, "the second check asked the same binary again"
    # Another binary at the same path (a JDK upgraded or replaced in place) is asked anew.
    _java(tmp_path, "11.0.20", calls)
    with pytest.raises(EnvironmentProblem, match="is Java 11"):
        check_java(java)
    assert _asked(calls) == 2
    # A failed check is not remembered: it is asked (and fails) every time.
    with pytest.raises(EnvironmentProblem, match="is Java 11"):
        check_java(java)
    assert _asked(calls) == 3


def test_an_unwritable_cache_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file: nothing can be created under it
    calls = tmp_path / "calls"
    java = _java(tmp_path, "21.0.1", calls)
    assert check_java(java) == 21
    assert check_java(java) == 21
    assert _asked(calls) == 2
