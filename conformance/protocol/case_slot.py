"""One object per running case, in a module-level slot.

A pytest process runs one case at a time, so "the case's frame trace" or "the case's invariant
monitor" is one slot: the plugin begins it when a case starts and ends it when the case is over;
connections take the current object when they open (their reader threads then write into it
without any context of their own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class CaseSlot(Generic[T]):
    """Holds the running case's ``T`` (None outside a case)."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._current: T | None = None

    def begin(self) -> T:
        """A new ``T`` for the case about to run (replacing the previous case's)."""
        self._current = self._make()
        return self._current

    def current(self) -> T | None:
        """The running case's ``T``; None outside a case (connections then record nothing)."""
        return self._current

    def end(self) -> None:
        self._current = None
