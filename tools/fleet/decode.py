"""Segment files of `__consumer_offsets` partitions, decoded to (key, value) records: the part of
the fleet job that runs on Spark's workers (and, unchanged, in the plain-Python reference).

A segment (`<base offset>.log`, groupshift's and Kafka's alike) is concatenated magic-2 record
batches (Kafka `DefaultRecordBatch`); records.batch frames and checks them. Every coordinator
key starts with its int16 record type and the group id as an int16-length string (Kafka
`CoordinatorRecordSerde`: OffsetCommitKey, GroupMetadataKey and the ConsumerGroup* keys all lead
with the group), so the group is read from the key without decoding the rest; values are decoded
later, once per live key, by tools.check.facts.

Each file is compacted on the worker as it is read, like Kafka's log cleaner does per partition:
only the last value of each key in the file is kept, with `n` counting the records it stands for
(so the job still knows how many records it read). The global compaction per (cluster,
partition, key) across files then runs on much fewer rows. Control batches (transaction
markers) carry no coordinator record and are skipped; what cannot be read (a CRC mismatch, a
torn tail, a compressed batch: groupshift never decompresses, and Kafka writes
`__consumer_offsets` uncompressed unless `offsets.topic.compression.codec` is set) becomes a
problem row instead of failing the job. Transactional offset commits are taken as committed (the
markers of aborted transactions are not applied).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from records.batch import (
    ATTR_CONTROL,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    iter_records,
    read_batch_header,
    verify_crc,
)
from records.errors import BatchError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Row:
    """One live key of one file: the newest record of that key in the file."""

    offset: int
    timestamp: int
    record_type: int
    group: str
    key: bytes
    value: bytes | None
    n: int  # records of this key in the file (1 + those it superseded)


@dataclass(frozen=True, slots=True)
class Problem:
    position: int
    offset: int | None
    error: str


def key_group(key: bytes) -> tuple[int, str]:
    """(record type, group id) of a coordinator key; raises ValueError if it has neither."""
    if len(key) < 4:
        raise ValueError(f"key of {len(key)} bytes has no group")
    record_type = _I16.unpack_from(key, 0)[0]
    n = _I16.unpack_from(key, 2)[0]
    if n < 0 or 4 + n > len(key):
        raise ValueError(f"record type {record_type}: group length {n} does not fit the key")
    return record_type, key[4 : 4 + n].decode("utf-8")


def iter_segment(data: bytes) -> Iterator[tuple[int, int, bytes | None, bytes | None] | Problem]:
    """(offset, timestamp, key, value) of every data record of a segment, in log order, and a
    Problem for each part that cannot be read (see the module doc)."""
    size = len(data)
    pos = 0
    while pos < size:
        if size - pos < RECORD_BATCH_OVERHEAD:
            yield Problem(pos, None, f"incomplete batch header ({size - pos} bytes): a torn tail")
            return
        try:
            header = read_batch_header(data, pos)
        except BatchError as e:
            yield Problem(pos, None, f"{e.reason}; rest of the segment skipped")
            return
        end = pos + header.size
        if header.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or end > size:
            yield Problem(pos, header.base_offset, f"incomplete batch of {header.size} bytes: a torn tail")
            return
        try:
            verify_crc(data, pos)
        except BatchError as e:
            yield Problem(pos, header.base_offset, f"{e.reason}; batch skipped")
            pos = end
            continue
        if header.compression:
            yield Problem(pos, header.base_offset, f"compressed batch (codec {header.compression}) skipped")
        elif not header.attributes & ATTR_CONTROL:
            try:
                for rec in iter_records(data, pos):
                    yield rec.offset, rec.timestamp, rec.key, rec.value
            except BatchError as e:
                yield Problem(pos, header.base_offset, f"{e.reason}; rest of the batch skipped")
        pos = end


def compact_segment(data: bytes) -> tuple[list[Row], list[Problem], int]:
    """The live keys of one segment (the newest record per key, tombstones kept: a tombstone
    must still delete the key's older values in earlier files), its problems, and how many
    records it held."""
    live: dict[bytes, Row] = {}
    problems: list[Problem] = []
    records = 0
    for item in iter_segment(data):
        if isinstance(item, Problem):
            problems.append(item)
            continue
        offset, timestamp, key, value = item
        records += 1
        if key is None:
            problems.append(Problem(-1, offset, "record without a key"))
            continue
        try:
            record_type, group = key_group(key)
        except (ValueError, UnicodeDecodeError) as e:
            problems.append(Problem(-1, offset, f"undecodable key: {e}"))
            continue
        old = live.pop(key, None)
        live[key] = Row(offset, timestamp, record_type, group, key, value, 1 + (old.n if old else 0))
    return list(live.values()), problems, records
