"""Where protocols meet: the engine's `MigrationHooks`, implemented (KIP-848 "Supporting Online
Consumer Group Upgrade").

| request                  | group of the other type                                   |
|--------------------------|-----------------------------------------------------------|
| ConsumerGroupHeartbeat   | non-empty classic group, epoch 0: upgrade (if allowed)    |
| member fenced (CGH path) | last consumer-protocol member gone: downgrade (if allowed)|
| JoinGroup                | non-empty consumer group: a classic member joins it       |
| SyncGroup / Heartbeat    | consumer group: the classic member's own loop             |
| LeaveGroup               | consumer group: classic members leave (never a downgrade) |
| DescribeGroups           | consumer group: described in classic shape                |
| DescribeGroups           | streams group: its classic Kafka Streams instances, if any|
| StreamsGroupHeartbeat    | non-empty classic Kafka Streams group: converted online   |
| streams member leaving   | last streams-protocol member gone: back to classic        |
| Join/Sync/Heartbeat/Leave| streams group: a classic Kafka Streams instance inside it |
| ConnectGroupHeartbeat    | non-empty classic Kafka Connect group: converted online   |
| SDK worker leaving       | last SDK worker gone: back to a classic Connect group     |
| Join/Sync/Heartbeat/Leave| connect group: a classic Kafka Connect worker inside it   |

Empty groups are replaced by the engine itself whatever the policy (Kafka converts empty groups whatever
the policy).
"""

from __future__ import annotations

from engine.classic.api import (
    DescribedGroup,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.classic.group import ClassicGroup
from engine.connect.group import ConnectGroup
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import ConsumerGroupMember
from engine.context import RequestContext
from engine.operation import Operation
from engine.outcome import Pending
from engine.state import ShardState
from engine.streams.api import StreamsGroupHeartbeatRequest
from engine.streams.group import StreamsGroup
from protocol.connect_wire import ConnectHeartbeatRequest
from records.consumer_group import ClientAssignorMetadata
from translation import (
    classic_member,
    connect_classic_worker,
    connect_downgrade,
    connect_upgrade,
    streams_classic_member,
    streams_downgrade,
    streams_upgrade,
)
from translation.classic_describe import describe_consumer_group_as_classic
from translation.downgrade import can_downgrade_after_fence, downgrade
from translation.upgrade import not_a_consumer_group, upgrade


class Migration:
    def __init__(self, shard: ShardState) -> None:
        self.shard = shard

    def consumer_heartbeat_to_classic_group(
        self,
        group: ClassicGroup,
        joining: bool,
        op: Operation,
        client_assignors: tuple[ClientAssignorMetadata, ...] = (),
    ) -> ConsumerGroup:
        if not joining:
            raise not_a_consumer_group(group.group_id)
        return upgrade(self.shard, group, op, client_assignors)

    def consumer_member_fenced(
        self, group: ConsumerGroup, member: ConsumerGroupMember, op: Operation, reason: str
    ) -> bool:
        if not can_downgrade_after_fence(self.shard, group, member.member_id, op):
            return False
        downgrade(
            self.shard,
            group,
            member.member_id,
            None,
            op,
            f"the last consumer-protocol member left ({reason})",
        )
        return True

    def classic_join_to_consumer_group(
        self, group: ConsumerGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
    ) -> JoinGroupResponse | Pending:
        return classic_member.join(self.shard, group, req, ctx, op)

    def classic_sync_to_consumer_group(
        self, group: ConsumerGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
    ) -> SyncGroupResponse | Pending:
        return classic_member.sync(self.shard, group, req, op)

    def classic_heartbeat_to_consumer_group(
        self, group: ConsumerGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
    ) -> HeartbeatResponse:
        return classic_member.heartbeat(self.shard, group, req, op)

    def classic_leave_to_consumer_group(
        self, group: ConsumerGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
    ) -> LeaveGroupResponse:
        return classic_member.leave(self.shard, group, req, op)

    def describe_consumer_group_as_classic(self, group: ConsumerGroup) -> DescribedGroup:
        return describe_consumer_group_as_classic(self.shard, group)

    def describe_streams_group_as_classic(self, group: StreamsGroup) -> DescribedGroup:
        return streams_classic_member.describe(self.shard, group)

    def streams_heartbeat_to_classic_group(
        self, group: ClassicGroup, req: StreamsGroupHeartbeatRequest, op: Operation
    ) -> StreamsGroup:
        return streams_upgrade.upgrade(self.shard, group, req, op)

    def streams_member_leaving(self, group: StreamsGroup, member_id: str, op: Operation, reason: str) -> bool:
        if not streams_downgrade.can_downgrade_after_leave(self.shard, group, member_id, op):
            return False
        return streams_downgrade.downgrade(
            self.shard, group, member_id, op, f"the last streams-protocol member left ({reason})"
        )

    def classic_join_to_streams_group(
        self, group: StreamsGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
    ) -> JoinGroupResponse:
        return streams_classic_member.join(self.shard, group, req, ctx, op)

    def classic_sync_to_streams_group(
        self, group: StreamsGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
    ) -> SyncGroupResponse:
        return streams_classic_member.sync(self.shard, group, req, op)

    def classic_heartbeat_to_streams_group(
        self, group: StreamsGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
    ) -> HeartbeatResponse:
        return streams_classic_member.heartbeat(self.shard, group, req, op)

    def classic_leave_to_streams_group(
        self, group: StreamsGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
    ) -> LeaveGroupResponse:
        return streams_classic_member.leave(self.shard, group, req, op)

    def connect_heartbeat_to_classic_group(
        self, group: ClassicGroup, req: ConnectHeartbeatRequest, op: Operation
    ) -> ConnectGroup:
        return connect_upgrade.upgrade(self.shard, group, req, op)

    def connect_member_leaving(self, group: ConnectGroup, member_id: str, op: Operation, reason: str) -> bool:
        return connect_downgrade.leaving(self.shard, group, member_id, op, reason)

    def classic_join_to_connect_group(
        self, group: ConnectGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
    ) -> JoinGroupResponse:
        return connect_classic_worker.join(self.shard, group, req, ctx, op)

    def classic_sync_to_connect_group(
        self, group: ConnectGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
    ) -> SyncGroupResponse:
        return connect_classic_worker.sync(self.shard, group, req, op)

    def classic_heartbeat_to_connect_group(
        self, group: ConnectGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
    ) -> HeartbeatResponse:
        return connect_classic_worker.heartbeat(self.shard, group, req, op)

    def classic_leave_to_connect_group(
        self, group: ConnectGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
    ) -> LeaveGroupResponse:
        return connect_classic_worker.leave(self.shard, group, req, op)
