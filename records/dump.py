"""`groupshift records dump PATH [--json]`: print the coordinator records of a log, decoded.

The same job as Kafka's `kafka-dump-log --offsets-decoder` (its `GroupCoordinatorRecordSerde`
based parser), for three kinds of input, told apart by what PATH is:

* **a log directory** (a directory): every `<20-digit base offset>.log` segment in it, in offset
  order. That is groupshift's coordinator log (`<data dir>/coordinator/__consumer_offsets-N`)
  and equally a directory copied from a Kafka broker (`<log.dirs>/__consumer_offsets-N`): the
  segment format is the same (magic-2 batches); Kafka's other files (`.index`, `.timeindex`,
  `.snapshot`, `leader-epoch-checkpoint`, `partition.metadata`, ...) are ignored;
* **one segment file** (a file whose name ends in `.log`);
* **a text file of raw records** (any other file), the form an operator can produce from a live
  cluster without access to the broker's disk. One record per line::

      <key as hex> <value as hex, or "-" for a tombstone (null value)>

  Blank lines and lines starting with `#` are ignored; hex may be upper or lower case, with an
  optional `0x`. Records are numbered from 0 in file order, and that number stands for the
  offset. For example, with kafka-python (`__consumer_offsets` is internal: allow it)::

      for m in KafkaConsumer("__consumer_offsets", exclude_internal_topics=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000):
          print(m.key.hex(), "-" if m.value is None else m.value.hex())

The input is only read, never changed: unlike opening it as a `SegmentLog`, a torn tail is not
truncated and no lock is taken, so the directory of a running server can be dumped.

Output, one line per record (`--json`: one JSON object per line instead)::

    offset: 17 time: 1700000000000 type: OffsetCommit key: {"group":"g","topic":"t",...} value: v3 {...}
    offset: 18 time: 1700000000000 type: ConsumerGroupMetadata key: {"groupId":"cg"} value: <tombstone>
    offset: 19 time: 1700000000000 type: unknown(99) key: 0x0063... value: 0x0000...
    offset: 20 time: 1700000000000 error: malformed record type 3: value: ... key: 0x0003... value: 0x...

Key and value fields carry Kafka's JSON names (camelCase), bytes are base64 and topic ids
Kafka's URL-safe base64 `Uuid` strings, as in Kafka's JSON converters. Classic groups'
embedded consumer-protocol bytes (subscription, assignment) stay base64 (Kafka decodes them).
JSON objects have `offset`, `timestamp` (null for raw pairs), `type` (the record type name,
"unknown", "control" or "error"), `record_type`, `key`, `value_version`, `value` (null for a
tombstone), `tombstone`; unknown and malformed records carry `key_hex`/`value_hex`, and
`error` the reason.

What is not a decodable record is reported in line and the dump **continues** (as Kafka's
tool does: "Error at offset N, skipping"):

* a record type we do not know (a newer Kafka's, share groups') is printed as unknown: not an
  error;
* a record whose bytes do not decode (`RecordDecodeError`), or without a key: an `error:` line
  naming its offset;
* a compressed batch (never decompressed here): one `error:` line naming its offset range;
* transaction markers (control batches): one `type: control(COMMIT|ABORT)` line per record;
* a batch whose CRC does not match: an `error:` line, the batch is skipped; a header that cannot
  be framed (or an incomplete batch at the end: a torn tail): an `error:` line naming the file
  and byte position, and the rest of that segment is skipped;
* in a raw-pairs file, a line that is not two hex fields: an `error:` line naming the line.

The exit status (`dump`'s return value) is 0 when every record decoded (unknown types
included), 1 when any error line was printed, 2 when PATH cannot be read at all.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import mmap
import os
import struct
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import IO, Any

from records.batch import (
    ATTR_CONTROL,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    iter_records,
    read_batch_header,
    verify_crc,
)
from records.codec import RecordDecodeError, UnknownRecordTypeError, decode_record
from records.errors import BatchError
from records.segment import SEGMENT_SUFFIX, parse_segment_name

__all__ = [
    "DumpError",
    "dump",
    "group_of",
    "iter_entries",
    "iter_raw_pairs",
    "offsets_logs",
    "to_json_fields",
]

Entry = dict[str, Any]

_COMPRESSION = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}
_MAGIC_POS = 16
_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i32 = struct.Struct(">i").unpack_from
_unpack_i64 = struct.Struct(">q").unpack_from


class DumpError(Exception):
    """PATH cannot be dumped at all (missing, unreadable, a directory without segments...)."""


# --- decoded objects as Kafka's JSON ------------------------------------------------------------


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


# Tagged fields Kafka's JSON converters leave out when absent (`TopicPartitions` of type 8,
# Kafka 4.3+; type 7's partitions have no such field at all), and groupshift's own tagged fields
# of types 5 and 7 (docs/client-side-assignors.md), absent as None or empty.
_OMITTED_WHEN_ABSENT = frozenset({"assignment_epochs", "client_assignors", "client_metadata"})


def to_json_fields(obj: Any) -> Any:
    """A decoded key or value (or part of one) as JSON-ready data with Kafka's field names."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            _camel(f.name): to_json_fields(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if f.name not in _OMITTED_WHEN_ABSENT or getattr(obj, f.name) not in (None, ())
        }
    if isinstance(obj, (tuple, list)):
        return [to_json_fields(x) for x in obj]
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode("ascii")
    if isinstance(obj, uuid.UUID):
        return base64.urlsafe_b64encode(obj.bytes).decode("ascii").rstrip("=")
    return obj


