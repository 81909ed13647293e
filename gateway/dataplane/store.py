"""Partition storage: the `PartitionStore` protocol and its implementation on `records.log`.

A partition is an append-only sequence of Kafka v2 record batches; the broker assigns offsets by
rewriting each batch's baseOffset on append, and a Fetch returns whole batches starting with the
one that contains the requested offset (Kafka's `LogSegment.read`: at least one batch, so a
consumer can always make progress past a batch larger than its fetch size).

`SegmentPartitionStore` keeps a partition in a `records.log.SegmentLog`, the segment log the
coordinator logs use: `<20-digit base offset>.log` segments rolled at `log.segment.bytes`,
validation and offset assignment of client batches, the in-memory sparse index, recovery of a
torn tail at open (warning `log.truncated_tail`) and `LogCorruptionError` for damage anywhere
else. The partition directory also holds SegmentLog's `.lock` (one process at a time).

Threads: `sync()` may be called from a worker thread while the event loop appends (the data
plane runs fsyncs off-loop so that many produce requests share one disk flush). A SegmentLog is
not thread-safe, so the store serialises every call on the log with a lock, and `sync()` holds
it only to capture and to account for the fsyncs (`begin_sync` / `finish_sync`), not while
they run (`PendingSync.run`): appends and reads never wait for the disk.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from records.durability import FsyncPolicy
from records.log import SegmentLog, TimestampOffset

# The data plane's produce path waits for `sync()` (acks=1/-1): SegmentLog's "batch" policy.
_FSYNC_POLICIES: dict[str, FsyncPolicy] = {
    "explicit": "batch",
    "batch": "batch",
    "interval": "interval",
    "none": "none",
}
# Kafka's `index.interval.bytes`.
INDEX_INTERVAL_BYTES = 4096


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

        Returns (base_offset, last_offset). Raises `records.errors.CorruptBatchError` or
        `InvalidBatchError` when the batch is refused (nothing is appended then), and
        `LogFailedError` once the log has failed (an earlier fsync error).
        """
        ...

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one containing `offset`, at least one, about `max_bytes`.

        `offset == end_offset` gives b""; offsets outside [start_offset, end_offset] raise
        `records.errors.OffsetOutOfRangeError`.
        """
        ...

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp_ms`, or None."""
        ...

    def sync(self) -> None:
        """Make every appended batch durable (fsync); may run in a worker thread. Raises
        `records.errors.LogFailedError` if the fsync failed."""
        ...

    def close(self) -> None: ...


class StoreFactory(Protocol):
    def __call__(self, path: Path, *, segment_bytes: int, fsync_policy: str) -> PartitionStore: ...


class SegmentPartitionStore:
    """A `PartitionStore` on a `SegmentLog`, safe for `sync()` from a worker thread."""

    def __init__(self, log: SegmentLog, leader_epoch: int = 0) -> None:
        self.log = log
        self._leader_epoch = leader_epoch
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls, path: Path, *, segment_bytes: int = 1 << 30, fsync_policy: str = "explicit"
    ) -> SegmentPartitionStore:
        try:
            policy = _FSYNC_POLICIES[fsync_policy]
        except KeyError:
            raise ValueError(
                f"fsync_policy must be one of {sorted(_FSYNC_POLICIES)}, got {fsync_policy!r}"
            ) from None
        log = SegmentLog.open(
            path,
            segment_bytes=segment_bytes,
            fsync_policy=policy,
            index_interval_bytes=INDEX_INTERVAL_BYTES,
        )
        return cls(log)

    @property
    def start_offset(self) -> int:
        return self.log.start_offset

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    def append_batch(self, raw_batch: bytes) -> tuple[int, int]:
        with self._lock:
            return self.log.append_batch(raw_batch, partition_leader_epoch=self._leader_epoch)

    def read(self, offset: int, max_bytes: int) -> bytes:
        with self._lock:
            return self.log.read(offset, max_bytes)

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        with self._lock:
            return self.log.offset_for_timestamp(timestamp_ms)

    def sync(self) -> None:
        with self._lock:
            pending = self.log.begin_sync()
        pending.run()  # the fsyncs, on duplicated descriptors: appends may go on meanwhile
        with self._lock:
            self.log.finish_sync(pending)

    def close(self) -> None:
        with self._lock:
            self.log.close()


def open_segment_store(path: Path, *, segment_bytes: int, fsync_policy: str) -> PartitionStore:
    return SegmentPartitionStore.open(path, segment_bytes=segment_bytes, fsync_policy=fsync_policy)
