"""Profiles: which expectation table a run is judged against.

``rabbitmq`` — RabbitMQ 3.x as its documentation describes it (the reference documents in
``shared/reference``) and as measured on RabbitMQ 3.10; where RabbitMQ legitimately differs from
the spec XML, the case's per-profile expected value says so, with its source.
``spec`` — the AMQP 0-9-1 XML read strictly (``conformance/data/amqp0-9-1.xml``).

Case families that come from a table (the tx table) keep the table here as TOML data.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

PROFILE_DESCRIPTIONS: dict[str, str] = {
    "rabbitmq": "RabbitMQ 3.x semantics (reference documents + behaviour measured on RabbitMQ 3.10)",
    "spec": "AMQP 0-9-1 specification XML, read strictly",
}
DEFAULT_PROFILE = "rabbitmq"


def load_table(name: str) -> dict[str, Any]:
    """Load ``conformance/profiles/<name>.toml``."""
    text = resources.files(__package__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)
