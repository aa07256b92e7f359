"""The exceptions the protocol client raises: what went other than the caller expected, with the
evidence (expected, observed) and nothing else.

They say what happened on the wire, not what it means for a case: the verdict model
(``conformance.model.verdicts``) maps each kind to a verdict. :class:`Mismatch` is the broker's doing,
:class:`AnswerTimeout` its silence, :class:`ClientFault` ours (socket, decoding).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


def render(value: Any) -> str:
    """A short, stable text form of an expected or observed value for messages and results."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return repr(value)


class ProtocolOutcome(Exception):
    """Base of the exceptions an exchange with the broker ends with when it did not go as expected."""

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


class Strictness(enum.Enum):
    """How binding the expectation a :class:`Mismatch` broke is, when the caller knows better than
    the rule it checks."""

    # An expectation a profile records for this broker: a deviation from it is one whatever the
    # rule's level.
    BINDING = "binding"
    # The broker may differ: worth recording, never a deviation.
    ADVISORY = "advisory"


class Mismatch(ProtocolOutcome, AssertionError):
    """The broker did something the caller did not expect.

    An ``AssertionError`` so that it reads like the ``assert`` it replaces. ``strictness`` is
    ``None`` unless the caller knows how binding the expectation is (see :class:`Strictness`).
    """

    def __init__(self, message: str, *, expected: Any = None, observed: Any = None,
                 strictness: Strictness | None = None) -> None:
        super().__init__(message, expected=expected, observed=observed)
        self.strictness = strictness


class AnswerTimeout(ProtocolOutcome):
    """The broker did not answer within the deadline."""

    def __init__(
        self, waiting_for: str, seconds: float, *, expected: Any = None, observed: Any = None
    ) -> None:
        super().__init__(
            f"TIMEOUT after {seconds:.1f}s waiting for {waiting_for}",
            expected=expected if expected is not None else waiting_for,
            observed=observed if observed is not None else f"nothing within {seconds:.1f}s",
        )
        self.waiting_for = waiting_for
        self.seconds = seconds


class ClientFault(ProtocolOutcome):
    """Our side or the network failed (socket, decoding, local settings); never the broker's doing."""


@dataclass(frozen=True)
class InvariantViolation:
    """A frame that broke a wire invariant (see ``conformance.protocol.invariants``)."""

    invariant: str  # its id, e.g. wire.delivery-tags-consecutive
    text: str  # what always holds
    rule: str  # the spec rule or document it comes from
    detail: str  # what was seen, where

    def describe(self) -> str:
        return f"{self.invariant}: {self.detail}"
