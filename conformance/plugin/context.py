"""What a case body works with: its context, its clean-up list and its connections.

Importable on its own (no pytest hooks), so scenario helpers can type ``ctx: CaseContext``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pamqp import commands as spec

from conformance.model.cases import Case
from conformance.model.sources import cite_text
from conformance.model.verdicts import CaseOutcome, CaseTimeout, Mismatch, Strictness
from conformance.protocol.raw import RawChannel, RawConnection, method_name
from conformance.protocol.wire import URL


def _jsonable(value: Any) -> Any:
    """``value`` as JSON holds it (tuples become lists, bytes and others their repr), so a value
    read back from a record compares equal to one the profile data gives."""
    import json

    return json.loads(json.dumps(value, default=repr))


class CaseContext:
    """Per-case helper: the case, its profile's expected value, observations, unique names."""

    def __init__(self, case: Case | None, profile: str, timeout: float, worker: str, *,
                 queue_type: str | None = None, release: str | None = None) -> None:
        self.case = case
        self.release = release  # the RabbitMQ release the rabbitmq profile applies (None: another profile)
        self.queue_type = queue_type  # the queue type this case declares (None: no typed queue)
        self.profile = profile
        self.timeout = timeout
        self.worker = worker
        self.observed: dict[str, Any] = {}
        self.informational_note: str | None = None
        self.extra: dict[str, Any] = {}
        self.client = case.client if case else "raw"
        self._uid = uuid.uuid4().hex[:8]

    def _release_row(self) -> Any:
        """The release-keyed expectation of this case (conformance/profiles/rabbitmq_releases.toml)
        on the applied release, or None (the case's own value holds)."""
        if self.case is None or self.profile != "rabbitmq" or not self.release:
            return None
        from conformance.profiles.releases import expectation

        return expectation(self.case.id, self.queue_type, self.release)

    @property
    def expected(self) -> Any:
        """The expected value for this run's profile (the case's per-profile data), on the applied
        RabbitMQ release where that release changed it (profile data keyed by release)."""
        if self.case is None:
            raise RuntimeError("not a conformance case")
        row = self._release_row()
        if row is not None and row.unsupported is None:
            return row.value
        return self.case.expected_for(self.profile, self.queue_type)

    @property
    def expected_source(self) -> str:
        """Where the expected value comes from: the release row's source, else the case's."""
        row = self._release_row()
        if row is not None:
            return f"RabbitMQ {self.release}, {row.source}"
        return self.case.source_for(self.profile, self.queue_type) if self.case else ""

    @property
    def unsupported_on_release(self) -> str | None:
        """Why this case cannot run on the applied release (a removed feature), or None."""
        row = self._release_row()
        return row.unsupported if row is not None else None

    def name(self, suffix: str = "q") -> str:
        """A unique, client-chosen entity name for this case execution."""
        slug = (self.case.id if self.case else "adhoc").replace(".", "-")[:60]
        return f"amqpc-{slug}-{self.worker}-{self._uid}-{suffix}"

    def declare_fields(self, **declare: Any) -> dict[str, Any]:
        """queue.declare fields for this case's queue type (``x-queue-type``, durable for quorum)."""
        from conformance.verify.queue_types import CLASSIC, declare_fields

        return declare_fields(self.queue_type or CLASSIC, declare)

    def observe(self, key: str, value: Any) -> Any:
        self.observed[key] = value
        return value

    def check(self, observed: Any, expected: Any, what: str) -> None:
        """Compare and record; a difference raises Mismatch (FAIL or NON_STRICT by the level)."""
        self.observed[what] = observed
        if observed != expected:
            raise Mismatch(what, expected=expected, observed=observed)

    def check_profile(self, observed: Any, what: str, *, evidence: str = "") -> None:
        """Compare with this profile's expected value; a difference is a FAIL (profile data).
        ``evidence``: what the broker did, in words, for the message (a close, a reset)."""
        expected = self.expected
        self.observed[what] = observed
        self.keep_release_value(observed)
        if observed != expected:
            source = cite_text(self.expected_source) if self.case else ""
            on = f", {self.queue_type} queue" if self.queue_type not in (None, "classic") else ""
            seen = f"; the broker: {evidence}" if evidence else ""
            raise Mismatch(f"{what} (profile {self.profile}{on}: {source}){seen}", expected=expected,
                           observed=observed, strictness=Strictness.BINDING)

    def keep_release_value(self, observed: Any) -> None:
        """For a release-keyed case under profile rabbitmq, keep the value it compared and its own
        expected value (record extra ``release_keyed``): which release a broker behaves like is
        judged from them (conformance/model/likeness.py). :meth:`check_profile` calls it; a case
        comparing its release-keyed value another way calls it itself."""
        from conformance.profiles.releases import release_keyed

        if self.case is None or self.profile != "rabbitmq":
            return
        if not release_keyed(self.case.id, self.queue_type):
            return
        self.extra["release_keyed"] = {"observed": _jsonable(observed),
                                       "own": _jsonable(self.case.expected_for("rabbitmq", self.queue_type))}

    def informational(self, observed: Any, note: str = "") -> None:
        """Record behaviour where nothing is required: the verdict becomes INFORMATIONAL."""
        self.observed["observed"] = observed
        self.informational_note = note or "recorded"


# The longest a clean-up waits for one delete's round trip (bookkeeping, not a verdict).
DELETE_WAIT_S = 3.0
# How many case ids a clean-up note names (the count is always whole).
NOTE_CASES = 3


def delete_wait(case_timeout: float) -> float:
    """The longest a clean-up waits for one delete's round trip."""
    return min(DELETE_WAIT_S, case_timeout)


