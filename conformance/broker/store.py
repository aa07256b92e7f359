"""Append-only durability log with group commit, CRC-checked records and compaction.

File layout: ``MAGIC`` then records ``[u32 length][u32 crc32(payload)][payload]`` where the
payload is a pickled tuple (see ``Recovered.apply`` for the record kinds).  On recovery
records are replayed until the first one that is short or fails its CRC: that is a torn
tail from a crash mid-write, it is dropped and the file truncated there.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAGIC = b"AMQPCONF-LOG-1\n"
_HDR = struct.Struct(">II")
LOG_NAME = "broker.log"

Record = tuple[Any, ...]


@dataclass
class StoredQueue:
    vhost: str
    name: str
    auto_delete: bool
    arguments: dict[str, Any]
    #: seq -> [record, delivered-flag]
    messages: dict[int, list[Any]] = field(default_factory=dict)


@dataclass
class Recovered:
    """The durable state rebuilt from the log, before the broker turns it into objects."""

    exchanges: dict[tuple[str, str], Record] = field(default_factory=dict)
    queues: dict[tuple[str, str], StoredQueue] = field(default_factory=dict)
    bindings: dict[tuple[Any, ...], Record] = field(default_factory=dict)
    records: int = 0
    dropped_tail_bytes: int = 0

    def apply(self, rec: Record) -> None:
        kind = rec[0]
        if kind == "x":  # exchange declared: (x, vhost, name, type, auto_delete, internal, args)
            self.exchanges[(rec[1], rec[2])] = rec
        elif kind == "X":  # exchange deleted: (X, vhost, name)
            self.exchanges.pop((rec[1], rec[2]), None)
            for key in [k for k in self.bindings if k[0] == rec[1] and (k[1] == rec[2] or (k[2] == "e" and k[3] == rec[2]))]:
                del self.bindings[key]
        elif kind == "q":  # queue declared: (q, vhost, name, auto_delete, args)
            self.queues[(rec[1], rec[2])] = StoredQueue(rec[1], rec[2], rec[3], rec[4])
        elif kind == "Q":  # queue deleted: (Q, vhost, name)
            self.queues.pop((rec[1], rec[2]), None)
            for key in [k for k in self.bindings if k[0] == rec[1] and k[2] == "q" and k[3] == rec[2]]:
                del self.bindings[key]
        elif kind == "b":  # binding added: (b, vhost, source, dest_kind, dest, rk, args)
            self.bindings[_binding_key(rec)] = rec
        elif kind == "B":  # binding removed
            self.bindings.pop(_binding_key(rec), None)
        elif kind == "m":  # message: (m, vhost, queue, seq, exchange, rk, props, body, expires_at)
            q = self.queues.get((rec[1], rec[2]))
            if q is not None:
                q.messages[rec[3]] = [rec, False]
        elif kind == "d":  # delivered at least once: (d, vhost, queue, seq)
            q = self.queues.get((rec[1], rec[2]))
            if q is not None and rec[3] in q.messages:
                q.messages[rec[3]][1] = True
        elif kind == "r":  # removed (acked, purged, expired, dead-lettered): (r, vhost, queue, seqs)
            q = self.queues.get((rec[1], rec[2]))
            if q is not None:
                for seq in rec[3]:
                    q.messages.pop(seq, None)
        else:
            raise ValueError(f"unknown log record kind {kind!r}")


def _binding_key(rec: Record) -> tuple[Any, ...]:
    return (rec[1], rec[2], rec[3], rec[4], rec[5], repr(rec[6]))


def encode_record(rec: Record) -> bytes:
    payload = pickle.dumps(rec, protocol=pickle.HIGHEST_PROTOCOL)
    return _HDR.pack(len(payload), zlib.crc32(payload)) + payload


def decode_records(data: bytes, start: int) -> tuple[list[Record], int]:
    """Records from ``data[start:]`` up to the first torn/corrupt one, and where it stopped."""
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
            rec = pickle.loads(payload)
        except Exception:  # noqa: BLE001 - a CRC collision on garbage: treat as torn
            break
        out.append(rec)
        pos = end
    return out, pos


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
        self._fd = -1
        self._fsync_lock = threading.Lock()

    # -- recovery --------------------------------------------------------------------------
    def recover(self) -> Recovered:
        state = Recovered()
        if self.path.exists():
            data = self.path.read_bytes()
            if data.startswith(MAGIC):
                records, stop = decode_records(data, len(MAGIC))
            else:  # a crash before the magic was complete: nothing was ever committed
                records, stop = [], 0
            for rec in records:
                state.apply(rec)
            state.records = len(records)
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

    def _rewrite(self, records: Iterable[Record]) -> None:
        """Write a fresh log holding ``records`` and atomically replace the old one."""
        tmp = self.path.with_suffix(".tmp")
        blob = MAGIC + b"".join(encode_record(r) for r in records)
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
        self.file_size = len(blob)

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
        """fsync the log (safe to call from a worker thread)."""
        with self._fsync_lock:
            if self._fd >= 0:
                os.fsync(self._fd)

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
        return self.file_size > self.compact_bytes

    def compact(self, snapshot: Iterable[Record]) -> None:
        """Replace the log by ``snapshot`` (the broker's current durable state).

        Everything appended so far is reflected in the snapshot, so afterwards all LSNs
        handed out are durable.
        """
        with self._fsync_lock:
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
