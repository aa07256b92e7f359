"""The sources registry: every source a case cites resolves to a followable citation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.model.sources import REGISTRY, cite, cite_all, resolve
from conformance.scenarios import all_cases

REFERENCE = Path("/work/shared/reference")
INTERNAL = re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b")


def test_every_cited_source_is_in_the_registry_and_never_shown_by_file_name() -> None:
    cited = sorted({s for c in all_cases() for s in c.sources})
    assert cited, "cases cite documents"
    for source in cited:
        citation = resolve(source)
        assert citation.document is not None, f"{source} is not in conformance/model/sources.py"
        assert not INTERNAL.search(citation.text()), citation.text()
        key, _, anchor = source.partition("#")
        if anchor and REGISTRY[key].sections and " " not in anchor:
            # A bare anchor must be a listed section, else the report would show a slug.
            assert anchor in REGISTRY[key].sections, f"{source}: add the section to the registry"


def test_citation_forms() -> None:
    assert cite("000_cd470977c809f5f5.txt#when-will-messages-be-confirmed") == (
        "RabbitMQ docs — Publisher Confirms § When will messages be confirmed?, "
        "https://www.rabbitmq.com/docs/confirms#when-publishes-are-confirmed")
    assert cite("001_27f7ea2622bbc99f.txt#tx") == (
        "RabbitMQ docs — Broker Semantics § Semantics of tx, https://www.rabbitmq.com/docs/semantics#tx")
    # No public address: title and publisher, no link.
    assert cite("003_50388870ec53b6aa.txt#the-delivery-tag") == (
        "AMQP 0-9-1: The Complete Protocol (book chapter) — Consumer Acknowledgments and Delivery Guarantees"
        " § The Delivery Tag")
    assert cite("amqp0-9-1.xml#connection.tune (frame-max)").startswith(
        "AMQP Working Group — AMQP 0-9-1 specification (machine-readable XML) § connection.tune (frame-max), https://")
    assert cite("elsewhere.txt#x") == "elsewhere.txt#x"  # unknown: as given, never dropped
    assert (
        cite_all(["001_27f7ea2622bbc99f.txt#tx", "001_27f7ea2622bbc99f.txt#tx", ""]).count("Semantics of tx")
        == 1
    )
    link = resolve("002_4ef6b84472723893.txt#requeue-true").html()
    assert (
        link.startswith('<a class="src" href="https://www.rabbitmq.com/blog/2010/08/03/')
        and "requeue=true" in link
    )
    assert resolve("004_ba6059c7056f3c65.txt#dealing-with-rejection").html().startswith('<span class="src">')


@pytest.mark.parametrize("key", [k for k in REGISTRY if INTERNAL.fullmatch(k)])
def test_sections_are_in_the_kept_documents(key: str) -> None:
    path = REFERENCE / key
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    text = path.read_text(encoding="utf-8")
    for anchor, section in REGISTRY[key].sections.items():
        assert section.locate and section.locate in text, (
            f"{key}#{anchor}: {section.locate!r} not in the document"
        )


def test_all_five_reference_documents_are_registered() -> None:
    keys = {k for k in REGISTRY if INTERNAL.fullmatch(k)}
    assert len(keys) == 5
    if REFERENCE.exists():
        assert keys == {p.name for p in REFERENCE.glob("*.txt")}


def test_free_text_names_no_internal_file() -> None:
    from conformance.model.sources import cite_text

    note = "001_27f7ea2622bbc99f.txt#ordering: 'messages are always held in the queue in publication order'"
    text = cite_text(note)
    assert "001_27f7ea2622bbc99f.txt" not in text
    assert (
        text.startswith("RabbitMQ docs — Broker Semantics")
        and "https://www.rabbitmq.com/docs/semantics" in text
    )
    assert text.endswith(": 'messages are always held in the queue in publication order'")
    assert cite_text("measured on RabbitMQ 3.10.8") == "measured on RabbitMQ 3.10.8"
