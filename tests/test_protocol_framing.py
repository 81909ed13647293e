"""protocol.framing: Kafka's size-prefixed frames, split sans I/O, bad sizes refused early."""

from __future__ import annotations

import struct

import pytest

from protocol.framing import FrameReader, FrameSizeError, frame, frame_end, frame_size

_SIZE = struct.Struct(">i")


def test_frame_end_waits_for_the_whole_frame() -> None:
    data = frame(b"abc") + frame(b"")
    assert frame_end(data[:3], 0, 100) == -1
    assert frame_end(data[:6], 0, 100) == -1
    assert frame_end(data, 0, 100) == 7
    assert frame_end(data, 7, 100) == 11
    assert frame_end(data, 11, 100) == -1


@pytest.mark.parametrize(("size", "reason"), [(-1, "frame.negative_size"), (101, "frame.oversized")])
def test_a_bad_size_is_refused_as_soon_as_its_four_bytes_arrive(size: int, reason: str) -> None:
    with pytest.raises(FrameSizeError) as info:
        frame_end(_SIZE.pack(size), 0, 100)  # no payload buffered yet
    assert info.value.reason == reason
    assert info.value.size == size
    with pytest.raises(FrameSizeError):
        frame_size(_SIZE.pack(size), 100)


def test_a_minimum_size_refuses_a_response_without_a_correlation_id() -> None:
    with pytest.raises(FrameSizeError) as info:
        frame_end(_SIZE.pack(3) + b"abc", 0, 100, min_size=4)
    assert info.value.reason == "frame.undersized"
    assert frame_size(_SIZE.pack(4), 100, min_size=4) == 4


def test_reader_yields_frames_across_any_chunking_and_keeps_those_before_a_bad_size() -> None:
    stream = frame(b"one") + frame(b"two" * 10) + frame(b"") + _SIZE.pack(1000) + b"zz"
    for step in (1, 2, 3, 7, len(stream)):
        reader = FrameReader(100)
        got: list[bytes] = []
        with pytest.raises(FrameSizeError):
            for i in range(0, len(stream), step):
                reader.feed(stream[i : i + step])
                while (f := reader.next_frame()) is not None:
                    got.append(f)
        assert got == [b"one", b"two" * 10, b""]


def test_reader_compacts_its_buffer() -> None:
    reader = FrameReader(100)
    reader.feed(frame(b"x" * 50) + b"\x00\x00")
    assert reader.next_frame() == b"x" * 50
    assert reader.next_frame() is None
    assert reader.buffered == 2
