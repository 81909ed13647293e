"""Reading and writing a Kafka broker's `__consumer_offsets-N` partition directories (Kafka
`UnifiedLog` / `LogSegment` on disk), so that groupshift's records move to and from real brokers.

A partition directory of a Kafka log dir (`log.dirs`) holds:

* segments `<20-digit base offset>.log`: magic-2 record batches back to back, the file named by
  the offset of its first batch. Coordinator records are uncompressed by default
  (`offsets.topic.compression.codec` = none); a compressed batch is refused here;
* derived files Kafka rebuilds when they are missing: `.index`, `.timeindex` (rebuilt by
  segment recovery), `.txnindex`, `<offset>.snapshot` (producer state) and
  `leader-epoch-checkpoint` (from the batches' partition leader epochs);
* `partition.metadata` (`version: 0` / `topic_id: <base64 uuid>`): since Kafka 3.7 a KRaft
  broker treats a partition directory without it as a stray log and deletes it, and one whose
  topic id differs from the cluster's `__consumer_offsets` as inconsistent. So a directory we
  write keeps the `partition.metadata` already there (the target broker's own), or gets one for
  a topic id the caller gives.

The log dir's checkpoint files (`recovery-point-offset-checkpoint`, `replication-offset-
checkpoint`, `log-start-offset-checkpoint`, `cleaner-offset-checkpoint`: `0`, a count, then
`topic partition offset` lines) hold per-partition offsets of the log being replaced; a stale
log start offset would delete the new segments, a stale recovery point skip their recovery. The
entries of rewritten partitions are dropped, which Kafka reads as "recover from 0".

A running broker holds an exclusive lock on `<log dir>/.lock` (Kafka's `FileLock`, a
`FileChannel.tryLock`, which is an fcntl record lock on Linux); groupshift holds flock locks on
each coordinator log's `.lock` (records.log). `running_broker`/`running_groupshift` try the same
locks without blocking, so that nothing writes under (or reads half-written logs from) a live
server.

Groups are placed as Kafka's `GroupMetadataManager.partitionFor` does:
`Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` (Java `String.hashCode`).
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.groups.routing import partition_for
from records.batch import (
    NO_PARTITION_LEADER_EPOCH,
    RECORD_BATCH_OVERHEAD,
    encode_batch,
    iter_records,
    read_batch_header,
    verify_crc,
)
from records.segment import parse_segment_name, segment_name

__all__ = [
    "TOPIC",
    "LogReadError",
    "LogRecord",
    "group_of_key",
    "list_partitions",
    "partition_dir",
    "partition_for",
    "read_batches",
    "read_partition",
    "running_broker",
    "running_groupshift",
    "write_partition",
    "write_partition_batches",
]

TOPIC = "__consumer_offsets"
PARTITION_METADATA = "partition.metadata"
CHECKPOINT_FILES = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
)
_DERIVED_SUFFIXES = (".index", ".timeindex", ".txnindex", ".snapshot", ".deleted", ".cleaned", ".swap")
_MAX_BATCH_BYTES = 512 * 1024  # below Kafka's default max.message.bytes (1 MiB)
_NAME = re.compile(re.escape(TOPIC) + r"-(\d+)")


class LogReadError(ValueError):
    """A partition directory whose segments cannot be read as plain coordinator batches."""


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record as stored: its offset and timestamp, and the key and value bytes unchanged."""

    offset: int
    timestamp: int
    key: bytes
    value: bytes | None


def running_broker(log_dir: str | os.PathLike[str]) -> bool:
    """Whether a Kafka broker has `log_dir` open: its `.lock` is locked (fcntl, non-blocking)."""
    return _locked(Path(log_dir) / ".lock", fcntl.lockf)


def running_groupshift(data_dir: str | os.PathLike[str]) -> bool:
    """Whether a groupshift server has `data_dir`'s coordinator logs open (flock on a `.lock`)."""
    coordinator = Path(data_dir) / "coordinator"
    locks = sorted(coordinator.glob("*/.lock")) if coordinator.is_dir() else []
    return any(_locked(lock, fcntl.flock) for lock in locks)


def _locked(path: Path, lock: Callable[[int, int], object]) -> bool:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:  # no lock file: nobody ever opened the directory this way
        return False
    try:
        lock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # EAGAIN / EACCES / EWOULDBLOCK: another process holds it
        return True
    else:
        lock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def partition_dir(log_dir: str | os.PathLike[str], partition: int) -> Path:
    return Path(log_dir) / f"{TOPIC}-{partition}"


def list_partitions(log_dir: str | os.PathLike[str]) -> dict[int, Path]:
    """The `__consumer_offsets-N` directories directly under `log_dir`, by N."""
    out: dict[int, Path] = {}
    base = Path(log_dir)
    if not base.is_dir():
        return out
    for entry in base.iterdir():
        m = _NAME.fullmatch(entry.name)
        if m and entry.is_dir():
            out[int(m.group(1))] = entry
    return dict(sorted(out.items()))


def _segments(path: Path) -> list[tuple[int, Path]]:
    found = []
    for entry in path.iterdir():
        base = parse_segment_name(entry.name)
        if base is not None and entry.is_file():
            found.append((base, entry))
    return sorted(found)


