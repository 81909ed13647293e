"""KIP-848 "Online Migration" case study, step by step, through the translation layer.

A classic group at generation 22 (A [0,1], B [3,4], C [2,5]) is upgraded when A rejoins with the
new protocol; B leaves; C (eager) rebalances through JoinGroup/SyncGroup; B rejoins with the new
protocol. Every table of the KIP is asserted: group epoch, target epoch and partitions, and each
member's epoch, owned partitions and pending (awaited) partitions.

Where the test differs from the KIP's prose (shipped Kafka wins):
* "A leaves and rejoins with the new protocol": a dynamic classic member leaving a classic group
  makes the group rebalance before anyone can upgrade, so — as in Kafka's own test of this path
  (`testConsumerGroupHeartbeatToClassicGroupFromExistingStaticMember`) — A is a static member
  (instance id "a") whose consumer-protocol incarnation replaces it with the same instance id.
  The upgraded A therefore has a new member id, "A2"; the KIP does not say which id A keeps.
* Every epoch after the conversion is one higher than the KIP's: A's consumer-protocol join
  computes the subscription metadata the conversion does not write, and that bumps the epoch
  to 23 with an unchanged target (as in `testConsumerGroupHeartbeatToClassicGroupFromExistingStaticMember`,
  where the replacing static member bumps the epoch), so the KIP's epochs 22/23/24 are 23/24/25.
* The epoch-24 target is computed by C's JoinGroup, not when B leaves (Kafka computes a target
  on the next heartbeat or join that needs one), and B's target entry is deleted with B.
* B leaves as a classic member (LeaveGroup), then later joins as a new consumer-protocol member
  "B2" — the KIP's "B rejoins the group with the new protocol".
"""

from __future__ import annotations

from typing import Any

from engine.classic.api import JoinGroupResponse, SyncGroupResponse
from engine.errors import Errors
from records.consumer_group import TopicPartitions
from tests.migration_harness import FOO, MigrationHarness, sub

Member = tuple[int, tuple[int, ...], tuple[int, ...]]


def snapshot(h: MigrationHarness) -> tuple[int, int, dict[str, tuple[int, ...]], dict[str, Member]]:
    """The KIP's table: (group epoch, target epoch, target, {member: (epoch, owned, pending)})."""
    g = h.shard.consumer_group("g")
    assert g is not None
    target = {m: tuple(sorted(a.get(FOO, ()))) for m, a in g.target_assignment.items()}
    members: dict[str, Member] = {}
    for mid, m in g.members.items():
        # what the member holds: its assignment plus what it has yet to revoke
        owned = tuple(
            sorted(m.assigned_partitions.get(FOO, ()) + m.partitions_pending_revocation.get(FOO, ()))
        )
        wanted = set(g.target(mid).get(FOO, ())) if m.member_epoch == g.assignment_epoch else set()
        pending = tuple(sorted(wanted - set(owned)))
        members[mid] = (m.member_epoch, owned, pending)
    return g.group_epoch, g.assignment_epoch, target, members


def owned(*ps: int) -> list[TopicPartitions]:
    return [TopicPartitions(FOO, ps)] if ps else []


def classic_c_partitions(response: Any) -> tuple[int, ...]:
    assert isinstance(response, SyncGroupResponse), response
    assert response.error_code == Errors.NONE
    return tuple(sorted(dict(MigrationHarness.assignment_partitions(response.assignment)).get("foo", ())))