def _fields_of_version(record_type: int, version: int, value: dict[str, Any]) -> dict[str, Any]:
    """Drop the fields the value's version does not have (decoding filled in their defaults), as
    Kafka's JSON converters write only a version's fields."""
    if record_type in (0, 1):  # OffsetCommitValue: leaderEpoch v3+, expireTimestamp v1 only
        if version < 3:
            value.pop("leaderEpoch", None)
        if version != 1:
            value.pop("expireTimestamp", None)
    elif record_type == 2:  # GroupMetadataValue: see records.classic_group_codec
        if version < 2:
            value.pop("currentStateTimestamp", None)
        for member in value.get("members", ()):
            if version < 1:
                member.pop("rebalanceTimeout", None)
            if version < 3:
                member.pop("groupInstanceId", None)
    return value


def _type_name(key: Any) -> str:
    name = type(key).__name__
    return name[:-3] if name.endswith("Key") else name


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def decode_entry(offset: int, timestamp: int | None, key: bytes | None, value: bytes | None) -> Entry:
    """One record as a dump entry (see the module doc for its fields)."""
    entry: Entry = {"offset": offset, "timestamp": timestamp}
    if key is None:
        entry.update(type="error", error="record has no key", value_hex=_hex(value))
        return entry
    try:
        record = decode_record(key, value)
    except UnknownRecordTypeError as e:
        entry.update(type="unknown", record_type=e.record_type, key_hex=key.hex(), value_hex=_hex(value))
        return entry
    except RecordDecodeError as e:
        entry.update(
            type="error", record_type=e.record_type, error=str(e), key_hex=key.hex(), value_hex=_hex(value)
        )
        return entry
    record_type = _unpack_i16(key, 0)[0]
    entry.update(type=_type_name(record.key), record_type=record_type, key=to_json_fields(record.key))
    if value is None or record.value is None:
        entry.update(value_version=None, value=None, tombstone=True)
    else:
        version = _unpack_i16(value, 0)[0]
        fields = _fields_of_version(record_type, version, to_json_fields(record.value))
        entry.update(value_version=version, value=fields, tombstone=False)
    return entry


# --- inputs -------------------------------------------------------------------------------------