def read_batches(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Every batch of the partition directory's segments, in offset order, bytes unchanged.
    A torn tail (an incomplete last batch, what a crash leaves and Kafka truncates at
    recovery) ends a segment; a batch failing its CRC or a compressed data batch raises."""
    for _, seg in _segments(Path(path)):
        data = seg.read_bytes()
        pos = 0
        while pos + RECORD_BATCH_OVERHEAD <= len(data):
            header = read_batch_header(data, pos)
            end = pos + header.size
            if header.batch_length <= 0 or end > len(data):
                break
            try:
                verify_crc(data, pos)
            except Exception as e:
                raise LogReadError(f"{seg}: batch at byte {pos} (offset {header.base_offset}): {e}") from None
            if header.compression and not header.is_control:
                raise LogReadError(
                    f"{seg}: batch at offset {header.base_offset} is compressed "
                    f"(codec {header.compression}); only uncompressed coordinator logs are supported"
                )
            yield data[pos:end]
            pos = end


def read_partition(path: str | os.PathLike[str]) -> Iterator[LogRecord]:
    """The data records of a partition directory in offset order (control batches, i.e.
    transaction markers, are left out)."""
    for batch in read_batches(path):
        header = read_batch_header(batch)
        if header.is_control:
            continue
        for rec in iter_records(batch):
            if rec.key is None:
                raise LogReadError(f"{path}: record at offset {rec.offset} has no key")
            yield LogRecord(rec.offset, rec.timestamp, rec.key, rec.value)


def group_of_key(key: bytes) -> str | None:
    """The group id every coordinator record key starts with, after its int16 record type:
    offset keys (group, topic, partition), group metadata, and every group-scoped record of
    later types (groupId first). Keys are never flexible (`"flexibleVersions": "none"` in all
    of Kafka's key schemas), so the id is an int16-length string. None if the key is too
    short to hold one."""
    if len(key) < 4:
        return None
    n = int.from_bytes(key[2:4], "big", signed=True)
    if n < 0 or 4 + n > len(key):
        return None
    return key[4 : 4 + n].decode("utf-8", "replace")


def _clear_partition(path: Path) -> None:
    """Remove segments and every file Kafka derives from them; keep `partition.metadata`."""
    for entry in path.iterdir():
        if not entry.is_file():
            continue
        if (
            parse_segment_name(entry.name) is not None
            or entry.name.endswith(_DERIVED_SUFFIXES)
            or entry.name == "leader-epoch-checkpoint"
        ):
            entry.unlink()


def _prepare(path: Path, topic_id: str | None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    _clear_partition(path)
    meta = path / PARTITION_METADATA
    if topic_id is not None:
        meta.write_text(f"version: 0\ntopic_id: {topic_id}\n")
    _forget_checkpoints(path.parent, path.name)


def _forget_checkpoints(log_dir: Path, name: str) -> None:
    m = _NAME.fullmatch(name)
    if m is None:
        return
    partition = m.group(1)
    for fname in CHECKPOINT_FILES:
        f = log_dir / fname
        if not f.is_file():
            continue
        lines = f.read_text().splitlines()
        if len(lines) < 2:
            continue
        kept = [ln for ln in lines[2:] if ln.split() != [] and ln.split()[:2] != [TOPIC, partition]]
        if len(kept) != len(lines) - 2:
            tmp = f.with_suffix(".tmp")
            tmp.write_text("\n".join([lines[0], str(len(kept)), *kept]) + "\n")
            os.replace(tmp, f)


def write_partition_batches(
    path: str | os.PathLike[str], batches: Sequence[bytes], *, topic_id: str | None = None
) -> int:
    """Replace the partition directory's log by `batches` (complete v2 batches, offsets
    ascending) in one segment named after the first batch's base offset. Returns the next
    offset."""
    p = Path(path)
    _prepare(p, topic_id)
    if not batches:
        return 0
    first = read_batch_header(batches[0]).base_offset
    with open(p / segment_name(first), "wb") as f:
        for b in batches:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    return read_batch_header(batches[-1]).next_offset


def write_partition(
    path: str | os.PathLike[str],
    records: Sequence[tuple[bytes, bytes | None, int]],
    *,
    topic_id: str | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> int:
    """Replace the partition directory's log by `records` ((key, value or None, timestamp),
    bytes unchanged) at consecutive offsets from 0, in batches under 512 KiB. Returns the
    next offset (the number of records)."""
    batches: list[bytes] = []
    offset = 0
    i = 0
    while i < len(records):
        size = RECORD_BATCH_OVERHEAD
        j = i
        while j < len(records) and (j == i or size < _MAX_BATCH_BYTES):
            k, v, _ = records[j]
            size += len(k) + (len(v) if v is not None else 0) + 20
            j += 1
        chunk = records[i:j]
        stamps = [t for _, _, t in chunk]
        batches.append(
            encode_batch(
                [(n, t - stamps[0], k, v, ()) for n, (k, v, t) in enumerate(chunk)],
                base_offset=offset,
                last_offset_delta=len(chunk) - 1,
                first_timestamp=stamps[0],
                max_timestamp=max(stamps),
                partition_leader_epoch=partition_leader_epoch,
            )
        )
        offset += len(chunk)
        i = j
    write_partition_batches(path, batches, topic_id=topic_id)
    return offset
