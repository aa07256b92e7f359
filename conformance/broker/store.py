"""Append-only durability log with group commit, CRC-checked records and compaction.

File layout: ``MAGIC`` then records ``[u32 length][u32 crc32(payload)][payload]`` where the
payload is a pickled tuple (the record types and their tuple form are in ``records.py``).
On recovery records are replayed until the first one that is short or fails its CRC:
that is a torn tail from a crash mid-write, it is dropped and the file truncated there.

The store never blocks the event loop on fsync by itself: ``append`` only buffers,
``write_pending`` hands the buffer to the OS (so a kill -9 of the broker loses nothing the
clients have seen), and ``fsync`` — called by the shell from a worker thread, at most
one at a time — makes everything written so far durable (group commit: one fsync covers
every record appended since the previous one).  LSNs count records; a publisher confirm
or tx.commit-ok that depends on record N waits until ``synced_lsn >= N``.
"""

from __future__ import annotations

import os
import pickle
import struct
import threading
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import records as log_records
from .records import (
    BindingAdded,
    BindingRemoved,
    ExchangeDeclared,
    ExchangeDeleted,
    MessageDelivered,
    MessagesRemoved,
    MessageStored,
    QueueDeclared,
    QueueDeleted,
    Record,
)

MAGIC = b"AMQPCONF-LOG-1\n"
_HDR = struct.Struct(">II")
LOG_NAME = "broker.log"

@dataclass(slots=True)
class StoredMessage:
    record: MessageStored
    delivered: bool = False


@dataclass
class StoredQueue:
    vhost: str
    name: str
    auto_delete: bool
    arguments: dict[str, Any]
    messages: dict[int, StoredMessage] = field(default_factory=dict)


@dataclass
class Recovered:
    """The durable state rebuilt from the log, before the broker turns it into objects."""

    exchanges: dict[tuple[str, str], ExchangeDeclared] = field(default_factory=dict)
    queues: dict[tuple[str, str], StoredQueue] = field(default_factory=dict)
    bindings: dict[tuple[Any, ...], BindingAdded] = field(default_factory=dict)
    records: int = 0
    dropped_tail_bytes: int = 0

    def apply(self, rec: Record) -> None:
        _APPLY[type(rec)](self, rec)

    def _exchange_declared(self, rec: ExchangeDeclared) -> None:
        self.exchanges[(rec.vhost, rec.name)] = rec

    def _exchange_deleted(self, rec: ExchangeDeleted) -> None:
        self.exchanges.pop((rec.vhost, rec.name), None)
        # its bindings as source and as destination go with it
        self._drop_bindings(
            lambda b: (
                b.vhost == rec.vhost and (b.source == rec.name or (b.dest_kind, b.dest) == ("e", rec.name))
            )
        )

    def _queue_declared(self, rec: QueueDeclared) -> None:
        self.queues[(rec.vhost, rec.name)] = StoredQueue(rec.vhost, rec.name, rec.auto_delete, rec.arguments)

    def _queue_deleted(self, rec: QueueDeleted) -> None:
        self.queues.pop((rec.vhost, rec.name), None)
        self._drop_bindings(lambda b: b.vhost == rec.vhost and (b.dest_kind, b.dest) == ("q", rec.name))

    def _drop_bindings(self, doomed: Callable[[BindingAdded], bool]) -> None:
        for key in [key for key, b in self.bindings.items() if doomed(b)]:
            del self.bindings[key]

    def _binding_added(self, rec: BindingAdded) -> None:
        self.bindings[rec.key] = rec

    def _binding_removed(self, rec: BindingRemoved) -> None:
        self.bindings.pop(rec.key, None)

    def _message_stored(self, rec: MessageStored) -> None:
        q = self.queues.get((rec.vhost, rec.queue))
        if q is not None:
            q.messages[rec.seq] = StoredMessage(rec)

    def _message_delivered(self, rec: MessageDelivered) -> None:
        q = self.queues.get((rec.vhost, rec.queue))
        stored = q.messages.get(rec.seq) if q is not None else None
        if stored is not None:
            stored.delivered = True

    def _messages_removed(self, rec: MessagesRemoved) -> None:
        q = self.queues.get((rec.vhost, rec.queue))
        if q is not None:
            for seq in rec.seqs:
                q.messages.pop(seq, None)


_APPLY: dict[type[Any], Callable[[Recovered, Any], None]] = {
    ExchangeDeclared: Recovered._exchange_declared,
    ExchangeDeleted: Recovered._exchange_deleted,
    QueueDeclared: Recovered._queue_declared,
    QueueDeleted: Recovered._queue_deleted,
    BindingAdded: Recovered._binding_added,
    BindingRemoved: Recovered._binding_removed,
    MessageStored: Recovered._message_stored,
    MessageDelivered: Recovered._message_delivered,
    MessagesRemoved: Recovered._messages_removed,
}


def encode_record(rec: Record) -> bytes:
    payload = pickle.dumps(log_records.encode(rec), protocol=pickle.HIGHEST_PROTOCOL)
    return _HDR.pack(len(payload), zlib.crc32(payload)) + payload


def decode_records(data: bytes, start: int) -> tuple[list[Record], int]:
    """Records from ``data[start:]`` up to the first torn/corrupt one, and where it stopped.

    A frame whose CRC holds but whose payload is no record raises ``ValueError``: that is
    not a torn write but a log this broker cannot read, and truncating it would lose data.
    """
    out: list[Record] = []
    pos = start
    n = len(data)
    while pos + _HDR.size <= n:
        length, crc = _HDR.unpack_from(data, pos)
        end = pos + _HDR.size + length
        if end > n:
            break
        payload = data[pos + _HDR.size : end]
        if zlib.crc32(payload) != crc:
            break
        try:
            raw = pickle.loads(payload)
        except Exception:  # noqa: BLE001 - a CRC collision on garbage: treat as torn
            break
        out.append(log_records.decode(raw))
        pos = end
    return out, pos


_datasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)


class Store:
    """Durable log.  Not thread-safe except that ``fsync`` may run in another thread."""

    def __init__(self, directory: str | os.PathLike[str], *, compact_bytes: int = 32 * 1024 * 1024) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / LOG_NAME
        self.compact_bytes = compact_bytes
        self._buf: list[bytes] = []
        self._buf_records = 0
        self.appended_lsn = 0
        self.written_lsn = 0
        self.synced_lsn = 0
        self.file_size = 0
        self.live_size = 0  # the log's size when last rewritten (compacted)
        self._fd = -1
        #: fsyncs may overlap (each in a worker thread); compaction and close wait until none is
        #: in flight before they replace or close the file
        self._fsync_lock = threading.Condition()
        self._fsyncs = 0

    # -- recovery --------------------------------------------------------------------------
    def recover(self) -> Recovered:
        state = Recovered()
        if self.path.exists():
            data = self.path.read_bytes()
            if data.startswith(MAGIC):
                recs, stop = decode_records(data, len(MAGIC))
            else:  # a crash before the magic was complete: nothing was ever committed
                recs, stop = [], 0
            for rec in recs:
                state.apply(rec)
            state.records = len(recs)
            state.dropped_tail_bytes = len(data) - stop
            if stop < len(MAGIC):
                self._rewrite([])
            else:
                if stop < len(data):
                    with open(self.path, "r+b") as f:
                        f.truncate(stop)
                        f.flush()
                        os.fsync(f.fileno())
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
                self.file_size = stop
        else:
            self._rewrite([])
        return state

    def _rewrite(self, recs: Iterable[Record]) -> None:
        """Write a fresh log holding ``recs`` and atomically replace the old one."""
        tmp = self.path.with_suffix(".tmp")
        blob = MAGIC + b"".join(encode_record(r) for r in recs)
        with open(tmp, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dfd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self.file_size = self.live_size = len(blob)

    # -- writing -----------------------------------------------------------------------------
    def append(self, rec: Record) -> int:
        self._buf.append(encode_record(rec))
        self._buf_records += 1
        self.appended_lsn += 1
        return self.appended_lsn

    def write_pending(self) -> None:
        """Hand buffered records to the OS (no fsync)."""
        if not self._buf:
            return
        blob = b"".join(self._buf)
        self._buf.clear()
        self._buf_records = 0
        view = memoryview(blob)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self.file_size += len(blob)
        self.written_lsn = self.appended_lsn

    @property
    def needs_sync(self) -> bool:
        return self.synced_lsn < self.appended_lsn

    def fsync(self) -> None:
        """fsync the log (safe to call from a worker thread).  fdatasync where there is one: the
        log only grows, and fdatasync flushes the size a read needs, skipping only timestamps."""
        with self._fsync_lock:
            fd = self._fd
            if fd < 0:
                return
            self._fsyncs += 1
        try:
            _datasync(fd)
        finally:
            with self._fsync_lock:
                self._fsyncs -= 1
                self._fsync_lock.notify_all()

    def sync_now(self) -> None:
        """write + fsync synchronously, then mark everything durable."""
        self.write_pending()
        target = self.written_lsn
        self.fsync()
        self.mark_synced(target)

    def mark_synced(self, lsn: int) -> None:
        if lsn > self.synced_lsn:
            self.synced_lsn = lsn

    # -- compaction -------------------------------------------------------------------------
    def should_compact(self) -> bool:
        """Over ``compact_bytes`` and at least twice what the last compaction left: a snapshot
        that is itself over the limit (many persistent messages queued) is not rewritten again
        on every tick."""
        return self.file_size > max(self.compact_bytes, 2 * self.live_size)

    def compact(self, snapshot: Iterable[Record]) -> None:
        """Replace the log by ``snapshot`` (the broker's current durable state).

        Everything appended so far is reflected in the snapshot, so afterwards all LSNs
        handed out are durable.
        """
        with self._fsync_lock:
            self._fsync_lock.wait_for(lambda: self._fsyncs == 0)
            self._buf.clear()
            self._buf_records = 0
            self._rewrite(snapshot)
            self.written_lsn = self.appended_lsn
            self.synced_lsn = self.appended_lsn

    def close(self) -> None:
        if self._fd >= 0:
            self.write_pending()
            self.fsync()
            self.mark_synced(self.written_lsn)
            with self._fsync_lock:
                self._fsync_lock.wait_for(lambda: self._fsyncs == 0)
                os.close(self._fd)
                self._fd = -1


class MemoryStore(Store):
    """No disk at all: every append is immediately "durable".  For unit tests."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.appended_lsn = self.written_lsn = self.synced_lsn = 0
        self.file_size = 0
        self.compact_bytes = 1 << 62
        self.directory = Path(".")
        self._buf = []
        self._fd = -1

    def recover(self) -> Recovered:
        state = Recovered()
        for rec in self.records:
            state.apply(rec)
        return state

    def append(self, rec: Record) -> int:
        self.records.append(rec)
        self.appended_lsn += 1
        self.written_lsn = self.synced_lsn = self.appended_lsn
        return self.appended_lsn

    def write_pending(self) -> None:
        return None

    def fsync(self) -> None:
        return None

    def compact(self, snapshot: Iterable[Record]) -> None:
        self.records = list(snapshot)

    def close(self) -> None:
        return None
