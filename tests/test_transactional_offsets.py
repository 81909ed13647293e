"""Transactional offsets (TxnOffsetCommit): who may commit, the pending store and its
resolution, the shadow group's hashing and tokens, and what a restart re-derives
(engine/offsets/transactional.py, gateway/upstream/transactions.py, docs/transactions.md)."""

from __future__ import annotations

import pytest

from engine.classic.state import ClassicGroupState
from engine.errors import CoordinatorError, Errors
from engine.offsets.store import OffsetAndMetadata
from engine.offsets.transactional import PendingTransactionalOffsets, validate_transactional_commit
from engine.shard import Shard
from gateway.upstream.transactions import (
    SHADOW_PREFIX,
    Token,
    committed_value,
    decode_token,
    java_string_hash,
    shadow_group,
)
from tests.classic_harness import ClassicHarness
from tests.consumer_harness import Harness
from tests.test_commit_assignment_epochs import three_epochs
from tests.test_streams_commit_epochs import two_epochs
from tests.test_streams_groups import REPARTITION, WORDS


def value(offset: int, ts: int = 100, metadata: str = "") -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, metadata, ts)


# -- the pending store ---------------------------------------------------------------------------


def test_pending_offsets_resolve_per_partition_and_keep_later_commits() -> None:
    pending = PendingTransactionalOffsets()
    pending.add(1, 7, 0, "g", {("t", 0): value(10), ("t", 1): value(20)})
    assert pending.has_pending("g", "t", 0) and pending.has_pending("g", "t", 1)
    assert not pending.has_pending("g", "t", 2) and not pending.has_pending("other", "t", 0)
    # the next transaction of the same producer writes t-0 before the first one's outcome is read
    pending.add(2, 7, 0, "g", {("t", 0): value(15)})
    assert pending.partitions("g") == {("t", 0): [1, 2], ("t", 1): [1]}
    # the outcome read covered only what was pending when it was sent (seq 1)
    pending.resolve("g", ("t", 0), [1])
    pending.resolve("g", ("t", 1), [1])
    assert pending.partitions("g") == {("t", 0): [2]}
    assert [p.value.offset for p in pending.pending("g", ("t", 0))] == [15]
    pending.resolve("g", ("t", 0), [2])
    assert len(pending) == 0 and pending.groups() == []


def test_a_zombie_producer_epoch_is_fenced_until_its_offsets_resolve() -> None:
    pending = PendingTransactionalOffsets()
    pending.add(1, 7, 3, "g", {("t", 0): value(10)})
    with pytest.raises(CoordinatorError) as e:
        pending.check_epoch(7, 2)
    assert e.value.code is Errors.INVALID_PRODUCER_EPOCH
    with pytest.raises(CoordinatorError):
        pending.add(2, 7, 2, "g", {("t", 1): value(1)})
    assert not pending.has_pending("g", "t", 1)
    pending.check_epoch(7, 4)  # a bumped epoch (the coordinator fenced the old one) is accepted
    pending.check_epoch(8, 0)  # another producer is unaffected
    pending.resolve("g", ("t", 0), [1])
    pending.check_epoch(7, 0)  # nothing pending any more: the upstream decides


def test_unknown_pending_partitions_and_deleted_partitions() -> None:
    pending = PendingTransactionalOffsets()
    pending.mark_unknown(5, "g", ("t", 0))  # found open upstream after a restart
    assert pending.has_pending("g", "t", 0) and pending.pending("g", ("t", 0)) == []
    pending.add(6, 1, 0, "g", {("t", 1): value(3)})
    pending.drop_partitions("g", [("t", 0), ("t", 1)])  # an offset tombstone drops them
    assert len(pending) == 0


# -- who may commit --------------------------------------------------------------------------------


def test_validation_follows_kafkas_transactional_rules() -> None:
    h = Harness()
    state = h.shard.state
    # no group: generation -1 is a simple group's commit, anything else ILLEGAL_GENERATION
    validate_transactional_commit(state, "g", -1, "", None)
    with pytest.raises(CoordinatorError) as e:
        validate_transactional_commit(state, "g", 1, "m", None)
    assert e.value.code is Errors.ILLEGAL_GENERATION
    resp = h.join("m1")
    h.ack("m1", resp)
    epoch = h.member("m1").member_epoch
    foo = [("foo", p) for p in range(6)]
    validate_transactional_commit(state, "g", epoch, "m1", None, foo)
    with pytest.raises(CoordinatorError) as e:  # a stale epoch: ILLEGAL_GENERATION, not STALE_MEMBER_EPOCH
        validate_transactional_commit(state, "g", epoch - 1, "m1", None, foo)
    assert e.value.code is Errors.ILLEGAL_GENERATION
    with pytest.raises(CoordinatorError) as e:  # a newer one too
        validate_transactional_commit(state, "g", epoch + 1, "m1", None, foo)
    assert e.value.code is Errors.ILLEGAL_GENERATION
    with pytest.raises(CoordinatorError) as e:  # a member fenced out of the group (a zombie)
        validate_transactional_commit(state, "g", epoch, "gone", None, foo)
    assert e.value.code is Errors.UNKNOWN_MEMBER_ID
    with pytest.raises(CoordinatorError) as e:  # generation -1 of a member while the group has members
        validate_transactional_commit(state, "g", -1, "m1", None, foo)
    assert e.value.code is Errors.ILLEGAL_GENERATION
    # Generation -1 without member id or instance id (TxnOffsetCommit v0-v2, a producer given
    # only the group id) is accepted whatever the members: Kafka 4.0-4.4's
    # `ConsumerGroup.validateOffsetCommit` returns at once when `isTransactional` (javap;
    # measured on 4.4: e2e/test_streams_differential.py::test_txn_offset_commit_of_streams_members).
    validate_transactional_commit(state, "g", -1, "", None, foo)


