"""pika and aio-pika, the way a user's code drives them, under the case deadline.

Two promises hold for every library interaction of a case, whatever the broker sends:

* **Bounded** (one mechanism, :class:`Bound`). The libraries' own waits have no deadline: pika's
  ``BlockingConnection`` waits for an RPC reply in a loop that only ends when a frame matching the
  request arrives (``basic_consume`` waits for a ``consume-ok`` naming *its* consumer tag, so a
  broker that renames the tag leaves it waiting forever, and pika dispatches ``call_later`` timers
  only inside ``process_data_events``/``start_consuming``, never inside such a wait); aio-pika's
  ``close()`` waits for ``close-ok`` even while its task is being cancelled. So the deadline is
  enforced from outside the library: a watchdog thread cuts the connections the interaction
  opened (socket shutdown for pika, ``transport.abort()`` on the event loop for aio-pika) and
  cancels the scenario's task. Whatever the library was waiting for then fails at once in the
  case's own thread, the case ends in TIMEOUT naming what it waited for and the frames it had
  received, and nothing is left behind (no thread of ours outlives the call, no connection stays
  open).
* **Blamed correctly** (one translation, :meth:`Bound.translate`). A library exception caused by
  what the broker sent (a nack, a return, a broker close, a lost stream, a duplicate or
  unexpected frame the library tripped on) is the broker's behaviour: it becomes a
  :class:`Mismatch` (FAIL or NON_STRICT by the case's level) with the exception and the last
  frames received. ERROR stays for faults of the harness (our own code) and of the local network
  (the broker's port refusing the TCP connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import ssl
import struct
import threading
import traceback
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from conformance.model.verdicts import CaseOutcome, CaseTimeout, HarnessError, Mismatch
from conformance.protocol import trace
from conformance.protocol.uri import aio_pika_connect_kwargs, pika_parameters
from conformance.protocol.wire import URL, redact

T = TypeVar("T")

RECENT_FRAMES = 8  # frames received that a verdict quotes as evidence
CLOSE_GRACE = 2.0  # seconds a clean close may take once the scenario itself is done
LIBRARY_PACKAGES = ("pika", "aio_pika", "aiormq", "pamqp")


# -- evidence: the frames a library received ------------------------------------------------------


class FrameTap:
    """Decodes the bytes a library received from the broker and keeps the last frames as text.

    The tap only reads copies of the bytes; a frame it cannot decode is recorded as such and never
    disturbs the library.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.frames: deque[str] = deque(maxlen=RECENT_FRAMES)
        # The running case's frame trace: every frame received, not only the last methods.
        self.trace = trace.current()
        self.connection_closes: list[Any] = []  # Connection.Close frames, for cases that check the code
        self._buf = b""
        self._broken = False

    def feed(self, data: bytes) -> None:
        if self._broken:
            return
        self._buf += data
        try:
            self._drain()
        except Exception as exc:  # noqa: BLE001 - evidence is best effort; the library decides
            self.frames.append(f"undecodable bytes ({type(exc).__name__}: {exc})")
            self._broken = True

    def _drain(self) -> None:
        from pamqp import frame as pframe

        while self._buf:
            if self._buf.startswith(b"AMQP"):  # a protocol header: the broker refused our version
                if len(self._buf) < 8:
                    return
                self.frames.append(f"protocol header {self._buf[:8]!r}")
                self._buf = self._buf[8:]
                continue
            if len(self._buf) < 7:
                return
            size = struct.unpack(">I", self._buf[3:7])[0]
            if len(self._buf) < size + 8:
                return
            chunk, self._buf = self._buf[: size + 8], self._buf[size + 8:]
            _n, channel, frm = pframe.unmarshal(chunk)
            if self.trace is not None:
                self.trace.add_frame(self.label, trace.RECEIVED, channel, frm)
            if getattr(frm, "name", "") == "Connection.Close":
                self.connection_closes.append(frm)
            text = describe_frame(frm)
            if text:
                self.frames.append(f"ch{channel} {text}")