def test_online_migration_case_study() -> None:
    h = MigrationHarness(topics={"foo": 6})
    h.seed_classic_group(22, {"A": [0, 1], "B": [3, 4], "C": [2, 5]}, instance_ids={"A": "a"})
    assert h.shard.classic_group("g") is not None

    # A rejoins with the new protocol: the group is converted; the generation becomes the epoch,
    # and the target and the member assignments are the classic assignment. The conversion
    # writes no subscription metadata, so A's heartbeat computes it and bumps the epoch to 23
    # (Kafka: a new group's metadata refresh deadline has expired); the target is unchanged.
    r = h.cgh("A2", 0, instance_id="a", topics=["foo"])
    assert r.error_code == Errors.NONE and r.member_epoch == 23
    assert h.shard.classic_group("g") is None
    assert snapshot(h) == (
        23,
        23,
        {"A2": (0, 1), "B": (3, 4), "C": (2, 5)},
        {"A2": (23, (0, 1), ()), "B": (22, (3, 4), ()), "C": (22, (2, 5), ())},
    )
    a_epoch = r.member_epoch

    # B leaves: removed, epoch bumped to 24. The next request recomputes the target.
    leave = h.leave(("B", None))
    assert [m.error_code for m in leave.members] == [Errors.NONE]
    g = h.shard.consumer_group("g")
    assert g is not None and g.group_epoch == 24 and "B" not in g.members

    # B's target entry goes with B (as in Kafka; the KIP's table still lists it).
    assert snapshot(h) == (
        24,
        23,
        {"A2": (0, 1), "C": (2, 5)},
        {"A2": (23, (0, 1), ()), "C": (22, (2, 5), ())},
    )

    # C heartbeats and is told to rebalance: its epoch (22) is behind the group's (24).
    assert h.heartbeat("C", 22) == Errors.REBALANCE_IN_PROGRESS

    # C (eager) revokes everything and rejoins. The join computes the epoch-24 target (Kafka
    # computes a target on the next request that needs it, not on the leave); C owns nothing, so
    # it moves to epoch 24 at once and gets generation 24 in its JoinGroup response.
    join = h.result(h.join("C", metadata=sub("foo")))
    assert isinstance(join, JoinGroupResponse)
    assert join.error_code == Errors.NONE and join.generation_id == 24
    assert snapshot(h) == (
        24,
        24,
        {"A2": (0, 1, 3), "C": (2, 4, 5)},
        {"A2": (23, (0, 1), ()), "C": (24, (2, 4, 5), ())},
    )

    # Meanwhile A heartbeats and transitions to epoch 24 with foo-3 (free since B left).
    r = h.cgh("A2", a_epoch, instance_id="a", owned=owned(0, 1))
    assert r.member_epoch == 24
    assert snapshot(h) == (
        24,
        24,
        {"A2": (0, 1, 3), "C": (2, 4, 5)},
        {"A2": (24, (0, 1, 3), ()), "C": (24, (2, 4, 5), ())},
    )

    # C syncs and collects all three partitions: they are all free.
    assert classic_c_partitions(h.result(h.sync("C", 24))) == (2, 4, 5)

    # B rejoins with the new protocol: epoch 25, and a new target computed in the same request.
    rb = h.cgh("B2", 0, topics=["foo"])
    assert snapshot(h) == (
        25,
        25,
        {"A2": (0, 1), "B2": (3, 4), "C": (2, 5)},
        {"A2": (24, (0, 1, 3), ()), "B2": (25, (), (3, 4)), "C": (24, (2, 4, 5), ())},
    )
    assert rb.member_epoch == 25 and not rb.assignment

    # A heartbeats and is told to revoke foo-3 (it keeps epoch 24 until it acknowledges).
    r = h.cgh("A2", 24, instance_id="a", owned=owned(0, 1, 3))
    assert r.member_epoch == 24
    assert sorted(p for t in r.assignment or () for p in t.partitions) == [0, 1]

    # C heartbeats and is told to rebalance; it revokes everything and rejoins: epoch 25,
    # foo-4 is released, and B picks it up on its next heartbeat.
    assert h.heartbeat("C", 24) == Errors.REBALANCE_IN_PROGRESS
    join = h.result(h.join("C", metadata=sub("foo")))
    assert join.error_code == Errors.NONE and join.generation_id == 25
    rb = h.cgh("B2", rb.member_epoch, owned=[])
    assert sorted(p for t in rb.assignment or () for p in t.partitions) == [4]
    assert snapshot(h) == (
        25,
        25,
        {"A2": (0, 1), "B2": (3, 4), "C": (2, 5)},
        {"A2": (24, (0, 1, 3), ()), "B2": (25, (4,), (3,)), "C": (25, (2, 5), ())},
    )

    # C syncs and transitions to Stable with [2, 5].
    assert classic_c_partitions(h.result(h.sync("C", 25))) == (2, 5)

    # A confirms the revocation of foo-3 and moves to epoch 25; foo-3 is released to B.
    r = h.cgh("A2", 24, instance_id="a", owned=owned(0, 1))
    assert r.member_epoch == 25
    rb = h.cgh("B2", 25, owned=owned(4))
    assert sorted(p for t in rb.assignment or () for p in t.partitions) == [3, 4]
    rb = h.cgh("B2", 25, owned=owned(3, 4))
    assert snapshot(h) == (
        25,
        25,
        {"A2": (0, 1), "B2": (3, 4), "C": (2, 5)},
        {"A2": (25, (0, 1), ()), "B2": (25, (3, 4), ()), "C": (25, (2, 5), ())},
    )
    assert h.shard.consumer_group("g") is not None
