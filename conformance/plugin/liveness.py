"""Never cascade: after a TIMEOUT, is the broker still answering? If not, the run stops.

A broker that a case has wedged would make every later case wait out its timeout and be
reported TIMEOUT for something it never observed. So after a TIMEOUT the worker opens a fresh
connection and makes one queue round trip (a bounded few seconds). If that gets no answer, it
writes a marker file next to the results; every process of the run (all xdist workers) sees it
before its next case and records the cases not yet run as NOT_RUN, naming the cause and the case
after which the broker stopped answering.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from conformance.model.verdicts import CaseOutcome, CaseTimeout, HarnessError
from conformance.protocol.wire import URL
from conformance.verify.fresh_channel import NoConnection, fresh_channel, probe_queue_name

# The exit code of a run whose target stopped answering (pytest's own codes are 0–5).
EXIT_UNRESPONSIVE = 6
CHECK_MIN_S = 2.0
CHECK_MAX_S = 5.0


@dataclass(frozen=True)
class Unresponsive:
    """Why the run stopped: the broker no longer answered after ``after_case``."""

    after_case: str
    cause: str
    worker: str

    def message(self) -> str:
        return f"not run: the broker stopped answering after case {self.after_case} ({self.cause})"


def check_timeout(case_timeout: float) -> float:
    return max(CHECK_MIN_S, min(CHECK_MAX_S, case_timeout))


def broker_answers(url: URL, timeout: float) -> str | None:
    """One bounded round trip on a fresh connection; None when it answered, else the cause.

    A queue.declare (named: some brokers refuse server-named queues) exercises queue handling,
    which is what a wedged broker stops doing while it still accepts connections. Any answer,
    a refusal included, means the broker is alive.
    """
    try:
        with fresh_channel(url, timeout) as ch:
            ch.declare_queue(probe_queue_name("liveness"), exclusive=True, auto_delete=True)
    except NoConnection as exc:
        return f"a fresh connection failed: {exc.outcome.message}"
    except (CaseTimeout, HarnessError) as exc:
        return f"no answer on a fresh connection: {exc.message.splitlines()[0]}"
    except CaseOutcome:
        return None  # a refusal is an answer
    return None


def marker_path(results_dir: Path, run_id: str) -> Path:
    return results_dir / f"{run_id}.unresponsive.json"


def write_marker(path: Path, found: Unresponsive) -> None:
    """First writer wins: the case named is the first after which the broker was found silent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(found)), encoding="utf-8")
    try:
        os.link(tmp, path)  # atomic, fails if another worker got there first
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def read_marker(path: Path) -> Unresponsive | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return Unresponsive(
        str(data.get("after_case", "?")), str(data.get("cause", "?")), str(data.get("worker", "?"))
    )


def post_mortem(save: Callable[[Path], str | None] | None, results_dir: Path, run_id: str) -> str | None:
    """A broker this run started and that stopped answering: keep what it can say about its own
    state (``Target.post_mortem``) beside the results, as ``<run id>.broker-state.txt``; the
    one line naming it, or None. Never raises: the run is ending and its verdicts come first."""
    if save is None:
        return None
    try:
        return save(results_dir / f"{run_id}.broker-state.txt")
    except Exception as exc:  # noqa: BLE001 - a failed post-mortem must not lose the run's results
        return f"the broker's state could not be saved: {exc}"