def describe_frame(frm: Any) -> str:
    """One line for a decoded pamqp method frame (empty for heartbeats and content frames)."""
    name = getattr(frm, "name", type(frm).__name__)
    if name in ("Heartbeat", "ContentHeader", "ContentBody"):
        return ""  # the method frames are the evidence; content is checked by the cases
    try:
        fields = ", ".join(f"{k}={v!r}" for k, v in frm if k != "server_properties")
    except TypeError:
        fields = ""
    return f"{name}({fields})"[:200]


# -- the bounding mechanism ------------------------------------------------------------------------


class Bound:
    """One bounded library interaction: its deadline, the connections it opened, what they received.

    The watchdog (a daemon ``threading.Timer``) fires once at the deadline and runs every
    registered *sever* action; each cuts one connection from outside the library so that the
    library's pending wait fails in the case's own thread. ``translate`` turns what then comes out
    of the library (or any other library exception) into the verdict-bearing exception.
    """

    def __init__(self, what: str, seconds: float) -> None:
        self.what = what
        self.seconds = seconds
        self.expired = threading.Event()
        self.taps: list[FrameTap] = []
        self._severs: list[Callable[[], object]] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.name = f"deadline: {what}"[:60]

    def start(self) -> Bound:
        self._timer.start()
        return self

    def cancel(self) -> None:
        self._timer.cancel()

    def on_expiry(self, sever: Callable[[], object]) -> None:
        """Register how to cut a connection at the deadline (at once if it has passed)."""
        with self._lock:
            if not self.expired.is_set():
                self._severs.append(sever)
                return
        with contextlib.suppress(Exception):
            sever()

    def _expire(self) -> None:
        with self._lock:
            self.expired.set()
            severs = list(self._severs)
        for sever in severs:
            with contextlib.suppress(Exception):  # a connection already gone needs no cutting
                sever()

    def tap(self, label: str) -> FrameTap:
        t = FrameTap(label)
        self.taps.append(t)
        return t

    def evidence(self) -> str:
        parts = [f"{t.label}: {'; '.join(t.frames) or 'no frames'}" for t in self.taps]
        return f"frames received ({' | '.join(parts)})" if parts else "no connection opened"

    # -- blame ------------------------------------------------------------------------------------

    def translate(self, exc: BaseException) -> BaseException:
        """The exception a case should end with for ``exc`` raised inside this interaction.

        * after the deadline, whatever the cut connection made the library raise → TIMEOUT;
        * a verdict the case body raised itself (Mismatch, CaseTimeout, …) → unchanged;
        * TLS failing before any AMQP frame (our CA/certificate settings, a TLS client on a plain
          port), or a certificate verification failure at any time → ERROR in one line;
        * a library timeout (aio-pika's ``timeout=``) → TIMEOUT;
        * a library exception caused by the broker's frames → Mismatch with the evidence;
        * the TCP connection to the broker refused → ERROR (local network, not the broker);
        * anything else (our own code) → unchanged, so the plugin reports ERROR.
        """
        if not isinstance(exc, Exception):
            return exc  # KeyboardInterrupt, pytest's skip/exit: not ours to reinterpret
        if self.expired.is_set():
            return CaseTimeout(self.what, self.seconds,
                               observed=f"no complete answer within {self.seconds:.1f}s; {self.evidence()}; "
                                        f"the connection was cut at the deadline ({type(exc).__name__})")
        if isinstance(exc, CaseOutcome):
            return exc
        tls = tls_failure(exc)
        if tls is not None and (
            isinstance(tls, ssl.SSLCertVerificationError) or not any(t.frames for t in self.taps)
        ):
            # Our TLS settings (CA, client certificate, a TLS client on a plain port) failed the
            # handshake: no AMQP frame was exchanged, so there is no broker behaviour to judge.
            return HarnessError(f"{self.what}: TLS with the broker failed: {exc_text(tls)}")
        if isinstance(exc, TimeoutError):
            return CaseTimeout(self.what, self.seconds, observed=f"{exc_text(exc)}; {self.evidence()}")
        if is_network_refusal(exc) and not any(t.frames for t in self.taps):
            return HarnessError(f"{self.what}: could not reach the broker: {exc_text(exc)}")
        if is_broker_caused(exc):
            return Mismatch(
                f"{self.what}: the client library raised {type(exc).__name__} on what the broker sent",
                observed=f"{exc_text(exc)}; {self.evidence()}",
            )
        return exc

    @contextlib.contextmanager
    def translating(self) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            out = self.translate(exc)
            if out is exc:
                raise
            raise out from exc


