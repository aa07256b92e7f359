"""Facts the package states once: its version, its profile names, its package data. No sockets."""

from __future__ import annotations

import tomllib
from pathlib import Path

import conformance
from conformance import profiles
from conformance.model import cases

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_pyproject_takes_its_version_from_the_package() -> None:
    assert "version" not in PYPROJECT["project"]
    assert "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "conformance.__version__"}


def test_the_reference_broker_reports_the_package_version() -> None:
    from conformance.broker import __version__ as broker_version

    assert broker_version == conformance.__version__


def test_profile_names_are_listed_once() -> None:
    assert cases.PROFILES == tuple(profiles.PROFILE_DESCRIPTIONS)
    assert profiles.DEFAULT_PROFILE in cases.PROFILES


def test_every_package_data_glob_matches_a_file() -> None:
    for package, globs in PYPROJECT["tool"]["setuptools"]["package-data"].items():
        base = ROOT / package.replace(".", "/")
        for pattern in globs:
            assert list(base.glob(pattern)), f"{package}: {pattern} matches nothing"
