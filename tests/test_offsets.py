"""Offsets for both group types: commit fencing, simple commits, fetch, delete, expiry (Kafka
`OffsetMetadataManager`)."""

from __future__ import annotations

from typing import Any

from engine.classic.state import ClassicGroupState as S
from engine.context import RequestContext
from engine.errors import Errors
from engine.offsets.api import (
    CommitPartition,
    CommitTopic,
    FetchTopic,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchGroupRequest,
)
from engine.shard import Shard
from records.classic_group import GroupMetadataKey
from records.offsets import OffsetCommitKey, OffsetCommitValue
from tests.classic_harness import ClassicHarness
from tests.consumer_harness import Harness

DAY = 24 * 3600 * 1000


def commit(
    shard: Shard,
    now: int,
    group: str = "g",
    gen: int = -1,
    member: str = "",
    version: int = 8,
    instance: str | None = None,
    offsets: dict[tuple[str, int], int] | None = None,
    metadata: str = "",
    retention: int = -1,
) -> Any:
    topics: dict[str, list[CommitPartition]] = {}
    for (t, p), o in (offsets or {("foo", 0): 42}).items():
        topics.setdefault(t, []).append(CommitPartition(p, o, 3, metadata))
    req = OffsetCommitRequest(
        group, gen, member, instance, retention, [CommitTopic(t, ps) for t, ps in topics.items()]
    )
    return shard.offset_commit(req, RequestContext("c", "/h", version), now)


def codes(out: Any) -> list[int]:
    return [p.error_code for t in out.response.topics for p in t.partitions]


def fetch(
    shard: Shard,
    group: str = "g",
    topics: dict[str, list[int]] | None = None,
    member: str | None = None,
    epoch: int = -1,
) -> Any:
    req = OffsetFetchGroupRequest(
        group, None if topics is None else [FetchTopic(t, p) for t, p in topics.items()], member, epoch
    )
    return shard.offset_fetch([req])[0]


# --- commit ----------------------------------------------------------------------------------


def test_admin_commit_to_a_missing_group_creates_a_simple_group_through_its_records() -> None:
    h = ClassicHarness()
    out = commit(h.shard, h.now)
    assert codes(out) == [0]
    [rec] = out.records
    assert rec.key == OffsetCommitKey("g", "foo", 0)
    assert rec.value == OffsetCommitValue(42, 3, "", h.now, -1)
    g = h.shard.classic_group("g")
    assert g is not None and g.is_simple()
    assert fetch(h.shard, topics={"foo": [0, 1]}).topics[0].partitions[0].committed_offset == 42


def test_member_commit_to_a_missing_group_is_group_id_not_found_from_v9_else_illegal_generation() -> None:
    h = ClassicHarness()
    assert codes(commit(h.shard, h.now, gen=3, member="m", version=9)) == [Errors.GROUP_ID_NOT_FOUND]
    assert codes(commit(h.shard, h.now, gen=3, member="m", version=8)) == [Errors.ILLEGAL_GENERATION]
    assert h.shard.groups == {}


def test_classic_commit_is_fenced_by_generation_and_member() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2)
    assert codes(commit(h.shard, h.now, gen=1, member=a)) == [0]
    assert codes(commit(h.shard, h.now, gen=0, member=a)) == [Errors.ILLEGAL_GENERATION]
    assert codes(commit(h.shard, h.now, gen=1, member="ghost")) == [Errors.UNKNOWN_MEMBER_ID]
    assert codes(commit(h.shard, h.now, gen=-1, member="")) == [
        Errors.UNKNOWN_MEMBER_ID
    ]  # admin, non-empty group


def test_classic_commit_during_completing_rebalance_is_rebalance_in_progress() -> None:
    h = ClassicHarness()
    a, _ = h.join_new()
    h.advance(1)
    assert h.group.state is S.COMPLETING_REBALANCE
    assert codes(commit(h.shard, h.now, gen=1, member=a)) == [Errors.REBALANCE_IN_PROGRESS]


def test_classic_commit_keeps_the_members_session_alive() -> None:
    h = ClassicHarness()
    a, _ = h.stable_group(2, session=3000)
    h.now += 2000
    commit(h.shard, h.now, gen=1, member=a)
    assert h.shard.timers.deadline(f"heartbeat-g-{a}") == h.now + 3000


def test_static_member_commit_with_a_stale_member_id_is_fenced_instance_id() -> None:
    h = ClassicHarness()
    r = h.result(h.join(instance_id="i", version=3))
    assert r is None
    h.advance(1)
    mid = next(iter(h.group.members))
    h.sync(mid, 1, {mid: b""})
    assert codes(commit(h.shard, h.now, gen=1, member="other", instance="i")) == [Errors.FENCED_INSTANCE_ID]


