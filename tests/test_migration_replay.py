"""Replay across migrations: the records a shard writes while groups move between protocols
rebuild, in a fresh shard, exactly the state the live shard persisted — also when the log is cut
between any two operations in the middle of a migration (docs/architecture.md, engine/: "replaying the
records of a shard from an empty state must rebuild exactly the same in-memory state").

The harness checkpoints after every operation that wrote records: the number of records logged
so far and the live `Shard.persisted_state()` (a consumer group's `persisted_state()`, a classic
group's GroupMetadata view, and the offsets). Each test then replays every prefix of the log
ending at a checkpoint into a fresh shard and compares. A replay must also never need the
lenient KAFKA-21117 rules (no replay warnings): our own logs are well-formed.

Checkpoints are taken only after operations that wrote records, because a classic group's
rebalance in progress (members joined, a generation started, assignments not yet synced) is by
design not persisted, in Kafka as here; what a classic group persists is checked at the moments
it writes its GroupMetadata record.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.classic.api import JoinGroupResponse
from engine.errors import Errors
from engine.ids import SeededIds
from engine.outcome import Outcome, Pending
from engine.shard import Shard
from records.consumer_group import TopicPartitions
from records.coordinator import CoordinatorRecord
from records.offsets import OffsetCommitKey, OffsetCommitValue
from tests.migration_harness import BAR, FOO, ClassicSeed, MigrationHarness, assignment, by_id, sub
from tests.test_migration_scenarios import (
    _mixed_group,
    _rebalancing_classic_group,
    _static_mixed_group,
    cgh_ok,
    joined,
)


class CheckpointingHarness(MigrationHarness):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checkpoints: list[tuple[int, dict[str, Any]]] = []
        self._depth = 0

    def process(self, out: Outcome[Any]) -> Any:
        self._depth += 1
        try:
            response = super().process(out)
        finally:
            self._depth -= 1
        if self._depth == 0:
            self.checkpoint()
        return response

    def advance(self, ms: int) -> list[Outcome[Any]]:
        outs = super().advance(ms)
        self.checkpoint()
        return outs

    def checkpoint(self) -> None:
        if not self.checkpoints or self.checkpoints[-1][0] != len(self.log):
            self.checkpoints.append((len(self.log), self.shard.persisted_state()))


def replay(h: MigrationHarness, records: list[CoordinatorRecord]) -> Shard:
    shard = Shard(h.shard.config, SeededIds(0), h.shard.image)
    shard.apply(records)
    assert shard.replay_warnings == []
    return shard


def assert_every_prefix_replays(h: CheckpointingHarness, min_checkpoints: int = 2) -> None:
    h.checkpoint()
    assert len(h.checkpoints) >= min_checkpoints, h.checkpoints
    for n, state in h.checkpoints:
        assert replay(h, h.log[:n]).persisted_state() == state, f"state after the first {n} records"
    assert replay(h, h.log).persisted_state() == h.shard.persisted_state()


def group_type(h: MigrationHarness) -> str | None:
    if h.shard.consumer_group("g") is not None:
        return "consumer"
    if h.shard.classic_group("g") is not None:
        return "classic"
    return None


# --- a whole migration, back and forth -------------------------------------------------------------


def settle_classic_member(h: MigrationHarness, member_id: str, metadata: Any, generation: int) -> int:
    """One turn of a classic member inside a consumer group: Heartbeat; when told to rebalance,
    JoinGroup (owning what it was last given) and SyncGroup. Returns its generation."""
    if h.heartbeat(member_id, generation) != Errors.REBALANCE_IN_PROGRESS:
        return generation
    j = joined(h, h.join(member_id, metadata=metadata(member_id), session=5000, rebalance=10000))
    assert j.error_code == Errors.NONE, j
    s = h.result(h.sync(member_id, j.generation_id))
    assert s.error_code == Errors.NONE, s
    owned[member_id] = MigrationHarness.assignment_partitions(s.assignment).get("foo", ())
    return j.generation_id


owned: dict[str, tuple[int, ...]] = {}


def test_round_trip_migration_replays_at_every_step() -> None:
    """A classic group of two cooperative members is upgraded by a KIP-848 member, runs mixed for
    several rounds (classic members rejoining through their own loop, the KIP-848 member
    acknowledging revocations), loses a classic member (LeaveGroup), is downgraded when the
    KIP-848 member leaves, completes a classic rebalance, and is upgraded again. Every prefix of
    the log replays to the live state at that point, with the real uniform assignor."""
    owned.clear()
    h = CheckpointingHarness(topics={"foo": 6})

    def cooperative(member_id: str) -> bytes:
        return sub("foo", version=1, owned={"foo": list(owned.get(member_id, ()))})

    owned.update({"c1": (0, 1, 2), "c2": (3, 4, 5)})
    h.seed_classic(
        3,
        [
            ClassicSeed("c1", cooperative("c1"), assignment(1, foo=[0, 1, 2])),
            ClassicSeed("c2", cooperative("c2"), assignment(1, foo=[3, 4, 5])),
        ],
    )
    h.checkpoint()

    r = cgh_ok(h.cgh("k1", 0))
    assert group_type(h) == "consumer" and r.member_epoch == 4
    generations = {"c1": 3, "c2": 3}
    epoch = r.member_epoch
    for _ in range(4):
        for c in ("c1", "c2"):
            generations[c] = settle_classic_member(h, c, cooperative, generations[c])
        r = cgh_ok(
            h.cgh("k1", epoch, owned=[TopicPartitions(t.topic_id, t.partitions) for t in r.assignment or ()])
        )
        epoch = r.member_epoch
        r = cgh_ok(h.cgh("k1", epoch, owned=list(h.owned_of("k1"))))
    g = h.shard.consumer_group("g")
    assert g is not None and all(m.member_epoch == g.group_epoch for m in g.members.values())

    leave = h.leave(("c2", None))
    assert leave.members[0].error_code == Errors.NONE
    generations["c1"] = settle_classic_member(h, "c1", cooperative, generations["c1"])

    cgh_ok(h.cgh("k1", -1))
    classic = h.shard.classic_group("g")
    assert classic is not None and list(classic.members) == ["c1"]

    assert h.heartbeat("c1", classic.generation_id) == Errors.REBALANCE_IN_PROGRESS
    j = h.result(h.join("c1", metadata=cooperative("c1"), session=5000, rebalance=10000))
    if isinstance(j, Pending):  # completes when the join phase ends
        h.advance(10000)
        j = h.result(j)
    assert isinstance(j, JoinGroupResponse) and j.leader == "c1", j
    s = h.result(h.sync("c1", j.generation_id, assignments={"c1": assignment(1, foo=[0, 1, 2, 3, 4, 5])}))
    assert s.error_code == Errors.NONE
    assert h.shard.classic_group("g").is_in_state(h.shard.classic_group("g").state.STABLE)  # type: ignore[union-attr]

    r = cgh_ok(h.cgh("k2", 0))
    assert group_type(h) == "consumer" and r.member_epoch == j.generation_id + 1

    assert_every_prefix_replays(h, min_checkpoints=10)


# --- the conversions of Kafka's scenarios ------------------------------------------------------------


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance"])
def test_upgrade_from_a_rebalancing_classic_group_replays(state: str) -> None:
    """Upgrades cut a classic rebalance short; the log (GroupMetadata, tombstone, the converted
    group, the joiner) replays to the live consumer group, before and after the classic members
    rejoin it."""
    h = CheckpointingHarness(topics={"foo": 2, "bar": 1}, prepared_assignor=True)
    meta1, meta2, _ = _rebalancing_classic_group(h)
    h.checkpoint()
    generation = 0
    if state == "CompletingRebalance":
        h.join("m2", metadata=meta2, session=5000, rebalance=10000)
        h.sync("m2", 1)
        generation = 1
    h.assignor.prepared = {"m1": by_id(foo=[0]), "m2": by_id(bar=[0]), "m3": by_id(foo=[1])}

    cgh_ok(h.cgh("m3", 0, topics=["foo", "bar"], rebalance=5000))
    assert group_type(h) == "consumer"
    for member_id, meta in (("m1", meta1), ("m2", meta2)):
        assert h.heartbeat(member_id, generation) == Errors.REBALANCE_IN_PROGRESS
        j = joined(h, h.join(member_id, metadata=meta, session=5000, rebalance=10000))
        assert j.error_code == Errors.NONE
    cgh_ok(h.cgh("m3", generation + 1, owned=[]))

    assert_every_prefix_replays(h, min_checkpoints=4)


@pytest.mark.parametrize("trigger", ["leave", "session timeout", "rebalance timeout"])
def test_downgrade_replays(trigger: str) -> None:
    """A downgrade (tombstones then GroupMetadata, in one operation) replays to the classic
    group the live shard installed, whatever fenced the last consumer-protocol member; and the
    classic group's next generation, once synced, replays too."""
    h = CheckpointingHarness(topics={"foo": 6, "bar": 3, "zar": 1}, prepared_assignor=True)
    if trigger == "rebalance timeout":
        _mixed_group(h, m2_topics=("foo", "bar", "zar"), rebalance=30000)
    else:
        _mixed_group(h)
    h.checkpoint()
    if trigger == "leave":
        cgh_ok(h.cgh("m2", -1))
    elif trigger == "session timeout":
        cgh_ok(h.cgh("m2", 10))
        h.advance(45001)
    else:
        h.assignor.prepared = {"m1": by_id(foo=[0, 1, 2], bar=[0, 1]), "m2": by_id(foo=[3, 4, 5])}
        still_owned = [TopicPartitions(FOO, (3, 4, 5)), TopicPartitions(BAR, (2,))]
        cgh_ok(h.cgh("m2", 10, topics=["foo", "bar"], owned=still_owned))
        h.advance(30001)
    classic = h.shard.classic_group("g")
    assert classic is not None

    j = h.result(h.join("m1", metadata=classic.members["m1"].supported_protocols[0].metadata, session=5000))
    assert isinstance(j, JoinGroupResponse) and j.generation_id == classic.generation_id
    s = h.result(h.sync("m1", j.generation_id, assignments={"m1": assignment(3, foo=[0, 1, 2, 3, 4, 5])}))
    assert s.error_code == Errors.NONE

    assert_every_prefix_replays(h, min_checkpoints=3)


