"""asyncio shell: moves bytes between sockets and ``ConnectionCore``s, drives timers and
group commit.  All protocol decisions live in the sans-IO core."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import shutil
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .access import Permissions, Users, parse_user_spec
from .core import CloseTransport, ConnectionCore
from .errors import ReplyCode
from .limits import Limits
from .model import Broker
from .store import Store

log = logging.getLogger("conformance.broker")

TICK_INTERVAL = 0.02
#: Group commit: an fsync covers every record written before it started.  When records
#: are waiting a new fsync starts after this delay (0 = on the next loop iteration, i.e.
#: after the current read has been fully processed, so one read's worth of publishes shares
#: one fsync), even while earlier ones are still in flight, up to SYNCS_IN_FLIGHT of them:
#: a commit that arrives during an fsync need not wait for it to end before its own starts
#: (measured here: one fdatasync at a time 480/s, p50 1.9 ms; four overlapping 13000/s; the
#: tx-persistent bench with four connections: 2 in flight 2.1-2.8k commits/s, 4: 2.5-3.8k).
GROUP_COMMIT_INTERVAL = 0.0
SYNCS_IN_FLIGHT = 4
#: Fair serving: messages a queue hands out per loop turn before other connections get theirs.
DISPATCH_BURST = 256
#: Write buffer per client above which deliveries pause (asyncio calls pause_writing).
WRITE_HIGH_WATER = 512 * 1024


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # type: ignore[import-not-found, unused-ignore]  # optional dependency
    except ImportError:  # pragma: no cover - uvloop is optional
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class Syncer:
    """The threads that fsync the log (``SYNCS_IN_FLIGHT`` of them, the GIL released while the
    disk works): ``submit(target)`` asks for one fsync, ``done(target, error)`` is called on the
    loop once it has ended.  Leaner than ``run_in_executor``: a commit waits for this round trip."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop,
                 done: Callable[[int, OSError | None], None]) -> None:
        self.store, self.loop, self.done = store, loop, done
        self._requests: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._run, name="amqp-reference-fsync", daemon=True)
                         for _ in range(SYNCS_IN_FLIGHT)]
        for t in self._threads:
            t.start()

    def submit(self, target: int) -> None:
        self._requests.put(target)

    def _run(self) -> None:
        while (target := self._requests.get()) is not None:
            error: OSError | None = None
            try:
                self.store.fsync()
            except OSError as exc:  # pragma: no cover - disk failure
                error = exc
            try:
                self.loop.call_soon_threadsafe(self.done, target, error)
            except RuntimeError:  # pragma: no cover - the loop is closed: nobody waits any more
                return

    def stop(self) -> None:
        for _ in self._threads:
            self._requests.put(None)
        for t in self._threads:
            t.join()


class AMQPProtocol(asyncio.Protocol):
    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.core: ConnectionCore | None = None
        self.transport: asyncio.Transport | None = None
        self._flush_scheduled = False
        self._reading_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only duck-typed alike
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.core = ConnectionCore(self.server.broker, heartbeat=self.server.heartbeat, peer=str(peer))
        self.core.wake = self.schedule_flush
        # a tx.commit-ok waits for the group commit (shared with every other connection)
        # instead of an fsync on the event loop
        self.core.sync_requester = self.server.after_activity
        self.server.protocols.add(self)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)  # type: ignore[attr-defined]

    def pause_writing(self) -> None:
        if self.core is not None:
            self.core.set_congested(True)

    def resume_writing(self) -> None:
        if self.core is not None:
            self.core.set_congested(False)
            self.server.after_activity()

    def data_received(self, data: bytes) -> None:
        assert self.core is not None
        # the flush below sends whatever this read makes due: no flush to schedule meanwhile
        self._flush_scheduled = True
        try:
            self.core.receive_data(data)
        finally:
            self.flush()
        self.server.after_activity()

    def _follow_block(self, core: ConnectionCore, transport: asyncio.Transport) -> None:
        """A blocked connection (a publisher during the memory alarm) is not read from:
        what it sends waits in the kernel's buffers and, once they fill, in the client."""
        if core.blocked and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not core.blocked and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.protocols.discard(self)
        if self.core is not None:
            self.core.connection_lost()
            self.core.events()
        self.server.after_activity()

    def schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.server.loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        core, transport = self.core, self.transport
        if core is None or transport is None or transport.is_closing():
            return
        # Anything a client can observe must at least be in the OS page cache, so a
        # kill -9 of the broker never "forgets" state a client has already seen.
        self.server.store.write_pending()
        # Stop reading from a blocked publisher before telling it so: a client that has seen
        # connection.blocked must find the broker no longer reading what it sends.
        self._follow_block(core, transport)
        data = core.data_to_send()
        if data:
            transport.write(data)
        for ev in core.events():
            if isinstance(ev, CloseTransport):
                log.debug("closing %s: %s", core.peer, ev.reason)
                transport.close()


