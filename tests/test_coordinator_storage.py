"""Durable shard state (issue 4): loading, rollback of a failed append, crash consistency at every
byte of the last batch, corruption, lenient replay and compaction (Kafka `CoordinatorRuntime`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from engine.consumer.api import ConsumerGroupHeartbeatRequest
from engine.context import RequestContext
from engine.errors import AppendError, Errors
from engine.ids import SeededIds
from engine.shard import Shard
from gateway.coordinator_storage import CoordinatorLoadError, CoordinatorStorage
from records import codec
from records.classic_group import GroupMetadataKey, GroupMetadataValue
from records.consumer_group import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
)
from records.coordinator import CoordinatorRecord
from records.errors import LogCorruptionError
from tests.storage_workload import CONFIG, IMAGE, Workload, persisted


def open_storage(path: Path, now: int = 1000, **kw: Any) -> CoordinatorStorage:
    return CoordinatorStorage.open(
        str(path), config=CONFIG, ids=SeededIds(5), image=IMAGE, now_ms=now, fsync_policy="none", **kw
    )


def run_workload(path: Path, steps: int, seed: int = 1) -> tuple[CoordinatorStorage, Workload, list[int]]:
    """Run `steps` operations; returns the storage, the workload and the log end offset after
    each step."""
    storage = open_storage(path)
    w = Workload(storage.shard, seed)
    ends = []
    for _ in range(steps):
        w.step()
        ends.append(storage.end_offset)
    storage.sync()
    return storage, w, ends


def replayed_state(path: Path) -> dict[str, Any]:
    s = open_storage(path)
    try:
        return persisted(s.shard)
    finally:
        s.close()


def test_a_reopened_shard_has_exactly_the_state_its_records_describe(tmp_path: Path) -> None:
    storage, w, _ = run_workload(tmp_path, 200)
    # What the log describes: the records replayed from an empty shard.
    reference = Shard(CONFIG)
    from gateway.coordinator_storage import load_shard

    load_shard(storage.log, reference)
    expected = persisted(reference)
    live = persisted(storage.shard)
    storage.close()
    assert live["offsets"] == expected["offsets"]
    assert {k: v for k, v in live["groups"].items() if v[0] == "consumer"} == {
        k: v for k, v in expected["groups"].items() if v[0] == "consumer"
    }
    assert replayed_state(tmp_path) == expected
    assert expected["offsets"] and expected["groups"]


def test_unknown_record_types_are_skipped_on_load(tmp_path: Path) -> None:
    storage, _, _ = run_workload(tmp_path, 30)
    before = persisted(storage.shard)
    storage.log.append_records([(b"\x00\x63some-future-key", b"\x00\x00value")], 5)  # record type 99
    storage.sync()
    storage.close()
    reopened = open_storage(tmp_path)
    assert reopened.load_stats is not None and reopened.load_stats.skipped_unknown == 1
    assert persisted(reopened.shard)["offsets"] == before["offsets"]
    reopened.close()


def test_malformed_bytes_of_a_known_type_stop_the_load_naming_offset_and_key(tmp_path: Path) -> None:
    storage = open_storage(tmp_path)
    key, _ = codec.encode_record(
        CoordinatorRecord(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(1))
    )
    storage.log.append_records([(key, b"\x00\x00\xff")], 5)
    storage.sync()
    storage.close()
    with pytest.raises(CoordinatorLoadError, match=r"malformed record at offset 0 \(key 0003"):
        open_storage(tmp_path)


def test_failed_append_leaves_the_state_unchanged_and_answers_the_mapped_error(tmp_path: Path) -> None:
    storage, w, _ = run_workload(tmp_path, 50)
    before = persisted(storage.shard)
    end = storage.end_offset

    def refuse(records: Any) -> None:
        raise AppendError(Errors.KAFKA_STORAGE_ERROR, "disk gone")

    storage.shard.journal = refuse
    out = storage.shard.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            "cg",
            "newcomer",
            0,
            rebalance_timeout_ms=5000,
            subscribed_topic_names=["foo"],
            topic_partitions=[],
        ),
        RequestContext("c", "/h", 1),
        w.now + 1,
    )
    assert out.response.error_code == Errors.NOT_COORDINATOR  # type: ignore[union-attr]
    assert persisted(storage.shard) == before
    assert storage.end_offset == end
    assert [n for n, _ in out.events][-1] == "append.failed"
    storage.close()


def test_too_large_operation_is_refused_as_message_too_large_mapped_to_unknown_server_error(
    tmp_path: Path,
) -> None:
    storage = open_storage(tmp_path, max_batch_bytes=200)
    before = persisted(storage.shard)
    out = storage.shard.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            "cg",
            "m",
            0,
            rebalance_timeout_ms=5000,
            subscribed_topic_names=["foo", "bar"],
            topic_partitions=[],
        ),
        RequestContext("c", "/h", 1),
        2000,
    )
    assert out.response.error_code == Errors.UNKNOWN_SERVER_ERROR  # type: ignore[union-attr]
    assert persisted(storage.shard) == before
    storage.close()


def test_truncating_the_last_batch_at_every_byte_recovers_the_state_before_it(tmp_path: Path) -> None:
    storage, w, ends = run_workload(tmp_path, 40, seed=3)
    # Make sure the last operation wrote a batch of several records (a consumer join does).
    before_last = storage.end_offset
    w.now += 10
    storage.shard.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            "cg",
            "late-joiner",
            0,
            rebalance_timeout_ms=5000,
            subscribed_topic_names=["foo"],
            topic_partitions=[],
        ),
        RequestContext("c", "/h", 1),
        w.now,
    )
    assert storage.end_offset - before_last >= 4
    storage.sync()
    storage.close()
    [segment] = sorted(tmp_path.glob("*.log"))
    data = segment.read_bytes()
    # The last batch starts where the state before it ended.
    reference = Shard(CONFIG)
    from records.log import SegmentLog

    with SegmentLog.open(str(tmp_path), fsync_policy="none") as log:
        positions = []
        pos = 0
        for header, raw in log.batches():
            positions.append((header.base_offset, pos))
            pos += len(raw)
    last_start = next(p for base, p in positions if base == before_last)
    expected_full = replayed_state(tmp_path)
    segment.write_bytes(data[:last_start])
    expected_before = replayed_state(tmp_path)
    assert expected_before != expected_full
    for cut in range(last_start, len(data) + 1):
        segment.write_bytes(data[:cut])
        state = replayed_state(tmp_path)
        assert state == (expected_full if cut == len(data) else expected_before), cut
    del reference


def test_a_flipped_byte_in_a_middle_batch_is_a_clear_startup_error(tmp_path: Path) -> None:
    storage, _, _ = run_workload(tmp_path, 60)
    storage.close()
    [segment] = sorted(tmp_path.glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[len(data) // 3] ^= 0xFF
    segment.write_bytes(bytes(data))
    with pytest.raises(LogCorruptionError) as e:
        open_storage(tmp_path)
    assert str(segment) in str(e.value) or segment.name in str(e.value)


def test_a_flipped_byte_in_the_last_batch_is_truncated_away(tmp_path: Path) -> None:
    storage, _, _ = run_workload(tmp_path, 20)
    end_before_last = None
    from records.log import SegmentLog

    storage.close()
    with SegmentLog.open(str(tmp_path), fsync_policy="none") as log:
        batches = [(h.base_offset, len(raw)) for h, raw in log.batches()]
        end_before_last = batches[-1][0]
    [segment] = sorted(tmp_path.glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[-5] ^= 0xFF
    segment.write_bytes(bytes(data))
    reopened = open_storage(tmp_path)
    assert reopened.end_offset == end_before_last
    reopened.close()


def test_state_is_the_same_after_compaction(tmp_path: Path) -> None:
    storage, w, _ = run_workload(tmp_path, 400, seed=9)
    before = persisted(storage.shard, ordered=False)
    size_before = storage.log.size_bytes
    result = storage.compact(w.now)
    assert result.records_kept < result.records_before
    assert persisted(storage.shard, ordered=False) == before
    for _ in range(50):
        w.step()
    storage.sync()
    after_more = persisted(storage.shard, ordered=False)
    storage.close()
    reopened = open_storage(tmp_path)
    assert persisted(reopened.shard, ordered=False)["offsets"] == after_more["offsets"]
    consumer = {k: v for k, v in after_more["groups"].items() if v[0] == "consumer"}
    assert {
        k: v for k, v in persisted(reopened.shard, ordered=False)["groups"].items() if v[0] == "consumer"
    } == consumer
    assert reopened.log.size_bytes < size_before + 50_000
    reopened.close()


def test_lenient_replay_turns_a_classic_group_into_a_consumer_group(tmp_path: Path) -> None:
    """KAFKA-21117: compaction dropped the GroupMetadata tombstone an upgrade wrote."""
    storage = open_storage(tmp_path)
    member = GroupMetadataValue(
        "consumer",
        3,
        "range",
        "m",
        5,
        (
            __import__("records.classic_group", fromlist=["GroupMemberMetadata"]).GroupMemberMetadata(
                "m", None, "c", "/h", 1000, 1000, b"", b""
            ),
        ),
    )
    recs = [
        CoordinatorRecord(GroupMetadataKey("g"), member),
        CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey("g", "x"), None),  # ignored
        CoordinatorRecord(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(4)),
    ]
    storage.log.append_records([codec.encode_record(r) for r in recs], 5)
    storage.sync()
    storage.close()
    reopened = open_storage(tmp_path)
    g = reopened.shard.consumer_group("g")
    assert g is not None and g.group_epoch == 4
    reopened.close()


def test_a_group_metadata_record_over_a_live_consumer_group_is_a_load_error_naming_the_group(
    tmp_path: Path,
) -> None:
    storage, w, _ = run_workload(tmp_path, 0)
    storage.shard.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            "cg", "m", 0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"], topic_partitions=[]
        ),
        RequestContext("c", "/h", 1),
        2000,
    )
    rec = CoordinatorRecord(GroupMetadataKey("cg"), GroupMetadataValue("consumer", 1, None, None, 5, ()))
    storage.log.append_records([codec.encode_record(rec)], 5)
    storage.sync()
    storage.close()
    with pytest.raises(CoordinatorLoadError, match="Group cg is a consumer group"):
        open_storage(tmp_path)


def test_empty_directory_loads_an_empty_shard(tmp_path: Path) -> None:
    s = open_storage(tmp_path / "new")
    assert s.shard.groups == {} and s.end_offset == 0
    assert os.path.isdir(tmp_path / "new")
    s.close()
