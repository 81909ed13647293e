"""A driver for classic-group tests: one shard, a clock, and bookkeeping of parked requests.

Appends are acknowledged at once (the runtime's job), unless `fail_next_append` is set."""

from __future__ import annotations

import struct
from typing import Any

from engine.classic.api import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.classic.group import ClassicGroup
from engine.classic.member import Protocol
from engine.config import CoordinatorConfig
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.outcome import Outcome, Pending
from engine.shard import Shard
from records.coordinator import CoordinatorRecord


def subscription(*topics: str, user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolSubscription v0: topics and user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        b = t.encode()
        out += struct.pack(">h", len(b)) + b
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    return out


class ClassicHarness:
    def __init__(self, topics: dict[str, int] | None = None, **config: Any) -> None:
        cfg = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 10}
        cfg.update({k.replace("_", "."): v for k, v in config.items()})
        image = MetadataImage([TopicImage(topic_id_for(n), n, c) for n, c in (topics or {"foo": 4}).items()])
        self.shard = Shard(CoordinatorConfig.from_kafka(cfg), SeededIds(11), image)
        self.now = 1000
        self.completed: dict[Pending, Any] = {}
        self.log: list[CoordinatorRecord] = []
        self.fail_next_append: Errors | None = None
        # True: appends are accepted but not yet durable (an fsync that stalls); their
        # continuations wait in `held` until `release_appends`.
        self.hold_appends = False
        self.held: list[Any] = []
        self.last: Outcome[Any] | None = None

    def process(self, out: Outcome[Any]) -> Any:
        self.last = out
        for handle, resp in out.completions:
            assert handle not in self.completed, f"{handle} completed twice"
            self.completed[handle] = resp
        if self.fail_next_append is not None and out.records:
            err, self.fail_next_append = self.fail_next_append, None
            if out.on_append is not None:
                self.process(out.on_append(err))
            return out.response
        self.log.extend(out.records)
        if out.on_append is not None:
            if self.hold_appends:
                self.held.append(out.on_append)
            else:
                self.process(out.on_append(Errors.NONE))
        return out.response

    def release_appends(self) -> None:
        """The stalled appends become durable, in order."""
        self.hold_appends = False
        held, self.held = self.held, []
        for continuation in held:
            self.process(continuation(Errors.NONE))

    def result(self, r: Any) -> Any:
        """The response of a request: itself, or what its parked handle was completed with."""
        if isinstance(r, Pending):
            return self.completed.get(r)
        return r

    def ctx(self, version: int, client_id: str = "client") -> RequestContext:
        return RequestContext(client_id, "/127.0.0.1", version)

    # --- requests ---------------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        instance_id: str | None = None,
        group_id: str = "g",
        protocols: tuple[Protocol, ...] | None = None,
        protocol_type: str = "consumer",
        session: int = 10_000,
        rebalance: int = 10_000,
        version: int = 7,
        client_id: str = "client",
    ) -> Any:
        protocols = protocols if protocols is not None else (Protocol("range", subscription("foo")),)
        self.now += 1
        req = JoinGroupRequest(group_id, session, rebalance, member_id, protocol_type, protocols, instance_id)
        return self.process(self.shard.join_group(req, self.ctx(version, client_id), self.now))

    def join_new(self, **kw: Any) -> tuple[str, Any]:
        """A dynamic member's first join: MEMBER_ID_REQUIRED, then the real join (parked)."""
        first = self.join(**kw)
        assert isinstance(first, JoinGroupResponse) and first.error_code == Errors.MEMBER_ID_REQUIRED, first
        return first.member_id, self.join(member_id=first.member_id, **kw)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
        group_id: str = "g",
        version: int = 5,
        protocol_type: str | None = "consumer",
        protocol_name: str | None = "range",
    ) -> Any:
        self.now += 1
        req = SyncGroupRequest(
            group_id,
            generation,
            member_id,
            instance_id,
            protocol_type,
            protocol_name,
            list((assignments or {}).items()),
        )
        return self.process(self.shard.sync_group(req, self.ctx(version), self.now))

    def heartbeat(
        self, member_id: str, generation: int, instance_id: str | None = None, group_id: str = "g"
    ) -> int:
        self.now += 1
        r = self.process(
            self.shard.heartbeat(
                HeartbeatRequest(group_id, generation, member_id, instance_id), self.ctx(4), self.now
            )
        )
        return int(r.error_code)

    def leave(self, *members: tuple[str, str | None], group_id: str = "g") -> Any:
        self.now += 1
        req = LeaveGroupRequest(group_id, [MemberIdentity(m, i) for m, i in members])
        return self.process(self.shard.leave_group(req, self.ctx(5), self.now))

    def advance(self, ms: int) -> None:
        self.now += ms
        for out in self.shard.expire(self.now):
            self.process(out)

    @property
    def group(self) -> ClassicGroup:
        g = self.shard.classic_group("g")
        assert g is not None
        return g

    def stable_group(self, n: int, **kw: Any) -> list[str]:
        """n dynamic members, joined, leader synced: a Stable group. Returns member ids."""
        ids, handles = [], []
        for _ in range(n):
            mid, h = self.join_new(**kw)
            ids.append(mid)
            handles.append(h)
        self.advance(1)  # the initial delay (0 ms here) ends the join phase
        responses = [self.result(h) for h in handles]
        assert all(r is not None and r.error_code == 0 for r in responses), responses
        gen = responses[0].generation_id
        leader = responses[0].leader
        syncs = {
            mid: self.sync(mid, gen, {m: f"assignment-{m}".encode() for m in ids} if mid == leader else None)
            for mid in ids
        }
        assert all(isinstance(self.result(s), SyncGroupResponse) for s in syncs.values())
        return ids
