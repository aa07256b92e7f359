"""A cited document and its sections (the sources registry's entries: ``conformance.model.sources``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Section:
    title: str  # the heading as the document gives it
    fragment: str | None = None  # the public page's own anchor, when it has one
    locate: str = ""  # a phrase of the kept text that proves the section is there (tests)


@dataclass(frozen=True)
class Document:
    key: str  # the name cases cite it by
    title: str
    publisher: str
    url: str | None
    sections: Mapping[str, Section] = field(default_factory=dict)
    about: str = ""  # what the suite takes from it
