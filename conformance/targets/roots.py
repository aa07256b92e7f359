"""A RabbitMQ installed in another root filesystem, run under ``chroot``: the second RabbitMQ release
of a machine (``--broker local:rabbitmq@trixie``, ``local:rabbitmq-cluster@trixie``).

A root is named by a Debian suite that ships a rabbitmq-server (``bullseye``, ``bookworm``,
``trixie``, ``forky``, ``sid``: :data:`SUITES`), the root ``scripts/rabbitmq-root build SUITE``
caches in ``$AMQP_CONFORMANCE_ROOTS`` (default ``~/.cache/amqp-conformance/roots``), or by an
absolute directory holding a Debian ``rabbitmq-server``. The release a root holds is read from the
root itself (its dpkg database: :func:`package_version`), never from a table: testing and unstable
move on. A node started in it runs as the root's own ``rabbitmq`` user (the uid and
gid read from the root's ``/etc/passwd``, never resolved on the host), with a clean environment
(``env -i``: nothing of the host's leaks in), in-root paths, and its folder under ``ROOT/tmp``.
The host's ``erl_call`` reaches it (HOME = the node's home seen from the host, where its cookie is).

Mounts: ``ROOT/proc`` (proc) and ``ROOT/dev`` (a bind of ``/dev``) are needed while a node runs
there. They are counted across processes (xdist workers start private brokers in the same root):
each user holds a token file ``ROOT/run/amqpc-mounts/<pid>-<token>`` (taken under an ``flock``);
the last one released, and no process left with its root in ROOT, unmounts both. Tokens of dead
processes are ignored, and :func:`sweep_mounts` (run before every start and by the cluster's
leftovers sweep) unmounts what a killed run left mounted.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.targets.base import TargetError

ROOTS_ENV = "AMQP_CONFORMANCE_ROOTS"
STAMP = ".amqp-conformance-root"
#: the suites scripts/rabbitmq-root builds, and the RabbitMQ each shipped when written (for messages
#: about a root not built yet only: a built root's release is read from it, :func:`package_version`)
SUITES = {
    "bullseye": "Debian 11, RabbitMQ 3.8.9",
    "bookworm": "Debian 12, RabbitMQ 3.10.8",
    "trixie": "Debian 13, RabbitMQ 4.0.5",
    "forky": "Debian 14 (testing), RabbitMQ 4.3.x when written",
    "sid": "Debian unstable, RabbitMQ 4.3.x when written",
}
DPKG_STATUS = "var/lib/dpkg/status"
SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
EPMD = "/usr/lib/erlang/bin/epmd"
LIB = "/usr/lib/rabbitmq/lib"
PATH = "/usr/lib/rabbitmq/bin:/usr/bin:/bin"
#: the mounts a node needs inside the root, in mount order (unmounted in reverse)
MOUNTS = ("proc", "dev")
HOLDERS = "run/amqpc-mounts"


def roots_dir() -> Path:
    return Path(os.environ.get(ROOTS_ENV) or Path.home() / ".cache" / "amqp-conformance" / "roots")


@dataclass(frozen=True)
class Root:
    """A root filesystem holding a RabbitMQ, and how to run a command in it."""

    path: Path
    label: str  # what the kind names: a suite (trixie) or the directory
    uid: int
    gid: int

    def outside(self, inner: str | Path) -> Path:
        """An in-root path as the host sees it."""
        return self.path / str(inner).lstrip("/")

    def inside(self, outer: Path) -> str:
        """A host path below the root as the root's processes see it."""
        return "/" + str(outer.resolve().relative_to(self.path))

    def command(self, env: Mapping[str, str], argv: Sequence[str], cwd: str | None = None) -> list[str]:
        """``argv`` run in the root as its rabbitmq user with exactly ``env`` (in-root values), in the
        in-root folder ``cwd`` (chroot's own is the root's /, which that user cannot write)."""
        return ["chroot", f"--userspec={self.uid}:{self.gid}", str(self.path), "/usr/bin/env", "-i",
                *(["--chdir", cwd] if cwd else []), *(f"{k}={v}" for k, v in env.items()), *argv]

    def own(self, folder: Path) -> None:
        """``folder`` and everything below it owned by the root's rabbitmq user (the node writes there)."""
        for dirpath, dirnames, filenames in os.walk(folder):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.lchown(name, self.uid, self.gid)

    def version(self) -> str:
        """The RabbitMQ release in the root (its dpkg database, else its release directory's name),
        or ``?``."""
        release = package_version(self.path)
        if release:
            return release
        found = sorted(self.outside(LIB).glob("rabbitmq_server-*"))
        return found[-1].name.removeprefix("rabbitmq_server-") if found else "?"


def package_version(path: Path, package: str = "rabbitmq-server") -> str:
    """The upstream release of ``package`` installed in the root at ``path``, read from the root's
    dpkg status file (``4.3.6`` of ``4.3.6-1``, ``3.8.9`` of ``3.8.9-3+deb11u1``); ``""`` if the
    package is not installed there or the file is unreadable."""
    try:
        text = (path / DPKG_STATUS).read_text(errors="replace")
    except OSError:
        return ""
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " ")
        if fields.get("Package") == package and fields.get("Status", "").endswith(" installed"):
            version = fields.get("Version", "")
            version = version.split(":", 1)[-1]  # an epoch
            return version.rsplit("-", 1)[0] if "-" in version else version
    return ""


