"""A scripted AMQP 0-9-1 peer for testing the harness: it behaves well, or breaks on purpose.

Modes (``FakeBroker(mode=...)``):
- ``ok``: handshake, channel.open, queue.declare, exchange.declare (passive), basic.publish is
  swallowed, queue names starting ``silent`` are never answered, ``close406`` closes the channel
  with 406, ``conn540`` closes the connection with 540; a queue named ``wedge…`` wedges the whole
  broker: from then on no queue.declare on any connection is answered (as garagemq after
  deleting a queue that has consumers); ``rst540`` ends the connection with 540 as RabbitMQ 3.10
  sometimes does: if the client has already sent more (a pipelined probe, unread by the broker)
  the socket is reset and the connection.close is lost, else the close arrives normally.
- ``refuse-login``: answers start-ok with connection.close 403.
- ``refuse-vhost``: answers connection.open with connection.close 530.
- ``min-frame-8192``: resets the socket on a tune-ok whose frame_max is below 8192 (not 0), as
  RabbitMQ 4.1+ does ("negotiated frame_max = 4096 is lower than the minimum allowed value (8192)").
- ``wrong-header``: answers the protocol header with ``AMQP\\x00\\x00\\x09\\x00`` and closes.
- ``silent``: accepts TCP and never says anything.
- ``http``: answers with an HTTP error line and closes.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any

from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp.body import ContentBody
from pamqp.header import ContentHeader, ProtocolHeader

from conformance.protocol.loopback import Listener
from conformance.protocol.wire import split_frames


class FakeBroker:
    def __init__(self, mode: str = "ok", capabilities: dict[str, bool] | None = None) -> None:
        self.mode = mode
        self.capabilities = capabilities if capabilities is not None else {"publisher_confirms": True}
        self.listener = Listener(self._on_accept)
        self.port = self.listener.port
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/"
        self.received: list[Any] = []
        self._stop = self.listener.stopped
        self.wedged = threading.Event()
        self._unread = 0

    def __enter__(self) -> FakeBroker:
        self.listener.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.listener.close()

    def _on_accept(self, client: socket.socket) -> None:
        self.listener.track(client)
        threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    @staticmethod
    def _send(client: socket.socket, channel: int, frm: Any) -> None:
        client.sendall(pframe.marshal(frm, channel))

    def _serve(self, client: socket.socket) -> None:
        try:
            header = self._recv_exact(client, 8)
            if self.mode == "silent":
                self._stop.wait(60)
                return
            if self.mode == "http":
                client.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                return
            if self.mode == "wrong-header" or header != b"AMQP\x00\x00\x09\x01":
                client.sendall(b"AMQP\x00\x00\x09\x00")
                return
            props = {"product": "fakebroker", "version": "9.9", "platform": "test",
                     "capabilities": dict(self.capabilities)}
            self._send(client, 0, spec.Connection.Start(server_properties=props, mechanisms="PLAIN",
                                                        locales="en_US"))
            buf = b""
            while not self._stop.is_set():
                got = client.recv(65536)
                if not got:
                    return
                chunks, buf = split_frames(buf + got)
                for i, chunk in enumerate(chunks):
                    self._unread = len(chunks) - i - 1 + len(buf)  # what the client sent beyond this frame
                    _n, channel, frm = pframe.unmarshal(chunk)
                    self.received.append(frm)
                    if not self._on_frame(client, channel, frm):
                        return
        except OSError:
            return
        finally:
            try:
                client.close()
            except OSError:
                pass

    def _recv_exact(self, client: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            got = client.recv(n - len(data))
            if not got:
                raise OSError("closed")
            data += got
        return data

    def _on_frame(self, client: socket.socket, channel: int, frm: Any) -> bool:
        """Answer one frame; False ends the connection."""
        if isinstance(frm, (spec.Connection.StartOk, spec.Connection.Open, spec.Connection.Close)):
            return self._on_connection_method(client, frm)
        if isinstance(frm, spec.Queue.Declare):
            return self._on_queue_declare(client, channel, frm)
        if isinstance(frm, spec.Connection.TuneOk):
            if self.mode == "min-frame-8192" and 0 < frm.frame_max < 8192:
                # no connection.close: the socket is reset (the client's pipelined open is unread)
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return False
            return True
        if isinstance(frm, spec.Connection.CloseOk):
            return False  # the client answered our connection.close: the socket ends, as a broker's does
        if isinstance(frm, spec.Channel.Open):
            # reserved-1 empty, as RabbitMQ sends it (pamqp's default "0" breaks the wire invariant,
            # and its validate() refuses anything else): class 20 method 11, longstr "", frame-end
            payload = struct.pack(">HHI", 20, 11, 0)
            client.sendall(struct.pack(">BHI", 1, channel, len(payload)) + payload + b"\xce")
        elif isinstance(frm, spec.Channel.Close):
            self._send(client, channel, spec.Channel.CloseOk())
        elif isinstance(frm, spec.Exchange.Declare):
            self._send(client, channel, spec.Exchange.DeclareOk())
        elif isinstance(frm, spec.Queue.Delete):
            self._send(client, channel, spec.Queue.DeleteOk(message_count=0))
        elif isinstance(frm, spec.Basic.Get):
            # One message with a two-frame body, to exercise content assembly.
            self._send(client, channel, spec.Basic.GetOk(delivery_tag=1, redelivered=False, exchange="",
                                                         routing_key=frm.queue, message_count=0))
            self._send(client, channel, ContentHeader(0, 6, spec.Basic.Properties(content_type="text/plain")))
            self._send(client, channel, ContentBody(b"hel"))
            self._send(client, channel, ContentBody(b"lo!"))
        return True

    def _on_connection_method(self, client: socket.socket, frm: Any) -> bool:
        if isinstance(frm, spec.Connection.StartOk):
            if self.mode == "refuse-login":
                self._send(
                    client,
                    0,
                    spec.Connection.Close(
                        reply_code=403, reply_text="ACCESS_REFUSED - login", class_id=10, method_id=11
                    ),
                )
                return False
            self._send(client, 0, spec.Connection.Tune(channel_max=64, frame_max=131072, heartbeat=0))
            return True
        if isinstance(frm, spec.Connection.Open):
            if self.mode == "refuse-vhost":
                self._send(client, 0, spec.Connection.Close(reply_code=530, reply_text="NOT_ALLOWED - vhost",
                                                            class_id=10, method_id=40))
                return False
            self._send(client, 0, spec.Connection.OpenOk())
            return True
        self._send(client, 0, spec.Connection.CloseOk())  # connection.close
        return False

    def _on_queue_declare(self, client: socket.socket, channel: int, frm: spec.Queue.Declare) -> bool:
        name = frm.queue
        if name.startswith("unwedge"):  # what a case's teardown does that starts again what it stopped
            self.wedged.clear()
        if name.startswith("wedge"):
            self.wedged.set()
        if name.startswith("silent") or self.wedged.is_set():
            return True
        if name.startswith("close406"):
            self._send(client, channel, spec.Channel.Close(reply_code=406, reply_text="PRECONDITION_FAILED",
                                                           class_id=50, method_id=10))
            return True
        if name.startswith("rst540"):
            return self._close_or_reset(client)
        if name.startswith("conn540"):
            self._send(client, 0, spec.Connection.Close(reply_code=540, reply_text="NOT_IMPLEMENTED",
                                                         class_id=50, method_id=10))
            return True
        self._send(client, channel, spec.Queue.DeclareOk(queue=name or "amq.gen-fake", message_count=0,
                                                        consumer_count=0))
        return True

    def _close_or_reset(self, client: socket.socket) -> bool:
        """connection.close 540, unless more input is waiting: then a reset (the close is lost)."""
        time.sleep(0.1)  # a pipelined probe has arrived by now
        try:
            waiting = self._unread or len(client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except BlockingIOError:
            waiting = 0
        if waiting:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        self._send(client, 0, spec.Connection.Close(reply_code=540, reply_text="NOT_IMPLEMENTED",
                                                     class_id=50, method_id=10))
        return True


__all__ = ["FakeBroker", "ProtocolHeader"]
