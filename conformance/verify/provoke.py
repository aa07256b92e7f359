"""Methods that make a broker raise a known error, written once for the cases that need one.

Several areas need "a soft error on this channel" or "a hard error on this connection" as a
step before what they actually check (the scope of an error, the class-id/method-id of a close,
the close handshake). These helpers send the offending method and expect the close it must
cause, recording it like every ``expect_*``:

- :func:`expect_passive_missing`: a passive declare of an entity that does not exist — channel.close
  404 NOT_FOUND naming the declare (``queue.declare/passive``, ``exchange.declare/not-found``).
- :func:`open_again` / :func:`expect_second_open`: channel.open on a channel that is already open —
  connection.close 504 CHANNEL_ERROR (``channel.open/state``, a hard error).
"""

from __future__ import annotations

from pamqp import commands as spec
from pamqp.base import Frame

from conformance.protocol.raw import Event, RawChannel, RawConnection
from conformance.verify.expect import expect_channel_close, expect_connection_close


def expect_passive_missing(ch: RawChannel, declare: Frame, what: str) -> Event:
    """Send ``declare`` (a passive queue.declare or exchange.declare of an entity that does not
    exist) and expect channel.close 404 naming it."""
    ch.send(declare)
    return expect_channel_close(ch, 404, what=what, method=type(declare))


def open_again(conn: RawConnection, ch: RawChannel) -> None:
    """Send channel.open on ``ch``, which is already open: a 504 connection exception."""
    conn.send_method(ch.id, spec.Channel.Open())


def expect_second_open(conn: RawConnection, ch: RawChannel, what: str = "second channel.open") -> Event:
    """:func:`open_again`, then expect connection.close 504 (probed on ``ch``)."""
    open_again(conn, ch)
    return expect_connection_close(conn, 504, what=what, probe_channel=ch)
