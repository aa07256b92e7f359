"""The root filesystems of local:rabbitmq@ROOT: which suites are known, and the release a root holds
read from the root's own dpkg database (sid moves on: no table says what it holds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.targets import roots
from conformance.targets.base import TargetError
from conformance.targets.kinds import kind_of

_STATUS = """Package: erlang-base
Status: install ok installed
Version: 1:29.0.1+dfsg-1

Package: rabbitmq-server
Status: install ok installed
Priority: optional
Version: {version}
Description: AMQP server written in Erlang
 RabbitMQ is an implementation of AMQP,
 Version: 9.9.9 (a continuation line, not a field)

Package: zlib1g
Status: install ok installed
Version: 1:1.3.dfsg-3
"""


def _root(tmp_path: Path, version: str, status: str = _STATUS) -> Path:
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / roots.DPKG_STATUS).write_text(status.format(version=version))
    return tmp_path


@pytest.mark.parametrize(("package", "release"), [
    ("4.3.6-1", "4.3.6"), ("3.8.9-3+deb11u1", "3.8.9"), ("3.10.8-1.1", "3.10.8"), ("4.0.5-6", "4.0.5"),
    ("1:4.4.0-1", "4.4.0"), ("4.3.7", "4.3.7"),
])
def test_the_release_is_read_from_the_roots_dpkg(tmp_path: Path, package: str, release: str) -> None:
    path = _root(tmp_path, package)
    assert roots.package_version(path) == release
    assert roots.Root(path, "sid", 0, 0).version() == release


def test_a_root_without_the_package_holds_no_release(tmp_path: Path) -> None:
    assert roots.package_version(tmp_path) == ""  # no dpkg database at all
    removed = _STATUS.replace("install ok installed\nPriority", "deinstall ok config-files\nPriority")
    assert roots.package_version(_root(tmp_path, "4.3.6-1", removed)) == ""
    # neither dpkg nor a release directory: unknown, said so
    assert roots.Root(tmp_path, "sid", 0, 0).version() == "?"


def test_every_debian_suite_shipping_rabbitmq_is_a_root() -> None:
    assert list(roots.SUITES) == ["bullseye", "bookworm", "trixie", "forky", "sid"]
    for suite in roots.SUITES:
        for kind in ("local:rabbitmq@", "local:rabbitmq-cluster@"):
            found = kind_of(kind + suite)
            assert found is not None and found.name == kind
            assert suite in found.description


def test_an_unbuilt_suite_says_how_to_build_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(roots.ROOTS_ENV, str(tmp_path))
    with pytest.raises(TargetError, match=r"the sid root \(Debian unstable.*scripts/rabbitmq-root build sid"):
        roots.resolve("sid")
    with pytest.raises(TargetError, match=r"unknown root 'wheezy' \(use a suite: bullseye \| bookworm"):
        roots.resolve("wheezy")


def test_the_script_knows_the_same_suites() -> None:
    script = (Path(__file__).parents[2] / "scripts" / "rabbitmq-root").read_text()
    case_line = next(line for line in script.splitlines() if line.strip().startswith("bullseye|"))
    assert case_line.strip().removesuffix(") ;;").split("|") == list(roots.SUITES)


def test_a_command_in_the_root_runs_in_the_folder_given() -> None:
    root = roots.Root(path=Path("/r"), label="trixie", uid=101, gid=102)
    argv = root.command({"A": "1"}, ["/usr/bin/x", "y"], cwd="/tmp/node")
    assert argv == ["chroot", "--userspec=101:102", "/r", "/usr/bin/env", "-i", "--chdir", "/tmp/node",
                    "A=1", "/usr/bin/x", "y"]
    assert "--chdir" not in root.command({"A": "1"}, ["/usr/bin/x"])
