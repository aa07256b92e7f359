"""Routing mutants: a broker whose matching rule is broken one way, made by rewriting what the
client asks for before the broker sees it (the proxy keeps the exchange types the connection
declared, so a rewrite touches only the bindings of the exchange type it breaks).

- ``BindRewrite("topic", words)``: a topic binding key's words replaced (``#`` as ``*``: # no longer
  matches zero or several words; ``*`` as ``#``: * matches zero or several);
- ``BindRewrite("headers", x_match=…)``: a headers binding's x-match swapped (all <-> any);
- ``DirectAsTopic``: a direct exchange declared as a topic exchange, so its binding keys' ``*`` and
  ``#`` become wildcards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pamqp import commands as spec

from conformance.mutate.faults import Tracking
from conformance.protocol.proxy import Frame, replace

BUILT_IN_TYPES = {"amq.topic": "topic", "amq.direct": "direct", "amq.fanout": "fanout",
                  "amq.headers": "headers", "amq.match": "headers"}


def _types(st: dict[str, Any]) -> dict[str, str]:
    types: dict[str, str] = st.setdefault("exchange_types", dict(BUILT_IN_TYPES))
    return types


class _Declared(Tracking):
    """Keeps the type of every exchange the connection declares."""

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Exchange.Declare) and not frm.passive:
            _types(st)[frm.exchange] = frm.exchange_type
        return super().to_broker(st, channel, frm)


class BindRewrite(_Declared):
    def __init__(self, name: str, type_: str, *, words: Mapping[str, str] | None = None,
                 x_match: Mapping[str, str] | None = None) -> None:
        self.name, self.type_ = name, type_
        self.words = dict(words or {})
        self.x_match = dict(x_match or {})

    def broker_frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Queue.Bind | spec.Exchange.Bind):
            source = frm.exchange if isinstance(frm, spec.Queue.Bind) else frm.source
            if _types(st).get(source) == self.type_:
                return [(channel, self._rewrite(frm))]
        return [(channel, frm)]

    def _rewrite(self, frm: Any) -> Any:
        if self.words:
            words = frm.routing_key.split(".") if frm.routing_key else []
            return replace(frm, routing_key=".".join(self.words.get(w, w) for w in words))
        args = dict(frm.arguments or {})
        mode = args.get("x-match", "all")
        if mode in self.x_match:
            args["x-match"] = self.x_match[mode]
            return replace(frm, arguments=args)
        return frm


class DirectAsTopic(_Declared):
    name = "direct-as-topic"

    def broker_frame(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Exchange.Declare) and frm.exchange_type == "direct" and not frm.passive:
            return [(channel, replace(frm, exchange_type="topic"))]
        return [(channel, frm)]
