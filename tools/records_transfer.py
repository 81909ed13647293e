"""`groupshift records export | import | rewrite`: moving coordinator records between a
groupshift data dir and a Kafka broker's `__consumer_offsets` partition directories, and making
a log an older Kafka can load (issue 15).

* **export** (data dir -> Kafka log dir): each `<data dir>/coordinator/__consumer_offsets-N`
  log becomes `<log dir>/__consumer_offsets-N`. With as many partitions as groupshift has
  shards the batches are copied unchanged (byte for byte, offsets included); with another
  count each group's records move to the partition Kafka's `partitionFor` gives it, in their
  order, into new batches (record bytes unchanged, offsets renumbered). Only committed
  transactional offset commits move then (aborted ones are dropped, open ones reported).
* **import** (Kafka log dir -> data dir): the reverse, batches unchanged, partition numbers kept,
  so groupshift serves it with `offsets.topic.num.partitions` = the partition count.
* **rewrite --for-downgrade TARGET**: a log TARGET's coordinator loads with every group and
  offset (`tools.check.loader_rules`): records TARGET would skip or fail on are removed,
  offset commit values it cannot read (v4 on Kafka 3.4.0 and older) are re-encoded in v3/v1,
  and every consumer group (KIP-848) is converted to a classic group, the way Kafka converts
  one when its last consumer-protocol member leaves (`translation.downgrade`): members that
  joined through the classic protocol stay members of a Stable classic group with their current
  assignment; a group with consumer-protocol members becomes an Empty classic group (its
  offsets kept, its members rejoin with classic clients).

Export, import and rewrite cannot destroy: a target partition that already holds data (a broker's own
groups and committed offsets) is refused unless `--force`, which first copies each replaced
partition directory (and, for export, the log dir's checkpoint files) into a backup directory
beside the target, named in the summary; `--dry-run` writes nothing and shows what would be
written over what; a run is refused while a Kafka broker holds the log dir's `.lock` or a
groupshift server its data dir's logs. There is no merge mode: Kafka's loader replays one log
per partition, so keeping both would mean renumbering the broker's records after ours, and a
group present in both would end up with whichever was written last; replace (with a backup) or
keep, nothing in between.

Kafka brokers need `partition.metadata` with their own topic id (`tools.kafka_logs`): write into
the log dir of the stopped target broker (its files are kept), or pass `--topic-id`.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import struct
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from engine.classic.records import group_metadata_record
from engine.consumer.group import ConsumerGroup
from engine.metadata import MetadataImage, TopicImage
from engine.shard import Shard
from protocol.varint import read_uvarint
from records import CoordinatorRecord, GroupMetadataKey, GroupMetadataValue
from records.batch import iter_records, read_batch_header
from records.codec import CoordinatorRecordError, decode_record, encode_record, encode_value
from records.consumer_group import ConsumerGroupPartitionMetadataValue
from records.dump import offsets_logs
from records.offsets import OffsetCommitValue
from records.segment import parse_segment_name
from tools.check.loader_rules import CONSUMER_GROUP_TYPES, KAFKA_TARGETS, RECORD_TYPE_NAMES, outcome
from tools.kafka_logs import (
    CHECKPOINT_FILES,
    LogReadError,
    group_of_key,
    list_partitions,
    partition_dir,
    partition_for,
    read_batches,
    read_partition,
    running_broker,
    running_groupshift,
    write_partition,
    write_partition_batches,
)
from translation.downgrade import build_classic_group
from translation.embedded_protocol import SchemaError

__all__ = ["add_commands", "export_data_dir", "import_log_dir", "rewrite_for_downgrade"]

META_FILE = "meta.properties"
COORDINATOR_DIR = "coordinator"
Entry = tuple[bytes, bytes | None, int]  # key, value, timestamp


class TransferError(ValueError):
    """An input that cannot be transferred as asked (message for the operator)."""


# --- committed records of a partition ------------------------------------------------------------


@dataclass
class _Pending:
    entries: list[Entry] = field(default_factory=list)


def committed_entries(path: str | os.PathLike[str], notes: list[str]) -> list[Entry]:
    """The partition's data records a coordinator would apply, in offset order: plain records,
    and transactional ones once their COMMIT marker is seen (ABORT drops them; a transaction
    still open at the end is reported in `notes` and left out)."""
    out: list[Entry] = []
    pending: dict[int, list[Entry]] = {}
    for batch in read_batches(path):
        header = read_batch_header(batch)
        records = list(iter_records(batch))
        if header.is_control:
            for rec in records:
                kind = struct.unpack_from(">h", rec.key or b"\0\0\0\0", 2)[0]
                done = pending.pop(header.producer_id, [])
                if kind == 1:  # COMMIT
                    out.extend(done)
            continue
        entries = [(r.key or b"", r.value, r.timestamp) for r in records]
        if header.is_transactional:
            pending.setdefault(header.producer_id, []).extend(entries)
        else:
            out.extend(entries)
    for pid, entries in pending.items():
        notes.append(f"{path}: {len(entries)} record(s) of open transaction (producer {pid}) left out")
    return out


# --- export / import -------------------------------------------------------------------------------


@dataclass
class Holdings:
    """What a target partition directory already holds (None: it does not exist or is empty)."""

    path: Path
    bytes: int
    records: int
    groups: set[str] | None  # None: the log does not read as plain coordinator batches


def holdings(path: Path) -> Holdings | None:
    """The data `path` (a `__consumer_offsets-N` directory) holds; None if no segment holds a byte."""
    if not path.is_dir():
        return None
    size = sum(
        e.stat().st_size for e in path.iterdir() if e.is_file() and parse_segment_name(e.name) is not None
    )
    if size == 0:
        return None
    records = 0
    groups: set[str] | None = set()
    try:
        for r in read_partition(path):
            records += 1
            if (g := group_of_key(r.key)) is not None and groups is not None:
                groups.add(g)
    except LogReadError:
        groups = None
    return Holdings(path, size, records, groups)


def _described(held: Sequence[Holdings]) -> str:
    records = sum(h.records for h in held)
    groups: set[str] = set().union(*(h.groups or set() for h in held))
    names = ", ".join(sorted(groups)[:3]) + (", ..." if len(groups) > 3 else "")
    unread = sum(1 for h in held if h.groups is None)
    return (
        f"{records} record(s) of {len(groups)} group(s)"
        + (f" ({names})" if groups else "")
        + (f", {unread} log(s) not readable here" if unread else "")
    )


def default_backup_dir(target: Path) -> Path:
    """Beside the directory written into, never inside it: a Kafka broker refuses to start on a
    log dir holding a directory that is not named `<topic>-<partition>`."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return target.parent / f"{target.name}.groupshift-backup-{stamp}"