def test_consumer_group_commit_is_fenced_by_member_epoch() -> None:
    h = Harness()
    h.join("m1")
    assert codes(commit(h.shard, h.now, gen=2, member="m1", version=9)) == [0]
    out = commit(h.shard, h.now, gen=1, member="m1", version=9)
    assert codes(out) == [Errors.STALE_MEMBER_EPOCH]
    assert [n for n, _ in out.events] == ["offset_commit.fenced", "request.rejected"]
    assert codes(commit(h.shard, h.now, gen=2, member="x", version=9)) == [Errors.UNKNOWN_MEMBER_ID]
    assert codes(commit(h.shard, h.now, gen=2, member="m1", version=8)) == [Errors.UNSUPPORTED_VERSION]
    assert codes(commit(h.shard, h.now, gen=-1, member="", version=9)) == [Errors.UNKNOWN_MEMBER_ID]


def test_admin_commit_to_an_empty_consumer_group_is_accepted() -> None:
    h = Harness()
    h.join("m1")
    h.hb(member_id="m1", member_epoch=-1)
    assert codes(commit(h.shard, h.now, gen=-1, member="", version=9)) == [0]


def test_metadata_longer_than_the_limit_fails_only_that_partition() -> None:
    h = ClassicHarness(offset_metadata_max_bytes=5)
    out = commit(h.shard, h.now, offsets={("foo", 0): 1, ("foo", 1): 2}, metadata="x" * 6)
    assert codes(out) == [Errors.OFFSET_METADATA_TOO_LARGE] * 2 and out.records == []
    out = commit(h.shard, h.now, offsets={("foo", 0): 1}, metadata="x" * 5)
    assert codes(out) == [0]


def test_retention_time_sets_an_expire_timestamp() -> None:
    h = ClassicHarness()
    out = commit(h.shard, h.now, retention=60_000, version=2)
    assert out.records[0].value.expire_timestamp == h.now + 60_000


# --- fetch -----------------------------------------------------------------------------------


def test_fetch_from_a_missing_group_gives_minus_one_without_error() -> None:
    h = ClassicHarness()
    r = fetch(h.shard, topics={"foo": [0]})
    assert r.error_code == 0
    p = r.topics[0].partitions[0]
    assert (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code) == (-1, -1, "", 0)
    assert fetch(h.shard).topics == []


