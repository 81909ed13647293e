"""A reproducible mixed workload for storage tests: consumer-group heartbeats, classic joins and
syncs, offset commits and deletions, driven through a shard whose records go to a log."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import Any

from engine.classic.api import JoinGroupRequest, JoinGroupResponse, SyncGroupRequest
from engine.classic.member import Protocol
from engine.config import CoordinatorConfig
from engine.consumer.api import ConsumerGroupHeartbeatRequest
from engine.context import RequestContext
from engine.errors import Errors
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.offsets.api import CommitPartition, CommitTopic, OffsetCommitRequest
from engine.outcome import Outcome, Pending
from engine.shard import Shard

CONFIG = CoordinatorConfig.from_kafka(
    {
        "group.consumer.session.timeout.ms": 600_000,
        "group.consumer.max.session.timeout.ms": 600_000,
        "group.initial.rebalance.delay.ms": 0,
        "group.min.session.timeout.ms": 10,
    }
)
IMAGE = MetadataImage([TopicImage(topic_id_for(t), t, 6) for t in ("foo", "bar")])
SUB = struct.pack(">hih", 0, 1, 3) + b"foo" + struct.pack(">i", -1)


def persisted(shard: Shard, ordered: bool = True) -> dict[str, Any]:
    """The shard's persisted state; `ordered=False` compares members as a set, since compaction
    keeps only each key's latest record and so may change the order members were created in."""
    state = shard.persisted_state()
    if not ordered:
        for gid, (kind, view) in list(state["groups"].items()):
            if kind == "consumer":
                view = dict(view)
                view["members"] = sorted(view["members"], key=lambda kv: kv[0])
                state["groups"][gid] = (kind, view)
    return state


class Workload:
    """Each `step()` runs one random operation; every operation writes at most one batch."""

    def __init__(self, shard: Shard, seed: int) -> None:
        self.shard = shard
        self.rng = random.Random(seed)
        self.now = 1000
        self.members: dict[str, int] = {}  # consumer member id -> epoch
        self.classic: dict[str, Any] = {}  # classic member id -> (generation) or None
        self.done: dict[Pending, Any] = {}

    def _drive(self, out: Outcome[Any]) -> Any:
        for h, r in out.completions:
            self.done[h] = r
        if out.on_append is not None:
            self._drive(out.on_append(Errors.NONE))
        return out.response

    def step(self) -> str:
        self.now += self.rng.randint(1, 50)
        choice: Callable[[], str] = self.rng.choice(
            [self._join, self._heartbeat, self._commit, self._commit, self._classic, self._leave]
        )
        return choice()

    def _join(self) -> str:
        mid = f"m{self.rng.randint(0, 5)}"
        topics = self.rng.choice([["foo"], ["foo", "bar"]])
        out = self.shard.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest(
                "cg",
                mid,
                0,
                rebalance_timeout_ms=5000,
                subscribed_topic_names=topics,
                topic_partitions=[],
            ),
            RequestContext("c", "/h", 1),
            self.now,
        )
        if out.response.error_code == 0:  # type: ignore[union-attr]
            self.members[mid] = out.response.member_epoch  # type: ignore[union-attr]
        return "join"

    def _heartbeat(self) -> str:
        if not self.members:
            return self._join()
        mid = self.rng.choice(sorted(self.members))
        g = self.shard.consumer_group("cg")
        owned = None
        if g is not None and mid in g.members:
            from records.consumer_group import TopicPartitions

            owned = [TopicPartitions(t, p) for t, p in g.members[mid].assigned_partitions.items()]
        out = self.shard.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest("cg", mid, self.members[mid], topic_partitions=owned),
            RequestContext("c", "/h", 1),
            self.now,
        )
        r = out.response
        if r.error_code == 0:  # type: ignore[union-attr]
            self.members[mid] = r.member_epoch  # type: ignore[union-attr]
        else:
            del self.members[mid]
        return "heartbeat"

    def _leave(self) -> str:
        if not self.members:
            return self._commit()
        mid = self.rng.choice(sorted(self.members))
        self.shard.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest("cg", mid, -1), RequestContext("c", "/h", 1), self.now
        )
        del self.members[mid]
        return "leave"

    def _commit(self) -> str:
        group = self.rng.choice(["simple", "classic"])
        req = OffsetCommitRequest(
            group,
            -1,
            "",
            None,
            -1,
            [
                CommitTopic(
                    self.rng.choice(["foo", "bar"]),
                    [CommitPartition(self.rng.randint(0, 5), self.rng.randint(0, 10**6))],
                )
            ],
        )
        self._drive(self.shard.offset_commit(req, RequestContext("c", "/h", 8), self.now))
        return "commit"

    def _classic(self) -> str:
        """A classic member joins and the group becomes Stable (several operations)."""
        ctx = RequestContext("c", "/h", 5)
        r = self._drive(
            self.shard.join_group(
                JoinGroupRequest("classic", 60_000, 60_000, "", "consumer", (Protocol("range", SUB),)),
                ctx,
                self.now,
            )
        )
        if not isinstance(r, JoinGroupResponse) or r.error_code != Errors.MEMBER_ID_REQUIRED:
            return "classic"
        h = self._drive(
            self.shard.join_group(
                JoinGroupRequest(
                    "classic", 60_000, 60_000, r.member_id, "consumer", (Protocol("range", SUB),)
                ),
                ctx,
                self.now,
            )
        )
        for out in self.shard.expire(self.now + 1):
            self._drive(out)
        resp = self.done.get(h) if isinstance(h, Pending) else h
        if resp is None or resp.error_code != 0 or resp.leader != resp.member_id:
            return "classic"
        members = resp.members
        self._drive(
            self.shard.sync_group(
                SyncGroupRequest(
                    "classic",
                    resp.generation_id,
                    resp.member_id,
                    None,
                    "consumer",
                    "range",
                    [(m.member_id, b"assignment") for m in members],
                ),
                ctx,
                self.now + 1,
            )
        )
        return "classic"
