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

Kafka brokers need `partition.metadata` with their own topic id (`tools.kafka_logs`): write into
the log dir of the stopped target broker (its files are kept), or pass `--topic-id`.
"""

from __future__ import annotations

import argparse
import base64
import os
import struct
import sys
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
from tools.check.loader_rules import CONSUMER_GROUP_TYPES, KAFKA_TARGETS, RECORD_TYPE_NAMES, outcome
from tools.kafka_logs import (
    LogReadError,
    group_of_key,
    list_partitions,
    partition_dir,
    partition_for,
    read_batches,
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


def _source_logs(path: Path) -> dict[int, Path]:
    logs = offsets_logs(path)
    if not logs:
        raise TransferError(f"{path} holds no __consumer_offsets-N log (a data dir or a log dir)")
    return {n: Path(p) for n, p in logs}


def export_data_dir(
    data_dir: Path, log_dir: Path, partitions: int | None, topic_id: str | None, out: IO[str]
) -> int:
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
    if set(shards) == set(range(n)):
        for p, src in shards.items():
            batches = list(read_batches(src))
            dest = partition_dir(log_dir, p)
            write_partition_batches(dest, batches, topic_id=topic_id)
            _report_metadata(dest, out)
            out.write(f"{dest}: {len(batches)} batch(es) copied unchanged\n")
        return 0
    notes: list[str] = []
    by_partition: dict[int, list[Entry]] = {p: [] for p in range(n)}
    for src in shards.values():
        for key, value, ts in committed_entries(src, notes):
            group = group_of_key(key)
            if group is None:
                notes.append(f"{src}: a record without a group id left out")
                continue
            by_partition[partition_for(group, n)].append((key, value, ts))
    for p, entries in by_partition.items():
        dest = partition_dir(log_dir, p)
        write_partition(dest, entries, topic_id=topic_id)
        _report_metadata(dest, out)
        out.write(f"{dest}: {len(entries)} record(s) (re-partitioned from {len(shards)} logs)\n")
    for note in notes:
        out.write(f"note: {note}\n")
    return 0


def _report_metadata(dest: Path, out: IO[str]) -> None:
    if not (dest / "partition.metadata").is_file():
        out.write(
            f"warning: {dest} has no partition.metadata: a KRaft broker (3.7+) deletes it as a stray "
            f"log; export into the stopped broker's own log dir or pass --topic-id\n"
        )


def import_log_dir(log_dir: Path, data_dir: Path, out: IO[str]) -> int:
    parts = list_partitions(log_dir)
    if not parts:
        raise TransferError(f"{log_dir} holds no __consumer_offsets-N partition directory")
    coordinator = data_dir / COORDINATOR_DIR
    existing = [e for e in coordinator.glob("__consumer_offsets-*")] if coordinator.is_dir() else []
    if existing and len(existing) != len(parts):
        raise TransferError(f"{data_dir} holds {len(existing)} coordinator logs, the log dir {len(parts)}")
    for p, src in parts.items():
        batches = list(read_batches(src))
        dest = coordinator / f"__consumer_offsets-{p}"
        write_partition_batches(dest, batches)
        (dest / "partition.metadata").unlink(missing_ok=True)
        out.write(f"{dest}: {len(batches)} batch(es) copied unchanged\n")
    meta = data_dir / META_FILE
    if not meta.exists():
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        meta.write_text(f"version=1\ncluster.id={cid}\nnode.id=0\n")
    out.write(f"serve it with offsets.topic.num.partitions={len(parts)}\n")
    return 0


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


def rewrite_for_downgrade(source: Path, dest: Path, target: str, topic_id: str | None, out: IO[str]) -> int:
    logs = offsets_logs(source)
    if not logs:
        raise TransferError(f"{source} holds no __consumer_offsets-N log (a data dir or a log dir)")
    summary = RewriteSummary()
    total_offsets = 0
    for p, src in logs:
        entries = committed_entries(src, summary.notes)
        rewritten = rewrite_partition(entries, target, summary)
        total_offsets += sum(1 for k, v, _ in rewritten if v is not None and k[:2] in (b"\0\0", b"\0\1"))
        d = partition_dir(dest, p)
        write_partition(d, rewritten, topic_id=topic_id)
        _report_metadata(d, out)
    out.write(
        f"rewritten for {target}: {len(logs)} partition(s) into {dest}; {summary.kept} record(s) kept "
        f"unchanged, {summary.reencoded} offset commit(s) re-encoded, {total_offsets} offset record(s)\n"
    )
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
    e.add_argument("--partitions", type=int, help="__consumer_offsets partition count (default: as is)")
    e.add_argument("--topic-id", help="write partition.metadata with this __consumer_offsets topic id")
    e.set_defaults(
        run=_guard(lambda a: export_data_dir(a.data_dir, a.to_log_dir, a.partitions, a.topic_id, sys.stdout))
    )

    i = records_sub.add_parser(
        "import", help="read a Kafka log dir's __consumer_offsets-N directories into a groupshift data dir"
    )
    i.add_argument(
        "--from-log-dir", required=True, type=Path, help="a Kafka log dir (log.dirs), broker stopped"
    )
    i.add_argument("--data-dir", required=True, type=Path, help="groupshift data directory (created)")
    i.set_defaults(run=_guard(lambda a: import_log_dir(a.from_log_dir, a.data_dir, sys.stdout)))

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
    r.set_defaults(
        run=_guard(
            lambda a: rewrite_for_downgrade(
                a.data_dir or a.log_dir, a.out, a.for_downgrade, a.topic_id, sys.stdout
            )
        )
    )


def _guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (TransferError, LogReadError, OSError) as e:
            sys.stderr.write(f"groupshift records: error: {e}\n")
            return 2

    return run
