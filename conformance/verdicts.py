"""The verdict model: a fixed, machine-readable set of outcomes for one case execution.

A case body signals its outcome by returning normally (PASS, or INFORMATIONAL when it only
recorded an observation) or by raising one of the exceptions below. The plugin turns the
exception into a verdict; anything else a case raises is a harness fault (ERROR) and is never
blamed on the broker.
"""

from __future__ import annotations

import enum
from typing import Any

import pytest


class Verdict(enum.StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    NON_STRICT = "NON_STRICT"
    UNSUPPORTED = "UNSUPPORTED"
    INFORMATIONAL = "INFORMATIONAL"
    TIMEOUT = "TIMEOUT"
    ERROR = "ERROR"
    # The case never ran: the broker had stopped answering before its turn (the record names the
    # case after which it went silent). Neither the broker's verdict on this case nor ours.
    NOT_RUN = "NOT_RUN"


ALL_VERDICTS: tuple[Verdict, ...] = tuple(Verdict)
DEFAULT_FAIL_ON: frozenset[Verdict] = frozenset({Verdict.FAIL, Verdict.TIMEOUT, Verdict.ERROR})


def parse_fail_on(text: str) -> frozenset[Verdict]:
    """Parse a comma separated verdict list such as ``FAIL,TIMEOUT,ERROR`` (``none`` = empty)."""
    text = text.strip()
    if text.lower() in ("", "none"):
        return frozenset()
    out: set[Verdict] = set()
    for part in text.split(","):
        name = part.strip().upper().replace("-", "_")
        try:
            out.add(Verdict(name))
        except ValueError as exc:
            known = ",".join(v.value for v in Verdict)
            raise ValueError(f"unknown verdict {part.strip()!r} in --fail-on (known: {known})") from exc
    return frozenset(out)


def render(value: Any) -> str:
    """A short, stable text form of an expected or observed value for messages and results."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return repr(value)


class CaseOutcome(Exception):
    """Base of the exceptions a case raises to end with a verdict other than PASS."""

    verdict: Verdict = Verdict.ERROR

    def __init__(self, message: str, *, expected: Any = None, observed: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.observed = observed

    def __str__(self) -> str:
        parts = [self.message]
        if self.expected is not None or self.observed is not None:
            parts.append(f"expected: {render(self.expected)}")
            parts.append(f"observed: {render(self.observed)}")
        return "\n".join(parts)


class Mismatch(CaseOutcome, AssertionError):
    """The broker's behaviour differs from the expectation.

    The verdict is FAIL for a MUST-level case (or a profile expectation) and NON_STRICT for a
    SHOULD/MAY-level case; the plugin decides from the case's level unless ``verdict`` is given.
    """

    verdict = Verdict.FAIL

    def __init__(
        self, message: str, *, expected: Any = None, observed: Any = None, verdict: Verdict | None = None
    ) -> None:
        super().__init__(message, expected=expected, observed=observed)
        self.explicit_verdict = verdict


class CaseTimeout(CaseOutcome):
    """The broker did not answer within the case budget."""

    verdict = Verdict.TIMEOUT

    def __init__(self, waiting_for: str, seconds: float, *, expected: Any = None, observed: Any = None) -> None:
        super().__init__(
            f"TIMEOUT after {seconds:.1f}s waiting for {waiting_for}",
            expected=expected if expected is not None else waiting_for,
            observed=observed if observed is not None else f"nothing within {seconds:.1f}s",
        )
        self.waiting_for = waiting_for
        self.seconds = seconds


class HarnessError(CaseOutcome):
    """The harness or the network failed; never the broker's fault."""

    verdict = Verdict.ERROR


class Unsupported(pytest.skip.Exception):  # type: ignore[name-defined,misc]
    """An optional capability the broker does not advertise (or 540 for an optional method)."""

    verdict = Verdict.UNSUPPORTED

    def __init__(self, message: str, *, expected: Any = None, observed: Any = None) -> None:
        super().__init__(f"UNSUPPORTED: {message}", allow_module_level=False)
        self.message = message
        self.expected = expected
        self.observed = observed
