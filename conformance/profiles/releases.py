"""Expectations keyed by RabbitMQ release (``rabbitmq_releases.toml``, its header says the format).

:func:`applied_release` says which release a run is judged by under profile ``rabbitmq``;
:func:`expectation` gives a case's expected value on that release where RabbitMQ changed it (None:
the case's own value holds); :func:`changes_between` names the documented changes touching a case
between two releases (the upgrade report).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from conformance.profiles import load_table

#: the product name a RabbitMQ node puts in server-properties
RABBITMQ_PRODUCT = "RabbitMQ"
_RELEASE_RE = re.compile(r"^\d+(?:\.\d+){0,3}")
#: how the applied release was chosen
BASIS_SERVER = "server-properties"
BASIS_NAMED = "named"
BASIS_DEFAULT = "default"


def parse_release(text: str | None) -> tuple[int, ...] | None:
    """``"4.0.5"`` → (4, 0, 5); ``"3.10"`` → (3, 10, 0); None when ``text`` names no release."""
    m = _RELEASE_RE.match((text or "").strip())
    if not m:
        return None
    parts = tuple(int(p) for p in m.group(0).split("."))
    return parts + (0,) * (3 - len(parts)) if len(parts) < 3 else parts


def check_profile(text: str) -> str:
    """``rabbitmq``, ``spec``, or ``rabbitmq@RELEASE`` (judge by that RabbitMQ release's semantics);
    ValueError (one line, without the option's name) otherwise."""
    from conformance.profiles import PROFILE_DESCRIPTIONS

    name, _, release = text.partition("@")
    if name not in PROFILE_DESCRIPTIONS:
        raise ValueError(f"names an unknown profile {text!r} (known: {', '.join(PROFILE_DESCRIPTIONS)}, "
                         "rabbitmq@RELEASE)")
    if "@" in text and not release:
        raise ValueError(f"{text!r} names no release (rabbitmq@4.0, rabbitmq@3.10.8)")
    if release and (name != "rabbitmq" or parse_release(release) is None):
        raise ValueError(f"{text!r}: only rabbitmq takes a release, as rabbitmq@4.0 or rabbitmq@3.10.8")
    return text


@dataclass(frozen=True)
class CaseRow:
    case: str  # a case id, or an fnmatch pattern (cluster.*)
    queue_type: str | None
    before: Any
    after: Any
    unsupported: str | None
    unsupported_before: str | None  # before `since` the case is UNSUPPORTED (the feature came later)
    observed_only: bool
    has_before: bool
    has_after: bool

    def matches(self, case_id: str, queue_type: str | None) -> bool:
        if self.queue_type is not None and self.queue_type != queue_type:
            return False
        return fnmatch.fnmatchcase(case_id, self.case)


@dataclass(frozen=True)
class Change:
    key: str
    summary: str
    since: str
    documented: str  # yes | code | no
    source: str
    quote: str
    cases: tuple[CaseRow, ...]

    @property
    def since_t(self) -> tuple[int, ...]:
        found = parse_release(self.since)
        assert found is not None, self.since
        return found

    def cite(self) -> str:
        """How a message names it: ``RabbitMQ 3.13.3 changed this: <url> — "<quote>"``."""
        return f"RabbitMQ {self.since} changed this ({self.summary}): {self.source} — \"{self.quote}\""


@dataclass(frozen=True)
class Applied:
    """A release-keyed expectation of one case on one release."""

    value: Any
    unsupported: str | None
    change: Change
    new: bool  # the release is at or after the change

    @property
    def source(self) -> str:
        side = f"from RabbitMQ {self.change.since}" if self.new else f"before RabbitMQ {self.change.since}"
        return f"{side}: {self.change.summary}; {self.change.source} — \"{self.change.quote}\""


@cache
def changes() -> tuple[Change, ...]:
    table = load_table("rabbitmq_releases")
    out = []
    for c in table.get("changes", []):
        rows = tuple(CaseRow(case=r["case"], queue_type=r.get("queue_type"), before=r.get("before"),
                             after=r.get("after"), unsupported=r.get("unsupported"),
                             unsupported_before=r.get("unsupported_before"),
                             observed_only=bool(r.get("observed_only", False)), has_before="before" in r,
                             has_after="after" in r) for r in c.get("cases", []))
        out.append(Change(key=c["key"], summary=c["summary"], since=c["since"], documented=c["documented"],
                          source=c["source"], quote=c["quote"], cases=rows))
    return tuple(sorted(out, key=lambda ch: ch.since_t))


@cache
def default_release() -> tuple[str, str]:
    """(release, why) for a broker that reports no RabbitMQ version."""
    d = load_table("rabbitmq_releases")["default"]
    return str(d["release"]), " ".join(str(d["why"]).split())


@cache
def verified_releases() -> tuple[str, ...]:
    """The releases the rows were checked on by real runs, oldest first ([default].verified)."""
    found = [str(r) for r in load_table("rabbitmq_releases")["default"].get("verified", [])]
    return tuple(sorted(found, key=lambda r: parse_release(r) or (0,)))


def newest_verified() -> str | None:
    """The newest release the rows were checked on (None: the data names none)."""
    found = verified_releases()
    return found[-1] if found else None


def beyond_verified(release: str | None) -> str | None:
    """The newest verified release when ``release`` is newer than it (the expectations were never
    checked on ``release``: it is judged by the newest rows), else None."""
    newest = newest_verified()
    at, top = parse_release(release), parse_release(newest)
    return newest if at is not None and top is not None and at > top else None


def beyond_verified_note(release: str) -> str:
    """The sentence a run, its record and its report say once for a release beyond the verified."""
    newest = newest_verified()
    return (f"RabbitMQ {release} is newer than any release the expectations were checked on (newest: "
            f"{newest}); it is judged by the newest release rows, so its non-PASS verdicts may be "
            f"documented changes of {release} not yet encoded")


def applied_release(product: str | None, version: str | None, named: str | None = None) -> tuple[str, str]:
    """(release, basis): the release named (``--profile rabbitmq@RELEASE``), else the server's
    ``version`` when its ``product`` is RabbitMQ, else the default."""
    if named:
        return named, BASIS_NAMED
    if (product or "").strip() == RABBITMQ_PRODUCT and parse_release(version) is not None:
        return str(version).strip(), BASIS_SERVER
    return default_release()[0], BASIS_DEFAULT


def expectation(case_id: str, queue_type: str | None, release: str | None) -> Applied | None:
    """The release-keyed expected value of ``case_id`` (on ``queue_type``) on ``release``; None when
    no change row applies (the case's own value holds)."""
    at = parse_release(release)
    if at is None:
        return None
    found: Applied | None = None
    before_found = False  # a release before several changes is judged by the nearest one's `before`
    for change in changes():  # by `since`: a later change overrides an earlier one
        for row in change.cases:
            if row.observed_only or not row.matches(case_id, queue_type):
                continue
            if at >= change.since_t:
                if row.unsupported is not None:
                    found = Applied(None, row.unsupported, change, True)
                elif row.has_after:
                    found = Applied(row.after, None, change, True)
            elif before_found:
                continue
            elif row.unsupported_before is not None:
                found, before_found = Applied(None, row.unsupported_before, change, False), True
            elif row.has_before:
                found, before_found = Applied(row.before, None, change, False), True
    return found


def expected_on(case_id: str, queue_type: str | None, release: str, own: Any) -> tuple[bool, Any]:
    """(runs, value): what ``release`` expects of a release-keyed case, ``own`` where no row applies;
    runs False where the case is UNSUPPORTED on that release (a removed feature)."""
    row = expectation(case_id, queue_type, release)
    if row is None:
        return True, own
    if row.unsupported is not None:
        return False, None
    return True, row.value


def release_keyed(case_id: str, queue_type: str | None) -> bool:
    """Does some change row give ``case_id`` (on ``queue_type``) an expected value by release?"""
    return any(not r.observed_only and r.unsupported is None and r.matches(case_id, queue_type)
               for c in changes() for r in c.cases)


def changes_between(case_id: str, queue_type: str | None, old: str | None, new: str | None) -> list[Change]:
    """The changes listing ``case_id`` whose release lies between ``old`` and ``new`` (either
    direction): what an upgrade from ``old`` to ``new`` is documented to change in that case."""
    a, b = parse_release(old), parse_release(new)
    if a is None or b is None or a == b:
        return []
    lo, hi = min(a, b), max(a, b)
    return [c for c in changes()
            if lo < c.since_t <= hi and any(r.matches(case_id, queue_type) for r in c.cases)]
