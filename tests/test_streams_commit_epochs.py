"""OffsetCommit with an older member epoch in a streams group (Kafka 4.4
`StreamsGroup.validateOffsetCommit` / `createAssignmentEpochValidator`, KAFKA-19779): each active
task keeps the epoch it was given at (record type 22, tagged `AssignmentEpochs`), and a commit sent
with an older epoch is accepted for the tasks the member already held at that epoch.

The race, as a Kafka Streams 4.4 instance meets it during a roll (e2e/test_streams_online_migration.py
found it): its periodic commit is built at epoch N, the heartbeat acknowledging a revocation moves
it to N+1, then the commit arrives. Refusing it makes the instance drop its tasks and rejoin, and
at-least-once processing counts again what it processed since its last commit."""

from __future__ import annotations

from engine.errors import Errors
from engine.streams.group import StreamsGroup
from records.streams_group import StreamsGroupCurrentMemberAssignmentValue
from tests.test_offsets import codes, commit
from tests.test_streams_groups import REPARTITION, WORDS, Streams


def recording() -> Streams:
    h = Streams()
    h.records = []  # the harness keeps every heartbeat's records from now on
    return h


def two_epochs() -> Streams:
    """m1 holds every task since epoch 2; m2 joins (epoch 3), m1 gives up half and moves to 3;
    m2 leaves (epoch 4) and m1 gets that half back at epoch 4."""
    h = recording()
    h.join("m1")
    h.join("m2")
    h.converge("m1", "m2")
    assert h.epochs == {"m1": 3, "m2": 3}
    h.hb(member_id="m2", member_epoch=-1)
    h.converge("m1")
    assert h.epochs["m1"] == 4
    return h


def given_at(h: Streams, member: str) -> dict[str, dict[int, int]]:
    m = h.group.members[member]
    out: dict[str, dict[int, int]] = {}
    for sid, parts in m.active.items():
        for p in parts:
            e = m.active_task_epoch(sid, p)
            assert e is not None
            out.setdefault(sid, {})[p] = e
    return out


def test_an_active_task_keeps_the_epoch_it_was_given_at_and_the_record_carries_it() -> None:
    h = two_epochs()
    epochs = given_at(h, "m1")
    assert sorted(set(epochs["0"].values()) | set(epochs["1"].values())) == [2, 4]
    kept = {p for p, e in epochs["0"].items() if e == 2}
    assert len(kept) == 2  # the half m1 never gave up
    [last] = [r.value for r in h.records if isinstance(r.value, StreamsGroupCurrentMemberAssignmentValue)][
        -1:
    ]
    assert last.member_epoch == 4
    for ids in last.active_tasks:
        assert ids.assignment_epochs == tuple(epochs[ids.subtopology_id][p] for p in ids.partitions)
    # A restart reads the same epochs back.
    replayed = h.replayed().groups["app"]
    assert isinstance(replayed, StreamsGroup)
    assert replayed.members["m1"].active_epochs == epochs
    assert h.shard.persisted_state()["groups"] == h.replayed().persisted_state()["groups"]


def test_an_older_epoch_commits_the_tasks_held_since_then_on_source_and_repartition_topics() -> None:
    h = two_epochs()
    epochs = given_at(h, "m1")
    old = sorted(p for p, e in epochs["0"].items() if e == 2)
    old_repartition = sorted(p for p, e in epochs["1"].items() if e == 2)
    offsets = {(WORDS, p): 10 + p for p in old} | {(REPARTITION, p): 20 + p for p in old_repartition}
    out = commit(h.shard, h.now, group="app", gen=3, member="m1", version=9, offsets=offsets)
    assert codes(out) == [0] * len(offsets)
    assert len(out.records) == len(offsets)


def test_an_older_epoch_cannot_commit_a_task_given_later_and_nothing_is_written() -> None:
    h = two_epochs()
    epochs = given_at(h, "m1")
    old = min(p for p, e in epochs["0"].items() if e == 2)
    new = min(p for p, e in epochs["0"].items() if e == 4)
    out = commit(
        h.shard, h.now, group="app", gen=3, member="m1", version=9, offsets={(WORDS, old): 1, (WORDS, new): 2}
    )
    assert codes(out) == [Errors.STALE_MEMBER_EPOCH] * 2
    assert not out.records


def test_an_older_epoch_refuses_a_topic_outside_the_topology_and_a_newer_epoch_is_stale() -> None:
    h = two_epochs()
    out = commit(h.shard, h.now, group="app", gen=3, member="m1", version=9, offsets={("elsewhere", 0): 1})
    assert codes(out) == [Errors.STALE_MEMBER_EPOCH]
    out = commit(h.shard, h.now, group="app", gen=5, member="m1", version=9, offsets={(WORDS, 0): 1})
    assert codes(out) == [Errors.STALE_MEMBER_EPOCH]
    out = commit(h.shard, h.now, group="app", gen=4, member="m1", version=9, offsets={(WORDS, 0): 1})
    assert codes(out) == [0]
