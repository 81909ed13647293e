"""Kafka record batches, magic v2 (KIP-98 format; Kafka `DefaultRecordBatch`/`DefaultRecord`).

Both the coordinator log and the embedded data plane store exactly the bytes Kafka stores, so a
batch written here can be fetched by any Kafka client and a batch produced by any client can be
stored unchanged. This module reads and writes that format; it never compresses or decompresses.

Batch layout (big-endian; 61-byte header, `RECORD_BATCH_OVERHEAD`)::

    offset  size  field
     0      8     baseOffset
     8      4     batchLength          bytes after this field (= total size - 12)
    12      4     partitionLeaderEpoch
    16      1     magic                (2)
    17      4     crc                  CRC-32C (Castagnoli) of bytes 21 .. end
    21      2     attributes           bits 0-2 compression, 3 timestamp type (1 = LogAppendTime),
                                       4 transactional, 5 control, 6 delete horizon
    23      4     lastOffsetDelta
    27      8     baseTimestamp        ("first timestamp")
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordsCount
    61      ...   records (compressed as one block when the codec bits are non-zero)

Record layout (uncompressed; varints are zigzag-encoded, as protobuf's sint32/sint64)::

    length varint (bytes after it) | attributes int8 (unused, 0) | timestampDelta varlong |
    offsetDelta varint | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) |
    value | headerCount varint | headers: keyLength varint, key (UTF-8), valueLength, value

The CRC starts at the attributes, so the four fields before it -- base offset, length,
partition leader epoch and magic -- can be rewritten without recomputing it. A broker uses that
to assign offsets (`set_base_offset`: every record stores only its delta to the base offset, so
rewriting the base moves the whole batch) and leader epochs (`set_partition_leader_epoch`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from crc32c import crc32c

from protocol.varint import encode_uvarlong, read_uvarint, read_uvarlong, zigzag64
from records.errors import BatchError, CorruptBatchError, InvalidBatchError, UnsupportedBatchError

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_LOG_APPEND_TIME",
    "ATTR_TRANSACTIONAL",
    "CRC_START",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "RECORD_BATCH_OVERHEAD",
    "BatchError",
    "BatchHeader",
    "CorruptBatchError",
    "InvalidBatchError",
    "RawRecord",
    "Record",
    "UnsupportedBatchError",
    "build_batch",
    "encode_batch",
    "iter_batch_headers",
    "iter_raw_records",
    "iter_records",
    "read_batch_header",
    "set_base_offset",
    "set_partition_leader_epoch",
    "validate_client_batch",
    "verify_crc",
]

MAGIC = 2
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch not counted by batchLength
RECORD_BATCH_OVERHEAD = 61
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_SEQUENCE = -1
MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # smallest legal batchLength (49)

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

CRC_START = 21  # first byte covered by the CRC (attributes)
_MAGIC_POS = 16

HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiibI")  # baseOffset .. crc (the part the CRC does not cover)
_CRC_COVERED = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
assert HEADER.size == RECORD_BATCH_OVERHEAD
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_INT32_MAX = (1 << 31) - 1


class BatchHeader(NamedTuple):
    """The 61 header bytes of a v2 batch, field by field (see the module doc for the layout)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record (Kafka `RecordBatch.lastSequence`): sequences wrap
        from 2**31 - 1 to 0; a batch without sequence numbers (-1) keeps -1."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (_INT32_MAX + 1)

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_LOG_APPEND_TIME)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)


class Record(NamedTuple):
    """One decoded record. `headers` are (UTF-8 key, value or None) pairs."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


RawRecord = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
"""(offset delta, timestamp delta, key, value, headers): a record as stored in its batch."""

Buffer = bytes | bytearray | memoryview


# --- header -----------------------------------------------------------------------------------


def read_batch_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the batch header at `pos`; check magic and the minimum length.

    It does not check that the whole batch is present (`header.size` tells how many bytes it
    needs) nor the CRC (`verify_crc`). Raises `CorruptBatchError`, never a struct error.
    """
    avail = len(buf) - pos
    if pos < 0 or avail < RECORD_BATCH_OVERHEAD:
        offset = _I64.unpack_from(buf, pos)[0] if pos >= 0 and avail >= 8 else None
        raise CorruptBatchError(
            f"truncated batch header: {max(avail, 0)} of {RECORD_BATCH_OVERHEAD} bytes",
            position=pos,
            offset=offset,
        )
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptBatchError(
            f"unsupported magic {header.magic} (only v2 batches are stored)",
            position=pos,
            offset=header.base_offset,
        )
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptBatchError(
            f"batch length {header.batch_length} is below the minimum {MIN_BATCH_LENGTH}",
            position=pos,
            offset=header.base_offset,
        )
    return header


