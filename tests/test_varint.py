"""protocol.varint: Kafka's ByteUtils varints, and the bounds that keep client bytes harmless."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.varint import (
    MAX_UVARINT,
    MAX_UVARLONG,
    OverlongVarintError,
    TruncatedVarintError,
    encode_uvarint,
    encode_uvarlong,
    encode_varint,
    encode_varlong,
    read_uvarint,
    read_uvarlong,
    read_varint,
    read_varlong,
    unzigzag,
    zigzag32,
    zigzag64,
)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
     (MAX_UVARINT, b"\xff\xff\xff\xff\x0f")],
)  # fmt: skip
def test_unsigned_varint_bytes_match_kafka(value: int, encoded: bytes) -> None:
    assert encode_uvarint(value) == encoded
    assert read_uvarint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))


@pytest.mark.parametrize(("value", "zigzagged"), [(0, 0), (-1, 1), (1, 2), (-2, 3), (2**31 - 1, 2**32 - 2)])
def test_zigzag_is_kafkas(value: int, zigzagged: int) -> None:
    assert zigzag32(value) == zigzagged
    assert zigzag64(value) == zigzagged
    assert unzigzag(zigzagged) == value


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n: int) -> None:
    data = encode_varint(n)
    assert len(data) <= 5
    assert read_varint(data, 0) == (n, len(data))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n: int) -> None:
    data = encode_varlong(n)
    assert len(data) <= 10
    assert read_varlong(data, 0) == (n, len(data))
    assert read_uvarlong(encode_uvarlong(n + 2**63), 0) == (n + 2**63, len(encode_uvarlong(n + 2**63)))


def test_encoders_refuse_values_outside_their_width() -> None:
    for bad in (-1, MAX_UVARINT + 1):
        with pytest.raises(ValueError):
            encode_uvarint(bad)
    for bad in (-1, MAX_UVARLONG + 1):
        with pytest.raises(ValueError):
            encode_uvarlong(bad)
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(-(2**63) - 1)


def test_an_overlong_varint_is_refused_at_the_bound() -> None:
    with pytest.raises(OverlongVarintError, match="longer than 5 bytes"):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)
    with pytest.raises(OverlongVarintError, match="longer than 5 bytes"):
        read_varint(b"\xff" * 1000, 0)
    with pytest.raises(OverlongVarintError, match="longer than 10 bytes"):
        read_varlong(b"\xff" * 10 + b"\x01", 0)
    assert read_uvarlong(b"\xff" * 9 + b"\x01", 0) == (2**64 - 1, 10)
    assert isinstance(OverlongVarintError("x"), ValueError)


def test_a_truncated_varint_is_refused() -> None:
    for data in (b"", b"\x80", b"\xff\xff"):
        with pytest.raises(TruncatedVarintError, match="truncated varint"):
            read_uvarint(data, 0)
    with pytest.raises(IndexError):  # callers treating running off the end as such keep doing so
        read_varlong(b"\x80\x80", 0)
