"""What is durable when: the guarantees of `SegmentLog`, and the fsync helpers behind them.

Kafka's own log relies on replication and flushes lazily; groupshift runs a single node, so a
response may be released only once its records are on disk (docs/architecture.md, "records/"). The rules:

1. **Append** (`append_records`, `append_batch`) writes the batch to the segment file with
   `os.write` before returning, so it is in the kernel page cache: it survives a crash of the
   process (SIGKILL, an exception) but not a power loss or kernel crash. An append either
   happens whole or raises with the log unchanged (a partial write is cut back).
2. **sync()** is the group-commit point. It fdatasyncs every segment written since the last
   sync and fsyncs the directory when a segment file was created or removed. When it returns,
   everything appended before it survives power loss; `durable_offset` then equals
   `end_offset`. A runtime appends the records of many operations, calls `sync()` once, and
   only then releases their responses. `sync()` blocks; an event loop splits it:
   `p = log.begin_sync()` (captures the end offset and what to fsync), `p.run()` in a worker
   thread while new appends continue, `log.finish_sync(p)` (advances `durable_offset` to the
   captured offset only), then releases the responses of operations below that offset.
3. A failed fsync (EIO...) leaves the page cache in an unknown state ("fsyncgate"), so the log
   marks itself failed: every later call raises `LogFailedError` until it is reopened, which
   re-runs recovery on what the disk really holds. Responses waiting for that sync must fail.
4. **Rolling** to a new segment first fdatasyncs the old one (policies "batch"/"interval"),
   even when an in-flight `PendingSync` covers it, so unsynced data only ever sits in the
   last segment: a crash can tear only the log's tail.
5. **truncate_to()** is made durable before it returns (policies "batch"/"interval"), so rolled
   back records cannot come back after a crash.
6. **Opening** a log runs recovery (see `records.recovery`): a torn tail -- the last batch(es)
   of the last segment, up to the end of the file, with no valid batch after the first bad
   byte -- is cut off and logged as `log.truncated_tail`; anything else that fails validation is
   `LogCorruptionError` naming the file and byte position. Open then fsyncs the last segment,
   so what a restarted process replays is what the disk holds.
7. **Compaction** writes `<base>.log.cleaned`, fsyncs it, renames it to `<base>.log.swap`
   (the commit point), removes the segments it replaces and renames the swap to `<base>.log`,
   fsyncing the directory after each rename. A crash anywhere leaves the old or the new state;
   open() finishes or discards the half-done swap (`records.compaction`).

Fsync policies (`fsync_policy`):

* ``"batch"`` (default): the caller calls `sync()` after each group of appends (group commit).
* ``"interval"``: the caller calls `sync()` on a timer; responses are released before their
  records are durable (Kafka's own behaviour with `flush.ms`), so a power loss can lose up to
  one interval of acknowledged writes.
* ``"none"``: `sync()` never fsyncs (benchmarks and tests). Appends still reach the page cache,
  so the log survives process crashes, but a power loss can lose or tear anything, even in
  non-last segments, and open() may then refuse to start (`LogCorruptionError`).

On macOS `fsync` does not flush the drive's cache (that needs F_FULLFSYNC); production is Linux.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, Literal, Protocol

from records.batch import BatchHeader

FsyncPolicy = Literal["batch", "interval", "none"]
FSYNC_POLICIES: tuple[FsyncPolicy, ...] = ("batch", "interval", "none")


def fsync_file(fd: int) -> None:
    """Flush a file's data (and the metadata needed to read it back, such as its size)."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - non-Linux
        os.fsync(fd)


def fsync_dir(path: str) -> None:
    """Make the directory entries in `path` durable (file creations, renames, unlinks)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SyncJob(Protocol):
    """The blocking half of a group commit (`SegmentLog.begin_sync`): run in a worker thread."""

    def run(self) -> None: ...


class CoordinatorLog(Protocol):
    """What a coordinator shard needs of its log: `SegmentLog` in the server; the deterministic
    simulator (docs/simulation.md) passes an in-memory log whose appends and fsyncs fail, stall
    or tear, with the same guarantees as rules 1-3 above."""

    @property
    def directory(self) -> str: ...

    @property
    def fsync_policy(self) -> FsyncPolicy: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def durable_offset(self) -> int: ...

    def append_records(
        self, records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int
    ) -> tuple[int, int]: ...

    def sync(self) -> int: ...

    def begin_sync(self) -> SyncJob: ...

    def finish_sync(self, pending: Any) -> int: ...

    def batches(self, from_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]: ...

    def close(self) -> None: ...
