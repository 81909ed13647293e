"""The memory bounds of a connection: the server-wide pool of partial-frame bytes
(`queued.max.request.bytes`) and the per-connection budget of unsent answer bytes
(`socket.response.buffer.max.bytes`) that bounds what a Fetch reads."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema

from gateway.connection import KafkaConnection, RequestBytesPool, ResponseSlot, response_budget_of
from gateway.dataplane.apis.fetch import FetchApi
from gateway.dataplane.plane import DataPlane
from gateway.upstream.link import UpstreamLink
from gateway.upstream.proxy import fetch_capped
from protocol.codec import api_schema, decode, encode_request
from protocol.entity_builder import build
from tests.fake_transport import FakeTransport
from tests.record_batches import make_batch

BIG = 1 << 20  # above the size that takes nothing from the pool


class BufferedTransport(FakeTransport):
    """A transport whose write buffer holds what the test says the client has not read."""

    def __init__(self) -> None:
        super().__init__()
        self.unsent = 0

    def get_write_buffer_size(self) -> int:
        return self.unsent


def connection(
    pool: RequestBytesPool | None = None, response_buffer_bytes: int = 1000
) -> tuple[KafkaConnection, BufferedTransport, list[ResponseSlot]]:
    slots: list[ResponseSlot] = []
    conn = KafkaConnection(
        connection_id=1,
        on_frame=lambda _c, _data, slot: slots.append(slot),
        max_frame_bytes=8 * BIG,
        request_pool=pool,
        response_buffer_bytes=response_buffer_bytes,
    )
    transport = BufferedTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport, slots


def test_the_pool_admits_one_frame_larger_than_itself_only_when_empty() -> None:
    pool = RequestBytesPool(100)
    assert pool.try_reserve(150)  # nothing else held: it may go alone
    assert not pool.try_reserve(1)
    pool.release(150)
    assert pool.try_reserve(60) and pool.try_reserve(40) and not pool.try_reserve(1)


def test_a_frame_that_does_not_fit_the_pool_stops_reading_until_another_completes() -> None:
    pool = RequestBytesPool(3 * BIG)
    first, t1, slots1 = connection(pool)
    second, t2, slots2 = connection(pool)
    first.data_received(struct.pack(">i", 2 * BIG) + b"a" * 10)
    assert pool.reserved == 2 * BIG and t1.reading
    second.data_received(struct.pack(">i", 2 * BIG) + b"b" * 10)
    assert not t2.reading and second.muted and pool.waiting == 1
    first.data_received(b"a" * (2 * BIG - 10))  # the first frame completes: its bytes go
    assert len(slots1) == 1
    assert t2.reading and not second.muted and pool.reserved == 2 * BIG and pool.waiting == 0
    second.data_received(b"b" * (2 * BIG - 10))
    assert len(slots2) == 1 and pool.reserved == 0


def test_a_closed_connection_gives_its_reservation_back() -> None:
    pool = RequestBytesPool(3 * BIG)
    first, _, _ = connection(pool)
    second, t2, _ = connection(pool)
    first.data_received(struct.pack(">i", 2 * BIG))
    second.data_received(struct.pack(">i", 2 * BIG))
    assert not t2.reading
    first.connection_lost(None)
    assert t2.reading and pool.reserved == 2 * BIG
    second.connection_lost(None)
    assert pool.reserved == 0 and pool.waiting == 0


def test_small_frames_never_wait_for_the_pool() -> None:
    pool = RequestBytesPool(BIG)
    big, _, _ = connection(pool)
    small, t, slots = connection(pool)
    big.data_received(struct.pack(">i", 4 * BIG))
    assert pool.reserved == 4 * BIG
    frame = struct.pack(">i", 100) + b"m" * 100
    small.data_received(frame[:50])
    assert t.reading
    small.data_received(frame[50:])
    assert len(slots) == 1


def test_unsent_answer_bytes_count_the_write_buffer_and_answers_queued_behind_others() -> None:
    conn, transport, slots = connection(response_buffer_bytes=1000)
    budget = response_budget_of(conn.ctx)
    assert budget is not None and budget.available() == 1000
    conn.data_received(struct.pack(">i", 1) + b"x" + struct.pack(">i", 1) + b"y")
    slots[1].complete(b"z" * 300)  # queued behind the first, unanswered request
    transport.unsent = 200
    assert conn.unsent_response_bytes == 500 and budget.available() == 500
    slots[0].complete(b"w" * 10)  # both written now: only the transport holds them
    assert conn.unsent_response_bytes == 200
    transport.unsent = 2000
    assert budget.available() == 0


def fetch_request(max_bytes: int) -> Any:
    return build(
        load_request_schema(1, 12),
        {
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "forgotten_topics_data": [],
            "rack_id": "",
            "topics": [
                {
                    "topic": "t",
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": max_bytes}],
                }
            ],
        },
    )


def test_a_fetch_reads_no_more_than_the_connections_budget_has_left(tmp_path: Path) -> None:
    async def scenario() -> None:
        plane = DataPlane(tmp_path)
        plane.create_topic("t", 1)
        p = plane.partition("t", 0)
        assert p is not None
        batch = make_batch([b"v" * 1000])
        for _ in range(20):
            p.append(batch)
        conn, transport, _ = connection(response_buffer_bytes=5 * len(batch))
        api = FetchApi(plane)

        async def records() -> int:
            # A task of its own, as the dispatcher runs it: what it holds goes when it is done.
            got = await asyncio.ensure_future(api.handle(conn.ctx, None, fetch_request(1 << 26)))
            await asyncio.sleep(0)
            return len(got.responses[0].partitions[0].records)

        assert await records() == 5 * len(batch)  # not 64 MiB: the budget
        transport.unsent = 4 * len(batch) + 10
        assert await records() == len(batch)  # KIP-74: at least one batch while any is left
        transport.unsent = 5 * len(batch)
        assert await records() == 0  # used up: answered as if there were no data

        budget = response_budget_of(conn.ctx)
        assert budget is not None
        transport.unsent = 0
        task = asyncio.ensure_future(api.handle(conn.ctx, None, fetch_request(1 << 26)))
        await asyncio.sleep(0)
        assert task.done() and budget.held == 5 * len(batch)  # held until the answer is queued
        await asyncio.sleep(0)
        assert budget.held == 0
        await plane.close()

    asyncio.run(scenario())


def fetch_frame(version: int, max_bytes: int) -> bytes:
    values: dict[str, Any] = {
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "forgotten_topics_data": [],
        "rack_id": "",
        "topics": [
            {
                ("topic" if version < 13 else "topic_id"): "t" if version < 13 else uuid.uuid4(),
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": max_bytes}],
            }
        ],
    }
    request = build(load_request_schema(1, version), values)
    return encode_request(request, correlation_id=9, client_id="capped")[4:]


@pytest.mark.parametrize("version", [4, 11, 12, 14, 15, 16])
def test_a_forwarded_fetch_asks_for_at_most_the_connections_budget(version: int) -> None:
    frame = fetch_frame(version, 64 << 20)
    capped = fetch_capped(frame, version, 1000)
    schema = api_schema(1, version)
    assert schema is not None
    _, original = decode(schema, frame)
    _, got = decode(schema, capped)
    assert got.max_bytes == 1000
    assert dataclasses.replace(got, max_bytes=original.max_bytes) == original
    small = fetch_frame(version, 500)
    assert fetch_capped(small, version, 1000) is small
    assert fetch_capped(frame[:12], version, 1000) == frame[:12]  # too short: as it is


def test_a_paused_link_times_nothing_out_and_restarts_its_timeouts_on_resume() -> None:
    """While a link does not read (its client does not), the answers wait on our side: that is
    no broker timeout. Resumed, the request timeout counts again from then."""

    async def scenario() -> None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # reads requests, never answers

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        link = UpstreamLink(1, "127.0.0.1", port, connect_timeout=1.0, request_timeout=0.2)
        results: list[object] = []
        link.forward(fetch_frame(12, 1000), results.append)
        await asyncio.sleep(0.05)
        link.pause_reading()
        await asyncio.sleep(1.3)  # past the timeout (the sweeper runs every 0.2 s)
        assert results == [] and not link.closed
        link.resume_reading()
        assert not link.read_paused
        await asyncio.sleep(0.1)
        assert results == []
        await asyncio.sleep(0.4)
        assert len(results) == 1 and link.closed  # no answer within the restarted timeout
        server.close()

    asyncio.run(scenario())