class CleanupNotes:
    """What the broker left unanswered in the clean-ups of a run, for the run's summary.

    A clean-up runs after its case's record is written, so what it saw goes here, not there.
    ``unanswered``: the broker answered the barrier sent right behind the method (so it had
    handled the method: a channel's methods are handled in order) but never the method itself.
    ``silent``: not even the barrier was answered within the wait. Each: method name -> the ids
    of the cases whose clean-up saw it, in order.
    """

    KINDS = ("unanswered", "silent")

    def __init__(self) -> None:
        self.unanswered: dict[str, list[str]] = {}
        self.silent: dict[str, list[str]] = {}

    def add(self, kind: str, method: str, case_id: str) -> None:
        getattr(self, kind).setdefault(method, []).append(case_id)

    def __bool__(self) -> bool:
        return bool(self.unanswered or self.silent)

    def as_dict(self) -> dict[str, dict[str, list[str]]]:
        return {kind: getattr(self, kind) for kind in self.KINDS}

    def merge(self, data: dict[str, dict[str, list[str]]]) -> None:
        """Add another process's notes (an xdist worker's ``as_dict``)."""
        for kind in self.KINDS:
            for method, cases in (data.get(kind) or {}).items():
                getattr(self, kind).setdefault(method, []).extend(cases)

    def lines(self, wait: float) -> list[str]:
        """One line per method: what the broker did not answer, how often, after which cases."""
        out = []
        for method, cases in sorted(self.unanswered.items()):
            out.append(f"clean-up: {method} was never answered (the barrier sent after it on the same "
                       f"channel was): {len(cases)} time(s), {_after(cases)}")
        for method, cases in sorted(self.silent.items()):
            out.append(f"clean-up: no answer within {wait:.1f}s to {method} nor to the barrier sent after "
                       f"it: {len(cases)} time(s), {_after(cases)}")
        return out


def _after(cases: list[str]) -> str:
    """``after 2 case(s): a, b`` (the first NOTE_CASES named)."""
    unique = list(dict.fromkeys(cases))
    more = len(unique) - NOTE_CASES
    return (f"after {len(unique)} case(s): " + ", ".join(unique[:NOTE_CASES])
            + (f" and {more} more" if more > 0 else ""))


class Cleanup:
    """Entities a case created, deleted in reverse order after it (errors ignored, bounded).

    Each delete goes out with a barrier right behind it (a passive declare of ``amq.direct``)
    and the clean-up waits for the barrier's answer, not for a fixed time: a broker that never
    answers a delete (garagemq and exchange.delete) costs one round trip, not the whole wait,
    and is noted in ``notes`` (the run's summary says so).
    """

    def __init__(self, url: URL, timeout: float, notes: CleanupNotes | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self.notes = notes if notes is not None else CleanupNotes()
        self.items: list[tuple[str, str]] = []

    def queue(self, name: str) -> str:
        self.items.append(("queue", name))
        return name

    def exchange(self, name: str) -> str:
        self.items.append(("exchange", name))
        return name

    def run(self, case_id: str = "?") -> None:
        if not self.items:
            return
        deadline = time.monotonic() + max(2.0, self.timeout)
        wait = delete_wait(self.timeout)
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
                    if not self._delete(ch, method, wait, case_id):
                        ch = None  # a 404 closed the channel; open another for the next one
                except CaseOutcome:
                    ch = None  # no answer, or the connection ended: a fresh channel, if any
                except ValueError:
                    continue  # a name the codec refuses to encode was never created by us
        finally:
            conn.close(timeout=1.0)
            self.items.clear()

    def _delete(self, ch: RawChannel, method: Any, wait: float, case_id: str) -> bool:
        """``method`` and a barrier behind it; True when the channel is still open after both.

        Waits (at most ``wait``) for the barrier's answer or the channel's close, whichever comes
        first. The broker answers a channel's methods in order, so a barrier answered before any
        reply to ``method`` means it will not answer ``method``: noted, not waited for.
        """
        names = tuple(method.valid_responses or ())
        ch.send(method)
        ch.barrier_send(timeout=wait)
        try:
            ended = ch.conn.wait_event(
                ch.id, lambda e: isinstance(e.method, (spec.Exchange.DeclareOk, spec.Channel.Close)),
                f"exchange.declare-ok (barrier behind {method_name(method)})", timeout=wait,
                close_is_error=False,
            )
        except CaseTimeout:
            self.notes.add("silent", method_name(method), case_id)
            raise
        before = [e for e in ch.pending() if e.seq < ended.seq]
        for event in before:
            ch.conn.discard(ch.id, event)  # dealt with: never taken for a later delete's answer
        if isinstance(ended.method, spec.Channel.Close):
            return False
        if not any(e.method.name in names for e in before):
            self.notes.add("unanswered", method_name(method), case_id)
        return True


class Connections:
    """Factory of raw connections for one case; every one is closed after the case."""

    def __init__(self, url: URL, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.opened: list[RawConnection] = []

    def __call__(self, url: URL | None = None, **kwargs: Any) -> RawConnection:
        kwargs.setdefault("timeout", self.timeout)
        conn = RawConnection.open(url or self.url, **kwargs)
        self.opened.append(conn)
        return conn

    def channel(self, url: URL | None = None, **kwargs: Any) -> RawChannel:
        """A new connection with one open channel."""
        return self(url, **kwargs).channel()

    def close_all(self) -> None:
        for conn in reversed(self.opened):
            conn.close(timeout=1.0)
        self.opened.clear()
