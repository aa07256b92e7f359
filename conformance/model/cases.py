"""Case metadata: every scenario states, in one place next to its code, what it checks and why.

A case has a stable id (``area.slug``), the spec rules it checks (``class.method/rule-name`` or
``class/rule-name`` from the spec XML), the reference documents it comes from, a level (MUST,
SHOULD, MAY from the rule text, EXTENSION for RabbitMQ extensions, INFO for cases that only
record behaviour), a one-line description and expectation, and — where brokers legitimately
differ — the expected value per profile, as data.

Use :func:`case` to decorate a test function, or :func:`param` to build one ``pytest.param`` of a
family generated from a table.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from conformance.profiles import PROFILE_DESCRIPTIONS

MARKER = "conformance_case"
ID_RE = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9][a-z0-9._-]*$")
RULE_RE = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+){0,2}/[a-z0-9-]+$")

# Profiles a case may name: the one list is conformance/profiles (names and descriptions).
PROFILES: tuple[str, ...] = tuple(PROFILE_DESCRIPTIONS)


class Level(enum.StrEnum):
    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"
    EXTENSION = "EXTENSION"
    INFO = "INFO"


class _Missing:
    def __repr__(self) -> str:
        return "<no expectation>"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Case:
    id: str
    description: str
    expectation: str
    level: Level = Level.MUST
    rules: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    # Expected value per profile where brokers legitimately differ; a profile not named falls
    # back to ``default`` (and a case with neither compares nothing by profile).
    expected: Mapping[str, Any] = field(default_factory=dict)
    default: Any = MISSING
    # Where a profile's expected value comes from (document + section, or an observed fact).
    expected_sources: Mapping[str, str] = field(default_factory=dict)
    requires: tuple[str, ...] = ()  # server capabilities, e.g. "publisher_confirms"
    client: str = "raw"  # raw | pika | aio-pika
    needs_restart: bool = False
    # The scenario can leave some brokers unable to answer anything (known: deleting a queue that
    # has consumers, closing a connection that owns an exclusive queue with a consumer). On a
    # target the suite cannot isolate (--broker-url) such cases run after all others.
    wedges: bool = False
    # The queue types the case's premise holds for (None: every type; ("classic",): exclusive,
    # auto-delete, non-durable or server-named queues, which RabbitMQ's quorum queues refuse —
    # such a case runs once, on a classic queue, whatever --amqp-queue-type says; ("quorum",): a
    # quorum-only case, run when quorum is selected). ``premise`` says why, for reports.
    queue_types: tuple[str, ...] | None = None
    premise: str = ""

    def __post_init__(self) -> None:
        if not ID_RE.match(self.id):
            raise ValueError(f"case id {self.id!r} is not of the form area.slug")
        for rule in self.rules:
            if not RULE_RE.match(rule):
                raise ValueError(f"case {self.id}: rule {rule!r} is not class.method/rule-name")
        for name in self.expected:
            # "profile@queue-type": the profile's value for that queue type (quorum semantics).
            if name.split("@", 1)[0] not in PROFILES:
                raise ValueError(f"case {self.id}: unknown profile {name!r}")
        if not self.rules and not self.sources and self.level is not Level.INFO:
            raise ValueError(f"case {self.id}: cite a spec rule or a reference document")

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]

    def expected_for(self, profile: str, queue_type: str | None = None) -> Any:
        if queue_type and f"{profile}@{queue_type}" in self.expected:
            return self.expected[f"{profile}@{queue_type}"]
        if profile in self.expected:
            return self.expected[profile]
        return self.default

    def source_for(self, profile: str, queue_type: str | None = None) -> str:
        if queue_type and f"{profile}@{queue_type}" in self.expected_sources:
            return self.expected_sources[f"{profile}@{queue_type}"]
        return self.expected_sources.get(profile, "; ".join(self.rules + self.sources))

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "area": self.area,
            "level": self.level.value,
            "rules": list(self.rules),
            "sources": list(self.sources),
            "description": self.description,
            "expectation": self.expectation,
            "requires": list(self.requires),
            "client": self.client,
            "wedges": self.wedges,
            "queue_types": list(self.queue_types) if self.queue_types is not None else None,
            "expected": {k: _jsonable(v) for k, v in self.expected.items()},
        }


def _jsonable(value: Any) -> Any:
    if value is MISSING:
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


REGISTRY: dict[str, Case] = {}


def register(c: Case) -> Case:
    existing = REGISTRY.get(c.id)
    if existing is not None and existing != c:
        raise ValueError(f"duplicate case id {c.id!r}")
    REGISTRY[c.id] = c
    return c


F = TypeVar("F", bound=Callable[..., Any])


def case(
    id: str,
    *,
    description: str,
    expectation: str,
    level: Level | str = Level.MUST,
    rules: Iterable[str] = (),
    sources: Iterable[str] = (),
    expected: Mapping[str, Any] | None = None,
    default: Any = MISSING,
    expected_sources: Mapping[str, str] | None = None,
    requires: Iterable[str] = (),
    client: str = "raw",
    needs_restart: bool = False,
    wedges: bool = False,
    queue_types: Iterable[str] | None = None,
    premise: str = "",
) -> Callable[[F], F]:
    """Decorate a test function as one conformance case."""
    c = register(
        Case(
            id=id, description=description, expectation=expectation, level=Level(level), rules=tuple(rules),
            sources=tuple(sources), expected=dict(expected or {}), default=default,
            expected_sources=dict(expected_sources or {}), requires=tuple(requires), client=client,
            needs_restart=needs_restart, wedges=wedges,
            queue_types=tuple(queue_types) if queue_types is not None else None, premise=premise,
        )
    )

    def deco(fn: F) -> F:
        return getattr(pytest.mark, MARKER)(c)(fn)

    return deco


def param(c: Case, *values: Any) -> Any:
    """One member of a case family: ``pytest.param(*values, id=c.id)`` carrying the case."""
    register(c)
    return pytest.param(*values, id=c.id, marks=getattr(pytest.mark, MARKER)(c))


def case_of(item: pytest.Item) -> Case | None:
    """The case a collected item carries (the closest marker wins: a family's param over a
    function-level decorator)."""
    marker = item.get_closest_marker(MARKER)
    if marker is None or not marker.args:
        return None
    found = marker.args[0]
    return found if isinstance(found, Case) else None
