"""What a case body works with: its context, its clean-up list and its connections.

Importable on its own (no pytest hooks), so scenario helpers can type ``ctx: CaseContext``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pamqp import commands as spec

from conformance.cases import Case
from conformance.protocol.raw import RawChannel, RawConnection
from conformance.sources import cite_text
from conformance.verdicts import CaseOutcome, Mismatch, Strictness


class CaseContext:
    """Per-case helper: the case, its profile's expected value, observations, unique names."""

    def __init__(self, case: Case | None, profile: str, timeout: float, worker: str, *,
                 queue_type: str | None = None) -> None:
        self.case = case
        self.queue_type = queue_type  # the queue type this case declares (None: no typed queue)
        self.profile = profile
        self.timeout = timeout
        self.worker = worker
        self.observed: dict[str, Any] = {}
        self.informational_note: str | None = None
        self.extra: dict[str, Any] = {}
        self.client = case.client if case else "raw"
        self._uid = uuid.uuid4().hex[:8]

    @property
    def expected(self) -> Any:
        """The expected value for this run's profile (the case's per-profile data)."""
        if self.case is None:
            raise RuntimeError("not a conformance case")
        return self.case.expected_for(self.profile, self.queue_type)

    def name(self, suffix: str = "q") -> str:
        """A unique, client-chosen entity name for this case execution."""
        slug = (self.case.id if self.case else "adhoc").replace(".", "-")[:60]
        return f"amqpc-{slug}-{self.worker}-{self._uid}-{suffix}"

    def declare_fields(self, **declare: Any) -> dict[str, Any]:
        """queue.declare fields for this case's queue type (``x-queue-type``, durable for quorum)."""
        from conformance.queue_types import CLASSIC, declare_fields

        return declare_fields(self.queue_type or CLASSIC, declare)

    def observe(self, key: str, value: Any) -> Any:
        self.observed[key] = value
        return value

    def check(self, observed: Any, expected: Any, what: str) -> None:
        """Compare and record; a difference raises Mismatch (FAIL or NON_STRICT by the level)."""
        self.observed[what] = observed
        if observed != expected:
            raise Mismatch(what, expected=expected, observed=observed)

    def check_profile(self, observed: Any, what: str) -> None:
        """Compare with this profile's expected value; a difference is a FAIL (profile data)."""
        expected = self.expected
        self.observed[what] = observed
        if observed != expected:
            source = cite_text(self.case.source_for(self.profile, self.queue_type)) if self.case else ""
            on = f", {self.queue_type} queue" if self.queue_type not in (None, "classic") else ""
            raise Mismatch(f"{what} (profile {self.profile}{on}: {source})", expected=expected,
                           observed=observed, strictness=Strictness.BINDING)

    def informational(self, observed: Any, note: str = "") -> None:
        """Record behaviour where nothing is required: the verdict becomes INFORMATIONAL."""
        self.observed["observed"] = observed
        self.informational_note = note or "recorded"


class Cleanup:
    """Entities a case created, deleted in reverse order after it (errors ignored, bounded)."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.items: list[tuple[str, str]] = []

    def queue(self, name: str) -> str:
        self.items.append(("queue", name))
        return name

    def exchange(self, name: str) -> str:
        self.items.append(("exchange", name))
        return name

    def run(self) -> None:
        if not self.items:
            return
        deadline = time.monotonic() + max(2.0, self.timeout)
        try:
            conn = RawConnection.open(self.url, timeout=min(5.0, self.timeout))
        except CaseOutcome:
            return
        try:
            ch: RawChannel | None = None
            for kind, name in reversed(self.items):
                if time.monotonic() > deadline or not conn.is_open:
                    break
                try:
                    if ch is None:
                        ch = conn.channel()
                    method = (
                        spec.Queue.Delete(queue=name)
                        if kind == "queue"
                        else spec.Exchange.Delete(exchange=name)
                    )
                    ch.rpc(method, timeout=min(3.0, self.timeout))
                except CaseOutcome:
                    ch = None  # a 404 closed the channel; open another for the next one
                except ValueError:
                    continue  # a name the codec refuses to encode was never created by us
        finally:
            conn.close(timeout=1.0)
            self.items.clear()


class Connections:
    """Factory of raw connections for one case; every one is closed after the case."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.opened: list[RawConnection] = []

    def __call__(self, url: str | None = None, **kwargs: Any) -> RawConnection:
        kwargs.setdefault("timeout", self.timeout)
        conn = RawConnection.open(url or self.url, **kwargs)
        self.opened.append(conn)
        return conn

    def channel(self, url: str | None = None, **kwargs: Any) -> RawChannel:
        """A new connection with one open channel."""
        return self(url, **kwargs).channel()

    def close_all(self) -> None:
        for conn in reversed(self.opened):
            conn.close(timeout=1.0)
        self.opened.clear()