def _segment_entries(path: str) -> Iterator[Entry]:
    """Entries of one segment file, read-only (see the module doc for how damage is reported)."""
    name = os.path.basename(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield from _batches_entries(data, size, name)


def _batches_entries(data: mmap.mmap, size: int, name: str) -> Iterator[Entry]:
    pos = 0
    while pos < size:
        where = {"file": name, "position": pos}
        if size - pos < LOG_OVERHEAD + 5:
            yield {
                **where,
                "type": "error",
                "error": f"incomplete batch header ({size - pos} bytes at "
                "the end of the file: a torn tail); rest of the segment skipped",
            }
            return
        (length,) = _unpack_i32(data, pos + 8)
        magic = data[pos + _MAGIC_POS]
        end = pos + LOG_OVERHEAD + length
        if magic in (0, 1) and length >= 14 and end <= size:
            (offset,) = _unpack_i64(data, pos)
            yield {
                **where,
                "offset": offset,
                "type": "error",
                "error": f"message format v{magic} (pre-0.11 Kafka) is not supported; skipped",
            }
            pos = end
            continue
        if size - pos < RECORD_BATCH_OVERHEAD:
            yield {
                **where,
                "type": "error",
                "error": f"incomplete batch header ({size - pos} bytes at "
                "the end of the file: a torn tail); rest of the segment skipped",
            }
            return
        try:
            header = read_batch_header(data[pos : pos + RECORD_BATCH_OVERHEAD])
        except BatchError as e:
            yield {**where, "type": "error", "error": f"{e.reason}; rest of the segment skipped"}
            return
        end = pos + header.size
        if end > size:
            yield {
                **where,
                "offset": header.base_offset,
                "type": "error",
                "error": f"incomplete batch of {header.size} bytes ({size - pos} present: a torn "
                "tail); rest of the segment skipped",
            }
            return
        raw = data[pos:end]
        try:
            verify_crc(raw)
        except BatchError as e:
            yield {
                **where,
                "offset": header.base_offset,
                "last_offset": header.last_offset,
                "type": "error",
                "error": f"{e.reason}; batch skipped",
            }
            pos = end
            continue
        if header.compression:
            codec = _COMPRESSION.get(header.compression, f"codec {header.compression}")
            yield {
                **where,
                "offset": header.base_offset,
                "last_offset": header.last_offset,
                "type": "error",
                "error": f"compressed batch ({codec}, {header.record_count} records) "
                "is not supported: its records were skipped",
            }
            pos = end
            continue
        try:
            for rec in iter_records(raw):
                if header.attributes & ATTR_CONTROL:
                    yield _control_entry(rec.offset, rec.timestamp, rec.key)
                else:
                    yield decode_entry(rec.offset, rec.timestamp, rec.key, rec.value)
        except BatchError as e:
            yield {
                **where,
                "offset": header.base_offset,
                "type": "error",
                "error": f"{e.reason}; rest of the batch skipped",
            }
        pos = end


def _control_entry(offset: int, timestamp: int, key: bytes | None) -> Entry:
    kind = "unknown"
    if key is not None and len(key) >= 4:
        kind = _CONTROL_TYPES.get(_unpack_i16(key, 2)[0], f"type {_unpack_i16(key, 2)[0]}")
    return {"offset": offset, "timestamp": timestamp, "type": "control", "control": kind}


def iter_raw_pairs(lines: IO[str]) -> Iterator[Entry]:
    """Entries of a raw-pairs text file (format in the module doc)."""
    index = 0
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.split()
        try:
            if len(fields) != 2:
                raise ValueError(f"expected '<key hex> <value hex or ->', got {len(fields)} fields")
            key = _parse_hex(fields[0])
            value = None if fields[1] == "-" else _parse_hex(fields[1])
        except ValueError as e:
            yield {"offset": index, "line": lineno, "type": "error", "error": f"line {lineno}: {e}"}
        else:
            yield {**decode_entry(index, None, key, value), "line": lineno}
        index += 1


def _parse_hex(text: str) -> bytes:
    if text[:2] in ("0x", "0X"):
        text = text[2:]
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"not hex: {text[:40]!r}") from None


def iter_entries(path: str | os.PathLike[str]) -> Iterator[Entry]:
    """Every record (and every damaged spot) of PATH, in order; raises DumpError up front."""
    p = os.fspath(path)
    if os.path.isdir(p):
        try:
            names = os.listdir(p)
        except OSError as e:
            raise DumpError(f"cannot list {p}: {e.strerror}") from None
        segments = sorted((base, n) for n in names if (base := parse_segment_name(n)) is not None)
        if not segments:
            raise DumpError(f"{p} holds no log segments (<20-digit offset>{SEGMENT_SUFFIX} files)")
        return _chain(os.path.join(p, n) for _, n in segments)
    if not os.path.exists(p):
        raise DumpError(f"{p} does not exist")
    if p.endswith(SEGMENT_SUFFIX):
        return _chain([p])
    try:
        handle = open(p, encoding="utf-8")  # noqa: SIM115 - closed by the generator
    except OSError as e:
        raise DumpError(f"cannot read {p}: {e.strerror}") from None
    return _raw_file(handle)


def _chain(paths: Iterator[str] | list[str]) -> Iterator[Entry]:
    for path in paths:
        yield from _segment_entries(path)


def _raw_file(handle: IO[str]) -> Iterator[Entry]:
    with handle:
        try:
            yield from iter_raw_pairs(handle)
        except UnicodeDecodeError:
            yield {"type": "error", "error": "not a text file of hex pairs (and not a .log segment)"}


