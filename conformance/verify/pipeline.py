"""Many methods sent at once, their replies counted: the "the server supports at least N"
rules (256 queues, 16 exchanges, 16 consumers) are checked this way, without a round trip each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.protocol.raw import RawChannel


def pipelined(ch: RawChannel, methods: Sequence[Any], ok: type, what: str) -> int:
    """Send every method of ``methods`` on ``ch``, then wait for one ``ok`` reply each; return
    how many arrived (each wait is bounded: a missing reply is a timeout naming ``what`` and the
    count so far)."""
    for method in methods:
        ch.send(method)
    oks = 0
    for _ in methods:
        ch.wait(ok, f"{what} (had {oks})")
        oks += 1
    return oks
