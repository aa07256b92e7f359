"""What can be checked without a Docker engine or tox run: compose file, image build file, tox, extras."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_current_brokers_with_health_checks() -> None:
    services = _compose()["services"]
    images = {name: svc["image"] for name, svc in services.items() if "image" in svc and "build" not in svc}
    assert images["rabbitmq"].startswith("rabbitmq:3.13")
    assert images["rabbitmq4"].startswith("rabbitmq:4")
    assert images["lavinmq"].startswith("cloudamqp/lavinmq:")
    for name in images:
        check = services[name]["healthcheck"]
        assert check["test"][0] == "CMD" and check["retries"] >= 10, name
        assert all(p.startswith("127.0.0.1:") for p in services[name]["ports"]), name


def test_compose_suites_wait_for_the_broker_they_test() -> None:
    services = _compose()["services"]
    suites = {name: svc for name, svc in services.items() if name.startswith("suite")}
    assert set(suites) == {"suite", "suite-rabbitmq4", "suite-lavinmq"}
    for name, suite in suites.items():
        assert suite["build"] == "."  # the Dockerfile below
        url = suite["command"][suite["command"].index("--broker-url") + 1]
        host = url.split("@", 1)[1].split(":", 1)[0]
        assert url.startswith("amqp://") and url.endswith(f"@{host}:5672/"), name
        assert suite["depends_on"] == {host: {"condition": "service_healthy"}}, name
        assert suite.get("profiles") == services[host].get("profiles"), name


def _dockerfile() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word, rest.strip()))
    return out


def test_dockerfile_pins_its_distribution_and_runs_as_a_user() -> None:
    lines = _dockerfile()
    assert lines[0][0] == "FROM"
    base = lines[0][1]
    assert re.fullmatch(r"python:3\.11-slim-bookworm", base), (
        "pin the Debian release: openjdk-17 is not in Debian 13"
    )
    users = [rest for word, rest in lines if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("ENTRYPOINT", '["amqp-conformance"]') in lines
    run = " ".join(rest for word, rest in lines if word == "RUN")
    assert "'.[report" in run, "the image builds reports: it needs the [report] extra"
    for src in ("pyproject.toml", "conformance"):
        assert any(word == "COPY" and src in rest for word, rest in lines) and (ROOT / src).exists()


def _apt_packages() -> list[str]:
    run = " ".join(rest for word, rest in _dockerfile() if word == "RUN")
    m = re.search(r"apt-get install ([^&]+)", run)
    assert m
    return [w for w in m.group(1).split() if not w.startswith("-")]


def test_dockerfile_packages_exist_in_its_distribution() -> None:
    """Checked against this machine's package lists when it runs the same release (Debian 12)."""
    os_release = Path("/etc/os-release")
    if not os_release.exists() or "VERSION_CODENAME=bookworm" not in os_release.read_text():
        pytest.skip("not a Debian 12 (bookworm) host: its package lists say nothing about the image's")
    if shutil.which("apt-cache") is None:
        pytest.skip("no apt-cache")
    packages = _apt_packages()
    assert packages == ["openjdk-17-jre-headless"]
    for pkg in packages:
        proc = subprocess.run(
            ["apt-cache", "show", "--no-all-versions", pkg], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0 and f"Package: {pkg}" in proc.stdout, f"{pkg} is not in bookworm's lists"


def test_tox_passes_the_suite_its_environment() -> None:
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(ROOT / "tox.ini")
    assert {"testenv:unit", "testenv:lint", "testenv:suite", "testenv:suite-rabbitmq"} <= set(ini.sections())
    passenv = ini["testenv"]["passenv"].split()
    assert "AMQP_CONFORMANCE_*" in passenv and "JAVA_HOME" in passenv
    for env in ("suite", "suite-rabbitmq"):
        assert "passenv" not in ini[f"testenv:{env}"], "an env's own passenv would replace the inherited one"
    assert "--broker local:rabbitmq" in ini["testenv:suite-rabbitmq"]["commands"]
    if shutil.which("tox") is not None:
        proc = subprocess.run(
            ["tox", "config", "-e", "suite", "-k", "pass_env"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0 and "AMQP_CONFORMANCE_*" in proc.stdout and "JAVA_HOME" in proc.stdout


def test_entry_points_and_package_data() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["scripts"]["amqp-conformance"] == "conformance.cli:main"
    assert meta["project"]["entry-points"]["pytest11"]["conformance"] == "conformance.plugin"
    assert (ROOT / "conformance" / "data" / "amqp0-9-1.xml").exists()


def test_the_plain_install_is_the_suite_and_the_gate() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(meta["dependencies"]).lower()
    assert "pyspark" not in core and "testcontainers" not in core
    extras = meta["optional-dependencies"]
    assert any(d.startswith("pyspark") for d in extras["report"])
    assert any(d.startswith("testcontainers") for d in extras["containers"])
    assert "amqp-conformance[report,containers]" in extras["dev"]
    # The modules a plain install runs import neither.
    from conformance.extras import EXTRAS

    assert EXTRAS == {"report": "pyspark", "containers": "testcontainers"}


def test_the_suite_and_the_gate_import_no_extra() -> None:
    import sys

    code = ("import sys, conformance.cli, conformance.plugin, conformance.gate.cli, conformance.targets, "
            "conformance.targets.container, conformance.report, conformance.report.cli; "
            "bad = sorted(m for m in ('pyspark', 'testcontainers', 'docker') if m in sys.modules); "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