def test_classic_groups_accept_what_kafka_accepts_transactionally() -> None:
    h = ClassicHarness()
    state = h.shard.state
    ids = h.stable_group(2)
    gen = h.group.generation_id
    validate_transactional_commit(state, "g", gen, ids[0], None)
    # TxnOffsetCommit v0-v2 carry no member: accepted in a group with members (a regular
    # commit would be UNKNOWN_MEMBER_ID)
    validate_transactional_commit(state, "g", -1, "", None)
    with pytest.raises(CoordinatorError) as e:
        validate_transactional_commit(state, "g", gen - 1, ids[0], None)
    assert e.value.code is Errors.ILLEGAL_GENERATION
    with pytest.raises(CoordinatorError) as e:
        validate_transactional_commit(state, "g", gen, "zombie", None)
    assert e.value.code is Errors.UNKNOWN_MEMBER_ID
    # a new member joins: the group completes a rebalance, transactional commits of the
    # members that already joined the new generation are accepted (a regular one is not)
    h.join_new()
    h.join(member_id=ids[0])
    h.join(member_id=ids[1])
    h.advance(1)
    assert h.group.state is ClassicGroupState.COMPLETING_REBALANCE
    validate_transactional_commit(state, "g", h.group.generation_id, ids[0], None)


def test_an_older_consumer_epoch_commits_transactionally_the_partitions_held_since_then() -> None:
    """Kafka 4.3+ `ConsumerGroup.createAssignmentEpochValidator` applies to TxnOffsetCommit too
    (`validateTransactionalOffsetCommit` calls `validateOffsetCommit` with `isTransactional`):
    a producer's commit built before a heartbeat moved its consumer on is kept for the
    partitions it held then; any other partition fails the request, as ILLEGAL_GENERATION."""
    h = three_epochs()  # m1 at epoch 4: foo-0..2 since epoch 2, foo-3..5 since 4
    state = h.shard.state
    validate_transactional_commit(state, "g", 3, "m1", None, [("foo", 0), ("foo", 2)])
    with pytest.raises(CoordinatorError) as e:
        validate_transactional_commit(state, "g", 3, "m1", None, [("foo", 0), ("foo", 3)])
    assert e.value.code is Errors.ILLEGAL_GENERATION
    assert "older than assignment epoch 4 for partition foo-3" in (e.value.message or "")


def test_streams_group_members_commit_transactionally_as_kafka_4_4_validates_them() -> None:
    """Kafka 4.4 `StreamsGroup.validateOffsetCommit` with `isTransactional` (javap): the member
    id and member epoch of a streams-protocol member (a Kafka Streams `exactly_once_v2`
    producer sends its consumer's group metadata), an older epoch only for the tasks held since
    then, a stale epoch answered ILLEGAL_GENERATION up to TxnOffsetCommit v5. groupshift
    answered every streams group GROUP_ID_NOT_FOUND ("not a consumer or classic group"), so no
    exactly-once Kafka Streams application could commit through it."""
    h = two_epochs()  # m1 at epoch 4, half of its tasks held since epoch 2; m2 left
    state = h.shard.state
    m1 = h.group.members["m1"]
    old = [(WORDS, p) for p in m1.active.get("0", ()) if m1.active_task_epoch("0", p) == 2]
    new = [(WORDS, p) for p in m1.active.get("0", ()) if m1.active_task_epoch("0", p) == 4]
    old_repartition = [(REPARTITION, p) for p in m1.active.get("1", ()) if m1.active_task_epoch("1", p) == 2]
    assert old and new and old_repartition
    every = [(WORDS, p) for p in range(4)] + [(REPARTITION, p) for p in range(4)]

    def refused(epoch: int, member: str, partitions: list[tuple[str, int]]) -> Errors:
        with pytest.raises(CoordinatorError) as e:
            validate_transactional_commit(state, "app", epoch, member, None, partitions)
        return e.value.code

    validate_transactional_commit(state, "app", 4, "m1", None, every)
    validate_transactional_commit(state, "app", 3, "m1", None, old + old_repartition)
    assert refused(3, "m1", old + new) is Errors.ILLEGAL_GENERATION  # a task given at epoch 4
    assert refused(3, "m1", [("elsewhere", 0)]) is Errors.ILLEGAL_GENERATION  # not in the topology
    validate_transactional_commit(state, "app", 4, "m1", None, [("elsewhere", 0)])  # own epoch: no check
    assert refused(5, "m1", old) is Errors.ILLEGAL_GENERATION  # newer than the member's
    assert refused(4, "m2", old) is Errors.UNKNOWN_MEMBER_ID  # left: a zombie's producer
    assert refused(4, "never", old) is Errors.UNKNOWN_MEMBER_ID
    assert refused(-1, "m1", old) is Errors.ILLEGAL_GENERATION
    validate_transactional_commit(state, "app", -1, "", None, every)  # no member given: accepted
    # Once every member is gone, an admin-style commit (epoch -1) is accepted.
    h.hb(member_id="m1", member_epoch=-1)
    validate_transactional_commit(state, "app", -1, "m1", None, every)


