"""The embedded data plane below the wire: batch validation, the segment-log store, topics,
producer state, change notifications, group-commit fsync and fetch wake-ups."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from engine.metadata import MetadataImage
from gateway.dataplane.apis.fetch import FetchApi
from gateway.dataplane.apis.produce import batch_error_code, single_produce_batch
from gateway.dataplane.plane import DataPlane, SequenceError, TopicError
from gateway.dataplane.producers import ProducerIdAllocator
from gateway.dataplane.store import SegmentPartitionStore
from gateway.dataplane.topics import TopicChange, topic_name_error
from gateway.registry import RequestContext
from protocol.entity_builder import build
from records.batch import iter_batch_headers, read_batch_header, validate_client_batch
from records.errors import CorruptBatchError, InvalidBatchError, LogFailedError, OffsetOutOfRangeError
from records.segment import segment_name
from tests.record_batches import make_batch

LOG_FILE = segment_name(0)
read_header = read_batch_header

# -- batches ---------------------------------------------------------------------------------


def test_a_flipped_bit_is_a_corrupt_batch() -> None:
    batch = bytearray(make_batch([b"a", b"b"]))
    batch[-1] ^= 0x01
    with pytest.raises(CorruptBatchError) as e:
        validate_client_batch(bytes(batch))
    assert batch_error_code(e.value) == ErrorCode.corrupt_message


def with_valid_crc(batch: bytearray) -> bytes:
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)


def test_count_and_offset_range_must_agree() -> None:
    batch = bytearray(make_batch([b"a", b"b"]))
    batch[57:61] = (3).to_bytes(4, "big")  # recordsCount 3 but lastOffsetDelta 1
    with pytest.raises(InvalidBatchError, match="inconsistent offset range") as e:
        validate_client_batch(with_valid_crc(batch))
    assert batch_error_code(e.value) == ErrorCode.invalid_record


def test_clients_may_not_write_control_batches() -> None:
    batch = bytearray(make_batch([b"a"]))
    batch[22] |= 0x20
    with pytest.raises(InvalidBatchError, match="control"):
        validate_client_batch(with_valid_crc(batch))


def test_produce_entries_must_hold_exactly_one_magic_2_batch() -> None:
    one = make_batch([b"a"])
    assert single_produce_batch(one, 9) == one
    assert single_produce_batch(one + one[:20], 9) == one  # incomplete tail is dropped
    with pytest.raises(InvalidBatchError, match="exactly one record batch"):
        single_produce_batch(one + one, 9)
    with pytest.raises(InvalidBatchError, match="at least one record batch"):
        single_produce_batch(b"", 9)
    old_magic = bytearray(one)
    old_magic[16] = 1
    with pytest.raises(InvalidBatchError, match="magic version 2"):
        single_produce_batch(bytes(old_magic), 9)
    bad_magic = bytearray(one)
    bad_magic[16] = 7
    with pytest.raises(CorruptBatchError, match="Invalid magic"):
        single_produce_batch(bytes(bad_magic), 9)


# -- the segment-log store -----------------------------------------------------------------


def open_store(path: Path, segment_bytes: int = 1 << 30) -> SegmentPartitionStore:
    return SegmentPartitionStore.open(path, segment_bytes=segment_bytes, fsync_policy="explicit")


def test_store_assigns_offsets_and_reads_whole_batches(tmp_path: Path) -> None:
    store = open_store(tmp_path / "p")
    assert store.append_batch(make_batch([b"a", b"b", b"c"])) == (0, 2)
    assert store.append_batch(make_batch([b"d"])) == (3, 3)
    first = store.read(1, 1)  # from the middle of a batch, more than max_bytes: one batch
    assert read_header(first).base_offset == 0 and read_header(first).size == len(first)
    assert read_header(first).partition_leader_epoch == 0  # the leader epoch is ours, 0
    both = store.read(0, 10_000)
    assert read_header(both, read_header(both).size).base_offset == 3
    assert store.read(4, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        store.read(5, 100)
    with pytest.raises(InvalidBatchError):
        store.append_batch(make_batch([b"x"]) + b"trailing")
    assert store.end_offset == 4
    store.close()


def test_store_recovers_its_index_and_cuts_a_torn_tail(tmp_path: Path) -> None:
    store = open_store(tmp_path / "p")
    store.append_batch(make_batch([b"a", b"b"]))
    store.append_batch(make_batch([b"c"]))
    store.close()
    log_file = tmp_path / "p" / LOG_FILE
    intact = log_file.stat().st_size
    with open(log_file, "ab") as f:  # a crash in the middle of the next append
        f.write(make_batch([b"torn"])[:30])
    store = open_store(tmp_path / "p")
    assert store.end_offset == 3 and log_file.stat().st_size == intact
    assert store.append_batch(make_batch([b"d"])) == (3, 3)
    store.close()


def test_store_rolls_segments_at_segment_bytes(tmp_path: Path) -> None:
    batch = make_batch([b"v" * 100] * 5)
    store = open_store(tmp_path / "p", segment_bytes=3 * len(batch))
    for i in range(10):
        assert store.append_batch(batch) == (5 * i, 5 * i + 4)
    assert store.log.segment_base_offsets == [0, 15, 30, 45]
    assert sorted(f for f in os.listdir(tmp_path / "p") if f.endswith(".log")) == [
        segment_name(b) for b in (0, 15, 30, 45)
    ]
    data = store.read(10, 10 * len(batch))  # reads across segments
    assert [h.base_offset for _, h in iter_batch_headers(data)] == [10, 15, 20, 25, 30, 35, 40, 45]
    store.sync()
    store.close()
    store = open_store(tmp_path / "p", segment_bytes=3 * len(batch))
    assert (store.start_offset, store.end_offset) == (0, 50)
    store.close()


def test_store_sync_from_a_worker_thread_while_appending(tmp_path: Path) -> None:
    store = open_store(tmp_path / "p", segment_bytes=4096)
    stop = threading.Event()
    errors: list[BaseException] = []

    def syncer() -> None:
        try:
            while not stop.is_set():
                store.sync()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    worker = threading.Thread(target=syncer)
    worker.start()
    try:
        for i in range(300):  # rolls a segment every few batches
            assert store.append_batch(make_batch([b"%d" % i] * 3)) == (3 * i, 3 * i + 2)
    finally:
        stop.set()
        worker.join(10)
    assert not errors
    store.sync()
    assert store.log.durable_offset == store.end_offset == 900
    store.close()


def test_a_failed_fsync_fails_the_store_until_it_is_reopened(tmp_path: Path) -> None:
    store = open_store(tmp_path / "p")
    store.append_batch(make_batch([b"a"]))
    real_fsync = os.fsync if not hasattr(os, "fdatasync") else os.fdatasync

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    name = "fdatasync" if hasattr(os, "fdatasync") else "fsync"
    setattr(os, name, broken)
    try:
        with pytest.raises(LogFailedError):
            store.sync()
    finally:
        setattr(os, name, real_fsync)
    with pytest.raises(LogFailedError):
        store.append_batch(make_batch([b"b"]))
    store.close()
    store = open_store(tmp_path / "p")
    assert store.end_offset == 1
    store.close()


def test_offset_for_timestamp_finds_the_first_record_at_or_after_it(tmp_path: Path) -> None:
    store = open_store(tmp_path / "p")
    store.append_batch(make_batch([b"a", b"b"], timestamps_ms=[100, 200]))
    store.append_batch(make_batch([b"c", b"d"], timestamps_ms=[300, 400]))
    assert store.offset_for_timestamp(0) == (0, 100)
    assert store.offset_for_timestamp(150) == (1, 200)
    assert store.offset_for_timestamp(300) == (2, 300)
    assert store.offset_for_timestamp(401) is None
    store.close()


def test_unknown_fsync_policies_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fsync_policy"):
        SegmentPartitionStore.open(tmp_path / "p", segment_bytes=1024, fsync_policy="sometimes")


# -- topics, notifications, restart ------------------------------------------------------------


def test_topic_names_follow_kafka_rules() -> None:
    assert topic_name_error("orders.v1_a-b") is None
    for bad in ("", ".", "..", "a" * 250, "with space", "slash/x", "ünïcode"):
        assert topic_name_error(bad) is not None, bad
    assert topic_name_error("a" * 249) is None


def test_adding_partitions_writes_its_files_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CreatePartitions (issue 27): the new partitions' directories and logs and the registry
    are written on a worker thread, as CreateTopics does, and the result is durable."""
    on_thread: list[int] = []

    async def scenario() -> None:
        plane = DataPlane(tmp_path, num_partitions=1)
        plane.create_topic("t")
        real_create, real_write = plane._create_partitions, plane.topics.write

        def create(topic: Any, indexes: range) -> Any:
            on_thread.append(threading.get_ident())
            return real_create(topic, indexes)

        def write(by_name: Any) -> None:
            on_thread.append(threading.get_ident())
            real_write(by_name)

        monkeypatch.setattr(plane, "_create_partitions", create)
        monkeypatch.setattr(plane.topics, "write", write)
        grown = await plane.add_partitions("t", 40)
        assert grown.partitions == 40 and plane.topic("t") == grown
        assert len(on_thread) == 2 and threading.get_ident() not in on_thread
        first, last = plane.partition("t", 0), plane.partition("t", 39)
        assert first is not None and last is not None and first.topic == last.topic == grown
        await plane.close()

    asyncio.run(scenario())
    reopened = DataPlane(tmp_path, num_partitions=1)
    topic = reopened.topic("t")
    assert topic is not None and topic.partitions == 40 and reopened.partition("t", 39) is not None
    asyncio.run(reopened.close())


