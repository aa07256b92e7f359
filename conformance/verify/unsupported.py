"""``Unsupported``: the broker does not offer an optional capability the case needs.

A pytest skip, so that pytest, JUnit and allure show such a case as skipped; that is why it lives
here and not in the verdict model, which imports no pytest and recognises it by the
:class:`~conformance.model.verdicts.UnsupportedOutcome` mark.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.model.verdicts import UnsupportedOutcome


# pytest.skip.Exception (_pytest.outcomes.Skipped) is public only as this attribute, which
# mypy cannot resolve as a base class.
class Unsupported(pytest.skip.Exception, UnsupportedOutcome):  # type: ignore[name-defined]
    """An optional capability the broker does not advertise (or 540 for an optional method)."""

    def __init__(self, message: str, *, expected: Any = None, observed: Any = None) -> None:
        super().__init__(f"UNSUPPORTED: {message}", allow_module_level=False)
        self.message = message
        self.expected = expected
        self.observed = observed


def case_ending(excinfo: pytest.ExceptionInfo[BaseException] | None) -> BaseException | None:
    """What a case phase ended with, as :func:`~conformance.model.verdicts.decide` reads it: a bare
    pytest skip (a marker, a fixture's ``pytest.skip``) is UNSUPPORTED with its reason."""
    if excinfo is None:
        return None
    exc = excinfo.value
    if isinstance(exc, pytest.skip.Exception) and not isinstance(exc, UnsupportedOutcome):
        return Unsupported(str(exc))
    return exc
