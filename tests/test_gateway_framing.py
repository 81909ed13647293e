"""Kafka framing: buffered parsing of size-prefixed frames, size limits, and responses written
in request order whatever order the handlers finish in."""

from __future__ import annotations

import asyncio
import struct

from gateway.connection import MAX_IN_FLIGHT, KafkaConnection, ResponseSlot
from tests.fake_transport import FakeTransport


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Recorder:
    """An on_frame callback that keeps frames and slots for the test to complete."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.slots: list[ResponseSlot] = []

    def __call__(self, conn: KafkaConnection, data: bytes, slot: ResponseSlot) -> None:
        self.frames.append(data)
        self.slots.append(slot)


def connection(max_frame: int = 1000) -> tuple[KafkaConnection, FakeTransport, Recorder]:
    rec = Recorder()
    conn = KafkaConnection(connection_id=1, on_frame=rec, max_frame_bytes=max_frame)
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport, rec


def test_a_frame_split_into_single_bytes_is_reassembled() -> None:
    conn, _, rec = connection()
    data = frame(b"hello kafka")
    for i in range(len(data)):
        conn.data_received(data[i : i + 1])
    assert rec.frames == [b"hello kafka"]


def test_many_frames_in_one_read_are_all_dispatched_in_order() -> None:
    conn, _, rec = connection()
    payloads = [bytes([i]) * i for i in range(1, MAX_IN_FLIGHT)]  # one short of the limit
    conn.data_received(b"".join(frame(p) for p in payloads) + frame(b"tail")[:3])
    assert rec.frames == payloads
    conn.data_received(frame(b"tail")[3:])
    assert rec.frames[-1] == b"tail"


def test_an_empty_frame_is_still_a_frame() -> None:
    conn, _, rec = connection()
    conn.data_received(frame(b"") + frame(b"x"))
    assert rec.frames == [b"", b"x"]


def test_an_oversized_size_closes_the_connection_before_the_payload_arrives() -> None:
    conn, transport, rec = connection(max_frame=100)
    conn.data_received(struct.pack(">i", 101))
    assert transport.closed and rec.frames == []
    conn.data_received(b"x" * 101)  # late bytes are ignored
    assert rec.frames == []


def test_a_frame_at_the_limit_is_accepted() -> None:
    conn, transport, rec = connection(max_frame=100)
    conn.data_received(frame(b"y" * 100))
    assert rec.frames == [b"y" * 100] and not transport.closed


def test_a_negative_size_closes_the_connection() -> None:
    conn, transport, rec = connection()
    conn.data_received(frame(b"ok") + struct.pack(">i", -1) + frame(b"never"))
    assert transport.closed and rec.frames == [b"ok"]


def test_responses_are_written_in_request_order_when_handlers_finish_out_of_order() -> None:
    conn, transport, rec = connection()
    conn.data_received(frame(b"1") + frame(b"2") + frame(b"3"))
    first, second, third = rec.slots
    third.complete(b"r3")
    second.complete(b"r2")
    assert transport.written == []
    first.complete(b"r1")
    assert b"".join(transport.written) == b"r1r2r3"


def test_a_request_without_response_does_not_block_the_ones_after_it() -> None:
    conn, transport, rec = connection()
    conn.data_received(frame(b"acks=0 produce") + frame(b"metadata"))
    rec.slots[1].complete(b"metadata response")
    rec.slots[0].complete(None)
    assert transport.written == [b"metadata response"]


def test_reading_pauses_when_too_many_requests_are_in_flight_and_resumes_after() -> None:
    conn, transport, rec = connection()
    conn.data_received(b"".join(frame(b"r") for _ in range(MAX_IN_FLIGHT)))
    assert not transport.reading
    for slot in rec.slots:
        slot.complete(b"done")
    assert transport.reading and b"".join(transport.written) == b"done" * MAX_IN_FLIGHT


async def test_frames_beyond_the_in_flight_limit_in_one_read_wait_unparsed_until_answers_drain() -> None:
    """One read after a stall can hold thousands of frames: only MAX_IN_FLIGHT are decoded;
    the rest stay bytes in the buffer and are parsed, in order, once answers drain."""
    conn, transport, rec = connection()
    extra = 10
    conn.data_received(b"".join(frame(b"%d" % i) for i in range(MAX_IN_FLIGHT + extra)) + frame(b"x")[:3])
    assert len(rec.frames) == MAX_IN_FLIGHT and not transport.reading
    for slot in list(rec.slots)[: MAX_IN_FLIGHT // 2 + 1]:
        slot.complete(b"done")
    assert transport.reading and len(rec.frames) == MAX_IN_FLIGHT  # parsing resumes on the next turn
    await asyncio.sleep(0)
    assert rec.frames == [b"%d" % i for i in range(MAX_IN_FLIGHT + extra)]
    conn.data_received(frame(b"x")[3:])
    assert rec.frames[-1] == b"x"
    for slot in rec.slots:
        slot.complete(b"done")
    assert conn.in_flight == 0 and b"".join(transport.written) == b"done" * (MAX_IN_FLIGHT + extra + 1)


async def test_a_half_closed_client_at_the_limit_still_gets_every_buffered_answer() -> None:
    conn, transport, rec = connection()
    conn.data_received(b"".join(frame(b"r") for _ in range(MAX_IN_FLIGHT + 3)))
    assert conn.eof_received() is True  # keep the transport open: answers are owed
    for slot in list(rec.slots):
        slot.complete(b"done")
    await asyncio.sleep(0)
    assert len(rec.frames) == MAX_IN_FLIGHT + 3 and not transport.closed
    for slot in rec.slots[MAX_IN_FLIGHT:]:
        slot.complete(b"done")
    assert transport.closed and b"".join(transport.written) == b"done" * (MAX_IN_FLIGHT + 3)


async def test_frames_buffered_at_the_limit_are_not_parsed_after_shutdown_stops_reading() -> None:
    conn, _transport, rec = connection()
    conn.data_received(b"".join(frame(b"r") for _ in range(MAX_IN_FLIGHT + 3)))
    conn.stop_reading()
    for slot in list(rec.slots):
        slot.complete(b"done")
    await asyncio.sleep(0)
    assert len(rec.frames) == MAX_IN_FLIGHT and conn.in_flight == 0
    await conn.drain()  # returns: nothing parsed is left unanswered


def test_closing_drops_unanswered_responses() -> None:
    conn, transport, rec = connection()
    conn.data_received(frame(b"a") + frame(b"b"))
    conn.close("test")
    rec.slots[0].complete(b"too late")
    assert transport.closed and transport.written == []


class InlineResponder(Recorder):
    """Answers every frame at once, from inside the read (as inline handlers do)."""

    def __call__(self, conn: KafkaConnection, data: bytes, slot: ResponseSlot) -> None:
        super().__call__(conn, data, slot)
        slot.complete(b"<" + data + b">")


def test_responses_completed_during_one_read_are_written_together_at_its_end() -> None:
    rec = InlineResponder()
    conn = KafkaConnection(connection_id=1, on_frame=rec, max_frame_bytes=1000)
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    conn.data_received(frame(b"a") + frame(b"b") + frame(b"c"))
    assert transport.written == [b"<a><b><c>"]
    conn.data_received(frame(b"d"))
    assert transport.written == [b"<a><b><c>", b"<d>"]


def test_a_response_completed_later_is_written_with_the_ready_ones_behind_it() -> None:
    conn, transport, rec = connection()
    conn.data_received(frame(b"slow") + frame(b"fast"))
    rec.slots[1].complete(b"fast answer")
    assert transport.written == []
    rec.slots[0].complete(b"slow answer")
    assert transport.written == [b"slow answerfast answer"]
    assert conn.in_flight == 0


def test_answers_completed_before_a_bad_frame_in_the_same_read_are_written_before_closing() -> None:
    rec = InlineResponder()
    conn = KafkaConnection(connection_id=1, on_frame=rec, max_frame_bytes=1000)
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    conn.data_received(frame(b"a") + frame(b"b") + struct.pack(">i", -1))
    assert transport.closed and transport.written == [b"<a><b>"]
