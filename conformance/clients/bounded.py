"""Run a blocking client-library interaction under a deadline.

pika's blocking waits have no deadline of their own: a broker that never answers would hang the
run. :func:`bounded` runs the interaction in a helper thread and ends the case in TIMEOUT instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from conformance.verdicts import CaseTimeout

T = TypeVar("T")


def bounded(fn: Callable[[], T], timeout: float, what: str) -> T:
    """``fn()`` in a daemon thread; its value or its exception, or TIMEOUT after ``timeout`` s.

    The thread is left behind on TIMEOUT (a blocked socket read cannot be interrupted); it is a
    daemon, and the case's connections are closed by the fixtures, which ends its wait.
    """
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the case's thread below
            box["error"] = exc

    t = threading.Thread(target=target, name=f"pika-{what}", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise CaseTimeout(what, timeout)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
