"""Target `records`: the coordinator record codec (`records.codec.decode_record`).

Every `__consumer_offsets` record (offset commits, classic group metadata, KIP-848 consumer
group records) is decoded by `decode_record(key, value)` when a shard loads its log. An input
is `[flags][key length: 2 bytes][key][value]`; flag bit 0 makes the value null (a tombstone).

Clean: `CoordinatorRecordError` (`UnknownRecordTypeError`: the loader skips the record, as
Kafka skips unknown types; `RecordDecodeError`: the loader stops with a `CoordinatorLoadError`
naming the offset). `decode_record` promises "nothing else whatever the bytes".

Seeds are real encodings: records drawn (derandomized, so always the same ones) from the
property tests' strategies and encoded with `records.codec.encode_record`, and the streams-group
records of the `streams_records` target (every field of types 17 and 19-23), which that target
also replays into a live group.
"""

from __future__ import annotations

import struct
from functools import cache

from fuzz.common import Target
from records.codec import CoordinatorRecordError, decode_record, encode_record

_LEN = struct.Struct(">H")


@cache
def encoded_records() -> tuple[tuple[bytes, bytes | None], ...]:
    """(key, value) encodings of a fixed sample of every record type, tombstones included."""
    from hypothesis import HealthCheck, Phase, given, settings

    from tests.record_strategies import coordinator_records

    out: list[tuple[bytes, bytes | None]] = []

    @settings(
        derandomize=True,
        max_examples=400,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(coordinator_records)
    def collect(record: object) -> None:
        out.append(encode_record(record))  # type: ignore[arg-type]

    collect()
    return tuple(out)


def frame(key: bytes, value: bytes | None) -> bytes:
    return bytes([1 if value is None else 0]) + _LEN.pack(len(key)) + key + (value or b"")


def seeds() -> list[bytes]:
    from fuzz.streams_records import seeds as streams_seeds

    return [frame(k, v) for k, v in encoded_records()] + streams_seeds()


def one_input(data: bytes) -> None:
    if len(data) < 3:
        data = data.ljust(3, b"\x00")
    (n,) = _LEN.unpack_from(data, 1)
    key = data[3 : 3 + n]
    value = None if data[0] & 1 else data[3 + n :]
    decode_record(key, value)


TARGET = Target(
    name="records",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(CoordinatorRecordError,),
    instrument=(
        "records.codec",
        "records.key_codec",
        "records.offsets_codec",
        "records.classic_group_codec",
        "records.consumer_group_codec",
        "records.streams_group_codec",
        "records.wire",
    ),
)