def test_static_replacements_replay() -> None:
    """Static replacements rename members inside a conversion (the upgrade's replaced classic
    member; the downgrade's tombstones written under the joiner's id): both logs replay."""
    h = CheckpointingHarness(topics={"foo": 1}, prepared_assignor=True)
    h.seed_classic(
        0, [ClassicSeed("member-id", sub("foo", version=3), assignment(3, foo=[0]), instance_id="i")]
    )
    h.checkpoint()
    cgh_ok(h.cgh("new-id", 0, topics=["foo"], instance_id="i"))
    assert_every_prefix_replays(h)

    h = CheckpointingHarness(topics={"foo": 6, "bar": 2}, prepared_assignor=True)
    _static_mixed_group(h)
    h.checkpoint()
    j = joined(h, h.join("", metadata=sub("foo", version=3), instance_id="instance-id", session=500))
    assert j.error_code == Errors.NONE and group_type(h) == "classic"
    assert_every_prefix_replays(h)

    h = CheckpointingHarness(topics={"foo": 6, "bar": 2}, prepared_assignor=True)
    _static_mixed_group(h)
    h.checkpoint()
    j = joined(h, h.join("", metadata=sub("foo", "bar", version=3), instance_id="instance-id", session=500))
    assert j.error_code == Errors.NONE and group_type(h) == "classic"  # KAFKA-19546: rebalancing
    assert_every_prefix_replays(h)


