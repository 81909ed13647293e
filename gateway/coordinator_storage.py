"""A coordinator shard bound to its log (Kafka `CoordinatorRuntime`; Kafka
`CoordinatorRuntime` write path and `CoordinatorLoaderImpl`).

This is the synchronous core of a shard's runtime; the asyncio server wraps it. It:

* **loads**: replays every batch of the shard's log into a fresh engine `Shard` (unknown record
  types are skipped with a structured warning, as Kafka >= 3.5 does; bytes of a known type that
  do not decode, or a record that cannot apply, stop the load with an error naming the offset
  and the key), then runs the engine's load duties (timers, metadata re-check, ...);
* **journals**: installed as the shard's journal, it encodes an operation's records and appends
  them as one batch, so a restart sees an operation whole or not at all. It does not fsync; a
  refused append raises `AppendError`, and the engine keeps its state as it was;
* **group commit**: `sync()` makes everything appended so far durable with one fsync; the caller
  releases the responses of operations whose batch ends at or before `durable_offset`;
* **compaction**: keeps the log bounded (latest value per key; tombstones dropped after a
  retention). The shard runtime starts it when a `CompactionPolicy` triggers and has the
  compacted segment written by a worker process while the shard keeps serving
  (`begin_compaction`, `records.compaction_worker`).

After an fsync failure the log refuses all further work (a record may or may not be on disk):
the owner fails the waiting responses and reopens the shard, which reloads it from what the log
really holds, as a Kafka coordinator unloads and reloads a partition.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from engine.config import CoordinatorConfig
from engine.consumer.group import ReplayError
from engine.errors import AppendError, Errors
from engine.ids import IdSource
from engine.metadata import MetadataImage
from engine.outcome import Outcome
from engine.shard import Shard
from records.batch import iter_raw_records
from records.codec import (
    RecordDecodeError,
    RecordEncodeError,
    UnknownRecordTypeError,
    decode_record,
    encode_record,
)
from records.compaction import (
    CompactionJob,
    CompactionResult,
    begin_compaction,
    compact,
    finish_compaction,
    should_compact,
)
from records.coordinator import CoordinatorRecord
from records.durability import CoordinatorLog, FsyncPolicy
from records.errors import LogError
from records.log import SegmentLog
from translation.migration import Migration

log = structlog.get_logger()

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
# Kafka's `log.cleaner.delete.retention.ms`: how long a tombstone outlives the value it deletes.
DEFAULT_TOMBSTONE_RETENTION_MS = 24 * 3600 * 1000
# Kafka's `offsets.load.buffer.size`-era batch limit: a single operation's batch above this is
# refused as MESSAGE_TOO_LARGE (like a record batch over `message.max.bytes`).
DEFAULT_MAX_BATCH_BYTES = 1024 * 1024 + 12


@dataclass(frozen=True)
class CompactionPolicy:
    """When a running shard compacts its log (Kafka's log cleaner on `__consumer_offsets`):
    once at least `min_bytes` were written since the last compaction and they make up at
    least `min_dirty_ratio` of the log (`log.cleaner.min.cleanable.ratio`)."""

    min_dirty_ratio: float = 0.5
    min_bytes: int = 4 * 1024 * 1024


class CoordinatorLoadError(LogError):
    """The shard's log cannot be loaded; the message names the log offset and the record."""


@dataclass(frozen=True)
class LoadStats:
    batches: int
    records: int
    skipped_unknown: int
    seconds: float


def load_shard(source: CoordinatorLog, shard: Shard, where: str = "") -> LoadStats:
    """Replay every record of `source` into `shard` (Kafka `CoordinatorLoaderImpl.load`).

    The hot loop of a shard's startup (a million records in a few seconds): it reads records
    straight from their batches (offset = base offset + delta; timestamps are not needed) and
    runs with the cyclic garbage collector paused: a load allocates millions of objects that
    all survive it, so collections during it would traverse them again and again and free
    nothing; afterwards they are frozen (gc.freeze) for the same reason.
    """
    start = time.perf_counter()
    batches = records = skipped = 0
    replay = shard.replay
    decode = decode_record
    warnings = shard.replay_warnings
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for header, raw in source.batches():
            batches += 1
            base = header.base_offset
            for offset_delta, _ts_delta, key, value, _headers in iter_raw_records(raw, 0, header):
                records += 1
                if key is None:
                    raise CoordinatorLoadError(f"{where}: record at offset {base + offset_delta} has no key")
                try:
                    record = decode(key, value)
                except UnknownRecordTypeError as e:
                    skipped += 1
                    log.warning(
                        "coordinator.unknown_record_skipped",
                        log=where,
                        offset=base + offset_delta,
                        record_type=e.record_type,
                        reason="unknown record type; it may be left over from a newer "
                        "version or an aborted upgrade",
                    )
                    continue
                except RecordDecodeError as e:
                    raise CoordinatorLoadError(
                        f"{where}: malformed record at offset {base + offset_delta} "
                        f"(key {key[:64].hex()}): {e}"
                    ) from None
                try:
                    replay(record)
                except (ReplayError, ValueError) as e:
                    raise CoordinatorLoadError(
                        f"{where}: cannot replay record at offset {base + offset_delta} "
                        f"({type(record.key).__name__} {_key_fields(record)}): {e}"
                    ) from None
                if warnings:
                    for name, fields in warnings:
                        log.warning(name, log=where, offset=base + offset_delta, **fields)
                    warnings.clear()
    finally:
        if gc_was_enabled:
            # What the load built is the shard's state and lives on: freeze it out of the
            # collector's generations, or the first collections after the load traverse all of
            # it again (about 0.5 s per million records) and every full collection of the
            # running gateway after them. Frozen objects are still freed by reference counting.
            gc.freeze()
            gc.enable()
    return LoadStats(batches, records, skipped, time.perf_counter() - start)


def _key_fields(record: CoordinatorRecord) -> str:
    key: Any = record.key
    return ", ".join(f"{f}={getattr(key, f)!r}" for f in getattr(key, "__slots__", ()))


class CoordinatorStorage:
    def __init__(
        self,
        shard: Shard,
        segment_log: CoordinatorLog,
        *,
        tombstone_retention_ms: int = DEFAULT_TOMBSTONE_RETENTION_MS,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> None:
        self.shard = shard
        self.log = segment_log
        self.tombstone_retention_ms = tombstone_retention_ms
        self.max_batch_bytes = max_batch_bytes
        self.load_stats: LoadStats | None = None
        self.load_outcomes: list[Outcome[Any]] = []
        shard.journal = self._journal

    @classmethod
    def open(
        cls,
        directory: str,
        *,
        config: CoordinatorConfig,
        ids: IdSource,
        image: MetadataImage,
        now_ms: int,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync_policy: FsyncPolicy = "batch",
        tombstone_retention_ms: int = DEFAULT_TOMBSTONE_RETENTION_MS,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> CoordinatorStorage:
        """Open (recovering) the log, replay it into a new shard, run the load duties."""
        segment_log = SegmentLog.open(directory, segment_bytes=segment_bytes, fsync_policy=fsync_policy)
        return cls.load(
            segment_log,
            config=config,
            ids=ids,
            image=image,
            now_ms=now_ms,
            tombstone_retention_ms=tombstone_retention_ms,
            max_batch_bytes=max_batch_bytes,
        )

    @classmethod
    def load(
        cls,
        segment_log: CoordinatorLog,
        *,
        config: CoordinatorConfig,
        ids: IdSource,
        image: MetadataImage,
        now_ms: int,
        tombstone_retention_ms: int = DEFAULT_TOMBSTONE_RETENTION_MS,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> CoordinatorStorage:
        """Replay an opened log into a new shard and run the load duties (the simulator passes
        its own log here, docs/simulation.md); the log is closed if the load fails."""
        directory = segment_log.directory
        shard = Shard(config, ids, image, migration=Migration)
        shard.tick(now_ms)
        try:
            stats = load_shard(segment_log, shard, directory)
        except BaseException:
            segment_log.close()
            raise
        storage = cls(
            shard, segment_log, tombstone_retention_ms=tombstone_retention_ms, max_batch_bytes=max_batch_bytes
        )
        storage.load_stats = stats
        # One line per shard: fifty of them at info for an empty data directory say nothing, so
        # a shard that had nothing to load reports at debug.
        report = log.info if stats.records or stats.batches else log.debug
        report(
            "coordinator.loaded",
            log=directory,
            batches=stats.batches,
            records=stats.records,
            skipped_unknown=stats.skipped_unknown,
            groups=len(shard.groups),
            seconds=round(stats.seconds, 3),
            end_offset=segment_log.end_offset,
        )
        storage.load_outcomes = shard.on_loaded(now_ms)
        return storage

    # --- the journal (called by the engine before it applies an operation) ---------------------

    def _journal(self, records: Sequence[CoordinatorRecord]) -> None:
        try:
            pairs = [encode_record(r) for r in records]
        except (RecordEncodeError, ValueError) as e:
            raise AppendError(Errors.UNKNOWN_SERVER_ERROR, f"cannot encode records: {e}") from None
        size = sum(len(k) + (len(v) if v is not None else 0) + 24 for k, v in pairs)
        if size > self.max_batch_bytes:
            raise AppendError(
                Errors.MESSAGE_TOO_LARGE,
                f"the operation's {len(pairs)} records take {size} bytes, over {self.max_batch_bytes}",
            )
        try:
            self.log.append_records(pairs, self.shard.now_ms)
        except (LogError, OSError) as e:
            raise AppendError(Errors.KAFKA_STORAGE_ERROR, f"append failed: {e}") from None

    # --- group commit ----------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """The offset after the last appended batch (an operation is durable once
        `durable_offset` reaches the end offset read right after it was journaled)."""
        return self.log.end_offset

    @property
    def durable_offset(self) -> int:
        return self.log.durable_offset

    def sync(self) -> int:
        """Make everything appended so far durable (one fsync); returns the durable offset."""
        return self.log.sync()

    # --- compaction ------------------------------------------------------------------------------

    def maybe_compact(
        self, now_ms: int, *, min_dirty_ratio: float = 0.5, min_bytes: int = 4 * 1024 * 1024
    ) -> CompactionResult | None:
        """Compact in place, now, if the trigger says so (tests, tools; the server uses
        `begin_compaction` and compacts off its event loop)."""
        if not isinstance(self.log, SegmentLog):
            return None  # a simulated log is not compacted
        if not should_compact(self.log, min_dirty_ratio=min_dirty_ratio, min_bytes=min_bytes):
            return None
        return self.compact(now_ms)

    def compact(self, now_ms: int) -> CompactionResult:
        assert isinstance(self.log, SegmentLog), "compaction needs a segment log"
        self.log.sync()
        result = compact(self.log, now_ms=now_ms, tombstone_retention_ms=self.tombstone_retention_ms)
        log.info("coordinator.compacted", log=self.log.directory, **result._asdict())
        return result

    def begin_compaction(self, now_ms: int, policy: CompactionPolicy) -> CompactionJob | None:
        """Start a compaction if `policy` triggers: roll the log and name its inputs. The caller
        runs `records.compaction.write_compaction(job)` in a thread (its passes in the worker
        process), then `finish_compaction`
        (or `records.compaction.abandon_compaction`) here again."""
        if not isinstance(self.log, SegmentLog):
            return None  # a simulated log is not compacted
        if not should_compact(self.log, min_dirty_ratio=policy.min_dirty_ratio, min_bytes=policy.min_bytes):
            return None
        return begin_compaction(self.log, now_ms=now_ms, tombstone_retention_ms=self.tombstone_retention_ms)

    def finish_compaction(self, job: CompactionJob) -> CompactionResult:
        return finish_compaction(job)

    def close(self) -> None:
        self.shard.journal = None
        self.log.close()