def test_topic_changes_are_durable_and_reported_with_the_new_image(tmp_path: Path) -> None:
    async def scenario() -> None:
        plane = DataPlane(tmp_path, num_partitions=2)
        seen: list[tuple[TopicChange, MetadataImage]] = []
        unsubscribe = plane.subscribe(lambda change, image: seen.append((change, image)))
        created = plane.create_topic("orders")
        grown = await plane.add_partitions("orders", 5)
        assert created.topic_id.int != 0 and grown.topic_id == created.topic_id
        assert [(c.kind, c.topic.partitions, c.previous_partitions) for c, _ in seen] == [
            ("created", 2, None),
            ("partitions_added", 5, 2),
        ]
        image = seen[-1][1]
        topic = image.topic("orders")
        assert topic is not None and (topic.topic_id, topic.num_partitions) == (
            created.topic_id,
            5,
        )
        assert image.version > seen[0][1].version
        with pytest.raises(TopicError) as shrink:
            await plane.add_partitions("orders", 3)
        assert shrink.value.code == ErrorCode.invalid_partitions
        with pytest.raises(TopicError) as dup:
            plane.create_topic("orders")
        assert dup.value.code == ErrorCode.topic_already_exists
        plane.create_topic("orders_v1")
        with pytest.raises(TopicError) as collide:
            plane.create_topic("orders.v1")
        assert collide.value.code == ErrorCode.invalid_topic_exception
        p = plane.partition("orders", 4)
        assert p is not None and p.append(make_batch([b"kept"])) == (0, 0)
        await plane.close()

        reopened = DataPlane(tmp_path, num_partitions=2)
        again = reopened.topic("orders")
        assert again is not None and (again.topic_id, again.partitions) == (created.topic_id, 5)
        assert reopened.cluster_id == plane.cluster_id
        p = reopened.partition("orders", 4)
        assert p is not None and p.high_watermark == 1
        deleted = await reopened.delete_topic("orders")
        assert deleted.topic_id == created.topic_id
        assert not (tmp_path / "orders-0").exists()
        unsubscribe()
        await reopened.close()

    asyncio.run(scenario())


