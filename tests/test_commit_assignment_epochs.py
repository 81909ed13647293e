"""OffsetCommit with an older member epoch (Kafka 4.3+ `ConsumerGroup.validateOffsetCommit` and
`createAssignmentEpochValidator`; the per-partition epochs of `ConsumerGroupMember`, stored in
tag 0 of record type 8's partitions).

The race these rules exist for, as Kafka's Java consumer meets it: it commits with the epoch it
knew when it built the request, and a heartbeat answer moves it to the next epoch before the
commit arrives. Kafka up to 4.2 refused the commit (STALE_MEMBER_EPOCH, which the Java consumer's
commitSync does not retry); Kafka 4.3+ accepts it for the partitions the member already held at
that epoch.
"""

from __future__ import annotations

from typing import Any

from engine.consumer.member import ConsumerGroupMember
from engine.errors import Errors
from engine.ids import SeededIds
from engine.metadata import topic_id_for
from engine.shard import Shard
from records.codec import decode_value, encode_value
from records.consumer_group import ConsumerGroupCurrentMemberAssignmentValue, TopicPartitions
from records.coordinator import CoordinatorRecord
from tests.consumer_harness import Harness
from tests.migration_harness import MigrationHarness, sub
from tests.migration_records import classic_meta
from tests.test_offsets import codes, commit

FOO = topic_id_for("foo")


class LoggingHarness(Harness):
    """The consumer harness, keeping every record written (to replay them)."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[CoordinatorRecord] = []

    def hb(self, version: int = 1, **fields: Any) -> Any:
        resp = super().hb(version, **fields)
        assert self.last is not None
        self.log.extend(self.last.records)
        return resp


def three_epochs() -> LoggingHarness:
    """m1 holds foo-0..2 since epoch 2 and foo-3..5 since epoch 4 (given back when m2 left)."""
    h = LoggingHarness()
    h.join("m1")  # epoch 2: all six
    h.join("m2")  # epoch 3: m2's half is revoked from m1 first
    h.converge("m1", "m2")
    assert h.member("m1").member_epoch == 3 and h.member("m2").member_epoch == 3
    h.hb(member_id="m2", member_epoch=-1)  # epoch 4: m2 leaves, m1 gets its half back
    h.converge("m1")
    m1 = h.member("m1")
    assert m1.member_epoch == 4
    assert m1.assignment_epochs == {FOO: {0: 2, 1: 2, 2: 2, 3: 4, 4: 4, 5: 4}}
    return h


def test_a_partition_keeps_the_epoch_it_was_given_at_while_the_member_moves_on() -> None:
    h = three_epochs()
    [rec] = [r for r in h.log if isinstance(r.value, ConsumerGroupCurrentMemberAssignmentValue)][-1:]
    assert rec.value == ConsumerGroupCurrentMemberAssignmentValue(
        4, 3, 0, (TopicPartitions(FOO, (0, 1, 2, 3, 4, 5), (2, 2, 2, 4, 4, 4)),), ()
    )


def test_an_older_epoch_commits_the_partitions_held_since_then() -> None:
    h = three_epochs()
    out = commit(h.shard, h.now, gen=3, member="m1", version=9, offsets={("foo", 0): 10, ("foo", 2): 11})
    assert codes(out) == [0, 0]
    assert len(out.records) == 2


def test_an_older_epoch_cannot_commit_a_partition_given_later_and_nothing_is_written() -> None:
    h = three_epochs()
    out = commit(h.shard, h.now, gen=3, member="m1", version=9, offsets={("foo", 0): 10, ("foo", 3): 11})
    assert codes(out) == [Errors.STALE_MEMBER_EPOCH] * 2
    assert not out.records
    [fenced] = [f for n, f in out.events if n == "offset_commit.fenced"]
    assert (fenced["topic"], fenced["partition"], fenced["received_epoch"]) == ("foo", 3, 3)
    [rejected] = [f for n, f in out.events if n == "request.rejected"]
    assert (
        rejected["reason"] == "Received member epoch 3 is older than assignment epoch 4 for partition foo-3."
    )


def test_an_older_epoch_cannot_commit_a_partition_the_member_does_not_hold() -> None:
    h = three_epochs()
    out = commit(h.shard, h.now, gen=3, member="m1", version=9, offsets={("bar", 0): 1})
    assert codes(out) == [Errors.STALE_MEMBER_EPOCH]
    out = commit(h.shard, h.now, gen=3, member="m1", version=9, offsets={("nope", 0): 1})
    assert codes(out) == [Errors.STALE_MEMBER_EPOCH]


def test_the_current_epoch_commits_anything_and_a_newer_one_nothing() -> None:
    h = three_epochs()
    assert codes(commit(h.shard, h.now, gen=4, member="m1", version=9, offsets={("bar", 0): 1})) == [0]
    out = commit(h.shard, h.now, gen=5, member="m1", version=9, offsets={("foo", 0): 1})
    assert codes(out) == [Errors.STALE_MEMBER_EPOCH]
    [rejected] = [f for n, f in out.events if n == "request.rejected"]
    assert rejected["reason"] == "Received member epoch 5 is newer than current member epoch 4."


def test_a_partition_pending_revocation_keeps_its_epoch_and_may_be_committed() -> None:
    h = LoggingHarness()
    h.join("m1")  # epoch 2
    h.join("m2")  # epoch 3
    h.hb(member_id="m1", member_epoch=2)  # m1 must revoke foo-3..5, still at epoch 2
    m1 = h.member("m1")
    assert m1.partitions_pending_revocation == {FOO: (3, 4, 5)}
    assert m1.assignment_epochs == {FOO: dict.fromkeys(range(6), 2)}
    assert codes(commit(h.shard, h.now, gen=2, member="m1", version=9, offsets={("foo", 4): 7})) == [0]


def test_assignment_epochs_survive_a_replay() -> None:
    h = three_epochs()
    shard = Shard(h.shard.config, SeededIds(0), h.shard.image)
    shard.apply(h.log)
    assert shard.replay_warnings == []
    assert shard.persisted_state() == h.shard.persisted_state()
    group = shard.consumer_group("g")
    assert group is not None
    assert group.members["m1"].assignment_epochs == {FOO: {0: 2, 1: 2, 2: 2, 3: 4, 4: 4, 5: 4}}


def test_a_record_without_epochs_gives_every_partition_the_member_epoch() -> None:
    """Records of Kafka up to 4.2 (and of groupshift before): Kafka's replay default."""
    h = three_epochs()
    log = [
        CoordinatorRecord(
            r.key,
            ConsumerGroupCurrentMemberAssignmentValue(
                r.value.member_epoch,
                r.value.previous_member_epoch,
                r.value.state,
                tuple(TopicPartitions(tp.topic_id, tp.partitions) for tp in r.value.assigned_partitions),
                tuple(
                    TopicPartitions(tp.topic_id, tp.partitions)
                    for tp in r.value.partitions_pending_revocation
                ),
            ),
        )
        if isinstance(r.value, ConsumerGroupCurrentMemberAssignmentValue)
        else r
        for r in h.log
    ]
    shard = Shard(h.shard.config, SeededIds(0), h.shard.image)
    shard.apply(log)
    group = shard.consumer_group("g")
    assert group is not None
    assert group.members["m1"].assignment_epochs == {FOO: dict.fromkeys(range(6), 4)}
    assert codes(commit(shard, h.now, gen=3, member="m1", version=9, offsets={("foo", 0): 1})) == [
        Errors.STALE_MEMBER_EPOCH
    ]


