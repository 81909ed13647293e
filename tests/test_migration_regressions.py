"""Deterministic regressions for bugs the migration state machine (test_migration_stateful.py)
found in the translation layer. Each test replays the minimal sequence hypothesis shrank to and
says what Kafka does and why groupshift differs where it does.
"""

from __future__ import annotations

from typing import Any

from engine.classic.api import JoinGroupResponse, SyncGroupResponse
from engine.classic.member import Protocol
from engine.classic.records import persisted_view
from engine.classic.state import ClassicGroupState
from engine.errors import Errors
from engine.ids import SeededIds
from engine.metadata import topic_id_for
from engine.outcome import Pending
from engine.shard import Shard
from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.coordinator import CoordinatorRecord
from tests.migration_harness import FOO, MigrationHarness, assignment, sub
from translation.embedded_protocol import serialize_assignment


def _dynamic_classic_join(h: MigrationHarness, **kw: Any) -> Any:
    """JoinGroup v5 of a new dynamic member: obtain the member id, then join with it."""
    r = h.join(**kw)
    assert isinstance(r, JoinGroupResponse) and r.error_code == Errors.MEMBER_ID_REQUIRED
    return h.join(r.member_id, **kw)


def test_stale_initial_rebalance_timer_leaves_a_downgraded_group_alone() -> None:
    """A classic group in its initial rebalance delay is upgraded, then downgraded again by a
    static replacement (no rebalance): the first classic group's join timer must not complete a
    join phase of the new classic group. It used to fire on it, silently drop the dynamic member
    that had not "rejoined" and move the leadership, none of which was written to the log.
    Kafka leaves the classic timers registered on upgrade and relies on a group-type check,
    which the downgrade defeats; groupshift cancels them with the classic group."""
    h = MigrationHarness(topics={"foo": 3}, group_initial_rebalance_delay_ms=3000)
    pending = _dynamic_classic_join(h, metadata=sub("foo"))
    assert isinstance(pending, Pending)  # parked for the initial rebalance delay
    a = pending.member_id
    # A consumer-protocol static member upgrades the group; A's parked join is answered.
    assert h.cgh("E1", 0, instance_id="e", topics=["foo"]).error_code == Errors.NONE
    assert h.result(pending).error_code == Errors.REBALANCE_IN_PROGRESS
    # A classic process takes over instance "e": the last consumer-protocol member is replaced,
    # the group is classic again (Stable, no rebalance: same subscription).
    j = h.join(instance_id="e", metadata=sub("foo"))
    assert isinstance(j, JoinGroupResponse) and j.error_code == Errors.NONE
    g = h.shard.classic_group("g")
    assert g is not None and a in g.members
    before = persisted_view(g)

    h.advance(3500)  # past the first classic group's initial delay

    g = h.shard.classic_group("g")
    assert g is not None and a in g.members, "a stale timer removed a member"
    assert persisted_view(g) == before
    fresh = Shard(h.shard.config, SeededIds(0), h.shard.image)
    fresh.apply(h.log)
    replayed = fresh.classic_group("g")
    assert replayed is not None and persisted_view(replayed) == persisted_view(g)


def test_static_replacement_downgrade_answers_the_selected_protocol() -> None:
    """A classic static member replacing the last consumer-protocol member turns the group
    classic; its JoinGroup answer must name the protocol that classic group selected, since its
    SyncGroup is checked against it. Kafka answers the member's first preference ("range" here)
    and the SyncGroup then fails with INCONSISTENT_GROUP_PROTOCOL, because the vote over
    {range, cooperative-sticky} and {cooperative-sticky} picks cooperative-sticky."""
    h = MigrationHarness(topics={"foo": 4})
    assert h.cgh("E1", 0, instance_id="e", topics=["foo"]).error_code == Errors.NONE
    coop = (Protocol("cooperative-sticky", sub("foo", version=1)),)
    c = _dynamic_classic_join(h, protocols=coop)
    assert isinstance(c, JoinGroupResponse) and c.error_code == Errors.NONE

    eager = (Protocol("range", sub("foo")), Protocol("cooperative-sticky", sub("foo")))
    j = h.join(instance_id="e", protocols=eager)
    assert isinstance(j, JoinGroupResponse) and j.error_code == Errors.NONE
    g = h.shard.classic_group("g")
    assert g is not None and g.protocol_name == "cooperative-sticky"
    assert j.protocol_name == g.protocol_name

    # The SyncGroup passes the protocol check; the group is rebalancing, so the member rejoins.
    s = h.result(h.sync(j.member_id, j.generation_id, instance_id="e", protocol_name=j.protocol_name))
    assert isinstance(s, SyncGroupResponse) and s.error_code == Errors.REBALANCE_IN_PROGRESS