def test_partition_directories_no_topic_owns_are_removed_on_open(tmp_path: Path) -> None:
    async def scenario() -> None:
        plane = DataPlane(tmp_path)
        plane.create_topic("gone", 1)
        await plane.close()
        (tmp_path / "topics.json").write_text('{"version": 1, "topics": []}')
        reopened = DataPlane(tmp_path)
        assert not (tmp_path / "gone-0").exists()
        recreated = reopened.create_topic("gone", 1)
        p = reopened.partition("gone", 0)
        assert p is not None and p.high_watermark == 0 and recreated.topic_id.int != 0
        await reopened.close()

    asyncio.run(scenario())


def test_a_different_node_id_than_the_data_directory_is_refused(tmp_path: Path) -> None:
    DataPlane(tmp_path, node_id=0)
    with pytest.raises(ValueError, match=r"node.id=1 does not match"):
        DataPlane(tmp_path, node_id=1)


# -- idempotent producers --------------------------------------------------------------------


def test_idempotent_retries_are_deduplicated_and_gaps_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        plane = DataPlane(tmp_path)
        plane.create_topic("idem", 1)
        p = plane.partition("idem", 0)
        assert p is not None
        first = make_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
        assert p.append(first) == (0, 1)
        assert p.append(first) == (0, 1)  # a retry: same offsets, nothing appended
        assert p.high_watermark == 2
        assert p.append(make_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=2)) == (2, 2)
        with pytest.raises(SequenceError) as gap:
            p.append(make_batch([b"e"], producer_id=7, producer_epoch=0, base_sequence=9))
        assert gap.value.code == ErrorCode.out_of_order_sequence_number
        assert p.append(make_batch([b"f"], producer_id=7, producer_epoch=1, base_sequence=0)) == (3, 3)
        with pytest.raises(SequenceError) as fenced:
            p.append(make_batch([b"g"], producer_id=7, producer_epoch=0, base_sequence=3))
        assert fenced.value.code == ErrorCode.invalid_producer_epoch
        await plane.close()

    asyncio.run(scenario())