def test_fetch_all_returns_every_committed_offset() -> None:
    h = ClassicHarness()
    commit(h.shard, h.now, offsets={("foo", 0): 5, ("foo", 1): 6, ("bar", 0): 7})
    r = fetch(h.shard)
    assert {(t.name, p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions} == {
        ("foo", 0, 5),
        ("foo", 1, 6),
        ("bar", 0, 7),
    }


def test_fetch_from_a_consumer_group_validates_the_member_epoch_when_given() -> None:
    h = Harness()
    h.join("m1")
    assert fetch(h.shard, topics={"foo": [0]}).error_code == 0  # librdkafka: null member, -1
    assert fetch(h.shard, topics={"foo": [0]}, member="m1", epoch=2).error_code == 0
    assert fetch(h.shard, topics={"foo": [0]}, member="m1", epoch=1).error_code == Errors.STALE_MEMBER_EPOCH
    assert fetch(h.shard, topics={"foo": [0]}, member="zz", epoch=2).error_code == Errors.UNKNOWN_MEMBER_ID


# --- delete --------------------------------------------------------------------------------


def test_offset_delete_rules() -> None:
    h = ClassicHarness()
    ctx = RequestContext("c", "/h", 0)
    out = h.shard.offset_delete(OffsetDeleteRequest("g", [FetchTopic("foo", [0])]), ctx, h.now)
    assert out.response.error_code == Errors.GROUP_ID_NOT_FOUND
    a, b = h.stable_group(2)
    commit(h.shard, h.now, gen=1, member=a, offsets={("foo", 0): 1, ("other", 0): 2})
    out = h.shard.offset_delete(
        OffsetDeleteRequest("g", [FetchTopic("foo", [0]), FetchTopic("other", [0, 1])]), ctx, h.now
    )
    # The group subscribes to foo (its members' subscriptions): that offset cannot go.
    assert [(t.name, [p.error_code for p in t.partitions]) for t in out.response.topics] == [
        ("foo", [Errors.GROUP_SUBSCRIBED_TO_TOPIC]),
        ("other", [0, 0]),
    ]
    assert [r.key for r in out.records] == [OffsetCommitKey("g", "other", 0)] and out.records[0].value is None
    assert h.shard.offsets.get("g", "other", 0) is None


def test_offset_delete_in_a_non_empty_non_consumer_classic_group_is_non_empty_group() -> None:
    h = ClassicHarness()
    h.stable_group(1, protocol_type="connect")
    out = h.shard.offset_delete(OffsetDeleteRequest("g", [FetchTopic("foo", [0])]), RequestContext(), h.now)
    assert out.response.error_code == Errors.NON_EMPTY_GROUP


def test_delete_groups_rules_and_records() -> None:
    h = ClassicHarness()
    ctx = RequestContext()
    (a,) = h.stable_group(1)
    commit(h.shard, h.now, gen=1, member=a, offsets={("foo", 0): 1, ("foo", 1): 2})
    out = h.shard.delete_groups(["g", "missing"], ctx, h.now)
    assert [(r.group_id, r.error_code) for r in out.response] == [
        ("g", Errors.NON_EMPTY_GROUP),
        ("missing", Errors.GROUP_ID_NOT_FOUND),
    ]
    h.leave((a, None))
    out = h.shard.delete_groups(["g"], ctx, h.now)
    assert out.response[0].error_code == 0
    assert [type(r.key).__name__ for r in out.records] == [
        "OffsetCommitKey",
        "OffsetCommitKey",
        "GroupMetadataKey",
    ]
    assert all(r.value is None for r in out.records)
    assert "g" not in h.shard.groups and not h.shard.offsets.has_offsets("g")


def test_delete_empty_consumer_group_writes_tombstones_in_kafka_order() -> None:
    h = Harness()
    h.join("m1")
    h.hb(member_id="m1", member_epoch=-1)
    out = h.shard.delete_groups(["g"], RequestContext(), h.now)
    assert out.response[0].error_code == 0
    assert [f"k{r.key.RECORD_TYPE}" for r in out.records] == ["k6", "k4", "k3"]
    assert h.shard.consumer_group("g") is None


def test_delete_non_empty_consumer_group_is_non_empty_group() -> None:
    h = Harness()
    h.join("m1")
    assert (
        h.shard.delete_groups(["g"], RequestContext(), h.now).response[0].error_code == Errors.NON_EMPTY_GROUP
    )


# --- expiry --------------------------------------------------------------------------------


def expire(shard: Shard, now: int) -> list[Any]:
    """One run of the offset expiration job at `now` (other timers are not fired)."""
    from engine.offsets.operations import expire_offsets
    from engine.operation import Operation

    shard.tick(now)
    op = Operation()
    expire_offsets(shard.state, op)  # the job's own argument (engine/expiry.py): the shard's state
    out = shard.commit(op, None)
    return [out] if out.records else []


def test_offset_expiration_runs_periodically_as_a_timer() -> None:
    h = ClassicHarness(offsets_retention_minutes=1)
    commit(h.shard, h.now)
    h.shard.schedule_offset_expiration()
    interval = h.shard.config.offsets_retention_check_interval_ms
    outs = h.shard.expire(h.now + interval)
    assert next(r.key for o in outs for r in o.records) == OffsetCommitKey("g", "foo", 0)
    assert h.shard.timers.deadline("expire-group-metadata") == h.now + 2 * interval


def test_simple_group_offsets_expire_after_retention_and_the_group_goes_too() -> None:
    h = ClassicHarness(offsets_retention_minutes=1)
    commit(h.shard, h.now)
    assert expire(h.shard, h.now + 59_999) == []
    outs = expire(h.shard, h.now + 60_000)
    keys = [r.key for o in outs for r in o.records]
    assert keys == [OffsetCommitKey("g", "foo", 0), GroupMetadataKey("g")]
    assert "g" not in h.shard.groups


def test_offsets_of_subscribed_topics_never_expire() -> None:
    h = Harness(offsets_retention_minutes=1)
    h.join("m1")
    commit(h.shard, h.now, gen=2, member="m1", version=9, offsets={("foo", 0): 1, ("gone", 0): 2})
    outs = expire(h.shard, h.now + 10 * DAY)
    assert [r.key for o in outs for r in o.records] == [OffsetCommitKey("g", "gone", 0)]
    assert h.shard.offsets.get("g", "foo", 0) is not None


def test_offsets_are_kept_while_the_retention_has_not_passed() -> None:
    h = ClassicHarness(offsets_retention_minutes=60)
    commit(h.shard, h.now)
    assert expire(h.shard, h.now) == []
    assert h.shard.offsets.get("g", "foo", 0) is not None


def test_empty_classic_group_offsets_age_from_when_it_became_empty() -> None:
    h = ClassicHarness(offsets_retention_minutes=10)
    (a,) = h.stable_group(1)
    commit(h.shard, h.now, gen=1, member=a)
    h.now += 20 * 60_000  # long after the commit, but the group is still Stable
    assert expire(h.shard, h.now) == []
    h.leave((a, None))  # Empty from now on
    assert expire(h.shard, h.now + 5 * 60_000) == []
    outs = expire(h.shard, h.now + 11 * 60_000)
    assert any(r.key == GroupMetadataKey("g") for o in outs for r in o.records)


def test_legacy_expire_timestamp_wins_over_retention() -> None:
    h = ClassicHarness(offsets_retention_minutes=10_000)
    commit(h.shard, h.now, retention=1000, version=2)
    outs = expire(h.shard, h.now + 1000)
    assert any(r.key == OffsetCommitKey("g", "foo", 0) for o in outs for r in o.records)


def test_deleting_a_topic_deletes_its_committed_offsets() -> None:
    h = ClassicHarness(topics={"foo": 2, "bar": 1})
    commit(h.shard, h.now, offsets={("foo", 0): 1, ("bar", 0): 2})
    out = h.shard.update_metadata(h.shard.image.without_topic("foo"))
    assert [r.key for r in out.records] == [OffsetCommitKey("g", "foo", 0)]
    assert h.shard.offsets.get("g", "bar", 0) is not None and h.shard.offsets.get("g", "foo", 0) is None
