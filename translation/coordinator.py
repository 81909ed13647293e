"""The Coordinator facade: the gateway's only entry point into a shard's groups (docs/architecture.md,
"translation/"; KIP-848 "Supporting Online Consumer Group Upgrade").

One Coordinator per shard. Every group API goes through it: the engine answers each request for
a group of the request's own protocol natively, and hands a request of the other protocol (a
classic JoinGroup to a consumer group, a ConsumerGroupHeartbeat to a classic group) to the
migration hooks this layer installs. It also renders consumer groups for DescribeGroups in
classic shape, which needs the embedded consumer protocol.

Difference from shipped Kafka, on purpose: Kafka 4.x answers DescribeGroups for a consumer group
with GROUP_ID_NOT_FOUND ("Dead"), which hides KIP-848 groups from tools that only speak
DescribeGroups (kafka-python's admin client, many exporters). groupshift describes them in
classic shape instead: protocol type `consumer`, the server assignor as protocol, each member's
subscription (a classic member's own metadata; for a consumer-protocol member a
ConsumerProtocolSubscription v3 built from its subscription) and its current assignment.
ConsumerGroupDescribe still answers GROUP_ID_NOT_FOUND for classic groups, so admin clients
that try it first fall back to DescribeGroups exactly as against Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.classic.api import (
    DescribedGroup,
    DescribedGroupMember,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.config import GroupConfig
from engine.consumer.api import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    ListedGroup,
)
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import ConsumerGroupMember
from engine.context import RequestContext
from engine.metadata import MetadataImage
from engine.offsets.api import (
    DeleteGroupResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchGroupRequest,
    OffsetFetchGroupResponse,
)
from engine.outcome import Outcome
from engine.shard import Shard
from translation.embedded_protocol import (
    SchemaError,
    Subscription,
    read_version,
    serialize_assignment,
    serialize_subscription,
)
from translation.migration import Migration


class Coordinator:
    def __init__(self, shard: Shard) -> None:
        self.shard = shard
        # The engine refuses cross-protocol requests on its own; this layer answers them.
        shard.migration = Migration(shard.state)

    # --- writes (each returns the engine's Outcome) -------------------------------------------

    def consumer_group_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[ConsumerGroupHeartbeatResponse]:
        return self.shard.consumer_group_heartbeat(req, ctx, now_ms)

    def join_group(
        self, req: JoinGroupRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[JoinGroupResponse]:
        return self.shard.join_group(req, ctx, now_ms)

    def sync_group(
        self, req: SyncGroupRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[SyncGroupResponse]:
        return self.shard.sync_group(req, ctx, now_ms)

    def heartbeat(
        self, req: HeartbeatRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[HeartbeatResponse]:
        return self.shard.heartbeat(req, ctx, now_ms)

    def leave_group(
        self, req: LeaveGroupRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[LeaveGroupResponse]:
        return self.shard.leave_group(req, ctx, now_ms)

    def offset_commit(
        self, req: OffsetCommitRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[OffsetCommitResponse]:
        return self.shard.offset_commit(req, ctx, now_ms)

    def offset_delete(
        self, req: OffsetDeleteRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[OffsetDeleteResponse]:
        return self.shard.offset_delete(req, ctx, now_ms)

    def delete_groups(
        self, group_ids: list[str], ctx: RequestContext, now_ms: int
    ) -> Outcome[list[DeleteGroupResult]]:
        return self.shard.delete_groups(group_ids, ctx, now_ms)

    # --- reads --------------------------------------------------------------------------------

    def offset_fetch(
        self, groups: Iterable[OffsetFetchGroupRequest], require_stable: bool = False
    ) -> list[OffsetFetchGroupResponse]:
        return self.shard.offset_fetch(groups, require_stable)

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return self.shard.describe_consumer_groups(group_ids)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
        return self.shard.list_groups(states, types)

    def describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        out = []
        for gid in group_ids:
            g = self.shard.groups.get(gid)
            if isinstance(g, ConsumerGroup):
                out.append(self._describe_consumer_group_as_classic(g))
            else:
                out.extend(self.shard.describe_groups([gid]))
        return out

    def _describe_consumer_group_as_classic(self, g: ConsumerGroup) -> DescribedGroup:
        image = self.shard.image
        members = []
        for m in g.members.values():
            by_name: dict[str, list[int]] = {}
            for tid, parts in m.assigned_partitions.items():
                t = image.topic_by_id(tid)
                if t is not None:
                    by_name.setdefault(t.name, []).extend(sorted(parts))
            version = _member_protocol_version(m)
            members.append(
                DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=_member_metadata(m, sorted(by_name.items())),
                    member_assignment=serialize_assignment(sorted(by_name.items()), version),
                )
            )
        return DescribedGroup(
            group_id=g.group_id,
            group_state=g.state().value,
            protocol_type="consumer",
            protocol_data=g.preferred_server_assignor() or self.shard.config.consumer_assignors[0],
            members=tuple(members),
        )

    # --- per-group configs and metrics ------------------------------------------------------------

    def set_group_config(self, group_id: str, config: GroupConfig | None) -> None:
        self.shard.set_group_config(group_id, config)

    def effective_group_config(self, group_id: str) -> dict[str, int]:
        """The KIP-848 group configs in force for `group_id` (its overrides, else the defaults)."""
        return {
            "consumer.session.timeout.ms": self.shard.consumer_session_timeout_ms(group_id),
            "consumer.heartbeat.interval.ms": self.shard.consumer_heartbeat_interval_ms(group_id),
        }

    def group_counts(self) -> dict[tuple[str, str], int]:
        """Groups by (type, state), for the KIP-848 group-count metric."""
        counts: dict[tuple[str, str], int] = {}
        for g in self.shard.groups.values():
            key = (
                ("consumer", g.state().value) if isinstance(g, ConsumerGroup) else ("classic", g.state.value)
            )
            counts[key] = counts.get(key, 0) + 1
        return counts

    # --- timers and metadata --------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.shard.next_deadline()

    def expire(self, now_ms: int) -> list[Outcome[Any]]:
        return self.shard.expire(now_ms)

    def update_metadata(self, image: MetadataImage, now_ms: int) -> Outcome[set[str]]:
        return self.shard.update_metadata(image, now_ms)


def _member_protocol_version(m: ConsumerGroupMember) -> int:
    if m.classic_member_metadata is not None and m.classic_member_metadata.supported_protocols:
        try:
            return read_version(m.classic_member_metadata.supported_protocols[0].metadata)
        except SchemaError:
            return 0
    return 3


def _member_metadata(m: ConsumerGroupMember, owned: list[tuple[str, list[int]]]) -> bytes:
    if m.classic_member_metadata is not None and m.classic_member_metadata.supported_protocols:
        return m.classic_member_metadata.supported_protocols[0].metadata
    topics = tuple(sorted(m.subscribed_topic_names))
    return serialize_subscription(
        Subscription(3, topics, None, tuple((t, tuple(p)) for t, p in owned), m.member_epoch, m.rack_id)
    )