def _back_up(held: Sequence[Holdings], extra_files: Sequence[Path], backup: Path) -> None:
    """Copy each replaced partition directory (and the files written into besides) to `backup`
    before anything is written; an existing `backup` is refused so that no backup is mixed up."""
    if backup.exists():
        raise TransferError(f"backup directory {backup} already exists; name another with --backup-dir")
    backup.mkdir(parents=True)
    for h in held:
        shutil.copytree(h.path, backup / h.path.name)
    for f in extra_files:
        if f.is_file():
            shutil.copy2(f, backup / f.name)


def _guard_target(
    what: str,
    where: Path,
    held: Sequence[Holdings],
    *,
    force: bool,
    dry_run: bool,
    backup_dir: Path | None,
    extra_files: Sequence[Path],
) -> Path | None:
    """Refuse to replace data without --force; with it, back the data up first. Returns the
    backup directory used (None: nothing was replaced)."""
    if not held or dry_run:
        return None
    parts = ", ".join(h.path.name.rsplit("-", 1)[-1] for h in held)
    if not force:
        raise TransferError(
            f"{where}: __consumer_offsets partition(s) {parts} already hold {_described(held)}; {what} "
            "would replace them. Nothing was written: see what would change with --dry-run, or replace "
            "them with --force (the replaced partition directories are copied to a backup first)"
        )
    backup = backup_dir or default_backup_dir(where)
    _back_up(held, extra_files, backup)
    return backup


