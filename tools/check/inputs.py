"""The inputs of `groupshift check` other than a live endpoint: `__consumer_offsets` partition
directories, from groupshift's data dir (`<data dir>/coordinator/__consumer_offsets-N`) or from an
Apache Kafka broker's log dir (`<log.dirs>/__consumer_offsets-N`). Both hold magic-2 record batch
segments (`<20-digit base offset>.log`), read here without starting anything and without a lock
(like `groupshift records dump`), record by record as Kafka's loader replays them.

Topic names for consumer-group assignments (stored by topic id) come from the sibling partition
directories' `partition.metadata` files (Kafka's file, which groupshift writes too).
"""

from __future__ import annotations

import base64
import mmap
import os
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from records.batch import ATTR_CONTROL, RECORD_BATCH_OVERHEAD, iter_records, read_batch_header, verify_crc
from records.dump import offsets_logs
from records.errors import BatchError
from records.segment import parse_segment_name
from tools.check.facts import GroupFacts, RecordKind, scan_entries

_I32 = struct.Struct(">i")


class InputError(Exception):
    """The input cannot be read at all."""


@dataclass
class LogRead:
    facts: dict[str, GroupFacts]
    problems: list[str] = field(default_factory=list)
    topics: tuple[str, ...] = ()
    logs: list[str] = field(default_factory=list)
    cluster_id: str | None = None
    # records of types we cannot decode, per partition (a loader reads them all the same)
    unknown_kinds: dict[int | None, tuple[RecordKind, ...]] = field(default_factory=dict)


def _segment_pairs(path: str, problems: list[str]) -> Iterator[tuple[bytes, bytes | None]]:
    name = os.path.basename(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            pos = 0
            while pos < size:
                if size - pos < RECORD_BATCH_OVERHEAD:
                    problems.append(f"{name}: torn tail at byte {pos}")
                    return
                try:
                    header = read_batch_header(data[pos : pos + RECORD_BATCH_OVERHEAD])
                except BatchError as e:
                    problems.append(f"{name}: byte {pos}: {e.reason}")
                    return
                end = pos + header.size
                if end > size:
                    problems.append(f"{name}: torn tail at byte {pos}")
                    return
                raw = data[pos:end]
                pos = end
                try:
                    verify_crc(raw)
                except BatchError as e:
                    problems.append(f"{name}: offset {header.base_offset}: {e.reason}")
                    continue
                if header.attributes & ATTR_CONTROL:
                    continue
                if header.compression:
                    problems.append(
                        f"{name}: offsets {header.base_offset}..{header.last_offset}: compressed batch "
                        "not read"
                    )
                    continue
                for rec in iter_records(raw):
                    if rec.key is not None:
                        yield rec.key, rec.value


def _log_pairs(log_dir: str, problems: list[str]) -> Iterator[tuple[bytes, bytes | None]]:
    segments = sorted((base, n) for n in os.listdir(log_dir) if (base := parse_segment_name(n)) is not None)
    for _base, n in segments:
        yield from _segment_pairs(os.path.join(log_dir, n), problems)


def _kafka_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError):
        return None


def topic_names(parent: str) -> dict[uuid.UUID, str]:
    """{topic id: name} from `<parent>/<topic>-<N>/partition.metadata`."""
    out: dict[uuid.UUID, str] = {}
    try:
        names = os.listdir(parent)
    except OSError:
        return out
    for n in names:
        topic, sep, part = n.rpartition("-")
        if not sep or not part.isdigit() or topic.startswith("__"):
            continue
        try:
            with open(os.path.join(parent, n, "partition.metadata"), encoding="utf-8") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k.strip() == "topic_id" and (tid := _kafka_uuid(v.strip())) is not None:
                        out[tid] = topic
        except OSError:
            continue
    return out


def _cluster_id(parent: str) -> str | None:
    try:
        with open(os.path.join(parent, "meta.properties"), encoding="utf-8") as f:
            for line in f:
                k, _, v = line.partition("=")
                if k.strip() == "cluster.id":
                    return v.strip()
    except OSError:
        return None
    return None


def read_logs(paths: list[str], *, cluster: str | None = None) -> LogRead:
    """Facts of every group in the `__consumer_offsets-N` logs PATHS hold (each a data dir, a
    broker log dir, or one partition directory)."""
    logs: list[str] = []
    for p in paths:
        if not os.path.isdir(p):
            raise InputError(f"{p} is not a directory")
        found = offsets_logs(p)
        if found is not None:
            logs.extend(path for _n, path in found)
        elif any(parse_segment_name(n) is not None for n in os.listdir(p)):
            logs.append(p)
        else:
            raise InputError(
                f"{p} holds no __consumer_offsets-N directories and no log segments "
                "(<20-digit offset>.log files)"
            )
    problems: list[str] = []
    names: dict[uuid.UUID, str] = {}
    parents = {os.path.dirname(os.path.normpath(log)) for log in logs}
    for parent in sorted(parents):
        names.update(topic_names(parent))
        # a groupshift data dir keeps the topic partitions beside `coordinator/`
        if os.path.basename(parent) == "coordinator":
            names.update(topic_names(os.path.dirname(parent)))
    cluster_id = None
    for parent in sorted(parents):
        cluster_id = cluster_id or _cluster_id(parent) or _cluster_id(os.path.dirname(parent))
    facts: dict[str, GroupFacts] = {}
    unknown: dict[int | None, tuple[RecordKind, ...]] = {}
    label = cluster or cluster_id or ",".join(paths)
    for log in logs:
        name = os.path.basename(os.path.normpath(log))
        n = name.rsplit("-", 1)[-1]
        partition = int(n) if name.startswith("__consumer_offsets-") and n.isdigit() else None
        scan = scan_entries(_log_pairs(log, problems), cluster=label, topic_names=names, partition=partition)
        problems.extend(f"{name}: {p}" for p in scan.problems)
        facts.update(scan.facts)
        if scan.unknown_kinds:
            unknown[partition] = unknown.get(partition, ()) + scan.unknown_kinds
    return LogRead(facts, problems, tuple(sorted(set(names.values()))), logs, cluster_id, unknown)