def exc_text(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it wraps (cause, context, exception arguments, ``.exceptions``)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        nested = [
            e.__cause__,
            e.__context__,
            *getattr(e, "args", ()),
            *(getattr(e, "exceptions", None) or ()),
        ]
        todo.extend(n for n in nested if isinstance(n, BaseException))


def tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind ``exc`` (pika and aiormq wrap it in their connection errors), if any."""
    return next((e for e in _chain(exc) if isinstance(e, ssl.SSLError)), None)


def is_network_refusal(exc: BaseException) -> bool:
    """The broker's TCP port refused or was unreachable: the local network, not the broker."""
    refusals = (ConnectionRefusedError, socket.gaierror)
    return any(isinstance(e, refusals) for e in _chain(exc)) or "ECONNREFUSED" in str(exc) \
        or "Connect call failed" in str(exc)


def _raised_in_library(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and any(f"/{pkg}/" in frames[-1].filename for pkg in LIBRARY_PACKAGES)


def is_broker_caused(exc: BaseException) -> bool:
    """Does ``exc`` come from a client library reacting to the broker's frames?"""
    with contextlib.suppress(ImportError):
        from pika import exceptions as pex

        if isinstance(exc, pex.AMQPError):
            return True
    with contextlib.suppress(ImportError):
        import aio_pika.exceptions as apex
        from aiormq import exceptions as aex

        if isinstance(exc, apex.MessageProcessError):
            return False  # settling a message twice: our own misuse of the API
        if isinstance(exc, (aex.AMQPError, aex.ChannelInvalidStateError)):
            return True
    with contextlib.suppress(ImportError):
        from pamqp.exceptions import PAMQPException

        if isinstance(exc, PAMQPException):
            return True  # bytes the codec could not decode
    # pika asserts its own invariants while it processes frames ('_CallbackResult was already set'
    # on a duplicate confirm); an asyncio future completed twice is aiormq's version of it.
    if isinstance(exc, (AssertionError, asyncio.InvalidStateError)) and _raised_in_library(exc):
        return True
    return isinstance(exc, (ConnectionResetError, BrokenPipeError, EOFError, asyncio.IncompleteReadError))


# -- pika ------------------------------------------------------------------------------------------


def _pika_params(url: URL, timeout: float) -> Any:
    """pika's parameters for ``url`` (TLS options included, every wait bounded by ``timeout``);
    a URL pika cannot honour or a TLS file that cannot be loaded is the harness's error."""
    try:
        return pika_parameters(url, timeout)
    except ValueError as exc:
        raise HarnessError(f"pika cannot connect to {redact(url)}: {exc}") from exc


class PikaBound:
    """pika connections opened under one :class:`Bound`; each is cut at the deadline."""

    def __init__(self, bound: Bound, url: URL) -> None:
        self.bound = bound
        self.url = url
        self.connections: list[Any] = []

    def connect(self, url: URL | None = None, params: Any = None) -> Any:
        """Open a BlockingConnection (``params`` overrides the URL's) that the deadline can cut."""
        import pika

        params = params if params is not None else _pika_params(url or self.url, self.bound.seconds)
        # Not translated here: the scenario may expect pika's exception (an auth refusal); what it
        # does not catch is translated where pika_bound ends.
        conn = pika.BlockingConnection(params)
        self.connections.append(conn)
        self._watch(conn, f"pika#{len(self.connections)}")
        return conn

    def _watch(self, conn: Any, label: str) -> None:
        # pika keeps its socket and its byte input private; both are needed: the socket to cut the
        # connection from the watchdog thread (shutdown wakes pika's poll with EOF, which is
        # thread safe, unlike pika's own calls), the input to quote what the broker sent.
        impl = conn._impl
        tap = self.bound.tap(label)
        receive = impl._on_data_available

        def tapped(data: bytes) -> None:
            tap.feed(bytes(data))
            receive(data)

        impl._on_data_available = tapped
        sock = getattr(getattr(impl, "_transport", None), "_sock", None)
        if sock is not None:
            self.bound.on_expiry(lambda: sock.shutdown(socket.SHUT_RDWR))

    def close_all(self) -> None:
        for conn in self.connections:
            if conn.is_open:
                with contextlib.suppress(Exception):  # a broker that does not answer close is cut
                    conn.close()


@contextlib.contextmanager
def pika_bound(url: URL, timeout: float, what: str) -> Iterator[PikaBound]:
    """Run a pika scenario (``with pika_bound(...) as pb: conn = pb.connect()``) under one deadline.

    The connections it opens are closed on exit; at the deadline they are cut and the case ends in
    TIMEOUT; a library exception caused by the broker becomes a Mismatch (see :class:`Bound`).
    """
    bound = Bound(what, timeout).start()
    pb = PikaBound(bound, url)
    try:
        with bound.translating():
            yield pb
            if bound.expired.is_set():
                # The scenario caught what the cut connection raised: its result is an artifact.
                raise CaseTimeout(what, timeout, observed=bound.evidence())
    finally:
        # The close runs under a short deadline of its own: the scenario is over and a broker that
        # never sends close-ok must not hold the worker.
        bound.cancel()
        closing = Bound(f"closing: {what}", min(CLOSE_GRACE, timeout)).start()
        for conn in pb.connections:
            sock = getattr(getattr(getattr(conn, "_impl", None), "_transport", None), "_sock", None)
            if sock is not None:
                closing.on_expiry(functools.partial(sock.shutdown, socket.SHUT_RDWR))
        try:
            pb.close_all()
        finally:
            closing.cancel()


@contextlib.contextmanager
def pika_session(url: URL, timeout: float, what: str = "the pika scenario") -> Iterator[Any]:
    """One bounded pika BlockingConnection (see :func:`pika_bound`), closed on exit."""
    with pika_bound(url, timeout, what) as pb:
        yield pb.connect()


async def aio_pika_connect(url: URL, timeout: float) -> Any:
    """``aio_pika.connect`` to ``url`` as the raw client reaches it (amqps, TLS files, query
    options: :func:`~conformance.protocol.uri.aio_pika_connect_kwargs`); a URL aio-pika cannot
    honour or a TLS file that cannot be loaded is the harness's error, not the broker's."""
    import aio_pika

    try:
        kwargs = aio_pika_connect_kwargs(url, timeout)
    except ValueError as exc:
        raise HarnessError(f"aio-pika cannot connect to {redact(url)}: {exc}") from exc
    return await aio_pika.connect(**kwargs)


@contextlib.asynccontextmanager
async def aio_pika_session(
    url: URL, timeout: float, *, what: str | None = None, expected: str = ""
) -> AsyncIterator[Any]:
    """One aio-pika connection (:func:`aio_pika_connect`), closed on exit -- the aio-pika twin of
    :func:`pika_session`; run it inside :func:`run_async`, which bounds it.

    With ``what``: a broker error raised inside (aiormq's ``AMQPError``) is the case's
    ``Mismatch(what, expected=expected, observed=repr(error))``, and closing the connection after
    it is best effort (the broker may already have closed it)."""
    from aiormq.exceptions import AMQPError

    conn = await aio_pika_connect(url, timeout)
    try:
        yield conn
    except AMQPError as exc:
        if what is None:
            raise
        raise Mismatch(what, expected=expected, observed=repr(exc)) from exc
    finally:
        if what is None:
            await conn.close()
        else:
            with contextlib.suppress(Exception):
                await conn.close()


def received_connection_closes() -> list[Any]:
    """The Connection.Close frames the connections of the running :func:`run_async` scenario
    received (pamqp objects): how a case reads the code of a refusal aiormq only reports as text."""
    loop = asyncio.get_running_loop()
    bound = getattr(loop, "bound", None)
    return [frm for tap in (bound.taps if isinstance(bound, Bound) else []) for frm in tap.connection_closes]


# -- aio-pika --------------------------------------------------------------------------------------


class _BoundLoop(asyncio.SelectorEventLoop):
    """An event loop that knows the connections opened on it, so a deadline can cut them.

    aio-pika (aiormq) opens its socket with ``asyncio.open_connection``, i.e. through
    ``loop.create_connection``: overriding that public method sees every transport.
    """

    def __init__(self, bound: Bound) -> None:
        super().__init__()
        self.bound = bound
        self.transports: list[asyncio.Transport] = []

    async def create_connection(self, protocol_factory: Any, *args: Any, **kwargs: Any) -> Any:
        transport, protocol = await super().create_connection(protocol_factory, *args, **kwargs)
        self.transports.append(transport)
        tap = self.bound.tap(f"aio-pika#{len(self.transports)}")
        receive = protocol.data_received

        def tapped(data: bytes) -> None:
            tap.feed(bytes(data))
            receive(data)

        protocol.data_received = tapped
        self.bound.on_expiry(lambda: self.call_soon_threadsafe(transport.abort))
        return transport, protocol

    def abort_all(self) -> None:
        for transport in self.transports:
            if not transport.is_closing():
                transport.abort()


def run_async(coro: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
    """Run an aio-pika scenario coroutine to completion within ``timeout`` seconds.

    At the deadline the connections it opened are aborted and its task cancelled, so even a
    ``finally: await conn.close()`` waiting for a close-ok that never comes ends at once; the case
    ends in TIMEOUT. Library exceptions are translated by :meth:`Bound.translate`. The event loop
    is private to the call and closed before it returns: no task or socket outlives it.
    """
    bound = Bound(what, timeout)
    loop = _BoundLoop(bound)
    task = loop.create_task(coro)
    bound.on_expiry(lambda: loop.call_soon_threadsafe(task.cancel))
    # Last resort: a task that swallows its cancellation still cannot keep the loop running.
    stopper = threading.Timer(timeout + CLOSE_GRACE, lambda: loop.call_soon_threadsafe(loop.stop))
    stopper.daemon = True
    bound.start()
    stopper.start()
    try:
        with bound.translating():
            try:
                result = loop.run_until_complete(task)
                if bound.expired.is_set():
                    # The scenario caught what the aborted connection raised: an artifact.
                    raise CaseTimeout(what, timeout, observed=bound.evidence())
                return result
            except asyncio.CancelledError as exc:
                raise CaseTimeout(what, timeout, observed=bound.evidence()) from exc
            except RuntimeError as exc:
                if not task.done():  # stopped by the last resort above
                    raise CaseTimeout(what, timeout, observed=bound.evidence()) from exc
                raise
    finally:
        bound.cancel()
        stopper.cancel()
        _close_loop(loop)


def _close_loop(loop: _BoundLoop) -> None:
    """Abort what is still connected, let the library's tasks finish briefly, close the loop."""
    loop.abort_all()
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in pending:
        t.cancel()
    with contextlib.suppress(Exception):
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=CLOSE_GRACE))
        loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), CLOSE_GRACE))
    with contextlib.suppress(Exception):
        loop.close()