def _refuse_live(source: Path | None, target: Path, dry_run: bool) -> str | None:
    """A server running on the directory written into (or read from) refuses a real run; a dry
    run says so instead."""
    live = []
    for d in (source, target):
        if d is None:
            continue
        if running_broker(d):
            live.append(f"a Kafka broker is running on {d} (it holds {d / '.lock'})")
        elif running_groupshift(d):
            live.append(f"a groupshift server is running on {d} (it holds its coordinator logs' locks)")
    if not live:
        return None
    if dry_run:
        return "; ".join(live) + ": a real run is refused until it stops"
    raise TransferError("; ".join(live) + ": stop it first. Nothing was written")


def _source_logs(path: Path) -> dict[int, Path]:
    logs = offsets_logs(path)
    if not logs:
        raise TransferError(f"{path} holds no __consumer_offsets-N log (a data dir or a log dir)")
    return {n: Path(p) for n, p in logs}


def export_data_dir(
    data_dir: Path,
    log_dir: Path,
    partitions: int | None,
    topic_id: str | None,
    out: IO[str],
    *,
    force: bool = False,
    dry_run: bool = False,
    backup_dir: Path | None = None,
) -> int:
    """Write `data_dir`'s coordinator logs into `log_dir` (see the module doc). A target
    partition that holds data is refused unless `force` (then copied to a backup first); a
    running broker on `log_dir` (or groupshift on `data_dir`) refuses the run; `dry_run` writes
    nothing and says what would be written over what."""
    shards = _source_logs(data_dir)
    existing = list_partitions(log_dir)
    n = partitions or len(shards)
    beyond = sorted(p for p in existing if p >= n)
    if beyond:
        raise TransferError(
            f"{log_dir} holds __consumer_offsets partition(s) {beyond[:5]}, beyond the {n} exported: "
            f"Kafka never changes the partition count of __consumer_offsets; pass --partitions with "
            f"the broker's offsets.topic.num.partitions"
        )
    live = _refuse_live(data_dir, log_dir, dry_run)
    notes: list[str] = []
    plan: dict[int, tuple[list[bytes], list[Entry]]] = {}
    copied = set(shards) == set(range(n))
    if copied:
        for p, src in shards.items():
            plan[p] = (list(read_batches(src)), [])
    else:
        by_partition: dict[int, list[Entry]] = {p: [] for p in range(n)}
        for src in shards.values():
            for key, value, ts in committed_entries(src, notes):
                group = group_of_key(key)
                if group is None:
                    notes.append(f"{src}: a record without a group id left out")
                    continue
                by_partition[partition_for(group, n)].append((key, value, ts))
        plan = {p: ([], entries) for p, entries in by_partition.items()}
    held = [h for p in sorted(plan) if (h := holdings(partition_dir(log_dir, p))) is not None]
    checkpoints = [log_dir / f for f in CHECKPOINT_FILES]
    if dry_run:
        for p, (batches, entries) in sorted(plan.items()):
            dest = partition_dir(log_dir, p)
            h = holdings(dest)
            now = f"holds {_described([h])}" if h is not None else "holds no data"
            wrote = f"{len(batches)} batch(es) unchanged" if copied else f"{len(entries)} record(s)"
            out.write(f"would write {dest}: {wrote}; it {now}\n")
    backup = _guard_target(
        "the export",
        log_dir,
        held,
        force=force,
        dry_run=dry_run,
        backup_dir=backup_dir,
        extra_files=checkpoints,
    )
    missing = 0
    if not dry_run:
        for p, (batches, entries) in sorted(plan.items()):
            dest = partition_dir(log_dir, p)
            if copied:
                write_partition_batches(dest, batches, topic_id=topic_id)
            else:
                write_partition(dest, entries, topic_id=topic_id)
            missing += not (dest / "partition.metadata").is_file()
    written = (
        f"{sum(len(b) for b, _ in plan.values())} batch(es) copied unchanged"
        if copied
        else f"{sum(len(e) for _, e in plan.values())} record(s) re-partitioned from {len(shards)} log(s)"
    )
    out.write(_summary("export", len(plan), log_dir, written, held, backup, dry_run, live) + "\n")
    if missing:
        out.write(
            f"warning: {missing} partition directory(ies) have no partition.metadata: a KRaft broker "
            "(3.7+) deletes them as stray logs; export into the stopped broker's own log dir or pass "
            "--topic-id\n"
        )
    for note in notes:
        out.write(f"note: {note}\n")
    return 0


