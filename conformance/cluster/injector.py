"""A broken node on purpose: a proxy that confirms a share of publishes and throws them away.

It proves the faults checker catches loss. In front of one node, on every channel in confirm mode,
the proxy drops every n-th basic.publish (method, header and body frames) and answers the client
with basic.ack for it itself; the broker's own confirms are renumbered (the broker numbers only
the publishes it received) so the client sees one ack per publish, as from a good broker. The
client therefore believes every dropped message confirmed — exactly a lost confirmed message.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from conformance.cluster.base import host_port
from conformance.protocol.proxy import TO_CLIENT, Fault, FaultProxy, Frame, replace
from conformance.protocol.wire import URL


class ConfirmThenDiscard(Fault):
    """Drop every ``every``-th confirmed-mode publish and ack it in the broker's name."""

    name = "confirm-then-discard"

    def __init__(self, every: int) -> None:
        self.every = max(1, every)
        self.dropped = 0

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        chans: dict[int, dict[str, Any]] = st.setdefault("confirm", {})
        if isinstance(frm, spec.Confirm.Select):
            chans[channel] = {"client": 0, "broker": 0, "map": {}, "dropping": None}
            return [(channel, frm)]
        ch = chans.get(channel)
        if ch is None:
            return [(channel, frm)]
        if isinstance(frm, spec.Basic.Publish):
            ch["client"] += 1
            if ch["client"] % self.every == 0:
                ch["dropping"] = {"tag": ch["client"], "size": None, "got": 0}
                return []
            ch["broker"] += 1
            ch["map"][ch["broker"]] = ch["client"]
            return [(channel, frm)]
        drop = ch["dropping"]
        if drop is not None and isinstance(frm, (ContentHeader, ContentBody)):
            if isinstance(frm, ContentHeader):
                drop["size"] = frm.body_size
            else:
                drop["got"] += len(frm.value)
            if drop["size"] is not None and drop["got"] >= drop["size"]:
                ch["dropping"] = None
                self.dropped += 1
                st.setdefault(TO_CLIENT, []).append((channel, spec.Basic.Ack(delivery_tag=drop["tag"])))
            return []
        return [(channel, frm)]

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        ch = st.get("confirm", {}).get(channel)
        if ch is not None and isinstance(frm, (spec.Basic.Ack, spec.Basic.Nack)) and frm.delivery_tag:
            mapped = ch["map"].get(frm.delivery_tag)
            if mapped is not None:
                return [(channel, replace(frm, delivery_tag=mapped))]
        return [(channel, frm)]


@contextlib.contextmanager
def loss_proxy(url: URL, share: float) -> Iterator[tuple[URL, str]]:
    """A proxy in front of the node at ``url`` dropping ``share`` of confirmed publishes:
    yields (the URL to use instead, a one-line description)."""
    every = max(1, round(1 / share))
    host, port = host_port(url)
    fault = ConfirmThenDiscard(every)
    with FaultProxy(host, port, fault) as proxy:
        proxied = proxy.url(url.user, url.password, url.vhost)
        yield (
            proxied,
            (
                f"{fault.name}: a proxy in front of {host}:{port} drops every {every}th publish on "
                "confirm channels and acks it in the broker's name"
            ),
        )