async def aio_pika_settle_then_get(url: URL, queue: str, settle: str, timeout: float) -> str:
    """aio-pika: publish one message to ``queue``, ``queue.get()`` it, settle it with
    ``message.<settle>(requeue=False)`` (``reject`` or ``nack``), then ``queue.get()`` again.

    Returns ``"queue empty"`` or a description of what the second get returned; a broker error
    surfaces as the library's exception, which :func:`run_async` turns into a Mismatch.
    """
    import aio_pika

    async with aio_pika_session(url, timeout) as conn:
        channel = await conn.channel()
        q = await channel.declare_queue(queue)
        await channel.default_exchange.publish(aio_pika.Message(b"a1"), routing_key=queue)
        msg = await q.get(timeout=timeout, fail=False)
        if msg is None:
            raise Mismatch("queue.get()", expected="the published message", observed="queue empty")
        await getattr(msg, settle)(requeue=False)
        again = await q.get(timeout=timeout, fail=False)
        return "queue empty" if again is None else f"message {again.body!r} redelivered={again.redelivered}"


# --- libfill ---
# Fill a queue through a client library: the first steps of most pika / aio-pika cases.
#
# The same as :func:`conformance.verify.steps.fill` for the raw client: declare the queue, then
# publish the given bodies to it by the default exchange, in order. Run them inside the case's
# bounded session (``libs.pika_session`` / ``libs.run_async``): every library call here waits on
# the broker.