def _summary(
    verb: str,
    count: int,
    where: Path,
    written: str,
    held: Sequence[Holdings],
    backup: Path | None,
    dry_run: bool,
    live: str | None,
) -> str:
    if dry_run:
        line = f"dry run, nothing written: {verb} would write {count} partition(s) into {where}, {written}"
        if held:
            line += (
                f"; {len(held)} of them hold {_described(held)}, so a run without --force is refused "
                "(--force backs them up, then replaces them)"
            )
        else:
            line += "; none holds data"
        return line + (f"; {live}" if live else "")
    line = f"{verb}: {count} partition(s) into {where}, {written}"
    if backup is not None:
        line += f"; replaced {len(held)} partition(s) that held {_described(held)}, backup in {backup}"
    return line


def import_log_dir(
    log_dir: Path,
    data_dir: Path,
    out: IO[str],
    *,
    force: bool = False,
    dry_run: bool = False,
    backup_dir: Path | None = None,
) -> int:
    """Copy a Kafka log dir's `__consumer_offsets-N` logs into `data_dir` (see the module doc),
    with export's care: data already in `data_dir` is refused unless `force` (backed up first),
    a running broker on `log_dir` or groupshift on `data_dir` refuses the run, `dry_run` writes
    nothing."""
    parts = list_partitions(log_dir)
    if not parts:
        raise TransferError(f"{log_dir} holds no __consumer_offsets-N partition directory")
    coordinator = data_dir / COORDINATOR_DIR
    existing = [e for e in coordinator.glob("__consumer_offsets-*")] if coordinator.is_dir() else []
    if existing and len(existing) != len(parts):
        raise TransferError(f"{data_dir} holds {len(existing)} coordinator logs, the log dir {len(parts)}")
    live = _refuse_live(log_dir, data_dir, dry_run)
    plan = {p: list(read_batches(src)) for p, src in parts.items()}
    held = [h for p in plan if (h := holdings(coordinator / f"__consumer_offsets-{p}")) is not None]
    if dry_run:
        for p, batches in plan.items():
            dest = coordinator / f"__consumer_offsets-{p}"
            h = holdings(dest)
            now = f"holds {_described([h])}" if h is not None else "holds no data"
            out.write(f"would write {dest}: {len(batches)} batch(es) unchanged; it {now}\n")
    backup = _guard_target(
        "the import", data_dir, held, force=force, dry_run=dry_run, backup_dir=backup_dir, extra_files=()
    )
    if not dry_run:
        for p, batches in plan.items():
            dest = coordinator / f"__consumer_offsets-{p}"
            write_partition_batches(dest, batches)
            (dest / "partition.metadata").unlink(missing_ok=True)
        meta = data_dir / META_FILE
        if not meta.exists():
            cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            meta.write_text(f"version=1\ncluster.id={cid}\nnode.id=0\n")
    written = f"{sum(len(b) for b in plan.values())} batch(es) copied unchanged"
    line = _summary("import", len(plan), coordinator, written, held, backup, dry_run, live)
    out.write(line + f"; serve it with offsets.topic.num.partitions={len(parts)}\n")
    return 0


def _report_metadata(dest: Path, out: IO[str]) -> None:
    if not (dest / "partition.metadata").is_file():
        out.write(
            f"warning: {dest} has no partition.metadata: a KRaft broker (3.7+) deletes it as a stray "
            f"log; export into the stopped broker's own log dir or pass --topic-id\n"
        )


# --- rewrite for a downgrade ----------------------------------------------------------------------


@dataclass
class RewriteSummary:
    kept: int = 0
    reencoded: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    converted: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def drop(self, what: str) -> None:
        self.dropped[what] = self.dropped.get(what, 0) + 1