def test_producer_ids_are_never_reused_across_restarts(tmp_path: Path) -> None:
    first = ProducerIdAllocator(tmp_path)
    a = [first.next_id() for _ in range(3)]
    second = ProducerIdAllocator(tmp_path)
    b = second.next_id()
    assert len(set(a)) == 3 and b > max(a)


# -- group commit and fetch wake-ups ---------------------------------------------------------


def test_concurrent_appends_share_fsyncs(tmp_path: Path) -> None:
    async def scenario() -> None:
        plane = DataPlane(tmp_path)
        plane.create_topic("sync", 1)
        p = plane.partition("sync", 0)
        assert p is not None
        calls = []
        gate = threading.Event()
        real_sync = p.store.sync

        def slow_sync() -> None:
            calls.append(1)
            gate.wait(5)
            real_sync()

        p.store.sync = slow_sync  # type: ignore[method-assign]
        waits = []
        for i in range(20):
            p.append(make_batch([str(i).encode()]))
            waits.append(asyncio.ensure_future(p.make_durable()))
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.gather(*waits)
        assert 1 <= len(calls) <= 2
        await plane.close()

    asyncio.run(scenario())


def fetch_request(topic: str, offset: int, max_wait_ms: int) -> Any:
    return build(
        load_request_schema(1, 12),
        {
            "max_wait": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "forgotten_topics_data": [],
            "rack_id": "",
            "topics": [
                {
                    "topic": topic,
                    "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
                }
            ],
        },
    )


def test_a_waiting_fetch_is_answered_as_soon_as_data_is_appended(tmp_path: Path) -> None:
    async def scenario() -> None:
        plane = DataPlane(tmp_path)
        plane.create_topic("wait", 1)
        api = FetchApi(plane)
        ctx = RequestContext(1, ("127.0.0.1", 1), ("127.0.0.1", 9092))
        loop = asyncio.get_running_loop()
        started = loop.time()
        fetch = asyncio.ensure_future(api.handle(ctx, None, fetch_request("wait", 0, 5000)))
        await asyncio.sleep(0.05)
        assert not fetch.done()
        p = plane.partition("wait", 0)
        assert p is not None
        p.append(make_batch([b"hello"]))
        resp = await asyncio.wait_for(fetch, 1)
        assert loop.time() - started < 1
        part = resp.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark) == (ErrorCode.none, 1)
        assert read_header(part.records).record_count == 1

        beyond = await api.handle(ctx, None, fetch_request("wait", 5, 5000))
        part = beyond.responses[0].partitions[0]
        assert (part.error_code, part.records) == (ErrorCode.offset_out_of_range, b"")
        await plane.close()

    asyncio.run(scenario())


def test_incremental_fetch_sessions_are_refused_so_clients_fall_back(tmp_path: Path) -> None:
    async def scenario() -> None:
        plane = DataPlane(tmp_path)
        api = FetchApi(plane)
        ctx = RequestContext(1, ("127.0.0.1", 1), ("127.0.0.1", 9092))
        full = await api.handle(ctx, None, fetch_request("none", 0, 0))
        assert full.session_id == 0 and full.error_code == ErrorCode.none
        assert full.responses[0].partitions[0].records == b""
        incremental = build(
            load_request_schema(1, 12),
            {
                **{
                    f: getattr(fetch_request("none", 0, 0), f)
                    for f in (
                        "max_wait",
                        "min_bytes",
                        "max_bytes",
                        "isolation_level",
                        "topics",
                        "forgotten_topics_data",
                        "rack_id",
                    )
                },
                "session_id": 1234,
                "session_epoch": 1,
            },
        )
        refused = await api.handle(ctx, None, incremental)
        assert refused.error_code == ErrorCode.fetch_session_id_not_found
        assert (refused.session_id, refused.responses) == (0, ())
        await plane.close()

    asyncio.run(scenario())


