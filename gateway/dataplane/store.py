"""Partition storage: the `PartitionStore` protocol and a small file-backed implementation.

A partition is an append-only sequence of Kafka v2 record batches; the broker assigns offsets by
rewriting each batch's baseOffset on append, and a Fetch returns whole batches starting with the
one that contains the requested offset (Kafka's `LogSegment.read`: at least one batch, so a
consumer can always make progress past a batch larger than its fetch size).

`PartitionStore` is exactly the surface of `records.log.SegmentLog` (log branch), so swapping
`FilePartitionStore` for it is a change of the `open_store` factory. `sync()` may be called from
a worker thread while the event loop appends (the data plane runs fsync off-loop to batch many
produce requests into one disk flush); implementations must allow that.

`FilePartitionStore` keeps one file per partition and an in-memory index of batch positions
rebuilt on open; a torn or corrupt tail (a crash mid-append) is truncated on open, as Kafka's
log recovery does. `segment_bytes` is accepted for signature compatibility and ignored: one file
never rolls.
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path
from typing import Protocol

import structlog
from crc32c import crc32c

from gateway.dataplane.batch import (
    CRC_START,
    HEADER_SIZE,
    read_header,
    record_timestamps,
    validate_client_batch,
    with_base_offset,
)

log = structlog.get_logger("gateway.dataplane")

LOG_FILE = "00000000000000000000.log"


class PartitionStore(Protocol):
    """One partition's log of record batches (the `records.log.SegmentLog` surface)."""

    @property
    def start_offset(self) -> int:
        """First offset still in the log (Kafka's log start offset)."""
        ...

    @property
    def end_offset(self) -> int:
        """The offset the next appended record gets (log end offset)."""
        ...

    def append_batch(self, raw_batch: bytes) -> tuple[int, int]:
        """Validate (magic 2, CRC-32C, counts), assign offsets and append one client batch.

        Returns (base_offset, last_offset). Raises `batch.BatchError` (with the Kafka error
        code to answer) when the batch is refused; nothing is appended then.
        """
        ...

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one containing `offset`, at least one, about `max_bytes`.

        `offset == end_offset` gives b""; offsets outside [start_offset, end_offset] raise
        `ValueError`.
        """
        ...

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp_ms`, or None."""
        ...

    def sync(self) -> None:
        """Make every appended batch durable (fsync)."""
        ...

    def close(self) -> None: ...


class StoreFactory(Protocol):
    def __call__(self, path: Path, *, segment_bytes: int, fsync_policy: str) -> PartitionStore:
        ...


class FilePartitionStore:
    """One append-only file of batches plus an in-memory index (base, last, position, size)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        self._lasts: list[int] = []  # last offset of each batch (sorted)
        self._bases: list[int] = []
        self._positions: list[int] = []
        self._sizes: list[int] = []
        self._max_ts: list[int] = []
        self._size = 0
        self._end = 0

    @classmethod
    def open(
        cls, path: Path, *, segment_bytes: int = 1 << 30, fsync_policy: str = "on-request"
    ) -> FilePartitionStore:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOG_FILE, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        store = cls(path, fd)
        store._recover()
        return store

    def _recover(self) -> None:
        """Index every intact batch; cut the file after the last one (torn tail)."""
        file_size = os.fstat(self._fd).st_size
        pos = 0
        while file_size - pos >= HEADER_SIZE:
            head = os.pread(self._fd, HEADER_SIZE, pos)
            h = read_header(head)
            if h.size < HEADER_SIZE or pos + h.size > file_size or h.base_offset != self._end:
                break
            raw = os.pread(self._fd, h.size, pos)
            if crc32c(memoryview(raw)[CRC_START:]) != h.crc:
                break
            self._index(h.base_offset, h.last_offset, pos, h.size, h.max_timestamp)
            pos += h.size
        if pos != file_size:
            log.warning(
                "partition.truncated", path=str(self.path), valid_bytes=pos, file_bytes=file_size
            )
            os.ftruncate(self._fd, pos)
            os.fsync(self._fd)
        self._size = pos

    def _index(self, base: int, last: int, pos: int, size: int, max_ts: int) -> None:
        self._bases.append(base)
        self._lasts.append(last)
        self._positions.append(pos)
        self._sizes.append(size)
        self._max_ts.append(max_ts)
        self._end = last + 1

    @property
    def start_offset(self) -> int:
        return 0

    @property
    def end_offset(self) -> int:
        return self._end

    def append_batch(self, raw_batch: bytes) -> tuple[int, int]:
        h = validate_client_batch(raw_batch)
        base = self._end
        data = with_base_offset(raw_batch, base)
        written = 0
        while written < len(data):
            written += os.write(self._fd, data[written:])
        last = base + h.last_offset_delta
        self._index(base, last, self._size, len(data), h.max_timestamp)
        self._size += len(data)
        return base, last

    def read(self, offset: int, max_bytes: int) -> bytes:
        if not self.start_offset <= offset <= self._end:
            raise ValueError(f"offset {offset} outside [{self.start_offset}, {self._end}]")
        if offset == self._end:
            return b""
        first = bisect.bisect_left(self._lasts, offset)
        total = self._sizes[first]
        last = first + 1
        while last < len(self._sizes) and total + self._sizes[last] <= max_bytes:
            total += self._sizes[last]
            last += 1
        return os.pread(self._fd, total, self._positions[first])

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        for i, max_ts in enumerate(self._max_ts):
            if max_ts < timestamp_ms:
                continue
            raw = os.pread(self._fd, self._sizes[i], self._positions[i])
            records = record_timestamps(raw)
            if records is None:  # compressed: the batch's first offset is the best we know
                return self._bases[i], max_ts
            for offset, ts in records:
                if ts >= timestamp_ms:
                    return offset, ts
        return None

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def open_file_store(path: Path, *, segment_bytes: int, fsync_policy: str) -> PartitionStore:
    return FilePartitionStore.open(path, segment_bytes=segment_bytes, fsync_policy=fsync_policy)
