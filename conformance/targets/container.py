"""``container:IMAGE``: a broker in a Docker container through testcontainers (needs a Docker engine
and the ``[containers]`` extra).

RabbitMQ images run as testcontainers' ``RabbitMqContainer`` (it creates the user and vhost
through ``RABBITMQ_DEFAULT_*``); any other image (LavinMQ, …) runs as a plain container with the
credentials, vhost and environment given by:

- ``AMQP_CONFORMANCE_CONTAINER_USER`` / ``_PASSWORD`` (default guest / guest),
- ``AMQP_CONFORMANCE_CONTAINER_VHOST`` (default ``/``),
- ``AMQP_CONFORMANCE_CONTAINER_ENV`` (``KEY=VALUE`` pairs separated by whitespace), passed to the
  container,
- ``AMQP_CONFORMANCE_CONTAINER_PORT`` (the AMQP port inside the container, default 5672),
- ``AMQP_CONFORMANCE_CONTAINER_START_TIMEOUT`` (seconds until AMQP answers, default 120).

The target has a controller: the container is stopped, killed and started again in place, so the
restart (durability) cases run there too. The host port is bound once, so the URL survives a
restart (an ephemeral mapping would move on every start).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conformance.extras import missing_extra
from conformance.protocol.wire import URL
from conformance.targets.base import StopStartRestart, Target, TargetError, free_port
from conformance.targets.readiness import amqp_ready

ENV_PREFIX = "AMQP_CONFORMANCE_CONTAINER_"
DEFAULT_START_TIMEOUT = 120.0
STOP_TIMEOUT = 30


@dataclass(frozen=True)
class ContainerSpec:
    image: str
    family: str  # rabbitmq | lavinmq | other: decides how credentials reach the broker
    user: str
    password: str
    vhost: str
    env: tuple[tuple[str, str], ...]
    port: int
    start_timeout: float

    def url(self, host: str, host_port: int) -> URL:
        return URL(host=host, port=host_port, user=self.user, password=self.password, vhost=self.vhost)


def image_family(image: str) -> str:
    """``rabbitmq:4.0-management`` → rabbitmq; ``cloudamqp/lavinmq:2`` → lavinmq; else other."""
    name = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0].lower()
    return name if name in ("rabbitmq", "lavinmq") else "other"


def container_spec(image: str, environ: Mapping[str, str] | None = None) -> ContainerSpec:
    env = os.environ if environ is None else environ
    if not image.strip():
        raise TargetError(
            "container: names no image (use --broker container:IMAGE, e.g. container:rabbitmq:3.13)"
        )

    def get(key: str, default: str) -> str:
        return env.get(ENV_PREFIX + key, "") or default

    pairs: list[tuple[str, str]] = []
    for item in get("ENV", "").split():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TargetError(f"{ENV_PREFIX}ENV: {item!r} is not KEY=VALUE")
        pairs.append((key, value))
    try:
        port = int(get("PORT", "5672"))
        timeout = float(get("START_TIMEOUT", str(DEFAULT_START_TIMEOUT)))
    except ValueError as exc:
        raise TargetError(f"{ENV_PREFIX}PORT / START_TIMEOUT must be numbers ({exc})") from exc
    return ContainerSpec(image.strip(), image_family(image), get("USER", "guest"), get("PASSWORD", "guest"),
                         get("VHOST", "/"), tuple(pairs), port, timeout)


def docker_available() -> str | None:
    """None when a Docker engine answers, else a one-line reason."""
    try:
        import docker  # testcontainers depends on the docker SDK
    except ImportError:
        return "the docker Python SDK is not installed: pip install 'amqp-conformance[containers]'"
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds; all mean "no engine"
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"no Docker engine answers ({first[:160]})"
    return None


def build_container(spec: ContainerSpec, host_port: int) -> Any:
    """The testcontainers object for ``spec`` (not started)."""
    from testcontainers.core.container import DockerContainer

    container: Any
    if spec.family == "rabbitmq":
        try:
            from testcontainers.community.rabbitmq import RabbitMqContainer  # testcontainers >= 4.10
        except ImportError:
            from testcontainers.rabbitmq import RabbitMqContainer
        container = RabbitMqContainer(spec.image, port=spec.port, username=spec.user, password=spec.password,
                                      vhost=spec.vhost)
    else:
        container = DockerContainer(spec.image).with_exposed_ports(spec.port)
    for key, value in spec.env:
        container = container.with_env(key, value)
    return container.with_bind_ports(spec.port, host_port)


class ContainerController(StopStartRestart):
    """Stop / kill / start the same container (its data stays in the container's filesystem)."""

    def __init__(self, container: Any, spec: ContainerSpec, url: URL) -> None:
        self.container = container
        self.spec = spec
        self.url = url

    def _docker(self) -> Any:
        return self.container.get_wrapped_container()

    def stop(self) -> None:
        self._docker().stop(timeout=STOP_TIMEOUT)

    def kill(self) -> None:
        self._docker().kill()

    def start(self) -> None:
        try:
            self._docker().start()
        except Exception as exc:  # the docker SDK raises many kinds: one line for the case
            raise TargetError(f"cannot start container {self.spec.image} again: {exc}") from exc
        amqp_ready(self.url, time.monotonic() + self.spec.start_timeout, f"container {self.spec.image}")


def start_container(image: str) -> Target:
    spec = container_spec(image)
    problem = missing_extra("containers", f"container:{spec.image}")
    if problem is not None:
        raise TargetError(problem)
    reason = docker_available()
    if reason is not None:
        raise TargetError(f"container:{spec.image} needs a running Docker engine: {reason}; "
                          "start Docker, or use --broker reference|local:rabbitmq|url")
    host_port = free_port()
    container = build_container(spec, host_port)
    try:
        container.start()
    except Exception as exc:  # pulling or starting fails in many ways: one line
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TargetError(f"cannot start container {spec.image}: {first[:200]}") from exc
    url = spec.url(container.get_container_host_ip(), host_port)
    try:
        amqp_ready(url, time.monotonic() + spec.start_timeout, f"container {spec.image}")
    except TargetError:
        container.stop()
        raise
    controller = ContainerController(container, spec, url)
    return Target(name=f"container:{spec.image}", url=url, controller=controller, cleanup=[container.stop])
