"""The suite: one scenario module an area (``test_<area>.py``), each declaring its cases.

:func:`all_cases` is the catalogue: importing the modules registers their cases in the case
model's registry (:data:`conformance.model.cases.REGISTRY`)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence

from conformance.model.cases import REGISTRY, Case


def all_cases() -> list[Case]:
    """Every case of the suite's scenario modules (importing them registers their cases)."""
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("test_"):
            importlib.import_module(f"{__name__}.{info.name}")
    return sorted(REGISTRY.values(), key=lambda c: c.id)


def known_areas() -> list[str]:
    """The areas: one per scenario module (read from the package, nothing imported)."""
    return sorted(info.name[5:] for info in pkgutil.iter_modules(__path__) if info.name.startswith("test_"))


def areas_of(given: Sequence[str]) -> list[str]:
    """``--area`` values (repeatable, each a comma list) checked against the known areas."""
    names = [a.strip() for item in given for a in item.split(",") if a.strip()]
    known = known_areas()
    unknown = [a for a in names if a not in known]
    if unknown:
        raise ValueError(f"--area names an unknown area {', '.join(unknown)} (known: {', '.join(known)})")
    return list(dict.fromkeys(names))
