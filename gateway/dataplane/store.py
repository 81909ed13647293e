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

File descriptors are a budget (`OpenFileBudget`, setting `log.open.files.max`): an open log holds
its `.lock` and its active segment (sealed segments are opened for each read and closed after:
`keep_sealed_open=False`), so a node with 10,000 partitions would hold 20,000 and fail with
EMFILE at start-up. Kafka keeps its index files memory-mapped and opens segments on
demand; here the least recently used partition logs beyond the budget are suspended
(`SegmentLog.suspend`: fsynced, then every file closed, the in-memory index kept) and resumed on
their next append or read, without the recovery scan. Suspending a log that is in use by another
thread is skipped (a non-blocking lock), so a worker's fsync never loses its file.

Threads: `sync()` may be called from a worker thread while the event loop appends (the data
plane runs fsyncs off-loop so that many produce requests share one disk flush). A SegmentLog is
not thread-safe, so the store serialises every call on the log with a lock, and `sync()` holds
it only to capture and to account for the fsyncs (`begin_sync` / `finish_sync`), not while
they run (`PendingSync.run`): appends and reads never wait for the disk.
"""

from __future__ import annotations

import resource
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

from records.durability import FsyncPolicy
from records.errors import LogError
from records.log import SegmentLog, TimestampOffset
from records.logger import get_logger

# The data plane's produce path waits for `sync()` (acks=1/-1): SegmentLog's "batch" policy.
_FSYNC_POLICIES: dict[str, FsyncPolicy] = {
    "explicit": "batch",
    "batch": "batch",
    "interval": "interval",
    "none": "none",
}
# Kafka's `index.interval.bytes`.
INDEX_INTERVAL_BYTES = 4096
# The smallest budget: a partition log needs two descriptors, and a few must be able to be open.
MIN_OPEN_FILES = 16
# The share of the process's descriptor limit (RLIMIT_NOFILE) the partition logs get by default;
# the rest is for client connections, the coordinator logs (50 shards by default), the listener.
AUTO_OPEN_FILES_SHARE = 4


def descriptor_limit() -> int:
    """The process's soft RLIMIT_NOFILE (`ulimit -n`)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def open_files_budget(configured: int, limit: int | None = None) -> int:
    """The descriptors partition logs may hold: `configured`, or with 0 (the default) a quarter
    of `ulimit -n` (at least `MIN_OPEN_FILES`). `ValueError` naming both when a configured
    value would leave less than half of the limit to everything else."""
    limit = descriptor_limit() if limit is None else limit
    if configured == 0:
        return max(MIN_OPEN_FILES, limit // AUTO_OPEN_FILES_SHARE)
    if configured > limit // 2:
        raise ValueError(
            f"log.open.files.max={configured} is more than half of the process's file descriptor "
            f"limit (ulimit -n = {limit}): client connections and the coordinator logs need the "
            f"rest; lower it to at most {limit // 2}, or raise ulimit -n"
        )
    return max(configured, MIN_OPEN_FILES)


class OpenFileBudget:
    """At most `max_files` descriptors held by the partition logs registered here (LRU).

    A store calls `opened(self)` after each use that needed its files; the budget then suspends
    the least recently used other stores until the total fits (`BudgetedLog.release_files`,
    which declines when the store is busy: it is then kept and counted). Thread-safe: creation
    may run off the event loop."""

    def __init__(self, max_files: int) -> None:
        if max_files < 2:
            raise ValueError(f"max_files must be at least 2, got {max_files}")
        self.max_files = max_files
        self._open: OrderedDict[SegmentPartitionStore, int] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()
        self.suspensions = 0  # logs suspended so far (metrics, tests)

    @property
    def open_files(self) -> int:
        """Descriptors held by the registered open logs (as last reported)."""
        return self._total

    @property
    def open_logs(self) -> int:
        return len(self._open)

    def opened(self, store: SegmentPartitionStore, files: int) -> None:
        """`store` holds `files` descriptors and was just used: evict others beyond the budget."""
        with self._lock:
            self._total += files - self._open.pop(store, 0)
            self._open[store] = files
            victims: list[SegmentPartitionStore] = []
            if self._total > self.max_files:
                for other in list(self._open):
                    if self._total <= self.max_files:
                        break
                    if other is store:
                        continue
                    self._total -= self._open.pop(other)
                    victims.append(other)
        busy = [v for v in victims if not v.release_files()]
        if busy:
            with self._lock:
                for v in busy:
                    if v not in self._open and not v.closed:
                        files = v.open_files
                        self._open[v] = files
                        self._total += files

    def forget(self, store: SegmentPartitionStore) -> None:
        """`store` closed its files (closed, or suspended by itself)."""
        with self._lock:
            self._total -= self._open.pop(store, 0)


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
    def __call__(
        self,
        path: Path,
        *,
        segment_bytes: int,
        fsync_policy: str,
        budget: OpenFileBudget | None = None,
    ) -> PartitionStore: ...


class SegmentPartitionStore:
    """A `PartitionStore` on a `SegmentLog`, safe for `sync()` from a worker thread; with a
    `budget`, its files are closed when the budget needs them and reopened at the next use."""

    def __init__(self, log: SegmentLog, leader_epoch: int = 0, budget: OpenFileBudget | None = None) -> None:
        self.log = log
        self._leader_epoch = leader_epoch
        self._lock = threading.Lock()
        self._budget = budget
        if budget is not None:
            with self._lock:
                self._report()

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        segment_bytes: int = 1 << 30,
        fsync_policy: str = "explicit",
        budget: OpenFileBudget | None = None,
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
            keep_sealed_open=False,  # a partition log holds two descriptors, however long
        )
        return cls(log, budget=budget)

    @property
    def start_offset(self) -> int:
        return self.log.start_offset  # kept in memory while the files are closed

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    @property
    def closed(self) -> bool:
        return self.log.closed

    @property
    def open_files(self) -> int:
        return self.log.open_files

    def _resume(self) -> SegmentLog:
        """The log with its files open (reopened if the budget closed them); under `_lock`."""
        if self.log.suspended:
            self.log.resume()
        return self.log

    def _report(self) -> None:
        """Tell the budget what the log holds now (after the use: a roll adds a segment); it
        may close other logs. Under `_lock`."""
        if self._budget is not None and not self.log.suspended:
            self._budget.opened(self, self.log.open_files)

    def append_batch(self, raw_batch: bytes) -> tuple[int, int]:
        with self._lock:
            try:
                return self._resume().append_batch(raw_batch, partition_leader_epoch=self._leader_epoch)
            finally:
                self._report()

    def read(self, offset: int, max_bytes: int) -> bytes:
        with self._lock:
            try:
                return self._resume().read(offset, max_bytes)
            finally:
                self._report()

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        with self._lock:
            try:
                return self._resume().offset_for_timestamp(timestamp_ms)
            finally:
                self._report()

    def sync(self) -> None:
        with self._lock:
            if self.log.suspended:  # suspend() made everything durable before closing
                return
            pending = self.log.begin_sync()
        pending.run()  # the fsyncs, on duplicated descriptors: appends may go on meanwhile
        with self._lock:
            self.log.finish_sync(pending)

    def release_files(self) -> bool:
        """Suspend the log (fsync, then close its files) for the budget; False, changing
        nothing, when another thread is using the store right now."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self.log.closed or self.log.suspended:
                return True
            try:
                self.log.suspend()
            except (OSError, LogError) as e:  # the log failed: its next use reports it
                get_logger().error("partition.suspend_failed", directory=self.log.directory, error=str(e))
                return True
            if self._budget is not None:
                self._budget.suspensions += 1
            return True
        finally:
            self._lock.release()

    def close(self) -> None:
        with self._lock:
            try:
                self.log.close()
            finally:
                if self._budget is not None:
                    self._budget.forget(self)


def open_segment_store(
    path: Path, *, segment_bytes: int, fsync_policy: str, budget: OpenFileBudget | None = None
) -> PartitionStore:
    return SegmentPartitionStore.open(
        path, segment_bytes=segment_bytes, fsync_policy=fsync_policy, budget=budget
    )
