"""Readiness: a broker is ready when a full AMQP handshake succeeds."""

from __future__ import annotations

import time

from conformance.protocol.wire import URL
from conformance.targets.base import TargetError


def amqp_ready(url: URL, deadline: float, what: str) -> None:
    from conformance.model.verdicts import CaseOutcome
    from conformance.protocol.raw import RawConnection

    last = "no attempt"
    while time.monotonic() < deadline:
        try:
            conn = RawConnection.open(url, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
        except CaseOutcome as exc:
            last = exc.message
            time.sleep(0.2)  # the broker is still booting; there is no event to wait on
            continue
        conn.close()
        return
    raise TargetError(f"{what} did not complete an AMQP handshake in time (last: {last})")