class BrokerServer:
    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        users: Mapping[str, str] | Users | None = None,
        vhosts: list[str] | None = None,
        heartbeat: int = 60,
        tls: ssl.SSLContext | None = None,
        tls_port: int = 0,
        limits: Limits | None = None,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.port = port
        self.heartbeat = heartbeat
        self.tls = tls
        self.requested_tls_port = tls_port
        self.tls_port: int | None = None  # bound once started, when ``tls`` is given
        self._tls_server: asyncio.base_events.Server | None = None
        self.store = Store(data_dir)
        self.broker = Broker(self.store, users=users, vhosts=vhosts or ["/"], limits=limits)
        self.protocols: set[AMQPProtocol] = set()
        self.loop = asyncio.get_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._syncs_in_flight = 0
        self._syncer: Syncer | None = None
        self._sync_started_lsn = 0  # what the newest fsync in flight covers
        self._sync_scheduled = False

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._server = await self.loop.create_server(
            lambda: AMQPProtocol(self), self.host, self.requested_port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        if self.tls is not None:
            # The same protocol behind TLS: asyncio does the handshake before connection_made,
            # so the core never sees a byte of TLS. ssl_handshake_timeout bounds a client that
            # connects and never says hello.
            self._tls_server = await self.loop.create_server(
                lambda: AMQPProtocol(self), self.host, self.requested_tls_port, reuse_address=True,
                ssl=self.tls, ssl_handshake_timeout=10.0,
            )
            self.tls_port = self._tls_server.sockets[0].getsockname()[1]
        self._ticker = self.loop.create_task(self._tick_forever())
        self._syncer = Syncer(self.store, self.loop, self._sync_done)
        self.broker.dispatch_burst = DISPATCH_BURST
        self.broker.dispatch_scheduler = self._schedule_dispatch

    def _schedule_dispatch(self) -> None:
        self.loop.call_soon(self._run_dispatch)

    def _run_dispatch(self) -> None:
        self.broker.run_deferred_dispatch()
        self.after_activity()

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL)
            try:
                self.broker.tick()
                for p in list(self.protocols):
                    if p.core is not None:
                        p.core.tick()
                        p.flush()
                if self.store.should_compact() and not self._syncs_in_flight:
                    self.broker.compact()
                self.after_activity()
            except Exception:  # pragma: no cover - keep the broker alive, but say so
                log.exception("timer tick failed")

    def force_alarm(self, on: bool) -> None:
        """Raise/clear the memory alarm by hand (SIGUSR1/SIGUSR2 of the broker command)."""
        self.broker.force_alarm(on)
        for p in list(self.protocols):
            p.flush()

    # -- group commit -----------------------------------------------------------------------
    def after_activity(self) -> None:
        if self.broker.limits.memory_watermark:
            # after every read, not only every tick: a flood grows faster than the tick interval
            self.broker.check_alarm()
        if self.store.needs_sync and not self._sync_scheduled and self._sync_due():
            self._sync_scheduled = True
            if GROUP_COMMIT_INTERVAL:
                self.loop.call_later(GROUP_COMMIT_INTERVAL, self._start_sync)
            else:
                self.loop.call_soon(self._start_sync)

    def _sync_due(self) -> bool:
        """Room for another fsync, and records appended since the newest one in flight began."""
        return self._syncs_in_flight < SYNCS_IN_FLIGHT and self.store.appended_lsn > self._sync_started_lsn

    def _start_sync(self) -> None:
        self._sync_scheduled = False
        if not self.store.needs_sync or not self._sync_due():
            return
        self.store.write_pending()
        target = self.store.written_lsn
        self._syncs_in_flight += 1
        self._sync_started_lsn = target
        assert self._syncer is not None  # started with the server
        self._syncer.submit(target)

    def _sync_done(self, target: int, error: OSError | None) -> None:
        # an fsync covers what was written before it started: a later one may end first, and
        # mark_synced never moves back
        self._syncs_in_flight -= 1
        if error is not None:  # pragma: no cover - disk failure
            log.error("fsync failed: %s", error)
            return
        self.store.mark_synced(target)
        self.broker.on_synced()
        self.after_activity()

    # -- shutdown ---------------------------------------------------------------------------
    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._tls_server is not None:
            self._tls_server.close()
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for p in list(self.protocols):
            if p.core is not None:
                p.core.close(
                    ReplyCode.CONNECTION_FORCED, "broker forced connection closure with reason 'shutdown'"
                )
                p.flush()
        deadline = self.loop.time() + 1.0
        while self.protocols and self.loop.time() < deadline:
            await asyncio.sleep(0.01)
        for p in list(self.protocols):
            if p.transport is not None:
                p.transport.abort()
        await self._close_store()
        if self._server is not None:
            await self._server.wait_closed()
        if self._tls_server is not None:
            await self._tls_server.wait_closed()

    async def _close_store(self) -> None:
        """The fsyncs in flight end, their threads stop, the log is closed."""
        while self._syncs_in_flight:
            await asyncio.sleep(0.001)
        if self._syncer is not None:
            self._syncer.stop()
            self._syncer = None
        self.store.close()


