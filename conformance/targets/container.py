"""``container:IMAGE``: a broker in a Docker container through testcontainers (needs a Docker engine)."""

from __future__ import annotations

import time

from conformance.targets.base import Target, TargetError
from conformance.targets.readiness import amqp_ready


def docker_available() -> str | None:
    """None when a Docker engine answers, else a one-line reason."""
    try:
        import docker  # testcontainers depends on the docker SDK
    except ImportError:
        return "the docker Python SDK is not installed (pip install testcontainers)"
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds; all mean "no engine"
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"no Docker engine answers ({first[:160]})"
    return None


def start_container(image: str) -> Target:
    reason = docker_available()
    if reason is not None:
        raise TargetError(f"container:{image} needs a running Docker engine: {reason}; "
                          "start Docker, or use --broker reference|local:rabbitmq|url")
    from testcontainers.core.container import DockerContainer

    container = DockerContainer(image).with_exposed_ports(5672)
    try:
        container.start()
    except Exception as exc:
        raise TargetError(f"cannot start container {image}: {exc}") from exc
    host = container.get_container_host_ip()
    port = int(container.get_exposed_port(5672))
    url = f"amqp://guest:guest@{host}:{port}/"
    try:
        amqp_ready(url, time.monotonic() + 120, f"container {image}")
    except TargetError:
        container.stop()
        raise
    return Target(name=f"container:{image}", url=url, controller=None, cleanup=[container.stop])
