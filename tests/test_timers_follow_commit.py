"""Timer changes are part of an operation and follow its records (issue 11).

A ConsumerGroupHeartbeat leave (member epoch -1) whose append fails is answered with the mapped
error and leaves the group untouched: the member is still there, so its session timer must still
be there too, or the member would never expire. The same holds for a classic member leaving a
consumer group, and at the storage level with a real coordinator log refusing the batch."""

from __future__ import annotations

from pathlib import Path

from engine.consumer.api import ConsumerGroupHeartbeatRequest
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import SeededIds
from engine.timers import rebalance_timeout_key, session_timeout_key
from gateway.coordinator_storage import CoordinatorStorage
from tests.migration_harness import MigrationHarness
from tests.storage_workload import CONFIG, IMAGE


def _joined(h: MigrationHarness, member_id: str = "m1") -> int:
    r = h.cgh(member_id, 0, topics=["foo"])
    assert r.error_code == 0
    r = h.ack(member_id, r)
    assert r.error_code == 0
    return r.member_epoch


def test_failed_leave_keeps_the_member_and_its_session_timer() -> None:
    h = MigrationHarness()
    epoch = _joined(h)
    before = h.shard.persisted_state()
    key = session_timeout_key("g", "m1")
    assert h.shard.timers.is_scheduled(key)

    h.append_error = Errors.KAFKA_STORAGE_ERROR
    r = h.cgh("m1", -1)
    assert r.error_code == Errors.NOT_COORDINATOR
    assert h.shard.persisted_state() == before
    group = h.shard.consumer_group("g")
    assert group is not None and "m1" in group.members
    assert h.shard.timers.is_scheduled(key), "the member stayed: its session timer must stay too"

    # The member never heartbeats again: its session expires and it is fenced.
    h.append_error = None
    h.advance(45_001)
    group = h.shard.consumer_group("g")
    assert group is None or "m1" not in group.members
    assert not h.shard.timers.is_scheduled(key)
    assert epoch > 0


def test_failed_join_schedules_no_timer_for_a_member_that_does_not_exist() -> None:
    h = MigrationHarness()
    h.append_error = Errors.NOT_LEADER_OR_FOLLOWER
    r = h.cgh("m1", 0, topics=["foo"])
    assert r.error_code == Errors.NOT_COORDINATOR
    assert h.shard.consumer_group("g") is None
    assert h.shard.timers.keys() == []


def test_failed_revocation_keeps_the_rebalance_timer_of_a_revoking_member() -> None:
    """A second member makes m1 revoke; m1's acknowledgement fails to append: m1 is still
    revoking, so its rebalance timer must not have been cancelled."""
    h = MigrationHarness(topics={"foo": 2})
    _joined(h, "m1")
    r2 = h.cgh("m2", 0, topics=["foo"])
    assert r2.error_code == 0
    r1 = h.cgh("m1", h.shard.consumer_group("g").members["m1"].member_epoch, owned=h.owned_of("m1"))  # type: ignore[union-attr]
    key = rebalance_timeout_key("g", "m1")
    assert h.shard.timers.is_scheduled(key)
    h.append_error = Errors.KAFKA_STORAGE_ERROR
    failed = h.cgh("m1", r1.member_epoch, owned=[])
    assert failed.error_code == Errors.NOT_COORDINATOR
    assert h.shard.timers.is_scheduled(key)


def test_failed_classic_leave_from_a_consumer_group_keeps_the_member_timers() -> None:
    h = MigrationHarness()
    _joined(h, "m1")
    j = h.result(h.join("", version=3))
    assert j.error_code == 0, j
    mid = j.member_id
    before = h.shard.persisted_state()
    key = session_timeout_key("g", mid)
    assert h.shard.timers.is_scheduled(key)

    h.append_error = Errors.KAFKA_STORAGE_ERROR
    r = h.leave((mid, None))
    assert r.error_code == Errors.NOT_COORDINATOR
    assert h.shard.persisted_state() == before
    assert h.shard.timers.is_scheduled(key)


def test_storage_refusing_a_leave_keeps_the_member_expirable(tmp_path: Path) -> None:
    """The same with a real coordinator log: the leave's batch exceeds the batch limit, so the
    append fails (MESSAGE_TOO_LARGE, answered UNKNOWN_SERVER_ERROR) and the member stays, with a
    session timer that later fences it through the log."""
    storage = CoordinatorStorage.open(
        str(tmp_path), config=CONFIG, ids=SeededIds(5), image=IMAGE, now_ms=1000, fsync_policy="none"
    )
    try:
        shard = storage.shard
        ctx = RequestContext("c", "/h", 1)
        join = ConsumerGroupHeartbeatRequest(
            "cg", "m1", 0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"], topic_partitions=[]
        )
        joined = shard.consumer_group_heartbeat(join, ctx, 1001).response
        assert joined is not None and joined.error_code == 0  # type: ignore[union-attr]
        end = storage.end_offset

        storage.max_batch_bytes = 1
        out = shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest("cg", "m1", -1), ctx, 1002)
        assert out.response.error_code == Errors.UNKNOWN_SERVER_ERROR  # type: ignore[union-attr]
        assert storage.end_offset == end
        group = shard.consumer_group("cg")
        assert group is not None and "m1" in group.members
        deadline = shard.timers.deadline(session_timeout_key("cg", "m1"))
        assert deadline is not None

        storage.max_batch_bytes = 1 << 20
        fired = shard.expire(deadline)
        assert any(n == "member.fenced" for o in fired for n, _ in o.events)
        assert storage.end_offset > end
        group = shard.consumer_group("cg")
        assert group is None or "m1" not in group.members
    finally:
        storage.close()
