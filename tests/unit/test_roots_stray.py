"""What a leftovers check calls a stray mount of a RabbitMQ root: mounted, no live holder, and no
process running in it (a mount in use belongs to whoever runs there, named by its own checks)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conformance.targets import roots


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(roots.ROOTS_ENV, str(tmp_path))
    where = tmp_path / "sid"
    (where / roots.HOLDERS).mkdir(parents=True)
    monkeypatch.setattr(roots, "mounted", lambda path: [path / "proc"] if path.name == "sid" else [])
    return where


def test_a_mount_unheld_and_unused_is_stray(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(roots, "processes_in", lambda path: [])
    assert roots.stray_mounts() == [root / "proc"]


def test_a_mount_a_process_runs_in_is_not_stray(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(roots, "processes_in", lambda path: [4355])
    assert roots.stray_mounts() == []


def test_a_mount_a_live_process_holds_is_not_stray(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(roots, "processes_in", lambda path: [])
    (root / roots.HOLDERS / f"{os.getpid()}-abcd").touch()
    assert roots.stray_mounts() == []
