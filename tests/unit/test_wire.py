"""The wire vocabulary agrees with the specification XML and describes frames in one way."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from pamqp import commands as spec

import conformance
from conformance.protocol.wire import PROTOCOL_HEADER, REPLY_NAMES, describe, reply_name, short_method

SPEC_XML = Path(conformance.__file__).parent / "data" / "amqp0-9-1.xml"


def spec_reply_codes() -> dict[int, str]:
    """Every reply-code constant of the XML (class soft-error / hard-error, and reply-success)."""
    root = ET.parse(SPEC_XML).getroot()
    return {int(c.get("value", "0")): c.get("name", "").upper().replace("-", "_")
            for c in root.iter("constant")
            if c.get("class") in ("soft-error", "hard-error") or c.get("name") == "reply-success"}


def test_reply_names_are_the_spec_constants() -> None:
    # 312 NO_ROUTE is not a constant of this XML but is what basic.return carries for an unroutable
    # mandatory publish (RabbitMQ, and pamqp's AMQPNoRoute): named too, nothing else added.
    extra = {code: name for code, name in REPLY_NAMES.items() if code not in spec_reply_codes()}
    assert extra == {312: "NO_ROUTE"}
    assert {code: REPLY_NAMES.get(code) for code in spec_reply_codes()} == spec_reply_codes()


def test_protocol_header_is_amqp_0_9_1() -> None:
    assert PROTOCOL_HEADER == b"AMQP\x00\x00\x09\x01"


def test_one_describer_for_methods_and_the_socket_end() -> None:
    close = spec.Channel.Close(reply_code=404, reply_text="NOT_FOUND - no queue", class_id=50, method_id=10)
    assert describe(close) == "channel.close 404 NOT_FOUND 'NOT_FOUND - no queue' (class 50, method 10)"
    assert describe(spec.Basic.Ack(delivery_tag=3, multiple=True)) == "basic.ack tag=3 multiple=True"
    assert describe(spec.Queue.DeclareOk(queue="q")) == "queue.declare-ok"
    assert describe(None) == "socket ended"
    assert short_method(close) == "channel.close 404 NOT_FOUND"
    assert short_method(close, names=False) == "channel.close 404"
    assert short_method(None) == "socket closed"
    assert reply_name(999) == "999 ?"
