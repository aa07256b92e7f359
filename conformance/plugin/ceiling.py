"""The per-case hard ceiling: the last line of defence against a wait without a deadline.

Every wait of a case should be bounded by the case timeout itself (the raw client is; the
library paths are made so). If one is not, the case must still end: a real-time interval timer
(``signal.setitimer``) raises :class:`~conformance.verdicts.CeilingExceeded` in the main thread —
where pytest, and pytest-xdist's workers, run the cases — interrupting a blocking socket read,
lock wait or event loop. The timer repeats every second until disarmed, so a library that catches
and retries still gets interrupted again.
"""

from __future__ import annotations

import signal
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from conformance.verdicts import CeilingExceeded

REPEAT_S = 1.0
STACK_FRAMES = 12


def available() -> bool:
    """Timers and signal handlers work only in the main thread of a POSIX process."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextmanager
def ceiling(seconds: float, phase: str) -> Iterator[None]:
    """Run the block under a hard ceiling of ``seconds``; past it, the block is interrupted."""
    if seconds <= 0 or not available():
        yield
        return

    def on_alarm(_signum: int, frame: FrameType | None) -> None:
        frames = traceback.extract_stack(frame, limit=STACK_FRAMES) if frame is not None else None
        if not frames:
            raise CeilingExceeded(seconds, phase, "?", ())
        last = frames[-1]
        where = f"{Path(last.filename).name}:{last.lineno} in {last.name}: {(last.line or '').strip()}"
        raise CeilingExceeded(seconds, phase, where, tuple(frames.format()))

    previous: Any = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
