"""The JSON Schema of a result record (one line of a results JSONL), made from :class:`ResultRecord`.

The schema ships as package data, ``conformance/data/result-record.schema.json``, so tools outside
this project (and this project's readers) can check a results file without importing the suite.
``python -m conformance.model.record_schema`` prints it; a unit test regenerates it from the dataclass
and compares it with the shipped file, so the two cannot drift.

``required`` lists what every reader relies on (:data:`REQUIRED_FIELDS`, the gate's and the
report's keys); the other fields are written by today's writer but absent from older runs.
"""

from __future__ import annotations

import functools
import json
import sys
import types
import typing
from dataclasses import MISSING, fields
from importlib import resources
from typing import Any

from conformance.model.results import REQUIRED_FIELDS, SCHEMA_VERSION, ResultRecord

SCHEMA_ID = "https://amqp-conformance.invalid/schemas/result-record.schema.json"
SCHEMA_FILE = "result-record.schema.json"

# One line per field: what a consumer of the results needs to know. A field without a
# description fails the unit test that regenerates the schema.
DESCRIPTIONS: dict[str, str] = {
    "run_id": "id of the run (one `amqp-conformance run` or pytest session); its file is <run_id>.jsonl",
    "time": "when the case finished: ISO 8601, UTC, milliseconds (2026-11-25T11:40:20.342Z)",
    "target": "the target kind: reference | url | local:rabbitmq | local:garagemq | container:IMAGE",
    "broker_product": "the broker's server-properties product (e.g. RabbitMQ)",
    "broker_version": "the broker's server-properties version",
    "broker_platform": "the broker's server-properties platform",
    "client": "the client the case used: raw | pika | aio-pika",
    "client_version": "that client's version (raw: the pamqp and suite versions)",
    "case_id": "the stable case id, area.slug; a non-classic queue type appends [type]",
    "area": "the case's area (its scenario module)",
    "rules": "ids of the spec rules the case checks (class.method/NN)",
    "level": "the strength of the case's expectation",
    "profile": "the expectation profile of the run: rabbitmq | spec",
    "verdict": "the case's verdict",
    "expected": "what the case expected, in words",
    "observed": "what the broker did, as the case saw it",
    "duration_s": "the case's wall time in seconds (setup, call and teardown)",
    "message": "why, for a non-PASS verdict (the failing check, the UNSUPPORTED reason, the error)",
    "nodeid": "the pytest node id of the test that ran the case",
    "worker": "the pytest-xdist worker (gw0, …) or main",
    "schema": "the record format's version",
    "extra": "further facts: url (password redacted), trace (the last frames, both directions, for a "
             "non-PASS case), invariants and case_verdict (a wire invariant broken), mutant (a mutation "
             "run), tx_row / tx_observed (tx table cases), stuck_stack (a case stopped by its ceiling)",
    "queue_type": "the queue type the case declared: classic | quorum; null when it declared no typed queue",
    "release": "the RabbitMQ release whose semantics the rabbitmq profile applied (conformance/profiles/"
               "rabbitmq_releases.toml), e.g. 4.0.5; null under another profile or in an older run",
    "release_basis": "how that release was chosen: server-properties (the broker's product is RabbitMQ), "
                     "named (--profile rabbitmq@RELEASE) or default (a broker reporting no RabbitMQ "
                     "version); null without a release",
    "release_verified": "set only when the applied release is newer than every release the release rows "
                        "were checked on: the newest of those (e.g. 4.3.6); such a run is judged by the "
                        "newest rows, so its non-PASS verdicts may be documented changes not yet encoded; "
                        "null otherwise",
}



def enums() -> dict[str, list[str]]:
    """The closed value sets. Imported here, not at the top: a reader that only validates files
    (:func:`shipped_schema`) needs neither the case catalogue nor pytest."""
    from conformance.model.cases import Level
    from conformance.model.verdicts import Verdict

    return {"verdict": [v.value for v in Verdict], "level": [level.value for level in Level]}


def _json_type(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        parts = [_json_type(arg) for arg in typing.get_args(hint)]
        return {"type": [p["type"] for p in parts]}
    if origin is list:
        (item,) = typing.get_args(hint)
        return {"type": "array", "items": _json_type(item)}
    if origin is dict or hint is dict:
        return {"type": "object"}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    if hint in simple:
        return {"type": simple[hint]}
    raise TypeError(f"no JSON type for {hint!r}: extend _json_type")


def record_schema() -> dict[str, Any]:
    """The schema, from the dataclass's fields and type hints."""
    hints = typing.get_type_hints(ResultRecord)
    closed = enums()
    properties: dict[str, Any] = {}
    for f in fields(ResultRecord):
        prop = {"description": DESCRIPTIONS[f.name], **_json_type(hints[f.name])}
        if f.name in closed:
            prop["enum"] = closed[f.name]
        if f.name == "schema":
            prop["const"] = SCHEMA_VERSION
        if f.name == "duration_s":
            prop["minimum"] = 0
        if f.default is not MISSING and f.default is not None:
            prop["default"] = f.default
        properties[f.name] = prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "amqp-conformance result record",
        "description": "One line of a results JSONL file: one case execution. Written by "
                       "conformance.model.results.ResultRecord.",
        "type": "object",
        "required": list(REQUIRED_FIELDS),
        "properties": properties,
        "additionalProperties": False,
    }


def render() -> str:
    return json.dumps(record_schema(), indent=2, ensure_ascii=False) + "\n"


def shipped_schema() -> dict[str, Any]:
    """The schema as installed with the package (what a reader should validate against)."""
    text = resources.files("conformance").joinpath("data", SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(shipped_schema())


def schema_problem(rec: dict[str, Any]) -> str | None:
    """Why ``rec`` is not a result record by the shipped JSON Schema (one short phrase naming the
    field), or None. Readers (the gate, the report's input check) call it on every record they take."""
    errors = sorted(_validator().iter_errors(rec), key=lambda e: (list(e.path), e.validator))
    if not errors:
        return None
    missing = sorted({str(e.message).split("'")[1] for e in errors if e.validator == "required"})
    mistyped = sorted({str(e.path[0]) for e in errors if e.validator == "type" and e.path})
    if missing or mistyped:
        return "missing or mistyped " + ", ".join(missing + [f for f in mistyped if f not in missing])
    first = errors[0]
    field = ".".join(str(p) for p in first.path) or "record"
    if field == "verdict" and first.validator == "enum":
        return f"unknown verdict {rec.get('verdict')!r}"
    return f"{field}: {first.message}"[:200]


if __name__ == "__main__":
    sys.stdout.write(render())