def resolve(text: str) -> Root:
    """The root a kind's argument names; TargetError (one line, saying how to build it) if unusable."""
    if not text:
        raise TargetError(f"names no root (use a suite: {' | '.join(SUITES)}, or an absolute directory)")
    if text.startswith("/"):
        path = Path(text)
    elif text in SUITES:
        path = roots_dir() / text
        if not (path / STAMP).exists():
            raise TargetError(f"the {text} root ({SUITES[text]}) is not built at {path}; build it once with: "
                              f"scripts/rabbitmq-root build {text}")
    else:
        raise TargetError(f"unknown root {text!r} (use a suite: {' | '.join(SUITES)}, "
                          "or an absolute directory)")
    path = path.resolve()
    if not (path / SERVER.lstrip("/")).exists():
        raise TargetError(f"no rabbitmq-server in the root {path} ({SERVER} is missing)")
    if os.geteuid() != 0:
        raise TargetError(f"running RabbitMQ from the root {path} needs root (chroot, mount)")
    uid, gid = _rabbitmq_user(path)
    return Root(path, text, uid, gid)


def _rabbitmq_user(path: Path) -> tuple[int, int]:
    try:
        for line in (path / "etc" / "passwd").read_text().splitlines():
            fields = line.split(":")
            if fields[0] == "rabbitmq":
                return int(fields[2]), int(fields[3])
    except (OSError, ValueError, IndexError) as exc:
        raise TargetError(f"cannot read the rabbitmq user of the root {path}: {exc}") from exc
    raise TargetError(f"the root {path} has no rabbitmq user in /etc/passwd")


# -- mounts, counted across processes ------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[Path]:
    holders = path / HOLDERS
    holders.mkdir(parents=True, exist_ok=True)
    with open(holders.parent / "amqpc-mounts.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield holders
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _live_holders(holders: Path) -> list[Path]:
    live = []
    for token in holders.iterdir():
        try:
            pid = int(token.name.split("-", 1)[0])
        except ValueError:
            continue
        if _alive(pid):
            live.append(token)
        else:
            token.unlink(missing_ok=True)  # its process died without releasing
    return live


def processes_in(path: Path) -> list[int]:
    """The processes whose root directory is ``path``."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(proc / "root") == str(path):
                    found.append(int(proc.name))
    return found


def mounted(path: Path) -> list[Path]:
    """The mounts of :data:`MOUNTS` present under ``path``."""
    return [path / m for m in MOUNTS if os.path.ismount(path / m)]


def _mount(path: Path) -> None:
    for name, argv in (("proc", ["mount", "-t", "proc", "proc"]), ("dev", ["mount", "--bind", "/dev"])):
        target = path / name
        if os.path.ismount(target):
            continue
        target.mkdir(exist_ok=True)
        done = subprocess.run([*argv, str(target)], capture_output=True, timeout=30)
        if done.returncode != 0:
            raise TargetError(f"cannot mount {target}: {done.stderr.decode(errors='replace').strip()}")


def _unmount(path: Path) -> None:
    for target in reversed([path / m for m in MOUNTS]):
        if os.path.ismount(target):
            done = subprocess.run(["umount", str(target)], capture_output=True, timeout=30)
            if done.returncode != 0:  # busy: detach now, the kernel drops it when the last user goes
                subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=30)


def acquire(root: Root) -> Path:
    """Mount what a node needs in ``root`` (if not mounted yet) and hold it; returns the token to
    :func:`release`."""
    sweep_mounts(root.path)
    with _locked(root.path) as holders:
        _mount(root.path)
        token = holders / f"{os.getpid()}-{secrets.token_hex(4)}"
        token.touch()
    return token


def release(root: Root, token: Path, wait: float = 15.0) -> None:
    """Give up ``token``; the last holder unmounts once no process has its root in ``root`` (waiting
    up to ``wait`` seconds for stopped nodes to go)."""
    with _locked(root.path) as holders:
        token.unlink(missing_ok=True)
        if _live_holders(holders):
            return
        deadline = time.monotonic() + wait
        while processes_in(root.path) and time.monotonic() < deadline:
            time.sleep(0.1)  # a killed VM is reaped asynchronously; nothing to wait on
        # The last holder: every node started in this root had a holder, so what still runs there
        # was left by a stop that did not reach it (a 3.8.9 node under chroot outlived its group's
        # SIGTERM and SIGKILL in CI, and the run ended with a node left running): killed, then unmounted.
        for pid in processes_in(root.path):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + wait
        while processes_in(root.path) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not processes_in(root.path):
            _unmount(root.path)


def sweep_mounts(path: Path | None = None) -> list[Path]:
    """Unmount what killed runs left mounted in ``path`` (default: every root under
    :func:`roots_dir`): no live holder and no process in the root. Returns the roots swept."""
    swept = []
    candidates = [path] if path is not None else [p for p in roots_dir().glob("*/") if p.is_dir()]
    for root in candidates:
        if os.geteuid() != 0 or not mounted(root):
            continue
        with _locked(root) as holders:
            if not _live_holders(holders) and not processes_in(root.resolve()):
                _unmount(root)
                swept.append(root)
    return swept


def stray_mounts() -> list[Path]:
    """Mounts under the roots of :func:`roots_dir` that no live process holds and no process runs
    in (what a test's leftovers check reports; what :func:`sweep_mounts` would unmount). A mount a
    process still runs in is in use: when that process was left behind by a run, the run's own
    process check names it (on a shared machine it is often somebody else's run)."""
    found = []
    for where in (p for p in roots_dir().glob("*/") if p.is_dir()):
        holders = where / HOLDERS
        pids = [int(t.name.split("-", 1)[0]) for t in holders.iterdir()
                if t.name.split("-", 1)[0].isdigit()] if holders.is_dir() else []
        if mounted(where) and not any(_alive(pid) for pid in pids) and not processes_in(where.resolve()):
            found += mounted(where)
    return found