def _value_version(value: bytes | None) -> int | None:
    return None if value is None or len(value) < 2 else struct.unpack_from(">h", value)[0]


def _offset_topic_id(value: bytes) -> uuid.UUID | None:
    """The `topicId` tagged field (tag 0) of an OffsetCommitValue v4, which Kafka 4.1+ writes."""
    try:
        pos = 2 + 8 + 4
        n, pos = read_uvarint(value, pos)
        pos += max(n - 1, 0) + 8
        count, pos = read_uvarint(value, pos)
        for _ in range(count):
            tag, pos = read_uvarint(value, pos)
            size, pos = read_uvarint(value, pos)
            if tag == 0 and size == 16:
                return uuid.UUID(bytes=value[pos : pos + 16])
            pos += size
    except (IndexError, ValueError):  # truncated, or an over-long varint: not Kafka's bytes
        return None
    return None


def _topic_image(decoded: Sequence[tuple[Entry, CoordinatorRecord | None]]) -> MetadataImage:
    """Topic ids and names the log itself tells: subscription metadata records (Kafka <= 4.0)
    and offset commits v4 (topic name in the key, id in the tagged field)."""
    topics: dict[uuid.UUID, TopicImage] = {}
    parts: dict[str, int] = {}
    for (_key, value, _), rec in decoded:
        if rec is None or value is None:
            continue
        if isinstance(rec.value, ConsumerGroupPartitionMetadataValue):
            for t in rec.value.topics:
                topics[t.topic_id] = TopicImage(t.topic_id, t.topic_name, t.num_partitions)
        elif isinstance(rec.value, OffsetCommitValue) and _value_version(value) == 4:
            tid = _offset_topic_id(value)
            name = getattr(rec.key, "topic", None)
            if tid is not None and name is not None and tid not in topics:
                parts[name] = max(parts.get(name, 0), int(getattr(rec.key, "partition", 0)) + 1)
                topics[tid] = TopicImage(tid, name, parts[name])
    return MetadataImage(topics.values())


def keeps_consumer_groups(target: str) -> bool:
    """Whether `target` reads every consumer-group record whatever the order (4.x): otherwise
    the rewrite converts the groups (3.x; 3.9 with KIP-848 on skips regex records and fails on
    a record or tombstone of a group it does not hold yet, which compaction can leave first)."""
    return all(
        r.outcome == "read" and not r.needs_group
        for t in CONSUMER_GROUP_TYPES
        for r in (outcome(target, t, 0), outcome(target, t, None))
    )


def rewrite_partition(entries: Sequence[Entry], target: str, summary: RewriteSummary) -> list[Entry]:
    decoded: list[tuple[Entry, CoordinatorRecord | None]] = []
    for e in entries:
        try:
            decoded.append((e, decode_record(e[0], e[1])))
        except CoordinatorRecordError:
            decoded.append((e, None))
    shard = Shard(image=_topic_image(decoded))
    convert = not keeps_consumer_groups(target)
    out: list[Entry] = []
    last_ts = 0
    for (key, value, ts), rec in decoded:
        last_ts = max(last_ts, ts)
        rtype = struct.unpack_from(">h", key)[0]
        name = RECORD_TYPE_NAMES.get(rtype, f"type {rtype}")
        if rec is not None:
            try:
                shard.replay(rec)
            except Exception as e:  # a record the engine cannot apply: reported, the rest goes on
                summary.notes.append(f"replay of a {name} record failed: {e}")
        rule = outcome(target, rtype, _value_version(value))
        if convert and rtype in CONSUMER_GROUP_TYPES:
            summary.drop(name)
        elif rule.outcome == "read":
            out.append((key, value, ts))
            summary.kept += 1
        elif rtype in (0, 1) and isinstance(rec, CoordinatorRecord) and rec.value is not None:
            reencoded = encode_value(rec.value)  # v3, or v1 with an expire timestamp
            assert reencoded is not None
            if outcome(target, rtype, _value_version(reencoded)).outcome != "read":
                summary.drop(f"{name} v{_value_version(value)} (unreadable)")
                continue
            out.append((key, reencoded, ts))
            summary.reencoded += 1
        else:
            summary.drop(f"{name}" if rtype in CONSUMER_GROUP_TYPES or rtype > 2 else f"{name} (unreadable)")
    if not convert:
        return out
    for _gid, group in sorted(shard.state.groups.items()):
        if isinstance(group, ConsumerGroup):
            out.append((*_classic_record(shard, group, last_ts, summary), last_ts))
    return out