def test_data_dir_layout_uses_kafka_names(tmp_path: Path) -> None:
    plane = DataPlane(tmp_path)
    topic = plane.create_topic("layout", 1)
    meta = (tmp_path / "layout-0" / "partition.metadata").read_text()
    assert meta.startswith("version: 0\ntopic_id: ")
    assert "cluster.id=" in (tmp_path / "meta.properties").read_text()
    assert str(topic.topic_id) in (tmp_path / "topics.json").read_text()
    # SegmentLog's lock file, the first segment, Kafka's partition.metadata.
    assert sorted(os.listdir(tmp_path / "layout-0")) == [".lock", LOG_FILE, "partition.metadata"]
    assert uuid.UUID(str(topic.topic_id)).version == 4


def test_a_request_pipelined_after_a_produce_sees_its_records(tmp_path: Path) -> None:
    """Kafka handles one request per connection at a time; appends keep that order here."""
    from gateway.connection import KafkaConnection
    from gateway.dataplane.apis.list_offsets import ListOffsetsApi
    from gateway.dataplane.apis.produce import ProduceApi
    from gateway.dispatch import Dispatcher
    from gateway.metrics import MetricsRegistry
    from gateway.registry import HandlerRegistry
    from protocol.codec import decode_response, encode_request, response_type_of
    from tests.fake_transport import FakeTransport

    async def scenario() -> None:
        plane = DataPlane(tmp_path)
        plane.create_topic("ordered", 1)
        registry = HandlerRegistry()
        ProduceApi(plane).register(registry)
        ListOffsetsApi(plane).register(registry)
        dispatcher = Dispatcher(registry, MetricsRegistry(), unsupported_api_versions=bytes)
        conn = KafkaConnection(connection_id=1, on_frame=dispatcher.on_frame, max_frame_bytes=1 << 20)
        transport = FakeTransport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        produce = build(
            load_request_schema(0, 9),
            {
                "transactional_id": None,
                "acks": 1,
                "timeout": 1000,
                "topic_data": [
                    {"name": "ordered", "partition_data": [{"index": 0, "records": make_batch([b"a", b"b"])}]}
                ],
            },
        )
        latest = build(
            load_request_schema(2, 7),
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": "ordered",
                        "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}],
                    }
                ],
            },
        )
        conn.data_received(
            encode_request(produce, correlation_id=1) + encode_request(latest, correlation_id=2)
        )
        for _ in range(50):
            if len(transport.frames()) == 2:
                break
            await asyncio.sleep(0.01)
        (c1, produced), (c2, offsets) = (
            decode_response(response_type_of(r), w[4:])
            for r, w in zip((produce, latest), transport.frames(), strict=True)
        )
        assert (c1, c2) == (1, 2)
        assert produced.responses[0].partition_responses[0].base_offset == 0
        assert offsets.topics[0].partitions[0].offset == 2
        await plane.close()

    asyncio.run(scenario())


def test_produce_v13_and_fetch_v16_address_topics_by_id(tmp_path: Path) -> None:
    from gateway.dataplane.apis.produce import ProduceApi

    async def scenario() -> None:
        plane = DataPlane(tmp_path)
        topic = plane.create_topic("by-id", 1)
        ctx = RequestContext(1, ("127.0.0.1", 1), ("127.0.0.1", 9092))
        unknown = uuid.uuid4()
        produce = build(
            load_request_schema(0, 13),
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": 1000,
                "topic_data": [
                    {"topic_id": tid, "partition_data": [{"index": 0, "records": make_batch([b"x"])}]}
                    for tid in (topic.topic_id, unknown)
                ],
            },
        )
        result = ProduceApi(plane).handle(ctx, None, produce)
        resp = await result
        assert [(t.topic_id, t.partition_responses[0].error_code) for t in resp.responses] == [
            (topic.topic_id, ErrorCode.none),
            (unknown, ErrorCode.unknown_topic_id),
        ]
        fetch = build(
            load_request_schema(1, 16),
            {
                "max_wait": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "forgotten_topics_data": [],
                "rack_id": "",
                "topics": [
                    {
                        "topic_id": tid,
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                    }
                    for tid in (topic.topic_id, unknown)
                ],
            },
        )
        got = await FetchApi(plane).handle(ctx, None, fetch)
        found, missing = got.responses
        assert found.topic_id == topic.topic_id and found.partitions[0].high_watermark == 1
        assert read_header(found.partitions[0].records).record_count == 1
        assert missing.partitions[0].error_code == ErrorCode.unknown_topic_id
        await plane.close()

    asyncio.run(scenario())