# --- output -------------------------------------------------------------------------------------


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def format_text(e: Entry) -> str:
    """One entry as a line of text (the default output)."""
    parts: list[str] = []
    if "offset" in e:
        span = f"{e['offset']}..{e['last_offset']}" if "last_offset" in e else str(e["offset"])
        parts.append(f"offset: {span}")
    if e.get("timestamp") is not None:
        parts.append(f"time: {e['timestamp']}")
    kind = e["type"]
    if kind == "error":
        where = f" (file {e['file']}, byte position {e['position']})" if "file" in e else ""
        parts.append(f"error: {e['error']}{where}")
        if "key_hex" in e:
            parts.append(f"key: 0x{e['key_hex']}")
        if e.get("value_hex") is not None:
            parts.append(f"value: 0x{e['value_hex']}")
    elif kind == "unknown":
        parts.append(f"type: unknown({e['record_type']}) key: 0x{e['key_hex']}")
        parts.append("value: <tombstone>" if e["value_hex"] is None else f"value: 0x{e['value_hex']}")
    elif kind == "control":
        parts.append(f"type: control({e['control']})")
    else:
        parts.append(f"type: {kind} key: {_compact(e['key'])}")
        if e["tombstone"]:
            parts.append("value: <tombstone>")
        else:
            parts.append(f"value: v{e['value_version']} {_compact(e['value'])}")
    return " ".join(parts)


OFFSETS_LOG_PREFIX = "__consumer_offsets-"
COORDINATOR_DIR = "coordinator"

ShardFor = Callable[[str, int], int]


def offsets_logs(path: str | os.PathLike[str]) -> list[tuple[int, str]] | None:
    """The `__consumer_offsets-N` log directories that PATH holds, as (N, path) in N order:
    those of `PATH/coordinator` (a groupshift data directory) or of PATH itself (groupshift's
    coordinator directory, or a Kafka broker's log directory); None when PATH holds none."""
    p = os.fspath(path)
    for base in (os.path.join(p, COORDINATOR_DIR), p):
        try:
            names = os.listdir(base)
        except OSError:
            continue
        logs = sorted(
            (int(n[len(OFFSETS_LOG_PREFIX) :]), os.path.join(base, n))
            for n in names
            if n.startswith(OFFSETS_LOG_PREFIX)
            and n[len(OFFSETS_LOG_PREFIX) :].isdigit()
            and os.path.isdir(os.path.join(base, n))
        )
        if logs:
            return logs
    return None


def group_of(entry: Entry) -> str | None:
    """The group a decoded record belongs to (`group` of offset keys, `groupId` of others)."""
    key = entry.get("key")
    if not isinstance(key, dict):
        return None
    group = key.get("group", key.get("groupId"))
    return group if isinstance(group, str) else None


def dump(
    path: str | os.PathLike[str],
    *,
    as_json: bool = False,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    group: str | None = None,
    shard_for: ShardFor | None = None,
) -> int:
    """Print every entry of PATH to `out`; return the exit status (module doc).

    PATH may also be a data directory or a coordinator directory (several
    `__consumer_offsets-N` logs): each log is dumped in turn, under a `log: NAME` line (JSON:
    a `log` field). With `group`, only that group's records (and any error line) are printed;
    `shard_for(group, number of logs)` (Kafka's `partitionFor`, given by the caller so this
    module stays in the records layer) then picks the one log that can hold them.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    logs = offsets_logs(path)
    if logs is None:
        return _dump_one(path, as_json, out, err, group, None)
    if group is not None and shard_for is not None:
        n = shard_for(group, logs[-1][0] + 1)
        chosen = [log for log in logs if log[0] == n]
        if not chosen:
            err.write(
                f"groupshift records dump: group {group!r} belongs to {OFFSETS_LOG_PREFIX}{n}, "
                f"which {os.fspath(path)} does not hold\n"
            )
            return 2
        logs = chosen
    status = 0
    for _n, log_path in logs:
        label = os.path.basename(log_path) if len(logs) > 1 else None
        status = max(status, _dump_one(log_path, as_json, out, err, group, label, quiet_empty=True))
    return status


def _dump_one(
    path: str | os.PathLike[str],
    as_json: bool,
    out: IO[str],
    err: IO[str],
    group: str | None,
    label: str | None,
    *,
    quiet_empty: bool = False,
) -> int:
    try:
        entries = iter_entries(path)
    except DumpError as e:
        if quiet_empty and os.path.isdir(path):
            return 0  # a shard that never had a record
        err.write(f"groupshift records dump: {e}\n")
        return 2
    status = 0
    write = out.write
    if label is not None and not as_json:
        write(f"log: {label}\n")
    while True:
        try:
            entry = next(entries, None)
        except OSError as e:
            err.write(f"groupshift records dump: cannot read {os.fspath(path)}: {e.strerror}\n")
            return 2
        if entry is None:
            return status
        if entry["type"] == "error":
            status = 1
        elif group is not None and group_of(entry) != group:
            continue
        if label is not None and as_json:
            entry = {"log": label, **entry}
        write((_compact(entry) if as_json else format_text(entry)) + "\n")
