"""Properties of the record codec over random records and random or corrupted bytes.

* Every record survives encode -> decode unchanged, for every type (tombstones included).
* Decoding is total: whatever the bytes, it returns a record or raises RecordDecodeError or
  UnknownRecordTypeError, never a raw struct.error/IndexError/UnicodeDecodeError. A record that
  does decode from corrupted bytes is a valid one: it re-encodes and decodes to itself.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from records import CoordinatorRecord, OffsetCommitValue
from records.codec import (
    RecordDecodeError,
    UnknownRecordTypeError,
    decode_record,
    decode_value,
    encode_record,
    encode_value,
)
from tests.record_strategies import KEYS_AND_VALUES, coordinator_records, int32, int64, records_of

RECORD_TYPES = ["k0/1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k16"]


@pytest.mark.parametrize(("keys", "values"), KEYS_AND_VALUES, ids=RECORD_TYPES)
def test_every_record_type_round_trips_through_its_bytes(keys: Any, values: Any) -> None:
    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
    @given(records_of(keys, values))
    def round_trip(record: CoordinatorRecord) -> None:
        key_bytes, value_bytes = encode_record(record)
        assert decode_record(key_bytes, value_bytes) == record
        assert (value_bytes is None) == record.is_tombstone
        # Bytes we wrote decode to an object that writes the same bytes again.
        assert encode_record(decode_record(key_bytes, value_bytes)) == (key_bytes, value_bytes)

    round_trip()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(coordinator_records)
def test_decoded_objects_are_frozen_and_hash_like_constructed_ones(
    record: CoordinatorRecord,
) -> None:
    # The decoders build objects without __init__ (records.construct); they must not differ.
    decoded = decode_record(*encode_record(record))
    assert hash(decoded) == hash(record)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.key = record.key  # type: ignore[misc]
    if decoded.value is not None:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(decoded.value, dataclasses.fields(decoded.value)[0].name, None)


@given(st.integers(-(2**31), 2**31 - 1).filter(lambda e: e != -1), int64, st.text(), int64)
def test_an_expire_timestamp_costs_the_leader_epoch_like_in_kafka(
    leader_epoch: int, expire_timestamp: int, metadata: str, offset: int
) -> None:
    if expire_timestamp == -1:
        expire_timestamp = 0
    value = OffsetCommitValue(offset, leader_epoch, metadata, 1, expire_timestamp)
    data = encode_value(value)
    assert data is not None and data[:2] == b"\x00\x01"
    assert decode_value(1, data) == OffsetCommitValue(offset, -1, metadata, 1, expire_timestamp)


@given(int32, int64, st.text())
def test_without_expire_timestamp_offsets_are_written_as_version_3(
    leader_epoch: int, offset: int, metadata: str
) -> None:
    data = encode_value(OffsetCommitValue(offset, leader_epoch, metadata, 1))
    assert data is not None and data[:2] == b"\x00\x03"


# --- decoding is total --------------------------------------------------------------------------


def _decode_is_total(key: bytes, value: bytes | None) -> None:
    try:
        record = decode_record(key, value)
    except (RecordDecodeError, UnknownRecordTypeError):
        return
    assert encode_record(record) is not None
    assert decode_record(*encode_record(record)) == record


KNOWN_TYPE_PREFIXES = st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 16]).map(lambda t: struct.pack(">h", t))


@settings(max_examples=400)
@given(KNOWN_TYPE_PREFIXES, st.binary(max_size=64), st.none() | st.binary(max_size=128))
def test_random_bytes_of_a_known_type_only_raise_codec_errors(
    prefix: bytes, key_rest: bytes, value: bytes | None
) -> None:
    _decode_is_total(prefix + key_rest, value)


@settings(max_examples=200)
@given(st.binary(max_size=64), st.none() | st.binary(max_size=64))
def test_random_bytes_only_raise_codec_errors(key: bytes, value: bytes | None) -> None:
    _decode_is_total(key, value)


def _mutate(data: bytes, kind: str, index: int, payload: bytes) -> bytes:
    if not data:
        return payload
    i = index % (len(data) + 1)
    if kind == "truncate":
        return data[:i]
    if kind == "flip" and i < len(data):
        return data[:i] + bytes([data[i] ^ (payload[0] if payload else 0xFF)]) + data[i + 1 :]
    if kind == "insert":
        return data[:i] + payload + data[i:]
    if kind == "delete":
        return data[:i] + data[i + len(payload) + 1 :]
    return data + payload


mutations = st.tuples(
    st.sampled_from(["truncate", "flip", "insert", "delete", "append"]),
    st.integers(0, 10_000),
    st.binary(min_size=0, max_size=8),
)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(coordinator_records, mutations, st.booleans())
def test_corrupted_record_bytes_only_raise_codec_errors(
    record: CoordinatorRecord, mutation: tuple[str, int, bytes], in_key: bool
) -> None:
    key, value = encode_record(record)
    if in_key or value is None:
        key = _mutate(key, *mutation)
    else:
        value = _mutate(value, *mutation)
    _decode_is_total(key, value)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(coordinator_records, st.integers(0, 10_000))
def test_every_truncation_of_a_value_is_a_decode_error(record: CoordinatorRecord, cut: int) -> None:
    key, value = encode_record(record)
    if value is None:
        return
    truncated = value[: cut % len(value)]
    with pytest.raises(RecordDecodeError):
        decode_record(key, truncated)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(coordinator_records, st.binary(min_size=1, max_size=8))
def test_bytes_after_a_value_are_a_decode_error(record: CoordinatorRecord, junk: bytes) -> None:
    key, value = encode_record(record)
    if value is None:
        return
    with pytest.raises(RecordDecodeError, match="trailing"):
        decode_record(key, value + junk)