def verify_crc(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Check that a whole batch is present at `pos` and its CRC-32C matches; return its header.

    Raises `CorruptBatchError` naming the position and base offset otherwise.
    """
    header = read_batch_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptBatchError(
            f"batch of {header.size} bytes extends past the end of the data "
            f"({len(buf) - pos} bytes available)",
            position=pos,
            offset=header.base_offset,
        )
    actual = crc32c(memoryview(buf)[pos + CRC_START : end])
    if actual != header.crc:
        raise CorruptBatchError(
            f"CRC mismatch (stored {header.crc:#010x}, computed {actual:#010x})",
            position=pos,
            offset=header.base_offset,
        )
    return header


def iter_batch_headers(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in `buf`, e.g. the bytes a `SegmentLog.read`
    returned; stops before an incomplete batch at the end. Headers are read with
    `read_batch_header` (`CorruptBatchError` for a bad magic or length); CRCs are not checked."""
    pos = 0
    end = len(buf)
    while end - pos >= RECORD_BATCH_OVERHEAD:
        header = read_batch_header(buf, pos)
        if pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def validate_client_batch(buf: Buffer) -> BatchHeader:
    """Validate one batch received from a client (a Produce request's records for a partition).

    Format checks (`CorruptBatchError`): exactly one whole v2 batch, CRC matches. Kafka's
    `LogValidator` rules for client appends (`InvalidBatchError`): a v2 produce carries one
    batch per partition; the offset range is non-empty and agrees with the record count
    (`lastOffsetDelta + 1 == recordsCount`); no control batches (only brokers write those);
    an idempotent batch (producerId >= 0) has a base sequence. Compressed payloads are not
    inspected: their records are opaque here.
    """
    header = verify_crc(buf, 0)
    if header.size != len(buf):
        raise InvalidBatchError(
            f"expected exactly one record batch of {header.size} bytes, got {len(buf)} bytes",
            offset=header.base_offset,
        )
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidBatchError(
            f"batch has an invalid offset range (lastOffsetDelta {header.last_offset_delta})",
            offset=header.base_offset,
        )
    if header.record_count <= 0:
        raise InvalidBatchError(
            f"invalid reported record count {header.record_count}", offset=header.base_offset
        )
    if header.record_count != count_from_offsets:
        raise InvalidBatchError(
            f"inconsistent offset range ({count_from_offsets} offsets) and record count "
            f"{header.record_count}",
            offset=header.base_offset,
        )
    if header.is_control:
        raise InvalidBatchError("clients are not allowed to write control batches", offset=header.base_offset)
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidBatchError(
            f"invalid sequence number {header.base_sequence} for producer id {header.producer_id}",
            offset=header.base_offset,
        )
    return header


def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """Rewrite the base offset of the batch at `pos` in place.

    Safe without touching the CRC: the CRC covers bytes from the attributes on, and the base
    offset precedes it. Records hold offset *deltas*, so this assigns offsets to all of them.
    """
    _I64.pack_into(buf, pos, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite the partition leader epoch (bytes 12-15, not covered by the CRC) in place."""
    _I32.pack_into(buf, pos + 12, epoch)


# --- encoding ---------------------------------------------------------------------------------

_NULL_LENGTH = b"\x01"  # zigzag(-1)
# The varints of a record: an already zigzagged value (a length n >= 0 zigzags to n << 1).
_uvarint = encode_uvarlong
_zigzag = zigzag64


def _encode_records(entries: Sequence[RawRecord]) -> tuple[bytes, int]:
    parts: list[bytes] = []
    append = parts.append
    for offset_delta, timestamp_delta, key, value, headers in entries:
        td = _uvarint(_zigzag(timestamp_delta))
        od = _uvarint(_zigzag(offset_delta))
        if key is None:
            kh, key = _NULL_LENGTH, b""
        else:
            kh = _uvarint(len(key) << 1)
        if value is None:
            vh, value = _NULL_LENGTH, b""
        else:
            vh = _uvarint(len(value) << 1)
        if headers:
            hparts = [_uvarint(len(headers) << 1)]
            for hkey, hvalue in headers:
                hk = hkey.encode()
                hparts.append(_uvarint(len(hk) << 1))
                hparts.append(hk)
                if hvalue is None:
                    hparts.append(_NULL_LENGTH)
                else:
                    hparts.append(_uvarint(len(hvalue) << 1))
                    hparts.append(hvalue)
            hb = b"".join(hparts)
        else:
            hb = b"\x00"
        body_len = 1 + len(td) + len(od) + len(kh) + len(key) + len(vh) + len(value) + len(hb)
        append(_uvarint(body_len << 1))
        append(b"\x00")  # record attributes: unused
        append(td)
        append(od)
        append(kh)
        append(key)
        append(vh)
        append(value)
        append(hb)
    return b"".join(parts), len(entries)


def encode_batch(
    entries: Sequence[RawRecord],
    *,
    base_offset: int,
    last_offset_delta: int,
    first_timestamp: int,
    max_timestamp: int,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """Encode an uncompressed batch from records given relative to the batch.

    The general form behind `build_batch`; compaction uses it to rewrite a batch with fewer
    records while keeping its offset range, timestamps and producer fields (Kafka's cleaner
    does the same: offsets of kept records never change, and an emptied batch can be kept as a
    header to preserve the range). `entries` may be empty.
    """
    if attributes & ATTR_COMPRESSION_MASK:
        raise ValueError("encode_batch writes uncompressed batches only (compression bits set)")
    if not 0 <= last_offset_delta <= _INT32_MAX:
        raise ValueError(f"last offset delta {last_offset_delta} out of range")
    for name, v in (
        ("base_offset", base_offset),
        ("first_timestamp", first_timestamp),
        ("max_timestamp", max_timestamp),
        ("producer_id", producer_id),
    ):
        if not _INT64_MIN <= v <= _INT64_MAX:
            raise ValueError(f"{name} {v} does not fit in int64")
    records, count = _encode_records(entries)
    covered = (
        _CRC_COVERED.pack(
            attributes,
            last_offset_delta,
            first_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + records
    )
    # batchLength counts everything after itself: leader epoch (4) + magic (1) + crc (4) + rest.
    prefix = _PREFIX.pack(base_offset, len(covered) + 9, partition_leader_epoch, MAGIC, crc32c(covered))
    return prefix + covered


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """Encode `(key, value)` pairs as one uncompressed v2 batch; None encodes a null.

    All records get `timestamp_ms` (CreateTime) and consecutive offsets from `base_offset`. A
    null value is a tombstone under log compaction. At least one record is required: an empty
    batch would have lastOffsetDelta -1, which Kafka rejects.
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    entries: list[RawRecord] = [(i, 0, k, v, ()) for i, (k, v) in enumerate(records)]
    return encode_batch(
        entries,
        base_offset=base_offset,
        last_offset_delta=len(records) - 1,
        first_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        attributes=attributes,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


# --- decoding ---------------------------------------------------------------------------------


def _as_bytes(batch: Buffer) -> bytes:
    return batch if isinstance(batch, bytes) else bytes(batch)


def iter_raw_records(batch: Buffer, pos: int = 0, header: BatchHeader | None = None) -> Iterator[RawRecord]:
    """Yield the records of the uncompressed batch at `pos` exactly as stored, relative deltas.

    Validates every record's framing (length, varints, record count, no trailing bytes) and
    raises `CorruptBatchError` on any mismatch; `UnsupportedBatchError` for compressed batches.
    The CRC is not re-checked here (see `verify_crc`). `header` is the batch's header when the
    caller has already read it (`SegmentLog.batches` yields it): it is then not read again.
    """
    buf = _as_bytes(batch)
    if header is None:
        header = read_batch_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptBatchError(
            "batch extends past the end of the data", position=pos, offset=header.base_offset
        )
    if header.attributes & ATTR_COMPRESSION_MASK:
        raise UnsupportedBatchError(
            f"compressed batch (codec {header.compression}) is not decoded here",
            position=pos,
            offset=header.base_offset,
        )
    p = pos + RECORD_BATCH_OVERHEAD
    index = 0
    try:
        for index in range(header.record_count):  # noqa: B007 - index used in the error below
            z = buf[p]
            p += 1
            if z >= 0x80:
                z, p = read_uvarint(buf, p - 1)
            length = (z >> 1) ^ -(z & 1)
            rec_end = p + length
            if length <= 0 or rec_end > end:
                raise ValueError(f"record length {length} does not fit in the batch")
            p += 1  # record attributes (unused)
            z = buf[p]
            p += 1
            if z >= 0x80:
                z, p = read_uvarlong(buf, p - 1)
            ts_delta = (z >> 1) ^ -(z & 1)
            z = buf[p]
            p += 1
            if z >= 0x80:
                z, p = read_uvarint(buf, p - 1)
            off_delta = (z >> 1) ^ -(z & 1)
            z = buf[p]
            p += 1
            if z >= 0x80:
                z, p = read_uvarint(buf, p - 1)
            n = (z >> 1) ^ -(z & 1)
            key: bytes | None
            if n < 0:
                key = None
            else:
                key = buf[p : p + n]
                p += n
            z = buf[p]
            p += 1
            if z >= 0x80:
                z, p = read_uvarint(buf, p - 1)
            n = (z >> 1) ^ -(z & 1)
            value: bytes | None
            if n < 0:
                value = None
            else:
                value = buf[p : p + n]
                p += n
            z = buf[p]
            p += 1
            headers: tuple[tuple[str, bytes | None], ...] = ()
            if z:
                if z >= 0x80:
                    z, p = read_uvarint(buf, p - 1)
                p, headers = _read_headers(buf, p, (z >> 1) ^ -(z & 1), rec_end)
            if p != rec_end:
                raise ValueError(
                    f"record framing mismatch: declared {length} bytes, read {length + p - rec_end}"
                )
            yield off_delta, ts_delta, key, value, headers
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        reason = "premature end of data" if isinstance(exc, IndexError) else str(exc)
        raise CorruptBatchError(
            f"record {index}: {reason}", position=pos, offset=header.base_offset
        ) from None
    if p != end:
        raise CorruptBatchError(
            f"{end - p} bytes after the last of {header.record_count} records",
            position=pos,
            offset=header.base_offset,
        )


def _read_headers(
    buf: bytes, p: int, count: int, rec_end: int
) -> tuple[int, tuple[tuple[str, bytes | None], ...]]:
    if count < 0 or count > rec_end - p:
        raise ValueError(f"invalid record header count {count}")
    out: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        z = buf[p]
        p += 1
        if z >= 0x80:
            z, p = read_uvarint(buf, p - 1)
        n = (z >> 1) ^ -(z & 1)
        if n < 0:
            raise ValueError(f"invalid negative header key size {n}")
        hkey = buf[p : p + n].decode()
        p += n
        z = buf[p]
        p += 1
        if z >= 0x80:
            z, p = read_uvarint(buf, p - 1)
        n = (z >> 1) ^ -(z & 1)
        hvalue: bytes | None
        if n < 0:
            hvalue = None
        else:
            hvalue = buf[p : p + n]
            p += n
        out.append((hkey, hvalue))
    return p, tuple(out)


def iter_records(batch: Buffer, pos: int = 0) -> Iterator[Record]:
    """Yield the records of the uncompressed batch at `pos` with absolute offsets and timestamps.

    offset = baseOffset + offsetDelta; timestamp = baseTimestamp + timestampDelta, except in a
    LogAppendTime batch where every record carries the batch's maxTimestamp (as Kafka reads it).
    """
    header = read_batch_header(batch, pos)
    base = header.base_offset
    if header.attributes & ATTR_LOG_APPEND_TIME:
        lat = header.max_timestamp
        for od, _td, k, v, h in iter_raw_records(batch, pos):
            yield Record(base + od, lat, k, v, h)
    else:
        first = header.first_timestamp
        for od, td, k, v, h in iter_raw_records(batch, pos):
            yield Record(base + od, first + td, k, v, h)
