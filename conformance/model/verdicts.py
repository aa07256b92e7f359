"""The verdict model: a fixed, machine-readable set of outcomes for one case execution.

A case body signals its outcome by returning normally (PASS, or INFORMATIONAL when it only
recorded an observation) or by raising: one of the protocol client's exceptions
(``conformance.protocol.errors``, under the names the cases use below), ``Unsupported``
(``conformance.verify``, a pytest skip marked :class:`UnsupportedOutcome`) or a plain
``assert``. :func:`decide` turns the ending into a verdict; anything else a case raises is a
harness fault (ERROR) and is never blamed on the broker. No pytest here: the plugin hands
:func:`decide` the exception itself.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from conformance.model.cases import Case, Level
from conformance.protocol.errors import (
    AnswerTimeout,
    ClientFault,
    InvariantViolation,
    Mismatch,
    ProtocolOutcome,
    Strictness,
    render,
)


class CaseContext(Protocol):
    """What :func:`decide` reads of a running case's context (the plugin's ``CaseContext``): named
    here so the verdict model does not import the plugin."""

    profile: str
    observed: dict[str, Any]
    informational_note: str | None


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
#: the verdicts by how much a reader must act on them, most first: a broken MUST, a silence, a run
#: that could not judge (ERROR, NOT_RUN), then a missed SHOULD, then what needs nothing. The report's
#: matrix and the release history list their rows in this order (worst first).
ACTION_ORDER: tuple[Verdict, ...] = (
    Verdict.FAIL, Verdict.TIMEOUT, Verdict.ERROR, Verdict.NOT_RUN, Verdict.NON_STRICT,
    Verdict.UNSUPPORTED, Verdict.INFORMATIONAL, Verdict.PASS,
)


def action_rank(verdict: str | None) -> int:
    """The place of ``verdict`` in :data:`ACTION_ORDER` (0: act first); an unknown one or None last."""
    try:
        return ACTION_ORDER.index(Verdict(verdict)) if verdict else len(ACTION_ORDER)
    except ValueError:
        return len(ACTION_ORDER)
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


# The protocol client's exceptions under the names the suite's cases use.
CaseOutcome = ProtocolOutcome
CaseTimeout = AnswerTimeout
HarnessError = ClientFault


def verdict_of(exc: ProtocolOutcome, level: Level) -> Verdict:
    """The verdict a protocol outcome means for a case of ``level``.

    A Mismatch is FAIL for a MUST-level case (or a binding profile expectation) and NON_STRICT
    for a SHOULD/MAY-level case (or an advisory one); a timeout is TIMEOUT and a client fault is
    ERROR. An outcome class defined above the protocol client may name its own ``verdict``.
    """
    own = getattr(type(exc), "verdict", None)
    if isinstance(exc, Mismatch):
        # INFO cases only record behaviour: whatever differed is information, never blame.
        if level is Level.INFO:
            return Verdict.INFORMATIONAL
        if exc.strictness is Strictness.BINDING:
            return Verdict.FAIL
        if exc.strictness is Strictness.ADVISORY or level in (Level.SHOULD, Level.MAY):
            return Verdict.NON_STRICT
        return own if isinstance(own, Verdict) else Verdict.FAIL
    if isinstance(own, Verdict):
        return own
    if isinstance(exc, AnswerTimeout):
        return Verdict.TIMEOUT
    return Verdict.ERROR


class CeilingExceeded(BaseException):
    """A case ran past its hard ceiling (a multiple of the case timeout) and was interrupted.

    The plugin's last line of defence against a wait without a deadline: raised from a timer
    signal in the thread running the case, wherever it was stuck. A ``BaseException`` so that
    no ``except Exception`` in a client library swallows it and waits on.
    """

    verdict = Verdict.TIMEOUT

    def __init__(self, seconds: float, phase: str, where: str, stack: tuple[str, ...]) -> None:
        self.seconds = seconds
        self.phase = phase
        self.where = where  # "file:line in function: source line" of the innermost frame
        self.stack = stack  # formatted frames, outermost first, where the case was stuck
        self.message = (
            f"TIMEOUT: still running in {phase} after the hard ceiling of {seconds:.1f}s; stuck at {where}"
        )
        super().__init__(self.message)


class UnsupportedOutcome:
    """The mark of an exception meaning UNSUPPORTED: the broker does not offer an optional
    capability the case needs. The exception (``conformance.verify.Unsupported``) is a pytest skip
    for pytest's sake, so it is defined above this module; :func:`decide` reads what it carries."""

    message: str
    expected: Any
    observed: Any


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    expected: str
    observed: str
    message: str


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


