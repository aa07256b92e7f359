"""The per-case hard ceiling: the last line of defence against a wait without a deadline.

Every wait of a case should be bounded by the case timeout itself (the raw client is; the
library paths are made so). If one is not, the case must still end: a real-time interval timer
(``signal.setitimer``) raises :class:`~conformance.model.verdicts.CeilingExceeded` in the main thread —
where pytest, and pytest-xdist's workers, run the cases — interrupting a blocking socket read,
lock wait or event loop. The timer repeats every second until disarmed, so a library that catches
and retries still gets interrupted again.
"""

from __future__ import annotations

import signal
import sysconfig
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from conformance.model.verdicts import CeilingExceeded

REPEAT_S = 1.0
STACK_FRAMES = 40
# Where installed libraries and the standard library live (frames there are not the case's own).
LIBRARY_DIRS: tuple[str, ...] = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")})

OWN_DIR = str(Path(__file__).resolve().parent.parent)  # the conformance package, wherever installed


def _describe(f: traceback.FrameSummary) -> str:
    return f"{Path(f.filename).name}:{f.lineno} in {f.name}: {(f.line or '').strip()}"


def available() -> bool:
    """Timers and signal handlers work only in the main thread of a POSIX process."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextmanager
def ceiling(seconds: float, phase: str, stated: float | None = None) -> Iterator[None]:
    """Run the block under a hard ceiling of ``seconds``; past it, the block is interrupted.

    ``stated`` is the ceiling the verdict names when ``seconds`` is what an earlier phase left of
    it (the body after setup): the user set the case's ceiling, not its remainder."""
    if seconds <= 0 or not available():
        yield
        return

    named = seconds if stated is None else stated

    def on_alarm(_signum: int, frame: FrameType | None) -> None:
        frames = traceback.extract_stack(frame, limit=STACK_FRAMES) if frame is not None else None
        if not frames:
            raise CeilingExceeded(named, phase, "?", ())
        where = _describe(frames[-1])
        # Stuck inside a library: also name the innermost frame of our own code that called it.
        ours = [
            f for f in frames if f.filename.startswith(OWN_DIR) or not f.filename.startswith(LIBRARY_DIRS)
        ]
        if ours and ours[-1] is not frames[-1]:
            where += f" (called from {_describe(ours[-1])})"
        raise CeilingExceeded(named, phase, where, tuple(frames.format()))

    previous: Any = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