def _classic_record(
    shard: Shard, group: ConsumerGroup, ts: int, summary: RewriteSummary
) -> tuple[bytes, bytes]:
    gid = group.group_id
    members = list(group.members.values())
    shard.state.now_ms = ts
    if members and all(m.uses_classic_protocol for m in members):
        try:
            classic = build_classic_group(shard.state, group, "", None)
            key, value = encode_record(group_metadata_record(classic, classic.group_assignment()))
            assert value is not None
            summary.converted.append(
                f"{gid}: consumer group (epoch {group.group_epoch}, {len(members)} classic-protocol "
                f"member(s)) -> Stable classic group, generation {classic.generation_id}"
            )
            return key, value
        except (SchemaError, ValueError, AssertionError) as e:
            summary.notes.append(f"{gid}: members kept out ({e})")
    record = CoordinatorRecord(
        GroupMetadataKey(gid), GroupMetadataValue("consumer", group.group_epoch, None, None, ts, ())
    )
    key, value = encode_record(record)
    assert value is not None
    native = sum(1 for m in members if not m.uses_classic_protocol)
    summary.converted.append(
        f"{gid}: consumer group (epoch {group.group_epoch}, {len(members)} member(s), {native} "
        f"consumer-protocol) -> Empty classic group, generation {group.group_epoch}: members rejoin "
        f"with classic clients"
    )
    return key, value


def rewrite_for_downgrade(
    source: Path,
    dest: Path,
    target: str,
    topic_id: str | None,
    out: IO[str],
    *,
    force: bool = False,
    dry_run: bool = False,
    backup_dir: Path | None = None,
) -> int:
    """Rewrite `source`'s coordinator logs into `dest` for the `target` Kafka, with export's
    care: `--out` is usually a stopped broker's own log dir, so a partition there that holds
    data is refused unless `force` (backed up first), a broker or groupshift running on either
    directory refuses the run, and `dry_run` writes nothing."""
    logs = offsets_logs(source)
    if not logs:
        raise TransferError(f"{source} holds no __consumer_offsets-N log (a data dir or a log dir)")
    if source.resolve() == dest.resolve():
        raise TransferError(
            f"--out {dest} is the directory read: write the rewrite elsewhere, then move it into place"
        )
    live = _refuse_live(source, dest, dry_run)
    summary = RewriteSummary()
    total_offsets = 0
    plan: dict[int, list[Entry]] = {}
    for p, src in logs:
        entries = committed_entries(src, summary.notes)
        rewritten = rewrite_partition(entries, target, summary)
        total_offsets += sum(1 for k, v, _ in rewritten if v is not None and k[:2] in (b"\0\0", b"\0\1"))
        plan[p] = rewritten
    held = [h for p in sorted(plan) if (h := holdings(partition_dir(dest, p))) is not None]
    if dry_run:
        for p, rewritten in sorted(plan.items()):
            d = partition_dir(dest, p)
            h = holdings(d)
            now = f"holds {_described([h])}" if h is not None else "holds no data"
            out.write(f"would write {d}: {len(rewritten)} record(s); it {now}\n")
    backup = _guard_target(
        "the rewrite",
        dest,
        held,
        force=force,
        dry_run=dry_run,
        backup_dir=backup_dir,
        extra_files=[dest / f for f in CHECKPOINT_FILES],
    )
    if not dry_run:
        for p, rewritten in sorted(plan.items()):
            d = partition_dir(dest, p)
            write_partition(d, rewritten, topic_id=topic_id)
            _report_metadata(d, out)
    written = (
        f"{summary.kept} record(s) kept unchanged, {summary.reencoded} offset commit(s) re-encoded, "
        f"{total_offsets} offset record(s)"
    )
    out.write(_summary(f"rewrite for {target}", len(plan), dest, written, held, backup, dry_run, live) + "\n")
    for line in summary.converted:
        out.write(f"converted: {line}\n")
    for what, n in sorted(summary.dropped.items()):
        out.write(f"dropped: {n} {what} record(s)\n")
    for note in summary.notes:
        out.write(f"note: {note}\n")
    return 0