def test_epochs_round_trip_through_the_record_bytes() -> None:
    h = three_epochs()
    value = h.member("m1").assignment_value()
    assert decode_value(8, encode_value(value)) == value


def test_a_classic_member_of_a_consumer_group_gets_illegal_generation_instead() -> None:
    """A classic member commits with its generation (its member epoch); the same per-partition
    rule applies, with the classic error."""
    h = MigrationHarness()
    classic = ConsumerGroupMember(
        member_id="c1",
        client_id="classic",
        client_host="/h",
        subscribed_topic_names=("foo",),
        rebalance_timeout_ms=10_000,
        classic_member_metadata=classic_meta(10_000, ("range", sub("foo"))),
        member_epoch=5,
        previous_member_epoch=4,
        assigned_partitions={FOO: (0, 1, 2)},
        assignment_epochs={FOO: {0: 3, 1: 3, 2: 5}},
    )
    h.seed_consumer_group(5, [classic])
    group = h.shard.consumer_group("g")
    assert group is not None and group.members["c1"].assignment_epochs == {FOO: {0: 3, 1: 3, 2: 5}}
    assert codes(commit(h.shard, h.now, gen=4, member="c1", offsets={("foo", 1): 3})) == [0]
    out = commit(h.shard, h.now, gen=4, member="c1", offsets={("foo", 2): 3})
    assert codes(out) == [Errors.ILLEGAL_GENERATION]
    [rejected] = [f for n, f in out.events if n == "request.rejected"]
    assert (
        rejected["reason"] == "Received generation id 4 is older than assignment epoch 5 for partition foo-2."
    )
    out = commit(h.shard, h.now, gen=6, member="c1", offsets={("foo", 0): 3})
    assert codes(out) == [Errors.ILLEGAL_GENERATION]