def test_empty_group_conversions_replay() -> None:
    """Empty groups replaced in both directions, and an offsets-only group whose offsets stay:
    the tombstones and the new group's records replay to the live state."""
    h = CheckpointingHarness(prepared_assignor=True)
    h._seed(
        [
            CoordinatorRecord(OffsetCommitKey("g", "foo", p), OffsetCommitValue(7 + p, -1, "", h.now))
            for p in range(3)
        ]
    )
    h.checkpoint()
    r = cgh_ok(h.cgh("k1", 0))
    assert group_type(h) == "consumer"
    cgh_ok(h.cgh("k1", -1))
    assert group_type(h) == "consumer" and h.shard.consumer_group("g").is_empty()  # type: ignore[union-attr]
    j = joined(h, h.join("", version=4))
    assert j.error_code == Errors.MEMBER_ID_REQUIRED and group_type(h) == "classic"
    handle = h.join(j.member_id, version=4, session=5000, rebalance=5000)
    h.advance(5000)
    j = h.result(handle)
    assert isinstance(j, JoinGroupResponse) and j.generation_id == 1
    h.sync(j.member_id, 1, assignments={j.member_id: assignment(0, foo=[0, 1, 2])})
    h.leave((j.member_id, None))
    assert h.shard.classic_group("g").is_empty()  # type: ignore[union-attr]
    cgh_ok(h.cgh("k2", 0))
    assert group_type(h) == "consumer" and len(h.shard.persisted_state()["offsets"]) > 0
    assert r.member_epoch == 2

    assert_every_prefix_replays(h, min_checkpoints=6)


def test_failed_conversions_leave_nothing_to_replay() -> None:
    """An upgrade and a downgrade whose appends fail write nothing: the log still replays to the
    live state, which is the state before each attempt."""
    h = CheckpointingHarness(topics={"foo": 6, "bar": 3}, prepared_assignor=True)
    _mixed_group(h)
    h.checkpoint()
    h.append_error = Errors.NOT_ENOUGH_REPLICAS
    assert h.cgh("m2", -1).error_code == Errors.COORDINATOR_NOT_AVAILABLE
    assert group_type(h) == "consumer"
    h.append_error = None
    cgh_ok(h.cgh("m2", -1))
    assert group_type(h) == "classic"
    h.append_error = Errors.REQUEST_TIMED_OUT
    assert h.cgh("k9", 0, topics=["foo"]).error_code == Errors.COORDINATOR_NOT_AVAILABLE
    assert group_type(h) == "classic"

    assert_every_prefix_replays(h)
