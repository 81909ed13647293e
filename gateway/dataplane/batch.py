"""Kafka v2 record batches as the data plane needs them: header fields, validation, offsets.

Layout (big-endian, 61-byte header; KIP-98 / Kafka `DefaultRecordBatch`):
baseOffset i64 | batchLength i32 (bytes after this field) | partitionLeaderEpoch i32 | magic i8 |
crc u32 (CRC-32C of everything from `attributes` on) | attributes i16 | lastOffsetDelta i32 |
baseTimestamp i64 | maxTimestamp i64 | producerId i64 | producerEpoch i16 | baseSequence i32 |
recordsCount i32 | records...

The CRC starts after the magic byte, so the broker rewrites baseOffset and partitionLeaderEpoch
without recomputing it -- that is how offsets are assigned on append.

Validation follows Kafka: `ProduceRequest.validateRecords` (v3+: at least one batch, magic 2,
exactly one batch per partition -> INVALID_RECORD), `DefaultRecordBatch.ensureValid` (CRC ->
CORRUPT_MESSAGE) and `LogValidator.validateBatch` for client appends (offset range consistent
with the record count, no control batches, sequences set when a producer id is -> INVALID_RECORD).
Records inside a batch are not re-validated one by one, and compressed batches are stored as
sent (never decompressed). `records/batch.py` (log branch) will hold the shared batch codec;
this module keeps only what the data plane needs until then.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c
from kio.schema.errors import ErrorCode

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MAGIC_OFFSET = 16
CRC_START = 21
MAGIC_V2 = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")


class BatchError(ValueError):
    """A batch a client sent cannot be appended; `code` is the Kafka error to answer with."""

    code: ErrorCode = ErrorCode.invalid_record


class CorruptBatch(BatchError):
    code = ErrorCode.corrupt_message


class InvalidBatch(BatchError):
    code = ErrorCode.invalid_record


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compressed(self) -> bool:
        return bool(self.attributes & ATTR_COMPRESSION_MASK)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (sequences wrap at 2**31 - 1, as in Kafka)."""
        return (self.base_sequence + self.last_offset_delta) % 2**31


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def single_produce_batch(records: bytes | None, api_version: int) -> bytes:
    """The one batch a v3+ Produce partition entry must hold (`ProduceRequest.validateRecords`).

    Kafka's batch iterator ignores an incomplete trailing batch, so trailing bytes that do not
    form a whole batch are dropped, as Kafka trims them before appending.
    """
    data = records or b""
    first = _complete_batch_size(data, 0)
    if first is None:
        raise InvalidBatch(
            f"Produce requests with version {api_version} must have at least one record batch "
            "per partition"
        )
    magic = data[MAGIC_OFFSET]
    if magic != MAGIC_V2:
        raise InvalidBatch(
            f"Produce requests with version {api_version} are only allowed to contain record "
            "batches with magic version 2"
        )
    if _complete_batch_size(data, first) is not None:
        raise InvalidBatch(
            f"Produce requests with version {api_version} are only allowed to contain exactly "
            "one record batch per partition"
        )
    return data[:first] if len(data) != first else data


def _complete_batch_size(data: bytes, pos: int) -> int | None:
    """Size of the batch at `pos` if it is entirely present, else None (Kafka's iterator)."""
    if len(data) - pos < LOG_OVERHEAD:
        return None
    (length,) = _LEADER_EPOCH.unpack_from(data, pos + 8)
    size = int(length) + LOG_OVERHEAD
    if size < MAGIC_OFFSET + 1:
        raise CorruptBatch(f"Record size {size} is less than the minimum record overhead (17)")
    if len(data) - pos < size:
        return None
    magic = data[pos + MAGIC_OFFSET]
    if not 0 <= magic <= MAGIC_V2:
        raise CorruptBatch(f"Invalid magic found in record: {magic}")
    return size


def validate_client_batch(raw: bytes) -> BatchHeader:
    """Check a whole batch from a client before it is appended; raise `BatchError`."""
    if len(raw) < HEADER_SIZE:
        raise CorruptBatch(f"batch of {len(raw)} bytes is shorter than the v2 header (61)")
    h = read_header(raw)
    if h.magic != MAGIC_V2:
        raise InvalidBatch(f"only magic v2 batches are accepted, got magic {h.magic}")
    if h.size != len(raw):
        raise CorruptBatch(f"batch length field says {h.size} bytes, got {len(raw)}")
    if crc32c(memoryview(raw)[CRC_START:]) != h.crc:
        raise CorruptBatch("Record batch is corrupt (CRC-32C mismatch)")
    if h.last_offset_delta < 0:
        raise InvalidBatch("Batch has an invalid offset range")
    if h.records_count <= 0:
        raise InvalidBatch("Invalid reported count for record batch")
    if h.last_offset_delta + 1 != h.records_count:
        raise InvalidBatch("Inconsistent batch offset range and record count")
    if h.attributes & ATTR_CONTROL:
        raise InvalidBatch("Clients are not allowed to write control records")
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidBatch("Invalid sequence number")
    return h


def with_base_offset(raw: bytes, base_offset: int, leader_epoch: int = 0) -> bytes:
    """The batch with its offsets moved to `base_offset` (the CRC does not cover these bytes)."""
    out = bytearray(raw)
    _BASE_OFFSET.pack_into(out, 0, base_offset)
    _LEADER_EPOCH.pack_into(out, 12, leader_epoch)
    return bytes(out)


def iter_headers(data: bytes) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every complete batch in `data`."""
    pos = 0
    end = len(data)
    while end - pos >= HEADER_SIZE:
        h = read_header(data, pos)
        if h.size < HEADER_SIZE or pos + h.size > end:
            return
        yield pos, h
        pos += h.size


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint/varlong (record fields)."""
    shift = 0
    raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def record_timestamps(batch: bytes, pos: int = 0) -> Iterator[tuple[int, int]] | None:
    """(offset, timestamp) of each record of an uncompressed batch; None if compressed.

    Used by ListOffsets to find a record by timestamp inside a batch.
    """
    h = read_header(batch, pos)
    if h.compressed:
        return None

    def gen() -> Iterator[tuple[int, int]]:
        p = pos + HEADER_SIZE
        for _ in range(h.records_count):
            length, p = _varint(batch, p)
            body = p
            p += 1  # record attributes
            ts_delta, p = _varint(batch, p)
            offset_delta, _ = _varint(batch, p)
            yield h.base_offset + offset_delta, h.base_timestamp + ts_delta
            p = body + length

    return gen()
