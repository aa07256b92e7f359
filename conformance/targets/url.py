"""``url``: any broker at a URL. Restart cases need ``--restart-cmd`` (a shell command that
restarts that broker and returns when it is back)."""

from __future__ import annotations

import contextlib
import os
import signal
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
        """Run the command with ``/bin/sh -c`` (so ``systemctl restart x && sleep 1``, pipes and
        variables work as the option's help says) in a process group of its own, killed whole when
        it outlives the timeout; then wait for the broker to answer AMQP again."""
        try:
            proc = subprocess.Popen(["/bin/sh", "-c", self.command], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
        except OSError as exc:
            raise TargetError(f"--restart-cmd failed: {exc}") from exc
        try:
            _out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise TargetError(f"--restart-cmd did not end within {self.timeout:.0f} s (killed)") from None
        except BaseException:  # ^C: the command's whole group goes too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        if proc.returncode != 0:
            raise TargetError(f"--restart-cmd exited {proc.returncode}: {err.strip()[:200]}")
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