def pika_fill(ch: Any, queue: str, bodies: Sequence[bytes], *, confirm: bool = False) -> None:
    """On a pika ``BlockingChannel``: queue_declare(``queue``), confirm_delivery() first when
    ``confirm`` (each basic_publish then returns once the broker confirmed it), and one
    basic_publish per body."""
    ch.queue_declare(queue)
    if confirm:
        ch.confirm_delivery()
    for body in bodies:
        ch.basic_publish("", queue, body)


async def aio_pika_fill(channel: Any, queue: str, bodies: Sequence[bytes], **declare: Any) -> Any:
    """On an aio-pika channel: declare_queue(``queue``, **``declare``) and one publish per body
    (a plain aio_pika.Message) by the default exchange; the declared queue object."""
    import aio_pika

    declared = await channel.declare_queue(queue, **declare)
    for body in bodies:
        await channel.default_exchange.publish(aio_pika.Message(body), routing_key=queue)
    return declared

# --- pika_steps ---
# Steps the pika (BlockingConnection) cases share: a confirm-mode channel with its queue and
# messages in place, and a consumer loop whose every wait is bounded.


def pika_queue_channel(conn: Any, queue: str, bodies: Sequence[bytes] = ()) -> Any:
    """A channel of the pika connection ``conn`` with ``queue`` declared, in confirm mode
    (``confirm_delivery()``), and ``bodies`` published to the queue by the default exchange (each
    ``basic_publish`` returns once the broker has confirmed it)."""
    ch = conn.channel()
    ch.queue_declare(queue)
    ch.confirm_delivery()
    for body in bodies:
        ch.basic_publish("", queue, body)
    return ch


def pika_deliveries(ch: Any, queue: str, timeout: float, seen: Sequence[Any]) -> Iterator[tuple[Any, bytes]]:
    """(method, body) of each delivery of a pika consumer loop on ``queue``, for as long as the
    caller goes on; no delivery within ``timeout`` is a TIMEOUT showing ``seen``, the caller's
    record of the deliveries so far. The caller cancels the consumer (``ch.cancel()``)."""
    for method, _props, body in ch.consume(queue, inactivity_timeout=timeout):
        if method is None:
            raise CaseTimeout("a delivery in the pika consumer loop", timeout,
                              observed=f"deliveries so far: {seen}")
        yield method, body