# --- CLI ----------------------------------------------------------------------------------------------


def add_commands(records_sub: Any) -> None:
    """The export, import and rewrite sub-commands of `groupshift records`."""
    e = records_sub.add_parser(
        "export",
        help="write a groupshift data dir's coordinator logs as Kafka __consumer_offsets-N directories",
    )
    e.add_argument("--data-dir", required=True, type=Path, help="groupshift data directory")
    e.add_argument(
        "--to-log-dir", required=True, type=Path, help="a Kafka log dir (log.dirs), broker stopped"
    )
    e.add_argument(
        "--partitions", type=_partition_count, help="__consumer_offsets partition count (default: as is)"
    )
    e.add_argument("--topic-id", help="write partition.metadata with this __consumer_offsets topic id")
    _add_safety(e, "a partition of the log dir that holds data (the broker's own groups and offsets)")
    e.set_defaults(
        run=_guard(
            lambda a: export_data_dir(
                a.data_dir, a.to_log_dir, a.partitions, a.topic_id, sys.stdout,
                force=a.force, dry_run=a.dry_run, backup_dir=a.backup_dir,
            )
        )
    )  # fmt: skip

    i = records_sub.add_parser(
        "import", help="read a Kafka log dir's __consumer_offsets-N directories into a groupshift data dir"
    )
    i.add_argument(
        "--from-log-dir", required=True, type=Path, help="a Kafka log dir (log.dirs), broker stopped"
    )
    i.add_argument("--data-dir", required=True, type=Path, help="groupshift data directory (created)")
    _add_safety(i, "a coordinator log of the data dir that holds data")
    i.set_defaults(
        run=_guard(
            lambda a: import_log_dir(
                a.from_log_dir,
                a.data_dir,
                sys.stdout,
                force=a.force,
                dry_run=a.dry_run,
                backup_dir=a.backup_dir,
            )
        )
    )

    r = records_sub.add_parser(
        "rewrite",
        help="rewrite a log so that an older Kafka loads it (consumer groups -> classic groups)",
    )
    r.add_argument("--for-downgrade", required=True, choices=KAFKA_TARGETS, metavar="TARGET",
                   help=f"the Kafka coordinator to load it: {', '.join(KAFKA_TARGETS)}")  # fmt: skip
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--data-dir", type=Path, help="groupshift data directory")
    src.add_argument("--log-dir", type=Path, help="Kafka log dir or a directory of __consumer_offsets-N")
    r.add_argument("--out", required=True, type=Path, help="output log dir (a stopped target broker's)")
    r.add_argument("--topic-id", help="write partition.metadata with this __consumer_offsets topic id")
    _add_safety(r, "a partition of the output log dir that holds data (the target broker's own groups)")
    r.set_defaults(
        run=_guard(
            lambda a: rewrite_for_downgrade(
                a.data_dir or a.log_dir, a.out, a.for_downgrade, a.topic_id, sys.stdout,
                force=a.force, dry_run=a.dry_run, backup_dir=a.backup_dir,
            )
        )
    )  # fmt: skip


def _partition_count(text: str) -> int:
    """A partition count of 1 or more (argparse type), refused before any log is read."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _add_safety(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--dry-run", action="store_true", help="write nothing; show what would be written and what is there"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help=f"replace {what}, after copying it to the backup directory (refused without)",
    )
    p.add_argument(
        "--backup-dir",
        type=Path,
        help="where --force copies what it replaces (default: beside the target, "
        "<target>.groupshift-backup-<UTC time>)",
    )


def _guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (TransferError, LogReadError, OSError) as e:
            sys.stderr.write(f"groupshift records: error: {e}\n")
            return 2

    return run