def test_list_offsets_by_timestamp_and_special_values(tmp_path: Path) -> None:
    from gateway.dataplane.apis.list_offsets import ListOffsetsApi

    plane = DataPlane(tmp_path)
    plane.create_topic("times", 1)
    p = plane.partition("times", 0)
    assert p is not None
    p.append(make_batch([b"a", b"b"], timestamps_ms=[1000, 5000]))
    p.append(make_batch([b"c", b"d"], timestamps_ms=[3000, 4000]))
    api = ListOffsetsApi(plane)
    ctx = RequestContext(1, ("127.0.0.1", 1), ("127.0.0.1", 9092))

    def ask(timestamp: int) -> tuple[int, int, int]:
        request = build(
            load_request_schema(2, 9),
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": "times",
                        "partitions": [
                            {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}
                        ],
                    }
                ],
            },
        )
        part = api.handle(ctx, None, request).topics[0].partitions[0]
        assert part.error_code == ErrorCode.none
        return part.offset, part.timestamp, part.leader_epoch

    assert ask(-2) == (0, -1, 0)  # earliest
    assert ask(-1) == (4, -1, 0)  # latest
    assert ask(-3) == (1, 5000, 0)  # max timestamp: offset 1 holds 5000
    assert ask(2000) == (1, 5000, 0)  # first record at or after 2000 in log order
    assert ask(6000) == (-1, -1, -1)
    assert ask(-5) == (-1, -1, -1)  # latest tiered: no tiered storage


def test_partitions_roll_segments_at_log_segment_bytes(tmp_path: Path) -> None:
    """`log.segment.bytes` reaches every partition's log (ServerConfig -> DataPlane -> store)."""
    from gateway.config import load_config

    config = load_config(overrides={"log.dirs": str(tmp_path)}, sets=["log.segment.bytes=1000"])
    assert config.log_segment_bytes == 1000

    async def scenario() -> None:
        plane = DataPlane(tmp_path, segment_bytes=config.log_segment_bytes)
        plane.create_topic("rolled", 1)
        p = plane.partition("rolled", 0)
        assert p is not None
        for i in range(20):
            p.append(make_batch([b"%03d" % i + b"v" * 200]))
        await p.make_durable()
        segments = sorted(f for f in os.listdir(tmp_path / "rolled-0") if f.endswith(".log"))
        assert len(segments) >= 5 and all(
            os.path.getsize(tmp_path / "rolled-0" / f) <= 1000 for f in segments
        )
        await plane.close()
        reopened = DataPlane(tmp_path, segment_bytes=config.log_segment_bytes)
        q = reopened.partition("rolled", 0)
        assert q is not None and q.high_watermark == 20
        assert [h.base_offset for _, h in iter_batch_headers(q.store.read(0, 1 << 20))] == list(range(20))
        await reopened.close()

    asyncio.run(scenario())


def test_a_failed_partition_log_answers_kafka_storage_error(tmp_path: Path) -> None:
    from gateway.dataplane.apis.list_offsets import ListOffsetsApi
    from gateway.dataplane.apis.produce import ProduceApi

    async def scenario() -> None:
        plane = DataPlane(tmp_path)
        plane.create_topic("failing", 1)
        p = plane.partition("failing", 0)
        assert p is not None
        p.append(make_batch([b"before"]))
        p.store.log._fail(OSError(5, "Input/output error"))  # what a failed fsync leaves
        ctx = RequestContext(1, ("127.0.0.1", 1), ("127.0.0.1", 9092))
        produce = build(
            load_request_schema(0, 9),
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": 1000,
                "topic_data": [
                    {"name": "failing", "partition_data": [{"index": 0, "records": make_batch([b"x"])}]}
                ],
            },
        )
        resp = ProduceApi(plane).handle(ctx, None, produce)
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.kafka_storage_error
        fetched = await FetchApi(plane).handle(ctx, None, fetch_request("failing", 0, 0))
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.kafka_storage_error
        by_time = build(
            load_request_schema(2, 9),
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": "failing",
                        "partitions": [{"partition_index": 0, "timestamp": 0, "current_leader_epoch": -1}],
                    }
                ],
            },
        )
        listed = ListOffsetsApi(plane).handle(ctx, None, by_time)
        assert listed.topics[0].partitions[0].error_code == ErrorCode.kafka_storage_error
        await plane.close()

    asyncio.run(scenario())
