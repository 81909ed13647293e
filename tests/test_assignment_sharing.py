"""A reconciled member shares its target's assignment object, and empty assignments are the
singletons: replaying a member's current-assignment record must not leave a second copy of what
the group already holds (issue 27: the soak's memory drifted with such copies)."""

from __future__ import annotations

import random
import uuid

from engine.assignment import EMPTY, EMPTY_EPOCHS
from engine.config import CoordinatorConfig
from engine.consumer.api import ConsumerGroupHeartbeatRequest
from engine.consumer.group import ConsumerGroup
from engine.context import RequestContext
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.shard import Shard
from records.consumer_group import TopicPartitions

TOPIC = "t"


def _churned_group() -> ConsumerGroup:
    tid = topic_id_for(TOPIC)
    shard = Shard(CoordinatorConfig(), SeededIds(1), MetadataImage([TopicImage(tid, TOPIC, 12)]))
    ctx = RequestContext("c", "/127.0.0.1", 1)
    now = 1_000
    members: dict[str, tuple[int, list[TopicPartitions]]] = {}
    rng = random.Random(7)

    def heartbeat(mid: str, epoch: int, owned: list[TopicPartitions] | None, join: bool = False) -> None:
        nonlocal now
        now += 1
        req = ConsumerGroupHeartbeatRequest(
            group_id="g",
            member_id=mid,
            member_epoch=epoch,
            rebalance_timeout_ms=300_000 if join else -1,
            subscribed_topic_names=[TOPIC] if join else None,
            topic_partitions=owned,
        )
        r = shard.consumer_group_heartbeat(req, ctx, now).response
        if epoch == -1 or r.error_code:
            members.pop(mid, None)
            return
        if r.assignment is not None:
            owned = [TopicPartitions(tp.topic_id, tuple(tp.partitions)) for tp in r.assignment]
        members[mid] = (r.member_epoch, owned or [])

    def round_of_heartbeats() -> None:
        for mid, (epoch, owned) in list(members.items()):
            heartbeat(mid, epoch, owned)

    for _ in range(16):  # more members than partitions: some hold none
        heartbeat(str(uuid.uuid4()), 0, [], join=True)
    for i in range(60):
        if i % 3 == 0:
            heartbeat(rng.choice(list(members)), -1, None)
        else:
            heartbeat(str(uuid.uuid4()), 0, [], join=True)
        round_of_heartbeats()
    for _ in range(8):
        round_of_heartbeats()
    group = shard.consumer_group("g")
    assert group is not None
    return group


def test_reconciled_members_share_their_targets_and_empty_is_the_singleton() -> None:
    group = _churned_group()
    assert group.state().name == "STABLE"
    holding = [m for m in group.members.values() if m.assigned_partitions]
    idle = [m for m in group.members.values() if not m.assigned_partitions]
    assert holding and idle
    for m in holding:
        assert m.assigned_partitions is group.target(m.member_id)
    for m in idle:
        assert m.assigned_partitions is EMPTY
        assert m.assignment_epochs is EMPTY_EPOCHS
    for m in group.members.values():
        assert m.partitions_pending_revocation is EMPTY