# -- shadow group and tokens -----------------------------------------------------------------------


@pytest.mark.parametrize("group", ["g", "copier", "a-much-longer.group_id-42", "grüppe-ü", "emoji-🙂"])
def test_the_shadow_group_maps_to_the_groups_consumer_offsets_partition(group: str) -> None:
    assert java_string_hash(SHADOW_PREFIX) == 0
    assert java_string_hash(shadow_group(group)) == java_string_hash(group)
    for partitions in (1, 3, 50, 64):
        assert partition_for(shadow_group(group), partitions) == partition_for(group, partitions)


def partition_for(group: str, partitions: int) -> int:
    """Kafka `GroupCoordinator.partitionFor`: Utils.abs(groupId.hashCode) % partitions."""
    h = java_string_hash(group)
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


def test_java_string_hash_matches_javas() -> None:
    assert java_string_hash("hello") == 99162322  # "hello".hashCode()
    assert java_string_hash("polygenelubricants") == 1 << 31  # Integer.MIN_VALUE


def test_tokens_round_trip_and_foreign_metadata_is_not_a_token() -> None:
    for meta in (None, "", "x;y;z", "+-;"):
        t = Token(1234, 5, 99, 2, meta)
        assert decode_token(t.encode()) == t
    for foreign in (None, "", "streams-metadata", "gs-txn1;1;2;3", "gs-txn1;a;2;3;4;-", "gs-txn1;1;2;3;4;x"):
        assert decode_token(foreign) is None


# -- learning the outcome, and a restart -----------------------------------------------------------


def test_only_a_committed_token_newer_than_the_stored_offset_is_materialized() -> None:
    token = Token(500, 1, 7, 0, "meta").encode()
    fresh = committed_value((42, 3, token), None)
    assert fresh == OffsetAndMetadata(42, 3, "meta", 500)
    assert committed_value((42, 3, token), fresh) is None  # already materialized
    assert committed_value((42, 3, token), value(40, ts=400)) == fresh  # older regular commit
    assert committed_value((42, 3, token), value(60, ts=600)) is None  # a newer regular commit wins
    # an aborted transaction leaves the shadow's earlier value: a regular (mirror-written)
    # offset or nothing at all, never a token of the aborted commit
    assert committed_value((30, -1, "plain"), None) is None
    assert committed_value((-1, -1, ""), None) is None


def test_materialized_offsets_are_log_records_a_restart_replays() -> None:
    h = Harness()
    offsets = {("foo", 0): OffsetAndMetadata(42, -1, "m", 500), ("foo", 1): OffsetAndMetadata(7, -1, "", 500)}
    out = h.shard.commit_transactional_offsets("g", offsets, 1000)
    assert sorted(out.response or []) == [("foo", 0), ("foo", 1)]
    assert h.shard.offsets.get("g", "foo", 0) == offsets[("foo", 0)]
    assert "g" in h.shard.groups  # a simple group, as Kafka creates for a commit without a group
    # a regular commit made after the transactional one was accepted is kept
    newer = {("foo", 0): OffsetAndMetadata(10, -1, "", 400)}
    assert h.shard.commit_transactional_offsets("g", newer, 1001).response == []
    restarted = Shard(h.shard.state.config, h.shard.state.ids, h.shard.image)
    restarted.apply(out.records)
    assert restarted.offsets.get("g", "foo", 0) == offsets[("foo", 0)]
    assert restarted.offsets.get("g", "foo", 1) == offsets[("foo", 1)]