def _coop() -> tuple[Protocol, ...]:
    return (Protocol("cooperative-sticky", sub("foo", version=1)),)


def _group_awaiting_a_revocation(h: MigrationHarness) -> tuple[str, str, int]:
    """A consumer group on foo[0-3]: static consumer-protocol member R ("r"), cooperative classic
    member H holding foo-2 and foo-3, and classic member D that has just joined at epoch 3 with
    a target partition H still holds (H has not rejoined yet). Returns (H, D, D's generation)."""
    r = h.cgh("R1", 0, instance_id="r", topics=["foo"])
    owned = list(r.assignment or ())
    h_join = _dynamic_classic_join(h, protocols=_coop())
    H = h_join.member_id
    r = h.cgh("R1", r.member_epoch, instance_id="r", owned=owned)  # told to revoke foo-2, foo-3
    r = h.cgh("R1", r.member_epoch, instance_id="r", owned=list(r.assignment or ()))  # revoked
    assert h.heartbeat(H, h_join.generation_id) == Errors.REBALANCE_IN_PROGRESS  # they are free
    h_join = h.join(H, protocols=_coop())
    synced = h.result(h.sync(H, h_join.generation_id, protocol_name="cooperative-sticky"))
    assert h.assignment_partitions(synced.assignment) == {"foo": (2, 3)}
    d_join = _dynamic_classic_join(h, protocols=_coop())
    g = h.shard.consumer_group("g")
    assert g is not None
    D = d_join.member_id
    assert set(g.target(D).get(FOO, ())) & {2, 3}, "D's target holds a partition H owns"
    assert dict(g.members[D].assigned_partitions) == {}
    return H, D, d_join.generation_id


def test_downgrade_writes_current_assignments_not_targets() -> None:
    """The GroupMetadata record of a downgrade carries each member's current assignment. Kafka
    writes the target (`ClassicGroup.fromConsumerGroup`), and the classic group serves it to the
    next SyncGroup once Stable: here D's target holds a partition that H, which has not rejoined
    since, still processes, so a SyncGroup from D (without a rebalance, or after a coordinator
    restart loads the group Stable) gave that partition to two members at once."""
    h = MigrationHarness(topics={"foo": 4})
    H, D, d_generation = _group_awaiting_a_revocation(h)

    # The last consumer-protocol member is replaced by a classic process: the group is classic.
    h.join(instance_id="r", protocols=_coop())
    assert h.shard.classic_group("g") is not None
    written = [r.value for r in h.log if isinstance(r.key, GroupMetadataKey) and r.value is not None][-1]
    stored = {m.member_id: h.assignment_partitions(m.assignment) for m in written.members}
    assert stored[H] == {"foo": (2, 3)}
    assert stored[D] == {}

    # A restarted coordinator loads the group Stable and answers D's SyncGroup from the record.
    restarted = MigrationHarness(topics={"foo": 4})
    restarted.shard.apply(h.log)
    restarted.now = h.now
    s = restarted.result(restarted.sync(D, d_generation, protocol_name="cooperative-sticky"))
    assert isinstance(s, SyncGroupResponse) and s.error_code == Errors.NONE
    assert not set(restarted.assignment_partitions(s.assignment).get("foo", ())) & {2, 3}


