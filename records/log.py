"""A segmented log of Kafka v2 record batches (Kafka `UnifiedLog`/`LocalLog`, single node).

One directory holds the segments `<20-digit base offset>.log`, each a run of magic-2 batches
exactly as Kafka stores them (Kafka's `.index`/`.timeindex` files are not written: the sparse
index lives in memory), so a fetch can return file bytes untouched. The same class serves:

* the **coordinator log** of a shard: `append_records` turns all records of one engine operation
  into one batch (recovery sees an operation whole or not at all); many operations are appended,
  then one `sync()` makes them all durable (group commit) before their responses go out;
  `batches()` replays them in order; `records.compaction` keeps the log bounded;
* the **embedded data plane**: `append_batch` stores a client's batch after validating it and
  assigning offsets by rewriting its base offset; `read` serves Fetch; `start_offset`,
  `end_offset` and `offset_for_timestamp` serve ListOffsets.

Offsets are dense for appends (each batch starts at the previous end offset); compaction may
leave gaps but never reorders or renumbers. What is durable when is in `records.durability`;
how open() recovers is in `records.recovery`. A `SegmentLog` is not thread-safe: one task (the
shard's, or the partition's) owns it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import NamedTuple

from records.batch import (
    BatchHeader,
    build_batch,
    iter_records,
    read_batch_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate_client_batch,
)
from records.durability import FSYNC_POLICIES, FsyncPolicy, fsync_dir, fsync_file
from records.errors import (
    LogCorruptionError,
    LogFailedError,
    LogLockedError,
    OffsetOutOfRangeError,
)
from records.logger import get_logger
from records.recovery import (
    OnCorruption,
    find_valid_batch_after,
    finish_interrupted_compaction,
    scan_segment,
)
from records.segment import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    Segment,
    parse_segment_name,
    segment_name,
)

__all__ = ["DEFAULT_SEGMENT_BYTES", "LOCK_FILE", "PendingSync", "SegmentLog", "TimestampOffset"]

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
LOCK_FILE = ".lock"


class TimestampOffset(NamedTuple):
    """Answer to a ListOffsets by timestamp: the offset found and the timestamp it carries."""

    offset: int
    timestamp: int


class PendingSync:
    """The fsyncs that make a log durable up to `target_offset` (from `begin_sync`).

    `run()` is blocking and thread-safe with respect to the log: it works on duplicated
    descriptors and never raises; the outcome is read by `SegmentLog.finish_sync`.
    """

    __slots__ = ("_directory", "_fds", "done", "error", "generation", "target_offset")

    def __init__(self, target_offset: int, fds: list[int], directory: str | None, generation: int) -> None:
        self.target_offset = target_offset
        self.generation = generation
        self._fds = fds
        self._directory = directory
        self.done = False
        self.error: OSError | None = None

    def run(self) -> None:
        try:
            for fd in self._fds:
                fsync_file(fd)
            if self._directory is not None:
                fsync_dir(self._directory)
        except OSError as exc:
            self.error = exc
        finally:
            for fd in self._fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds = []
            self.done = True


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class SegmentLog:
    """A directory of segment files; see the module doc. Create with `SegmentLog.open`."""

    def __init__(
        self,
        directory: str,
        segments: list[Segment],
        *,
        segment_bytes: int,
        fsync_policy: FsyncPolicy,
        index_interval_bytes: int,
        lock_fd: int,
        keep_sealed_open: bool = True,
    ) -> None:
        self._dir = directory
        self._keep_sealed_open = keep_sealed_open
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._segment_bytes = segment_bytes
        self._policy: FsyncPolicy = fsync_policy
        self._index_interval = index_interval_bytes
        self._lock_fd = lock_fd
        self._size = sum(s.size for s in segments)
        self._unsynced: set[Segment] = set()
        self._dir_dirty = False
        self._durable = self.end_offset
        self._truncations = 0  # bumped by truncate_to: a PendingSync begun before is stale
        self._closed = False
        self._suspended = False
        self._failure: BaseException | None = None
        # Offsets below this were produced by the last compaction (in this process).
        self._clean_offset = self.start_offset

    # --- opening -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync_policy: FsyncPolicy = "batch",
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        on_corruption: OnCorruption = "error",
        keep_sealed_open: bool = True,
    ) -> SegmentLog:
        """Open (creating if needed) the log in directory `path` and recover it.

        Recovery (`records.recovery`): finish or discard an interrupted compaction, validate
        every batch, truncate a torn tail of the last segment (warning `log.truncated_tail`),
        raise `LogCorruptionError` for any other damage -- unless `on_corruption="truncate"`,
        an operator's explicit choice to cut the log at the first bad batch instead. Raises
        `LogLockedError` if another open log holds the directory.

        With `keep_sealed_open=False` only the active segment keeps a descriptor: a sealed one
        is opened for each read and closed after (Kafka opens segments on demand too), so the
        log holds two descriptors however many segments it has. Compaction needs them open.
        """
        if segment_bytes <= 0:
            raise ValueError(f"segment_bytes must be positive, got {segment_bytes}")
        if index_interval_bytes <= 0:
            raise ValueError(f"index_interval_bytes must be positive, got {index_interval_bytes}")
        if fsync_policy not in FSYNC_POLICIES:
            raise ValueError(f"fsync_policy must be one of {FSYNC_POLICIES}, got {fsync_policy!r}")
        if on_corruption not in ("error", "truncate"):
            raise ValueError(f"on_corruption must be 'error' or 'truncate', got {on_corruption!r}")
        directory = os.fspath(path)
        os.makedirs(directory, exist_ok=True)
        lock_fd = _lock_directory(directory)
        try:
            sync = fsync_policy != "none"
            finish_interrupted_compaction(directory, index_interval=index_interval_bytes, sync=sync)
            segments = _recover_segments(
                directory, index_interval_bytes, on_corruption, sync, keep_sealed_open
            )
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(
            directory,
            segments,
            segment_bytes=segment_bytes,
            fsync_policy=fsync_policy,
            index_interval_bytes=index_interval_bytes,
            lock_fd=lock_fd,
            keep_sealed_open=keep_sealed_open,
        )

    # --- state -------------------------------------------------------------------------------

    @property
    def directory(self) -> str:
        return self._dir

    @property
    def fsync_policy(self) -> FsyncPolicy:
        return self._policy

    @property
    def segment_bytes(self) -> int:
        return self._segment_bytes

    @property
    def start_offset(self) -> int:
        """The first offset the log can hold (the base offset of its first segment)."""
        return self._segments[0].base_offset

    @property
    def end_offset(self) -> int:
        """The offset the next appended record gets (Kafka's log end offset)."""
        return self._segments[-1].next_offset

    @property
    def durable_offset(self) -> int:
        """End offset covered by the last `sync()` (or by recovery at open)."""
        return self._durable

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def suspended(self) -> bool:
        """Whether `suspend()` released the log's files (`resume()` takes them back)."""
        return self._suspended

    @property
    def open_files(self) -> int:
        """File descriptors the log holds now: its `.lock` and one per segment while open,
        none while suspended or closed (what an owner of many logs budgets)."""
        if self._closed or self._suspended:
            return 0
        return 1 + sum(1 for s in self._segments if s.fd >= 0)

    def __repr__(self) -> str:
        return (
            f"SegmentLog({self._dir!r}, offsets=[{self.start_offset}, {self.end_offset}), "
            f"segments={len(self._segments)}, size={self._size})"
        )

    # --- appending ---------------------------------------------------------------------------

    def append_records(
        self, records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int
    ) -> tuple[int, int]:
        """Append `(key, value)` records (value None = tombstone) as ONE batch.

        Returns (base offset, last offset). Written to the file, not yet durable: call
        `sync()`. On a write error the log is left unchanged and the error propagates.
        """
        self._check_usable()
        base = self.end_offset
        data = build_batch(records, base_offset=base, timestamp_ms=timestamp_ms)
        self._write(data, base, base + len(records), timestamp_ms)
        return base, base + len(records) - 1

    def append_batch(
        self,
        raw_batch: bytes | bytearray | memoryview,
        *,
        partition_leader_epoch: int | None = None,
    ) -> tuple[int, int]:
        """Validate a client's batch, assign its offsets, append it; return (base, last) offset.

        Validation is `records.batch.validate_client_batch` (one whole v2 batch, CRC, Kafka's
        client rules); it raises `CorruptBatchError`/`InvalidBatchError` and appends nothing.
        Offsets are assigned by rewriting the 8-byte base offset (not covered by the CRC), and
        the partition leader epoch too when given. Records stay opaque (compressed or not).
        """
        self._check_usable()
        header = validate_client_batch(raw_batch)
        data = bytearray(raw_batch)
        base = self.end_offset
        set_base_offset(data, 0, base)
        if partition_leader_epoch is not None:
            set_partition_leader_epoch(data, 0, partition_leader_epoch)
        next_offset = base + header.last_offset_delta + 1
        self._write(data, base, next_offset, header.max_timestamp)
        return base, next_offset - 1

    def _write(self, data: bytes | bytearray, base: int, next_offset: int, max_ts: int) -> None:
        seg = self._segments[-1]
        if seg.size > 0 and seg.size + len(data) > self._segment_bytes:
            seg = self._roll()
        pos = seg.size
        try:
            _write_all(seg.fd, data)
        except OSError as exc:
            try:
                os.ftruncate(seg.fd, pos)
            except OSError as cut_exc:
                self._fail(cut_exc)
                raise LogFailedError(
                    f"append to {seg.path} failed ({exc}) and could not be undone"
                ) from cut_exc
            raise
        seg.note_batch(pos, base, next_offset, max_ts, len(data))
        self._size += len(data)
        self._unsynced.add(seg)

    def _roll(self) -> Segment:
        """Start a new segment at the end offset; the old one is fsynced first (rule 4)."""
        old = self._segments[-1]
        if self._policy != "none":  # even if an in-flight PendingSync covers it (rule 4)
            self._guarded_fsync(old)
            self._unsynced.discard(old)
        base = old.next_offset
        seg = Segment.open_file(
            os.path.join(self._dir, segment_name(base)), base, self._index_interval, create=True
        )
        self._segments.append(seg)
        self._bases.append(base)
        self._dir_dirty = True
        if not self._keep_sealed_open:  # fsynced above; reads reopen it
            self._unsynced.discard(old)
            old.close()
        return seg

    # --- durability --------------------------------------------------------------------------

    def sync(self) -> int:
        """Make everything appended so far durable (the group-commit point); return the
        durable offset. With fsync_policy "none" nothing is fsynced but the offset advances.

        Blocks for the fsyncs. An asyncio runtime that must not block its loop uses the two
        halves instead: `p = log.begin_sync()`, `await asyncio.to_thread(p.run)`,
        `log.finish_sync(p)` -- and may keep appending while `p.run()` is in flight.
        """
        pending = self.begin_sync()
        pending.run()
        return self.finish_sync(pending)

    def begin_sync(self) -> PendingSync:
        """Capture what must be fsynced to make the current end offset durable.

        The returned `PendingSync.run()` only touches duplicated file descriptors, so it may
        run in another thread while this log keeps appending (truncate_to and compaction
        should wait; a truncation meanwhile makes `finish_sync` not advance the offset).
        """
        self._check_usable()
        fds: list[int] = []
        directory: str | None = None
        if self._policy != "none":
            try:
                for seg in self._unsynced:
                    fds.append(os.dup(seg.fd))
            except OSError:
                for fd in fds:
                    os.close(fd)
                raise
            directory = self._dir if self._dir_dirty else None
        self._unsynced.clear()
        self._dir_dirty = False
        return PendingSync(self.end_offset, fds, directory, self._truncations)

    def finish_sync(self, pending: PendingSync) -> int:
        """Account for a completed `PendingSync`; return the durable offset.

        If its fsync failed, the log fails (`LogFailedError` now and on every later call).
        """
        if not pending.done:
            raise RuntimeError("finish_sync() before the PendingSync has run")
        if pending.error is not None:
            self._fail(pending.error)
            raise LogFailedError(f"fsync failed: {pending.error}") from pending.error
        if pending.generation == self._truncations:
            self._durable = max(self._durable, pending.target_offset)
        return self._durable

    def _guarded_fsync(self, seg: Segment) -> None:
        try:
            fsync_file(seg.fd)
        except OSError as exc:
            self._fail(exc)
            raise LogFailedError(f"fsync of {seg.path} failed: {exc}") from exc

    def _fail(self, exc: BaseException) -> None:
        """Refuse all further work until reopened (after fsync errors, failed compactions)."""
        self._failure = exc
        get_logger().error("log.failed", directory=self._dir, error=str(exc))

    # --- truncation --------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after `offset`, so that the log ends at `offset`.

        Used to roll back appends that memory did not keep. `offset` must not fall inside a
        batch (ValueError) and must lie in [start_offset, end_offset]. Made durable before
        returning unless fsync_policy is "none" (records.durability, rule 5).
        """
        self._check_usable()
        if not self.start_offset <= offset <= self.end_offset:
            raise OffsetOutOfRangeError(offset, self.start_offset, self.end_offset)
        if offset == self.end_offset:
            return
        i = bisect_right(self._bases, offset) - 1
        seg = self._segments[i]
        if seg.fd < 0:  # a sealed segment closed to save descriptors becomes the active one
            seg.fd = os.open(seg.path, os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
        pos = seg.position_for(offset)
        if pos < seg.size:
            header = read_batch_header(os.pread(seg.fd, 61, pos))
            if header.base_offset < offset:
                raise ValueError(
                    f"offset {offset} is inside the batch [{header.base_offset}, "
                    f"{header.last_offset}]; truncate_to needs a batch boundary"
                )
        for later in self._segments[i + 1 :]:
            later.close()
            os.unlink(later.path)
            self._unsynced.discard(later)
            self._dir_dirty = True
        del self._segments[i + 1 :]
        del self._bases[i + 1 :]
        os.ftruncate(seg.fd, pos)
        seg.reset_to(pos)
        self._size = sum(s.size for s in self._segments)
        self._unsynced.add(seg)
        self._durable = min(self._durable, self.end_offset)
        self._truncations += 1
        self._clean_offset = min(self._clean_offset, self.end_offset)
        if self._policy != "none":
            self.sync()

    # --- compaction hooks (records.compaction) --------------------------------------------------

    @property
    def clean_offset(self) -> int:
        """Offsets below this were rewritten by the last compaction in this process (the log
        start after open): what `records.compaction.should_compact` counts as clean."""
        return self._clean_offset

    def _sealed_segments(self) -> list[Segment]:
        """Roll if the active segment holds data, then return every segment before the
        active one: the input of a compaction. Durable first unless fsync_policy is "none"."""
        self._check_usable()
        if not self._keep_sealed_open:
            raise ValueError("compaction needs the sealed segments open (keep_sealed_open=True)")
        if self._segments[-1].size > 0:
            self._roll()
        if self._policy != "none":
            self.sync()
        return self._segments[:-1]

    def _install_compacted(self, segment: Segment, replaced: list[Segment]) -> None:
        """Put `segment` in place of the `replaced` leading segments (already closed and
        deleted on disk) and mark everything before the active segment clean."""
        n = len(replaced)
        if self._segments[:n] != replaced:
            raise ValueError("compacted segments are not the log's leading segments")
        for seg in replaced:
            self._unsynced.discard(seg)
        self._segments[:n] = [segment]
        self._bases[:n] = [segment.base_offset]
        self._size = sum(s.size for s in self._segments)
        self._clean_offset = self._segments[-1].base_offset

    # --- reading -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _readable(self, seg: Segment) -> Iterator[Segment]:
        """`seg` with a descriptor for the duration: a sealed segment closed to save
        descriptors (`keep_sealed_open=False`) is opened read-only, and closed after."""
        if seg.fd >= 0:
            yield seg
            return
        seg.fd = os.open(seg.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            yield seg
        finally:
            seg.close()

    def read(self, offset: int, max_bytes: int, *, upper_offset: int | None = None) -> bytes:
        """Raw bytes of whole batches, from the batch containing `offset`, up to `max_bytes`.

        At least one whole batch is returned even if it is larger than `max_bytes` (Kafka's
        fetch rule, so a consumer always progresses). Batches reaching `upper_offset` (e.g. a
        high watermark) or beyond are left out. `offset == end_offset` gives b"", an offset
        outside [start_offset, end_offset] raises `OffsetOutOfRangeError`. Batches keep their
        base offsets, so the caller can hand the bytes to a Fetch response as they are.
        """
        self._check_usable()
        if not self.start_offset <= offset <= self.end_offset:
            raise OffsetOutOfRangeError(offset, self.start_offset, self.end_offset)
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        i = bisect_right(self._bases, offset) - 1
        seg = self._segments[i]
        with self._readable(seg):
            pos = seg.position_for(offset)
        parts: list[bytes] = []
        total = 0
        while True:
            with self._readable(seg):
                data, stopped = seg.read_whole_batches(pos, max_bytes - total, upper_offset, not parts)
            if data:
                parts.append(data)
                total += len(data)
            i += 1
            if stopped or total >= max_bytes or i >= len(self._segments):
                break
            seg = self._segments[i]
            pos = 0
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def batches(self, from_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        """Yield (header, raw bytes) of every batch from the one containing `from_offset`
        (default: the start) to the end, in offset order: the replay path.

        Batches were validated at open or written by this log, so CRCs are not re-checked.
        Do not truncate or compact the log while iterating.
        """
        self._check_usable()
        start = self.start_offset if from_offset is None else from_offset
        if not self.start_offset <= start <= self.end_offset:
            raise OffsetOutOfRangeError(start, self.start_offset, self.end_offset)
        i = bisect_right(self._bases, start) - 1
        with self._readable(self._segments[i]) as first:
            pos = first.position_for(start)
        for seg in self._segments[i:]:
            with self._readable(seg):
                for _pos, header, raw in seg.batches(pos):
                    yield header, raw
            pos = 0

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets by timestamp: the first record with timestamp >= `timestamp`.

        Finds the first batch whose maxTimestamp >= `timestamp` (Kafka's search); inside an
        uncompressed batch it returns the first such record, inside a compressed one (which is
        never decompressed here) the batch's base offset with its max timestamp. None when no
        batch qualifies (Kafka then answers with offset -1 / the log end).
        """
        self._check_usable()
        for seg in self._segments:
            if seg.max_timestamp < timestamp:
                continue
            with self._readable(seg):
                pos = seg.position_for_timestamp(timestamp)
                if pos is None:
                    continue
                header = read_batch_header(os.pread(seg.fd, 61, pos))
                raw = os.pread(seg.fd, header.size, pos) if header.compression == 0 else b""
            if header.compression == 0:
                for record in iter_records(raw):
                    if record.timestamp >= timestamp:
                        return TimestampOffset(record.offset, record.timestamp)
            return TimestampOffset(header.base_offset, header.max_timestamp)
        return None

    # --- releasing files while open (a budget of file descriptors) -----------------------------

    def suspend(self) -> None:
        """Make everything durable, then close every file, the directory lock included, and
        keep the in-memory state (segments, index, offsets): `resume()` reopens the files
        without the recovery scan. Reads of `start_offset`/`end_offset` still answer; any
        other call raises `LogFailedError` until `resume()`.

        For an owner of more logs than file descriptors (Kafka opens a segment's files on
        demand too): the data plane keeps a bounded set of partition logs open. The fsync
        comes first so that a later crash cannot lose what was acknowledged before closing;
        it raises `LogFailedError` (the log fails, and keeps its files) when it fails.
        """
        self._check_usable()
        if self._policy != "none":
            self.sync()
        self._release_files()
        self._suspended = True

    def resume(self) -> None:
        """Take back the files `suspend()` closed. Raises `LogLockedError` if another open log
        holds the directory, `LogCorruptionError` if a segment is missing or its size changed
        while the files were closed (then the log stays suspended), `OSError` (EMFILE...)."""
        if self._closed:
            raise LogFailedError(f"log {self._dir} is closed")
        if not self._suspended:
            return
        lock_fd = _lock_directory(self._dir)
        fds: list[int] = []
        try:
            for seg in self._segments:
                if not self._keep_sealed_open and seg is not self._segments[-1]:
                    size = _size_or_missing(seg)
                    if size != seg.size:
                        raise LogCorruptionError(
                            seg.path,
                            min(size, seg.size),
                            f"file is {size} bytes, {seg.size} when it was closed",
                        )
                    fds.append(-1)
                    continue
                try:
                    fd = os.open(seg.path, os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
                except FileNotFoundError:
                    raise LogCorruptionError(
                        seg.path, 0, "segment file vanished while the log was suspended"
                    ) from None
                fds.append(fd)
                size = os.fstat(fd).st_size
                if size != seg.size:
                    raise LogCorruptionError(
                        seg.path, min(size, seg.size), f"file is {size} bytes, {seg.size} when it was closed"
                    )
        except BaseException:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)
            os.close(lock_fd)
            raise
        for seg, fd in zip(self._segments, fds, strict=True):
            seg.fd = fd
        self._lock_fd = lock_fd
        self._suspended = False

    # --- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Sync (unless the log failed) and release files and the directory lock. Idempotent."""
        if self._closed:
            return
        if self._suspended:  # durable and released by suspend()
            self._closed = True
            return
        try:
            if self._failure is None:
                self.sync()
        finally:
            self._release()

    def _release(self) -> None:
        self._closed = True
        self._release_files()

    def _release_files(self) -> None:
        for seg in self._segments:
            seg.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = -1

    def _abandon(self) -> None:
        """Drop file handles without syncing or cleaning up: what a process crash leaves.

        For crash tests, which then reopen the directory in the same process.
        """
        self._release()

    def __enter__(self) -> SegmentLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_usable(self) -> None:
        if self._closed:
            raise LogFailedError(f"log {self._dir} is closed")
        if self._suspended:
            raise LogFailedError(f"log {self._dir} is suspended (its files are closed); resume() it first")
        if self._failure is not None:
            raise LogFailedError(f"log {self._dir} failed earlier ({self._failure}); reopen it to recover")


def _lock_directory(directory: str) -> int:
    fd = os.open(
        os.path.join(directory, LOCK_FILE),
        os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0),
        0o644,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogLockedError(f"log directory {directory} is in use by another open log") from None
    return fd


def _size_or_missing(seg: Segment) -> int:
    """The size of `seg`'s file; `LogCorruptionError` if it is gone."""
    try:
        return os.stat(seg.path).st_size
    except FileNotFoundError:
        raise LogCorruptionError(seg.path, 0, "segment file vanished while the log was suspended") from None


def _recover_segments(
    directory: str,
    index_interval: int,
    on_corruption: OnCorruption,
    sync: bool,
    keep_sealed_open: bool = True,
) -> list[Segment]:
    """Open and validate every segment (records.recovery); return them in offset order.
    Without `keep_sealed_open`, each segment is closed once the next one is validated."""
    log = get_logger()
    bases = sorted(b for b in (parse_segment_name(n) for n in os.listdir(directory)) if b is not None)
    segments: list[Segment] = []
    try:
        if not bases:
            seg = Segment.open_file(os.path.join(directory, segment_name(0)), 0, index_interval, create=True)
            segments.append(seg)
        for i, base in enumerate(bases):
            seg = Segment.open_file(
                os.path.join(directory, segment_name(base)), base, index_interval, create=False
            )
            if segments and segments[-1].next_offset > base:
                prev = segments[-1]
                raise LogCorruptionError(
                    prev.path,
                    prev.size,
                    f"batches run to offset {prev.next_offset}, past the next segment's base offset {base}",
                )
            if segments and not keep_sealed_open:
                segments[-1].close()
            segments.append(seg)
            file_size = os.fstat(seg.fd).st_size
            bad = scan_segment(seg, file_size)
            if bad is None:
                continue
            last = i == len(bases) - 1
            if on_corruption == "error":
                if not last or bad.complete:
                    raise LogCorruptionError(seg.path, bad.position, bad.reason)
                after = find_valid_batch_after(seg.fd, file_size, bad)
                if after is not None:
                    raise LogCorruptionError(
                        seg.path,
                        bad.position,
                        f"{bad.reason}; a valid batch follows at position {after}, "
                        "so this is not a torn tail",
                    )
                event = "log.truncated_tail"
            else:
                event = "log.truncated_corruption"
            os.ftruncate(seg.fd, bad.position)
            log.warning(
                event,
                file=seg.path,
                position=bad.position,
                reason=bad.reason,
                truncated_bytes=file_size - bad.position,
            )
            for later_base in bases[i + 1 :]:
                later = os.path.join(directory, segment_name(later_base))
                os.unlink(later)
                log.warning(event, file=later, position=0, reason="after a truncated segment")
            break
        if sync:
            fsync_file(segments[-1].fd)
            fsync_dir(directory)
    except BaseException:
        for seg in segments:
            seg.close()
        raise
    return segments