def tls_context(certfile: str, keyfile: str | None = None, cafile: str | None = None) -> ssl.SSLContext:
    """The server side of the TLS listener. With ``cafile`` a client certificate signed by it
    is asked for (and checked when sent); without, none is asked for. ValueError (one line) for
    files that cannot be loaded."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(certfile, keyfile)
        if cafile:
            ctx.load_verify_locations(cafile=cafile)
            ctx.verify_mode = ssl.CERT_OPTIONAL
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the TLS certificate/key: {exc}") from exc
    return ctx


def _add_user(users: Users, name: str, entry: Any) -> None:
    """A users-file entry given as an object: password, tags, permissions per vhost."""
    if not isinstance(entry, dict) or not isinstance(entry.get("password"), str):
        raise ValueError(f"user {name!r}: expected a password or {{\"password\": …, \"permissions\": …}}")
    users.passwords[name] = entry["password"]
    tags = entry.get("tags") or []
    if not isinstance(tags, list):
        raise ValueError(f"user {name!r}: tags must be a list of names")
    users.tags[name] = frozenset(str(t) for t in tags)
    for vhost, perms in (entry.get("permissions") or {}).items():
        if not isinstance(perms, dict):
            raise ValueError(f"user {name!r} vhost {vhost!r}: permissions must be an object")
        users.permissions[(name, str(vhost))] = Permissions(
            str(perms.get("configure", "")), str(perms.get("write", "")), str(perms.get("read", "")))


def load_users(path: str | os.PathLike[str] | None, specs: Iterable[str] = ()) -> tuple[Users, list[str]]:
    """The users file and ``--user`` specs → (users with their permissions, vhosts).

    The file is JSON (both keys optional; defaults: guest/guest and "/")::

        {"users": {"guest": "guest",
                   "alice": {"password": "pw",
                             "permissions": {"/": {"configure": "^a-", "write": "^a-", "read": "^a-"}}}},
         "vhosts": ["/", "v2"]}

    A user given as a bare password has full permissions in every vhost (RabbitMQ's default
    guest); a user given as an object has exactly the permissions it lists (none: it can log in
    but open no vhost) and the tags it lists (``"tags": ["impersonator"]``: it may publish with
    another user's ``user_id``). Each ``--user NAME:PASS[:VHOST:CONFIGURE:WRITE:READ]`` adds or
    replaces that user's password and adds one vhost's permissions. Raises ValueError (one
    line) for a malformed file or spec, OSError when the file cannot be read.
    """
    import json

    data: dict[str, Any] = {}
    if path is not None:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict):
            raise ValueError("the top level must be an object")
    vhosts = [str(v) for v in data.get("vhosts", ["/"])]
    users = Users()
    entries = data.get("users", {"guest": "guest"})
    if not isinstance(entries, dict):
        raise ValueError('"users" must be an object of name: password or name: {password, permissions}')
    for name, entry in entries.items():
        if isinstance(entry, str):
            users.passwords[str(name)] = entry
            users.permissions.update({(str(name), v): Permissions() for v in vhosts})
            continue
        _add_user(users, str(name), entry)
    for spec in specs:
        name, password, vhost, perms = parse_user_spec(spec)
        users.passwords[name] = password
        if vhost is not None and perms is not None:
            users.permissions[(name, vhost)] = perms
            if vhost not in vhosts:
                vhosts.append(vhost)
    return users, vhosts


class EmbeddedBroker:
    """The broker in a background thread, for tests::

        with EmbeddedBroker() as b:
            pika.BlockingConnection(pika.URLParameters(b.url))
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        users: Mapping[str, str] | Users | None = None,
        vhosts: list[str] | None = None,
        heartbeat: int = 60,
        tls: ssl.SSLContext | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.limits = limits
        self._own_dir = data_dir is None
        self.tls = tls
        self.tls_port: int | None = None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="amqp-ref-"))
        self.host = host
        self.port = port
        self.users = users
        self.vhosts = vhosts
        self.heartbeat = heartbeat
        self.server: BrokerServer | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{self.host}:{self.port}/"

    @property
    def tls_url(self) -> str:
        """``amqps://`` to the TLS listener (without CA options: add ``?cacertfile=…``)."""
        return f"amqps://guest:guest@{self.host}:{self.tls_port}/"

    @property
    def broker(self) -> Broker:
        assert self.server is not None
        return self.server.broker

    def start(self, timeout: float = 10.0) -> EmbeddedBroker:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)

            async def main() -> None:
                self._stopped = asyncio.Event()
                self.server = BrokerServer(
                    self.data_dir,
                    host=self.host,
                    port=self.port,
                    users=self.users,
                    vhosts=self.vhosts,
                    heartbeat=self.heartbeat,
                    tls=self.tls,
                    tls_port=self.tls_port or 0,
                    limits=self.limits,
                )
                await self.server.start()
                self.port = self.server.port
                self.tls_port = self.server.tls_port
                ready.set()
                await self._stopped.wait()
                await self.server.stop()

            try:
                loop.run_until_complete(main())
            except BaseException as exc:  # noqa: BLE001 - surfaced to start()
                errors.append(exc)
                ready.set()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="amqp-reference-broker", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError("reference broker did not start listening")
        if errors:
            raise RuntimeError("reference broker failed to start") from errors[0]
        return self

    def call(self, fn: Any, timeout: float = 10.0) -> Any:
        """Run ``fn()`` on the broker's loop thread and return its result."""
        assert self._loop is not None
        fut = asyncio.run_coroutine_threadsafe(_as_coro(fn), self._loop)
        return fut.result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is None:
            return
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopped.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("reference broker did not stop")
        self._thread = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def cleanup(self) -> None:
        """Remove the data folder this broker made itself (after :meth:`stop`; ``with`` does both)."""
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.cleanup()


async def _as_coro(fn: Any) -> Any:
    return fn()