def _harness_error(c: Case, exc: BaseException, phase: str) -> Decision:
    first = _first_line(exc)
    return Decision(Verdict.ERROR, c.expectation, f"{type(exc).__name__}: {first}"[:500],
                    f"harness error in {phase}: {type(exc).__name__}: {first}"[:500])


def decide(c: Case, exc: BaseException | None, ctx: CaseContext | None,
           phase: str = "call", violations: Sequence[InvariantViolation] = ()) -> Decision:
    """Turn a case's outcome into its verdict. Pure: unit-tested on its own.

    A case that returns is PASS (INFORMATIONAL for INFO cases or when it recorded an
    observation). A raised protocol outcome means what :func:`verdict_of` says; a plain
    ``assert`` in the case body is a Mismatch. Anything else, and a mismatch while setting a case up, is a
    harness fault (ERROR): never blamed on the broker. A wire invariant the broker broke while
    the case ran (``violations``) makes it FAIL whatever its body concluded: the frames prove
    the deviation (a skipped case, UNSUPPORTED, keeps its verdict only if nothing was broken).
    """
    decision = _decide(c, exc, ctx, phase)
    if not violations:
        return decision
    first = violations[0]
    more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
    case_said = f"; the case itself: {decision.verdict.value} {decision.message}" if decision.message else ""
    return Decision(Verdict.FAIL, f"{first.invariant}: {first.text} [{first.rule}]",
                    "; ".join(v.describe() for v in violations)[:1500],
                    f"wire invariant {first.invariant} broken: {first.detail}{more}{case_said}"[:2000])


def _decide(c: Case, exc: BaseException | None, ctx: CaseContext | None, phase: str) -> Decision:
    expected_text = render(c.expected_for(ctx.profile)) if ctx and c.expected else c.expectation
    observed_text = render(ctx.observed) if ctx and ctx.observed else ""
    if exc is None:
        if c.level is Level.INFO or (ctx is not None and ctx.informational_note):
            note = ctx.informational_note if ctx and ctx.informational_note else "recorded"
            return Decision(Verdict.INFORMATIONAL, c.expectation, observed_text or "-", note)
        return Decision(Verdict.PASS, expected_text, observed_text or "as expected", "")
    if isinstance(exc, CeilingExceeded):
        return Decision(exc.verdict, f"the case ends within its hard ceiling of {exc.seconds:.1f}s",
                        f"still running in {exc.phase} after {exc.seconds:.1f}s", exc.message)
    if isinstance(exc, UnsupportedOutcome):
        return Decision(
            Verdict.UNSUPPORTED,
            render(exc.expected) if exc.expected is not None else c.expectation,
            render(exc.observed),
            exc.message,
        )
    if isinstance(exc, AssertionError):
        # A mismatch found while setting a case up is our fault (the fixture), not the broker's.
        if phase != "call":
            return _harness_error(c, exc, phase)
        # A plain ``assert`` in a case body states an expectation like a Mismatch does.
        mismatch = exc if isinstance(exc, Mismatch) else Mismatch("")
        verdict = verdict_of(mismatch, c.level)
        if verdict is Verdict.ERROR:
            return _harness_error(c, exc, phase)
        first = _first_line(exc)
        expected = render(mismatch.expected) if mismatch.expected is not None else expected_text
        observed = render(mismatch.observed) if mismatch.observed is not None else (first or observed_text)
        return Decision(verdict, expected, observed, mismatch.message or first or "assertion failed")
    if not isinstance(exc, ProtocolOutcome) or verdict_of(exc, c.level) is Verdict.ERROR:
        return _harness_error(c, exc, phase)
    return Decision(verdict_of(exc, c.level), render(exc.expected), render(exc.observed), exc.message)