def test_static_replacement_downgrade_rebalances() -> None:
    """A downgrade by static replacement prepares a rebalance even when the joiner subscribes
    like the member it replaces. Kafka (KAFKA-19546) skips it then, and the classic group stays
    Stable with a leader no client knows about: every member was told leader "" by the
    consumer group, so no one watches the metadata (added partitions are never assigned) and
    the partitions still moving at the conversion (here foo-3, D's target) stay unassigned."""
    h = MigrationHarness(topics={"foo": 4})
    H, D, d_generation = _group_awaiting_a_revocation(h)
    j = h.join(instance_id="r", protocols=_coop())
    assert isinstance(j, JoinGroupResponse) and j.error_code == Errors.NONE
    g = h.shard.classic_group("g")
    assert g is not None and g.state is ClassicGroupState.PREPARING_REBALANCE
    s = h.result(h.sync(D, d_generation, protocol_name="cooperative-sticky"))
    assert s.error_code == Errors.REBALANCE_IN_PROGRESS
    assert h.heartbeat(H, g.generation_id - 1) == Errors.ILLEGAL_GENERATION  # H is still at epoch 2

    # Everyone rejoins: the next generation has a leader that knows it and sees every member.
    joins = [
        h.join(H, protocols=_coop()),
        h.join(D, protocols=_coop()),
        h.join(j.member_id, instance_id="r", protocols=_coop()),
    ]
    answers = [h.result(x) for x in joins]
    assert all(a.error_code == Errors.NONE and a.generation_id == g.generation_id for a in answers)
    leaders = [a for a in answers if a.leader == a.member_id]
    assert len(leaders) == 1 and len(leaders[0].members) == 3


def test_upgrade_by_static_replacement_computes_the_subscription_metadata() -> None:
    """An upgrade writes no subscription metadata (k4); the joining heartbeat must compute it,
    even when the joiner replaces a static member with the same subscription (no subscription
    change, so no epoch bump of its own). Kafka does so because a new ConsumerGroup's metadata
    refresh deadline is 0 (`hasMetadataExpired`). groupshift used to skip the refresh: the
    group stayed at the classic generation with no subscription metadata, and partitions that
    no member had been assigned in the classic group (here all of bar) were never assigned."""
    h = MigrationHarness(topics={"foo": 2, "bar": 2})
    members = (
        GroupMemberMetadata(
            "A", "a", "c", "/h", 10_000, 10_000, sub("foo"), serialize_assignment({"foo": [0, 1]}, 0)
        ),
        GroupMemberMetadata(
            "B", None, "c", "/h", 10_000, 10_000, sub("foo", "bar"), serialize_assignment({}, 0)
        ),
    )
    rec = CoordinatorRecord(
        GroupMetadataKey("g"), GroupMetadataValue("consumer", 7, "range", "A", h.now, members)
    )
    h.shard.apply([rec])
    h.log.append(rec)

    r = h.cgh("A2", 0, instance_id="a", topics=["foo"])
    assert r.error_code == Errors.NONE
    g = h.shard.consumer_group("g")
    assert g is not None
    assert set(g.subscription_metadata) == {"foo", "bar"}
    assert g.group_epoch == 8 and g.assignment_epoch == 8
    assert {p for a in g.target_assignment.values() for p in a.get(topic_id_for("bar"), ())} == {0, 1}


def _eager() -> tuple[Protocol, ...]:
    return (Protocol("range", sub("foo")), Protocol("cooperative-sticky", sub("foo")))


def _coop_owning(*parts: int) -> tuple[Protocol, ...]:
    return (Protocol("cooperative-sticky", sub("foo", version=1, owned={"foo": list(parts)})),)


def _parts(h: MigrationHarness, response: Any) -> tuple[int, ...]:
    assert isinstance(response, SyncGroupResponse) and response.error_code == Errors.NONE, response
    return h.assignment_partitions(response.assignment).get("foo", ())


