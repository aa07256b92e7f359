"""The container target without a Docker engine: its configuration, its controller, its one-line refusals."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from conformance.protocol.wire import URL
from conformance.targets import container as ct
from conformance.targets.base import TargetError


def test_spec_from_the_environment() -> None:
    spec = ct.container_spec("cloudamqp/lavinmq:2.0", {
        "AMQP_CONFORMANCE_CONTAINER_USER": "vendor", "AMQP_CONFORMANCE_CONTAINER_PASSWORD": "p@ss:word",
        "AMQP_CONFORMANCE_CONTAINER_VHOST": "tests/1", "AMQP_CONFORMANCE_CONTAINER_ENV": "A=1 B=x=y",
        "AMQP_CONFORMANCE_CONTAINER_PORT": "5673"})
    assert (spec.family, spec.user, spec.vhost, spec.port) == ("lavinmq", "vendor", "tests/1", 5673)
    assert spec.env == (("A", "1"), ("B", "x=y"))
    assert spec.url("localhost", 4000) == URL.parse("amqp://vendor:p%40ss%3Aword@localhost:4000/tests%2F1")
    default = ct.container_spec("rabbitmq:4.0-management", {})
    assert (default.family, default.user, default.password, default.vhost) == (
        "rabbitmq",
        "guest",
        "guest",
        "/",
    )
    assert default.url("h", 1) == URL.parse("amqp://guest:guest@h:1/")


@pytest.mark.parametrize(("image", "family"), [
    ("rabbitmq:3.13", "rabbitmq"), ("docker.io/library/rabbitmq:4.0-management", "rabbitmq"),
    ("cloudamqp/lavinmq:2.2", "lavinmq"), ("rabbitmq@sha256:abc", "rabbitmq"), ("garagemq:latest", "other"),
    ("myrepo/rabbitmq-custom:1", "other"),
])
def test_image_family(image: str, family: str) -> None:
    assert ct.image_family(image) == family


@pytest.mark.parametrize(("env", "message"), [
    ({"AMQP_CONFORMANCE_CONTAINER_ENV": "NOEQUALS"}, "is not KEY=VALUE"),
    ({"AMQP_CONFORMANCE_CONTAINER_PORT": "x"}, "must be numbers"),
])
def test_bad_configuration_is_one_line(env: dict[str, str], message: str) -> None:
    with pytest.raises(TargetError, match=message):
        ct.container_spec("rabbitmq:3.13", env)


class FakeDockerClient:
    def __init__(self, **_: Any) -> None:
        pass


def test_rabbitmq_images_use_rabbitmqcontainer_with_a_fixed_host_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("testcontainers")
    import testcontainers.core.container as tcc

    monkeypatch.setattr(tcc, "DockerClient", FakeDockerClient)
    spec = ct.container_spec(
        "rabbitmq:3.13", {"AMQP_CONFORMANCE_CONTAINER_VHOST": "v", "AMQP_CONFORMANCE_CONTAINER_ENV": "X=1"}
    )
    c = ct.build_container(spec, 45678)
    assert type(c).__name__ == "RabbitMqContainer"
    assert c.env["RABBITMQ_DEFAULT_VHOST"] == "v" and c.env["X"] == "1"
    assert {int(k): v for k, v in c.ports.items()} == {5672: 45678}
    other = ct.build_container(ct.container_spec("cloudamqp/lavinmq:2.2", {}), 45679)
    assert type(other).__name__ == "DockerContainer"
    assert {int(k): v for k, v in other.ports.items()} == {5672: 45679}


class FakeWrapped:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def stop(self, timeout: int) -> None:
        self.log.append(f"stop {timeout}")

    def kill(self) -> None:
        self.log.append("kill")

    def start(self) -> None:
        self.log.append("start")


class FakeContainer:
    def __init__(self, log: list[str]) -> None:
        self.wrapped = FakeWrapped(log)

    def get_wrapped_container(self) -> FakeWrapped:
        return self.wrapped


def test_the_controller_restarts_the_same_container(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    monkeypatch.setattr(ct, "amqp_ready", lambda url, deadline, what: log.append(f"ready {url}"))
    ctl = ct.ContainerController(FakeContainer(log), ct.container_spec("rabbitmq:3.13", {}),
                                 URL.parse("amqp://g:g@h:1/"))
    ctl.restart()
    ctl.restart(kill=True)
    ready = f"ready {URL.parse('amqp://g:g@h:1/')}"
    assert log == ["stop 30", "start", ready, "kill", "start", ready]


def test_without_the_extra_one_line_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "testcontainers", None)
    with pytest.raises(TargetError) as info:
        ct.start_container("rabbitmq:3.13")
    text = str(info.value)
    assert "\n" not in text
    assert text == ("container:rabbitmq:3.13 needs the [containers] extra (testcontainers is not installed): "
                    "pip install 'amqp-conformance[containers]'")


def test_without_a_docker_engine_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("testcontainers")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(TargetError) as info:
        ct.start_container("rabbitmq:3.13")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith(
        "container:rabbitmq:3.13 needs a running Docker engine: no Docker engine answers"
    )
