"""Which queue type a collected case runs with (``--amqp-queue-type``), and its run id."""

from __future__ import annotations

import pytest

from conformance.model.cases import Case, case_of
from conformance.verify.queue_types import CLASSIC, run_case_id

FIXTURE = "queue_type"


def typed(item: pytest.Item) -> bool:
    """Does the case declare queues of the selected type (``declared_queue`` / ``queue_type``)?"""
    return FIXTURE in getattr(item, "fixturenames", ())


def item_queue_type(item: pytest.Item, selected: tuple[str, ...]) -> str | None:
    """The queue type this item runs with; None for a case that declares no typed queue.

    Several types selected: the item's parametrization says. One selected: that type, unless the
    case's premise holds for classic queues only (it then runs on a classic queue, under its plain
    id). A case for other types only, with none of them selected, gets None (deselected)."""
    c = case_of(item)
    if c is None or not typed(item):
        return None
    callspec = getattr(item, "callspec", None)
    if callspec is not None and FIXTURE in callspec.params:
        return str(callspec.params[FIXTURE])
    allowed = c.queue_types
    if allowed is None:
        return selected[0]
    common = [t for t in selected if t in allowed]
    if common:
        return common[0]
    return CLASSIC if CLASSIC in allowed else None


def runs(item: pytest.Item, selected: tuple[str, ...]) -> bool:
    """Is this item part of the run (its type selected and allowed by the case's premise)?"""
    c = case_of(item)
    if c is None or not typed(item):
        return True
    qt = item_queue_type(item, selected)
    if qt is None:
        return False
    return c.queue_types is None or qt in c.queue_types


def parametrize(metafunc: pytest.Metafunc, selected: tuple[str, ...]) -> None:
    """Several types selected: every typed case once per type (ids ``…-classic`` / ``…-quorum``)."""
    if len(selected) > 1 and FIXTURE in metafunc.fixturenames:
        metafunc.parametrize(FIXTURE, list(selected), ids=list(selected))


def run_id_of(item: pytest.Item, c: Case, selected: tuple[str, ...]) -> str:
    return run_case_id(c.id, item_queue_type(item, selected))
