"""``url``: any broker at a URL. Restart cases need ``--restart-cmd`` (a shell command that
restarts that broker and returns when it is back)."""

from __future__ import annotations

import shlex
import subprocess
import time

from conformance.protocol.raw import redact
from conformance.protocol.wire import URL
from conformance.targets.base import RESTRICTED, Target, TargetError
from conformance.targets.readiness import amqp_ready

NO_RESTRICTED_USER = (
    "the access cases need a second user with restricted permissions: give --restricted-url "
    f"amqp://USER:PASS@host/vhost of a user with configure {RESTRICTED.configure!r} write "
    f"{RESTRICTED.write!r} "
    f"read {RESTRICTED.read!r} in that vhost (see the scenarios README, 'access')"
)


class CommandController:
    """Restarts a broker the suite does not own by running a user-given command."""

    def __init__(self, command: str, url: URL, timeout: float = 120.0) -> None:
        self.command = command
        self.url = url
        self.timeout = timeout

    def _run(self) -> None:
        try:
            done = subprocess.run(
                shlex.split(self.command), capture_output=True, text=True, timeout=self.timeout
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TargetError(f"--restart-cmd failed: {exc}") from exc
        if done.returncode != 0:
            raise TargetError(f"--restart-cmd exited {done.returncode}: {done.stderr.strip()[:200]}")
        amqp_ready(self.url, time.monotonic() + self.timeout, f"broker at {redact(self.url)}")

    def stop(self) -> None:
        raise TargetError("a url target can only be restarted as a whole (--restart-cmd)")

    kill = stop
    start = stop

    def restart(self, *, kill: bool = False) -> None:
        self._run()


def url_target(url: URL, restart_cmd: str | None) -> Target:
    ctl = CommandController(restart_cmd, url) if restart_cmd else None
    return Target(name="url", url=url, controller=ctl, restricted_unsupported=NO_RESTRICTED_USER)
