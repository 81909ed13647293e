"""Log compaction of the coordinator log (Kafka's log cleaner, `cleanup.policy=compact`).

`__consumer_offsets` is a compacted topic: only the latest value of each key matters, and a
null value (tombstone) deletes the key. `compact` rewrites every sealed segment into one
segment holding, in the original offset order and with the original offsets, only the latest
record of each key (raw key bytes are the identity unless `key_fn` says otherwise). Tombstones
are kept while younger than `tombstone_retention_ms` (so that a reader that saw the old value
also sees the delete) and then dropped (Kafka's `delete.retention.ms`, default 24 h), judged by
the record's timestamp.

Like Kafka's cleaner, a batch that loses records keeps its base offset, lastOffsetDelta,
timestamps and producer fields, so offsets never change; a batch that loses all its records
disappears, except the very last one, which is kept empty so the compacted segment still ends
where its inputs ended (that is how recovery knows which segments a swap file replaces).

Only sealed segments are compacted: the active segment is rolled first, so appends continue
untouched in a fresh segment. The swap is crash-safe at every step (Kafka's naming):

1. roll; make the inputs and the new segment durable;
2. write `<base>.log.cleaned` and fsync it   -- crash: open() deletes the .cleaned file;
3. rename it to `<base>.log.swap`, fsync dir -- the commit point;
4. delete the input segments, fsync dir      -- crash: open() deletes the remaining inputs
                                                (segments in [base, swap end)) and installs
                                                the swap;
5. rename the swap to `<base>.log`, fsync dir.

Any error during a compaction fails the log (`LogFailedError` afterwards); reopening finishes
or discards the half-done swap. With fsync_policy "none" the steps are the same without fsyncs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Hashable
from typing import NamedTuple

from records.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    NO_TIMESTAMP,
    BatchHeader,
    RawRecord,
    encode_batch,
    iter_raw_records,
)
from records.durability import fsync_dir, fsync_file
from records.errors import CompactionError
from records.log import SegmentLog
from records.recovery import CLEANED_SUFFIX, SWAP_SUFFIX, scan_segment
from records.segment import Segment, segment_name

__all__ = [
    "COMPACTION_STEPS",
    "CompactionJob",
    "CompactionResult",
    "CompactionTask",
    "KeyFn",
    "abandon_compaction",
    "begin_compaction",
    "clean_to_file",
    "compact",
    "dirty_bytes",
    "finish_compaction",
    "should_compact",
    "write_compaction",
]

KeyFn = Callable[[bytes], Hashable]
COMPACTION_STEPS = (
    "rolled",
    "writing_cleaned",
    "cleaned_written",
    "swap_renamed",
    "input_deleted",  # once per input segment
    "swap_installed",
)
_FLUSH_BYTES = 1 << 20


class CompactionResult(NamedTuple):
    segments_replaced: int
    bytes_before: int
    bytes_after: int
    records_before: int
    records_kept: int
    tombstones_dropped: int
    clean_offset: int  # everything below this offset is now compacted


def dirty_bytes(log: SegmentLog) -> int:
    """Bytes written since the last compaction (in this process; all of the log after open)."""
    clean = log.clean_offset
    return sum(s.size for s in log._segments if s.base_offset >= clean)


def should_compact(log: SegmentLog, *, min_dirty_ratio: float = 0.5, min_bytes: int = 1 << 20) -> bool:
    """Kafka's trigger (`min.cleanable.dirty.ratio`): compact when at least `min_bytes` were
    written since the last compaction and they make up at least `min_dirty_ratio` of the log."""
    total = log.size_bytes
    dirty = dirty_bytes(log)
    return total > 0 and dirty >= min_bytes and dirty / total >= min_dirty_ratio


def compact(
    log: SegmentLog,
    *,
    now_ms: int,
    tombstone_retention_ms: int,
    key_fn: KeyFn | None = None,
    on_step: Callable[[str], None] | None = None,
    cleaner: Cleaner | None = None,
) -> CompactionResult:
    """Compact every sealed segment of `log` into one (see the module doc); return figures.

    `on_step` is called after each step named in `COMPACTION_STEPS` (crash tests stop there);
    `cleaner` runs passes 1 and 2 elsewhere (`records.compaction_worker.clean_in_worker`).
    Raises `CompactionError` for compressed or control batches or null keys, and an OSError
    while writing the .cleaned file, with the log unchanged and usable. A failure after that
    file is complete fails the log (reopen to finish the swap).
    """
    step = on_step or (lambda _name: None)
    job = begin_compaction(log, now_ms=now_ms, tombstone_retention_ms=tombstone_retention_ms, key_fn=key_fn)
    if job is None:
        return CompactionResult(0, 0, 0, 0, 0, 0, log.clean_offset)
    step("rolled")
    try:
        write_compaction(job, step, cleaner=cleaner)
    except (OSError, CompactionError):
        raise
    except BaseException as exc:
        log._fail(exc)
        raise
    return finish_compaction(job, step)


class TaskInput(NamedTuple):
    """A sealed input segment as another process can open it (sealed segments never change)."""

    path: str
    base_offset: int
    size: int
    next_offset: int


class CompactionTask(NamedTuple):
    """Passes 1 and 2 of one compaction as plain data, so that another process can run them
    (`clean_to_file`): every object they allocate then lives and dies in that process's heap,
    not among the server's long-lived state."""

    inputs: tuple[TaskInput, ...]
    cleaned_path: str
    now_ms: int
    retention_ms: int
    key_fn: KeyFn | None
    sync: bool


