"""The queue-type helpers: ids, declaration fields (no sockets)."""

from __future__ import annotations

import pytest

from conformance.verify.queue_types import PremiseError, declare_fields, run_case_id, split_case_id


def test_ids_classic_plain_others_suffixed() -> None:
    assert run_case_id("confirms.x", "classic") == "confirms.x"
    assert run_case_id("confirms.x", None) == "confirms.x"
    assert run_case_id("confirms.x", "quorum") == "confirms.x[quorum]"
    assert split_case_id("confirms.x[quorum]") == ("confirms.x", "quorum")
    assert split_case_id("confirms.x") == ("confirms.x", None)


def test_classic_declaration_unchanged() -> None:
    assert declare_fields("classic", {"durable": False}) == {"durable": False}
    assert declare_fields("classic", {}) == {}


def test_quorum_declaration_is_durable_and_typed() -> None:
    got = declare_fields("quorum", {"arguments": {"x-max-length": 1}})
    assert got == {"durable": True, "arguments": {"x-max-length": 1, "x-queue-type": "quorum"}}
    assert declare_fields("quorum", {"passive": True}) == {"passive": True}


@pytest.mark.parametrize("field", ["exclusive", "auto_delete"])
def test_quorum_premise_errors(field: str) -> None:
    with pytest.raises(PremiseError):
        declare_fields("quorum", {field: True})