def test_upgrade_keeps_partitions_a_cooperative_member_has_not_revoked() -> None:
    """A cooperative classic member C holds foo-1 and foo-2; the leader's plan for generation 2
    keeps foo-1 for C and withholds foo-2 (it moves to M next generation). Before C collects
    that plan, a consumer-protocol member upgrades the group. C's stored assignment is {foo-1},
    but C still processes foo-2: the conversion keeps foo-2 pending revocation on C (from the
    owned partitions of C's subscription), so M gets it only after C rejoined without it.
    Kafka converts the stored assignment only, and M got foo-2 while C still held it."""
    h = MigrationHarness(topics={"foo": 3})
    lj, cj = _dynamic_classic_join(h, protocols=_eager()), _dynamic_classic_join(h, protocols=_coop())
    L, C = lj.member_id, cj.member_id
    h.advance(1)  # the initial rebalance: generation 1, L leads
    plan = {L: serialize_assignment({"foo": [0]}, 0), C: serialize_assignment({"foo": [1, 2]}, 1)}
    h.sync(L, 1, assignments=plan, protocol_name="cooperative-sticky")
    assert _parts(h, h.result(h.sync(C, 1, protocol_name="cooperative-sticky"))) == (1, 2)

    mj = _dynamic_classic_join(h, protocols=_eager())
    M = mj.member_id
    assert h.heartbeat(C, 1) == Errors.REBALANCE_IN_PROGRESS
    h.join(L, protocols=_eager())
    h.join(C, protocols=_coop_owning(1, 2))  # generation 2 starts: everyone has rejoined
    plan = {
        L: serialize_assignment({"foo": [0]}, 0),
        C: serialize_assignment({"foo": [1]}, 1),
        M: serialize_assignment({}, 0),  # foo-2 is withheld: it changes owner
    }
    h.sync(L, 2, assignments=plan, protocol_name="cooperative-sticky")
    # C has not sent its SyncGroup yet: it still processes foo-1 and foo-2.

    assert h.cgh("J", 0, topics=["foo"]).error_code == Errors.NONE
    g = h.shard.consumer_group("g")
    assert g is not None
    assert dict(g.members[C].assigned_partitions) == {FOO: (1,)}  # the classic assignment
    assert dict(g.members[C].partitions_pending_revocation) == {FOO: (2,)}
    assert set(g.target(M).get(FOO, ())) == {2}

    # M is told to rebalance and rejoins: foo-2 is not free yet.
    assert h.heartbeat(M, 2) == Errors.REBALANCE_IN_PROGRESS
    m2 = h.join(M, protocols=_eager())
    assert 2 not in _parts(h, h.result(h.sync(M, m2.generation_id, protocol_name="range")))

    # C rejoins still owning foo-2, syncs, sees its assignment shrink, revokes and rejoins.
    assert h.heartbeat(C, 2) == Errors.REBALANCE_IN_PROGRESS
    c2 = h.join(C, protocols=_coop_owning(1, 2))
    assert _parts(h, h.result(h.sync(C, c2.generation_id, protocol_name="cooperative-sticky"))) == (1,)
    c3 = h.join(C, protocols=_coop_owning(1))
    assert c3.error_code == Errors.NONE and c3.generation_id == g.group_epoch
    assert h.shard.consumer_group("g").current_partition_epoch(FOO, 2) == -1  # type: ignore[union-attr]

    # Now M collects foo-2.
    assert h.heartbeat(M, m2.generation_id) == Errors.REBALANCE_IN_PROGRESS
    m3 = h.join(M, protocols=_eager())
    assert 2 in _parts(h, h.result(h.sync(M, m3.generation_id, protocol_name="range")))


# --- found by the chaos simulator (sim/chaos.py, docs/simulation.md) -------------------------------


