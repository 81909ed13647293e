"""Kafka v2 record batches: our encoder/decoder against the format and against real clients'
codecs (kafka-python's pure-Python one and aiokafka's C one)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from records.batch import (
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    CRC_START,
    RECORD_BATCH_OVERHEAD,
    BatchError,
    CorruptBatchError,
    InvalidBatchError,
    UnsupportedBatchError,
    build_batch,
    encode_batch,
    iter_raw_records,
    iter_records,
    read_batch_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate_client_batch,
    verify_crc,
)

TS = 1_700_000_000_123
RECORDS: list[tuple[bytes | None, bytes | None]] = [
    (b"\x00\x03group-a\x00\x05member", b"\x00\x00value-one"),
    (b"key-with-null-value", None),
    (None, b"value-without-key"),
    (b"", b""),
    (b"k" * 200, b"v" * 70_000),  # multi-byte varint lengths
]


def _recompute_crc(buf: bytearray) -> None:
    from crc32c import crc32c

    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[CRC_START:])))


def _kafka_python_batch(
    entries: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]],
    *,
    compression: int = 0,
    producer: tuple[int, int, int] | None = None,
) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 24)
    if producer is not None:
        builder.set_producer_state(producer[0], producer[1], producer[2], False)
    for ts, key, value, headers in entries:
        assert builder.append(timestamp=ts, key=key, value=value, headers=headers) is not None
    builder.close()
    return bytes(builder.buffer())


# --- round trip -------------------------------------------------------------------------------


def test_build_batch_round_trips_keys_values_offsets_and_timestamps() -> None:
    raw = build_batch(RECORDS, base_offset=42, timestamp_ms=TS)
    decoded = list(iter_records(raw))
    assert [(r.key, r.value) for r in decoded] == RECORDS
    assert [r.offset for r in decoded] == [42, 43, 44, 45, 46]
    assert all(r.timestamp == TS and r.headers == () for r in decoded)


def test_header_fields_describe_the_batch() -> None:
    raw = build_batch(
        RECORDS[:3],
        base_offset=7,
        timestamp_ms=TS,
        producer_id=99,
        producer_epoch=3,
        base_sequence=11,
        partition_leader_epoch=5,
    )
    h = read_batch_header(raw)
    assert h.size == len(raw)
    assert (h.base_offset, h.last_offset_delta, h.last_offset, h.next_offset) == (7, 2, 9, 10)
    assert (h.magic, h.record_count, h.partition_leader_epoch) == (2, 3, 5)
    assert (h.first_timestamp, h.max_timestamp) == (TS, TS)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (99, 3, 11)
    assert (h.compression, h.is_control, h.is_transactional) == (0, False, False)
    assert verify_crc(raw) == h


def test_empty_record_list_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([], timestamp_ms=TS)


def test_compression_bits_are_refused_by_the_encoder() -> None:
    with pytest.raises(ValueError, match="uncompressed"):
        build_batch([(b"k", b"v")], timestamp_ms=TS, attributes=1)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 1 << 20),
            st.integers(-(1 << 40), 1 << 40),
            st.none() | st.binary(max_size=300),
            st.none() | st.binary(max_size=300),
            st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3),
        ),
        max_size=20,
    ),
    st.integers(-(1 << 62), 1 << 62),
)
def test_encode_batch_round_trips_arbitrary_records(
    entries: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    base_offset: int,
) -> None:
    raw_entries = [(od, td, k, v, tuple(h)) for od, td, k, v, h in entries]
    raw = encode_batch(
        raw_entries,
        base_offset=base_offset,
        last_offset_delta=1 << 20,
        first_timestamp=TS,
        max_timestamp=TS,
    )
    verify_crc(raw)
    assert list(iter_raw_records(raw)) == raw_entries
    assert [(r.offset, r.timestamp) for r in iter_records(raw)] == [
        (base_offset + od, TS + td) for od, td, *_ in raw_entries
    ]


def test_log_append_time_batches_give_every_record_the_max_timestamp() -> None:
    raw = encode_batch(
        [(0, 0, b"a", b"1", ()), (1, 5, b"b", b"2", ())],
        base_offset=0,
        last_offset_delta=1,
        first_timestamp=TS,
        max_timestamp=TS + 999,
        attributes=ATTR_LOG_APPEND_TIME,
    )
    assert [r.timestamp for r in iter_records(raw)] == [TS + 999, TS + 999]


# --- CRC and in-place rewrites ----------------------------------------------------------------


def test_crc_detects_a_flipped_byte_anywhere_in_the_covered_range() -> None:
    raw = build_batch(RECORDS[:4], base_offset=0, timestamp_ms=TS)
    for pos in range(CRC_START, len(raw)):
        for flip in (0x01, 0x80, 0xFF):
            damaged = bytearray(raw)
            damaged[pos] ^= flip
            with pytest.raises(CorruptBatchError, match="CRC mismatch") as info:
                verify_crc(damaged)
            assert info.value.position == 0


def test_stored_crc_field_damage_is_detected() -> None:
    raw = build_batch(RECORDS[:1], timestamp_ms=TS)
    for pos in range(17, CRC_START):
        damaged = bytearray(raw)
        damaged[pos] ^= 0x10
        with pytest.raises(CorruptBatchError, match="CRC mismatch"):
            verify_crc(damaged)


def test_base_offset_and_leader_epoch_rewrites_keep_the_crc_valid() -> None:
    buf = bytearray(build_batch(RECORDS[:3], base_offset=0, timestamp_ms=TS))
    set_base_offset(buf, 0, 1_000_000)
    set_partition_leader_epoch(buf, 0, 17)
    h = verify_crc(buf)
    assert (h.base_offset, h.partition_leader_epoch) == (1_000_000, 17)
    assert [r.offset for r in iter_records(buf)] == [1_000_000, 1_000_001, 1_000_002]


def test_set_base_offset_works_at_a_position_inside_a_larger_buffer() -> None:
    a = build_batch([(b"a", b"1")], base_offset=0, timestamp_ms=TS)
    b = build_batch([(b"b", b"2"), (b"c", b"3")], base_offset=0, timestamp_ms=TS)
    buf = bytearray(a + b)
    set_base_offset(buf, len(a), 1)
    assert verify_crc(buf, len(a)).base_offset == 1
    assert [r.offset for r in iter_records(buf, len(a))] == [1, 2]


# --- bad input gives clear errors ---------------------------------------------------------------


def test_every_truncation_of_a_batch_raises_corrupt_batch_error() -> None:
    raw = build_batch(RECORDS[:3], base_offset=5, timestamp_ms=TS)
    for cut in range(len(raw)):
        with pytest.raises(CorruptBatchError) as info:
            verify_crc(raw[:cut])
        assert info.value.position == 0
        if cut >= 8:
            assert info.value.offset == 5


def test_wrong_magic_and_short_length_are_named() -> None:
    raw = bytearray(build_batch(RECORDS[:1], timestamp_ms=TS))
    raw[16] = 1
    with pytest.raises(CorruptBatchError, match="unsupported magic 1"):
        read_batch_header(raw)
    raw = bytearray(build_batch(RECORDS[:1], timestamp_ms=TS))
    struct.pack_into(">i", raw, 8, 10)
    with pytest.raises(CorruptBatchError, match="below the minimum"):
        read_batch_header(raw)


def test_record_framing_errors_are_corrupt_batch_errors() -> None:
    raw = bytearray(build_batch([(b"key", b"value")], timestamp_ms=TS))
    raw[RECORD_BATCH_OVERHEAD] += 2  # record length varint: claim one more byte
    _recompute_crc(raw)
    with pytest.raises(CorruptBatchError, match="record 0"):
        list(iter_records(raw))
    raw = bytearray(build_batch([(b"key", b"value")], timestamp_ms=TS))
    struct.pack_into(">i", raw, 57, 2)  # recordsCount 2 but one record
    _recompute_crc(raw)
    with pytest.raises(CorruptBatchError, match="premature end"):
        list(iter_records(raw))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_batches_raise_only_batch_errors(data: st.DataObject) -> None:
    raw = bytearray(build_batch(RECORDS[:4], base_offset=3, timestamp_ms=TS))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1) | st.integers(RECORD_BATCH_OVERHEAD, 120))
        raw[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        _recompute_crc(raw)  # get past the CRC to exercise the record parser
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    with contextlib.suppress(BatchError):
        list(iter_records(raw))


def test_compressed_batches_are_not_decoded() -> None:
    raw = _kafka_python_batch([(TS, b"k", b"v" * 100, [])], compression=1)  # gzip
    h = verify_crc(raw)
    assert h.compression == 1
    with pytest.raises(UnsupportedBatchError, match="codec 1"):
        list(iter_records(raw))


# --- client batch validation (Kafka LogValidator rules) ---------------------------------------


def test_validate_client_batch_accepts_a_producer_batch() -> None:
    raw = _kafka_python_batch([(TS, b"k", b"v", [])] * 3, producer=(1000, 0, 10))
    h = validate_client_batch(memoryview(raw))
    assert (h.record_count, h.producer_id, h.base_sequence) == (3, 1000, 10)


def test_validate_client_batch_refuses_two_batches() -> None:
    raw = build_batch([(b"k", b"v")], timestamp_ms=TS)
    with pytest.raises(InvalidBatchError, match="exactly one record batch"):
        validate_client_batch(raw + raw)


def test_validate_client_batch_refuses_inconsistent_count() -> None:
    raw = bytearray(build_batch([(b"k", b"v"), (b"k", b"v")], timestamp_ms=TS))
    struct.pack_into(">i", raw, 57, 3)
    _recompute_crc(raw)
    with pytest.raises(InvalidBatchError, match="inconsistent offset range"):
        validate_client_batch(raw)


def test_validate_client_batch_refuses_control_batches_and_missing_sequence() -> None:
    with pytest.raises(InvalidBatchError, match="control"):
        validate_client_batch(build_batch([(b"k", b"v")], timestamp_ms=TS, attributes=ATTR_CONTROL))
    with pytest.raises(InvalidBatchError, match="sequence"):
        validate_client_batch(build_batch([(b"k", b"v")], timestamp_ms=TS, producer_id=5))


def test_validate_client_batch_refuses_a_bad_crc_as_corrupt() -> None:
    raw = bytearray(build_batch([(b"k", b"v")], timestamp_ms=TS))
    raw[-1] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC"):
        validate_client_batch(raw)


# --- real peers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("peer", [KpBatch, AioBatch], ids=["kafka-python", "aiokafka"])
def test_client_codecs_decode_our_batches(peer: type) -> None:
    raw = build_batch(RECORDS, base_offset=1234, timestamp_ms=TS)
    batch = peer(raw)
    assert batch.validate_crc()
    assert (batch.base_offset, batch.last_offset_delta, batch.max_timestamp) == (1234, 4, TS)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(1234 + i, TS, k, v, []) for i, (k, v) in enumerate(RECORDS)]


def test_kafka_python_reads_a_log_read_of_several_batches() -> None:
    a = build_batch([(b"a", b"1")], base_offset=0, timestamp_ms=TS)
    b = build_batch([(b"b", b"2"), (b"c", None)], base_offset=1, timestamp_ms=TS + 1)
    records = MemoryRecords(a + b)
    got = []
    while records.has_next():
        got.extend((r.offset, r.key, r.value) for r in records.next_batch())
    assert got == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"c", None)]


def test_we_decode_batches_built_by_kafka_python() -> None:
    entries: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (TS, b"key-1", b"value-1", []),
        (TS + 7, None, b"no key", [("trace", b"abc"), ("empty", b"")]),
        (TS - 3, b"tombstone", None, []),
        (TS + 100, b"big", b"x" * 5000, [("h\u00e9", b"\x00\xff")]),
    ]
    raw = _kafka_python_batch(entries, producer=(77, 2, 40))
    h = validate_client_batch(raw)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 2, 40)
    assert (h.first_timestamp, h.max_timestamp) == (TS, TS + 100)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in iter_records(raw)]
    assert got == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(entries)]