Cleaner = Callable[[CompactionTask], tuple[int, int, int]]


def clean_to_file(task: CompactionTask) -> tuple[int, int, int]:
    """Passes 1 and 2 from the task alone: open the inputs read-only by path, write and fsync
    the `.cleaned` file; return (records before, records kept, tombstones dropped)."""
    segments: list[Segment] = []
    try:
        for i in task.inputs:
            fd = os.open(i.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            seg = Segment(i.path, i.base_offset, fd, index_interval=1 << 62)  # read only: no index
            seg.size = i.size
            seg.next_offset = i.next_offset
            segments.append(seg)
        latest, before = _latest_offsets(segments, task.key_fn)
        kept, dropped = _write_cleaned(
            task.cleaned_path,
            segments,
            latest,
            task.now_ms,
            task.retention_ms,
            task.key_fn,
            task.sync,
            lambda _name: None,
        )
        return before, kept, dropped
    finally:
        for seg in segments:
            seg.close()


class CompactionJob:
    """One compaction split in three so that the slow part can run off the event loop:
    `begin_compaction` (on the log's owner: roll, make the inputs durable), `write_compaction`
    (any thread: read the sealed, immutable input segments and write and validate the
    `.cleaned` file; the log keeps taking appends meanwhile, in its new active segment), and
    `finish_compaction` (on the owner again: the crash-safe swap) or `abandon_compaction`."""

    __slots__ = (
        "base",
        "cleaned_path",
        "dropped",
        "final_path",
        "inputs",
        "kept",
        "key_fn",
        "log",
        "now_ms",
        "records_before",
        "retention_ms",
        "segment",
        "sync",
    )

    def __init__(
        self, log: SegmentLog, inputs: list[Segment], now_ms: int, retention_ms: int, key_fn: KeyFn | None
    ) -> None:
        self.log = log
        self.inputs = inputs
        self.now_ms = now_ms
        self.retention_ms = retention_ms
        self.key_fn = key_fn
        self.base = inputs[0].base_offset
        self.final_path = os.path.join(log.directory, segment_name(self.base))
        self.cleaned_path = self.final_path[: -len(".log")] + CLEANED_SUFFIX
        self.sync = log.fsync_policy != "none"
        self.records_before = 0
        self.kept = 0
        self.dropped = 0
        self.segment: Segment | None = None  # the validated .cleaned file, once written

    @property
    def input_bytes(self) -> int:
        return sum(s.size for s in self.inputs)

    def task(self) -> CompactionTask:
        return CompactionTask(
            tuple(
                TaskInput(os.path.abspath(s.path), s.base_offset, s.size, s.next_offset) for s in self.inputs
            ),
            os.path.abspath(self.cleaned_path),  # the worker's working directory may differ
            self.now_ms,
            self.retention_ms,
            self.key_fn,
            self.sync,
        )


def begin_compaction(
    log: SegmentLog, *, now_ms: int, tombstone_retention_ms: int, key_fn: KeyFn | None = None
) -> CompactionJob | None:
    """Roll the log and name its sealed segments as the inputs; None when there are none."""
    inputs = log._sealed_segments()
    if not inputs:
        return None
    return CompactionJob(log, inputs, now_ms, tombstone_retention_ms, key_fn)


def write_compaction(
    job: CompactionJob,
    step: Callable[[str], None] | None = None,
    pause: Callable[[], None] = lambda: None,
    cleaner: Cleaner | None = None,
) -> None:
    """Passes 1 and 2: write the kept records to the `.cleaned` file, fsync and validate it.
    Touches only the input segments' files (read with pread) and the new file, so it may run
    in another thread; `pause` is called before each batch is read (a thread gives the
    interpreter lock to the event loop there). `cleaner`, when given, runs passes 1 and 2
    instead (`clean_to_file` in a worker process); the file it wrote is validated here all the
    same. On any error the `.cleaned` file is removed; the log itself is never changed here
    (`abandon_compaction` removes the file after any error)."""
    step = step or (lambda _name: None)
    try:
        if cleaner is not None:
            job.records_before, job.kept, job.dropped = cleaner(job.task())
            step("writing_cleaned")
        else:
            latest, job.records_before = _latest_offsets(job.inputs, job.key_fn, pause)
            job.kept, job.dropped = _write_cleaned(
                job.cleaned_path,
                job.inputs,
                latest,
                job.now_ms,
                job.retention_ms,
                job.key_fn,
                job.sync,
                step,
                pause,
            )
        seg = Segment.open_file(job.cleaned_path, job.base, job.log._index_interval, create=False)
        bad = scan_segment(seg, os.fstat(seg.fd).st_size)
        if bad is not None:  # pragma: no cover - we just wrote and fsynced it
            seg.close()
            raise CompactionError(f"compacted segment {job.cleaned_path} fails validation: {bad.reason}")
        job.segment = seg
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(job.cleaned_path)
        raise


def abandon_compaction(job: CompactionJob) -> None:
    """Drop a written but not installed compaction (the log moved on, or is closing)."""
    if job.segment is not None:
        job.segment.close()
        job.segment = None
    with contextlib.suppress(OSError):
        os.unlink(job.cleaned_path)


def finish_compaction(job: CompactionJob, step: Callable[[str], None] | None = None) -> CompactionResult:
    """Steps 3-5 on the log's owner: commit the `.cleaned` file in place of the inputs. Any
    failure here fails the log (reopening it finishes or discards the swap)."""
    step = step or (lambda _name: None)
    log = job.log
    assert job.segment is not None, "write_compaction did not complete"
    try:
        step("cleaned_written")
        new_seg = _swap_in(log, job.inputs, job.segment, job.cleaned_path, job.final_path, job.sync, step)
    except BaseException as exc:
        log._fail(exc)
        raise
    return CompactionResult(
        segments_replaced=len(job.inputs),
        bytes_before=job.input_bytes,
        bytes_after=new_seg.size,
        records_before=job.records_before,
        records_kept=job.kept,
        tombstones_dropped=job.dropped,
        clean_offset=log.clean_offset,
    )


def _latest_offsets(
    inputs: list[Segment], key_fn: KeyFn | None, pause: Callable[[], None] = lambda: None
) -> tuple[dict[Hashable, int], int]:
    """Pass 1: the offset of the last record of every key."""
    latest: dict[Hashable, int] = {}
    count = 0
    for seg in inputs:
        for pos, header, raw in seg.batches():
            pause()
            _check_compactable(seg, pos, header)
            base = header.base_offset
            for od, _td, key, _value, _headers in iter_raw_records(raw):
                if key is None:
                    raise CompactionError(f"record at offset {base + od} in {seg.path} has a null key")
                latest[key if key_fn is None else key_fn(key)] = base + od
                count += 1
    return latest, count


def _check_compactable(seg: Segment, pos: int, header: BatchHeader) -> None:
    if header.attributes & (ATTR_COMPRESSION_MASK | ATTR_CONTROL):
        raise CompactionError(
            f"batch at position {pos} of {seg.path} is compressed or a control batch; "
            "only coordinator logs (uncompressed, no transactions) are compacted"
        )


def _write_cleaned(
    path: str,
    inputs: list[Segment],
    latest: dict[Hashable, int],
    now_ms: int,
    retention_ms: int,
    key_fn: KeyFn | None,
    sync: bool,
    step: Callable[[str], None],
    pause: Callable[[], None] = lambda: None,
) -> tuple[int, int]:
    """Pass 2: write the kept records to `path`; return (records kept, tombstones dropped)."""
    kept_total = 0
    dropped = 0
    last_seg = inputs[-1]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        pending: list[bytes] = []
        pending_bytes = 0
        started = False
        for seg in inputs:
            for _pos, header, raw in seg.batches():
                pause()
                kept: list[RawRecord] = []
                b = header.base_offset
                lat = header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else None
                for rec in iter_raw_records(raw):
                    od, td, key, value, _h = rec
                    assert key is not None  # checked in pass 1
                    if latest[key if key_fn is None else key_fn(key)] != b + od:
                        continue  # superseded by a later record of the same key
                    if value is None:
                        ts = lat if lat is not None else header.first_timestamp + td
                        if now_ms - ts > retention_ms:
                            dropped += 1
                            continue
                    kept.append(rec)
                kept_total += len(kept)
                is_last = seg is last_seg and header.next_offset == seg.next_offset
                if len(kept) == header.record_count:
                    out = raw  # untouched: the original bytes and CRC
                elif kept or is_last:
                    out = _rewrite(header, kept)
                else:
                    continue
                pending.append(out)
                pending_bytes += len(out)
                if pending_bytes >= _FLUSH_BYTES:
                    _flush(fd, pending)
                    pending_bytes = 0
                    if not started:
                        started = True
                        step("writing_cleaned")
        _flush(fd, pending)
        if not started:
            step("writing_cleaned")
        if sync:
            fsync_file(fd)
    finally:
        os.close(fd)
    return kept_total, dropped


def _swap_in(
    log: SegmentLog,
    inputs: list[Segment],
    new_seg: Segment,
    cleaned_path: str,
    final_path: str,
    sync: bool,
    step: Callable[[str], None],
) -> Segment:
    """Steps 3-5: commit the cleaned file as a swap, drop the inputs, install the swap. The
    new segment stays open across the renames (an open descriptor follows its file)."""
    directory = log.directory
    swap_path = final_path[: -len(".log")] + SWAP_SUFFIX
    os.rename(cleaned_path, swap_path)
    if sync:
        fsync_dir(directory)
    step("swap_renamed")
    for seg in inputs:
        seg.close()
        os.unlink(seg.path)
        step("input_deleted")
    if sync:
        fsync_dir(directory)
    os.rename(swap_path, final_path)
    if sync:
        fsync_dir(directory)
    new_seg.path = final_path
    log._install_compacted(new_seg, inputs)
    step("swap_installed")
    return new_seg


def _rewrite(header: BatchHeader, kept: list[RawRecord]) -> bytes:
    """The batch with only `kept` records: same offset range, timestamps and producer fields.
    An emptied batch gets baseTimestamp -1, as Kafka writes it."""
    return encode_batch(
        kept,
        base_offset=header.base_offset,
        last_offset_delta=header.last_offset_delta,
        first_timestamp=header.first_timestamp if kept else NO_TIMESTAMP,
        max_timestamp=header.max_timestamp,
        attributes=header.attributes,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )


def _flush(fd: int, pending: list[bytes]) -> None:
    data = b"".join(pending)
    pending.clear()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