def test_downgrade_cancels_the_consumer_members_timers() -> None:
    """A downgrade ends the consumer group's member timers (session, rebalance, classic join and
    sync), as Kafka's `convertToClassicGroup` does; the classic members get heartbeat timers.
    They used to outlive the conversion (chaos seed 2, before the fix): timers of members of a
    group that no longer exists, which fire without effect."""
    h = MigrationHarness(topics={"foo": 2})
    r = h.cgh("R1", 0, topics=["foo"])
    c = _dynamic_classic_join(h, metadata=sub("foo"))
    assert isinstance(c, JoinGroupResponse) and c.error_code == Errors.NONE, c
    assert h.deadline("session-timeout-g-R1") is not None
    assert h.deadline(f"session-timeout-g-{c.member_id}") is not None
    left = h.cgh("R1", -1)  # the last consumer-protocol member leaves: the group is classic
    assert left.error_code == Errors.NONE and r.error_code == Errors.NONE
    assert h.shard.classic_group("g") is not None
    keys = set(h.shard.timers.keys())
    assert not {k for k in keys if k.startswith(("session-timeout-", "rebalance-timeout-"))}, keys
    assert f"heartbeat-g-{c.member_id}" in keys


def test_join_with_a_stale_member_id_keeps_an_empty_consumer_group() -> None:
    """A classic JoinGroup with a member id the empty consumer group does not know is refused
    with UNKNOWN_MEMBER_ID and changes nothing (Kafka: `getOrMaybeCreateClassicGroup` throws
    before the conversion is kept). It used to delete the consumer group and create nothing, so
    OffsetFetch found none of the group's committed offsets (chaos seed 7, before the fix)."""
    from engine.context import RequestContext
    from engine.offsets.api import CommitPartition, CommitTopic, OffsetCommitRequest, OffsetFetchGroupRequest

    h = MigrationHarness(topics={"foo": 2})
    r = h.cgh("R1", 0, topics=["foo"])
    commit = OffsetCommitRequest(
        "g", r.member_epoch, "R1", topics=[CommitTopic("foo", [CommitPartition(0, 42)])]
    )
    out = h.process(h.coordinator.offset_commit(commit, RequestContext("c", "/h", 9), h.tick()))
    assert out.topics[0].partitions[0].error_code == 0
    assert h.cgh("R1", -1).error_code == Errors.NONE  # the group is empty now

    j = h.join("stale-member-id", metadata=sub("foo"))
    assert isinstance(j, JoinGroupResponse) and j.error_code == Errors.UNKNOWN_MEMBER_ID
    assert h.shard.consumer_group("g") is not None
    fetched = h.coordinator.offset_fetch([OffsetFetchGroupRequest("g", None)])[0]
    assert [
        (t.name, p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions
    ] == [("foo", 0, 42)]


def test_failed_append_keeps_the_empty_consumer_group_it_would_replace() -> None:
    """A JoinGroup that replaces an empty consumer group by a classic group, whose records are
    refused: the consumer group stays (Kafka reverts the operation) and the joiner gets the
    append's error. The classic group used to stay in memory while the log kept the consumer
    group, so the next GroupMetadata record made the log fail to load ("Group g is a consumer
    group: a GroupMetadata record cannot replace it...", chaos seeds 57 and 19, before the fix)."""
    h = MigrationHarness(topics={"foo": 2})
    assert h.cgh("R1", 0, topics=["foo"]).error_code == Errors.NONE
    assert h.cgh("R1", -1).error_code == Errors.NONE
    h.append_error = Errors.KAFKA_STORAGE_ERROR
    j = h.join(metadata=sub("foo"))
    assert isinstance(j, JoinGroupResponse) and j.error_code == Errors.NOT_COORDINATOR, j
    assert h.shard.consumer_group("g") is not None
    assert not [k for k in h.shard.timers.keys() if k.startswith(("heartbeat-g", "join-g"))]  # noqa: SIM118
    h.append_error = None
    pending = _dynamic_classic_join(h, metadata=sub("foo"))
    h.advance(100)  # the join phase completes
    c = h.result(pending)
    assert isinstance(c, JoinGroupResponse) and c.error_code == Errors.NONE, c
    s = h.result(h.sync(c.member_id, c.generation_id, assignments={c.member_id: assignment(foo=[0, 1])}))
    assert isinstance(s, SyncGroupResponse) and s.error_code == Errors.NONE, s
    replayed = h.replayed()  # the log loads (its GroupMetadata record follows the tombstones)
    g = replayed.classic_group("g")
    assert g is not None and c.member_id in g.members
