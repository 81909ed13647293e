"""Where the translation layer plugs into the engine (KIP-848 "Supporting Online Consumer Group
Upgrade").

The engine runs each group type natively. A request of one protocol that reaches a group of the
other type is handed to these hooks (the cells of `engine.routing.ROUTES` that say so, the
fencing of a member, which may downgrade its group, and DescribeGroups of a consumer group); the
translation layer implements them (classic members in consumer groups, conversions in both
directions, consumer groups described in classic shape). `RefuseMigration` is the engine's
behaviour on its own: what Kafka answers when no conversion is possible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from engine.errors import CoordinatorError, Errors

if TYPE_CHECKING:
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
    from engine.streams.api import StreamsGroupHeartbeatRequest
    from engine.streams.group import StreamsGroup
    from protocol.connect_wire import ConnectHeartbeatRequest
    from records.consumer_group import ClientAssignorMetadata


class MigrationHooks(Protocol):
    def consumer_heartbeat_to_classic_group(
        self,
        group: ClassicGroup,
        joining: bool,
        op: Operation,
        client_assignors: tuple[ClientAssignorMetadata, ...] = (),
    ) -> ConsumerGroup:
        """A ConsumerGroupHeartbeat reached a classic group: convert it (upgrade) or refuse.
        `client_assignors`: the joining member's (a client assignor that reads the classic
        members' metadata lifts the KAFKA-18134 refusal, docs/client-side-assignors.md)."""
        ...

    def consumer_member_fenced(
        self, group: ConsumerGroup, member: ConsumerGroupMember, op: Operation, reason: str
    ) -> bool:
        """A member is being fenced; True when the hook handled it (downgrade to classic)."""
        ...

    def classic_join_to_consumer_group(
        self, group: ConsumerGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
    ) -> JoinGroupResponse | Pending: ...

    def classic_sync_to_consumer_group(
        self, group: ConsumerGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
    ) -> SyncGroupResponse | Pending: ...

    def classic_heartbeat_to_consumer_group(
        self, group: ConsumerGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
    ) -> HeartbeatResponse: ...

    def classic_leave_to_consumer_group(
        self, group: ConsumerGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
    ) -> LeaveGroupResponse: ...

    def describe_consumer_group_as_classic(self, group: ConsumerGroup) -> DescribedGroup:
        """DescribeGroups reached a consumer group."""
        ...

    def describe_streams_group_as_classic(self, group: StreamsGroup) -> DescribedGroup:
        """DescribeGroups reached a streams group (classic Kafka Streams instances may be inside)."""
        ...

    def streams_heartbeat_to_classic_group(
        self, group: ClassicGroup, req: StreamsGroupHeartbeatRequest, op: Operation
    ) -> StreamsGroup:
        """A joining StreamsGroupHeartbeat reached a non-empty classic group: convert a classic
        Kafka Streams group to a streams group keeping its instances, or refuse."""
        ...

    def streams_member_leaving(self, group: StreamsGroup, member_id: str, op: Operation, reason: str) -> bool:
        """A streams-protocol member leaves or is fenced; True when the hook handled it (the
        last one left classic Kafka Streams instances behind: back to a classic group)."""
        ...

    def classic_join_to_streams_group(
        self, group: StreamsGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
    ) -> JoinGroupResponse: ...

    def classic_sync_to_streams_group(
        self, group: StreamsGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
    ) -> SyncGroupResponse: ...

    def classic_heartbeat_to_streams_group(
        self, group: StreamsGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
    ) -> HeartbeatResponse: ...

    def classic_leave_to_streams_group(
        self, group: StreamsGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
    ) -> LeaveGroupResponse: ...

    def connect_heartbeat_to_classic_group(
        self, group: ClassicGroup, req: ConnectHeartbeatRequest, op: Operation
    ) -> ConnectGroup:
        """A joining ConnectGroupHeartbeat reached a non-empty classic group: convert a classic
        Kafka Connect group to a connect group keeping its workers, or refuse."""
        ...

    def connect_member_leaving(self, group: ConnectGroup, member_id: str, op: Operation, reason: str) -> bool:
        """An SDK (new-protocol) worker leaves or is fenced; True when the hook handled it (the
        last one left classic Kafka Connect workers behind: back to a classic group)."""
        ...

    def classic_join_to_connect_group(
        self, group: ConnectGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
    ) -> JoinGroupResponse: ...

    def classic_sync_to_connect_group(
        self, group: ConnectGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
    ) -> SyncGroupResponse: ...

    def classic_heartbeat_to_connect_group(
        self, group: ConnectGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
    ) -> HeartbeatResponse: ...

    def classic_leave_to_connect_group(
        self, group: ConnectGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
    ) -> LeaveGroupResponse: ...


class RefuseMigration:
    """No translation: each protocol only reaches groups of its own type."""

    def consumer_heartbeat_to_classic_group(
        self,
        group: ClassicGroup,
        joining: bool,
        op: Operation,
        client_assignors: tuple[ClientAssignorMetadata, ...] = (),
    ) -> ConsumerGroup:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a consumer group")

    def consumer_member_fenced(
        self, group: ConsumerGroup, member: ConsumerGroupMember, op: Operation, reason: str
    ) -> bool:
        return False

    def classic_join_to_consumer_group(
        self, group: ConsumerGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
    ) -> JoinGroupResponse | Pending:
        from engine.classic.api import JoinGroupResponse

        return JoinGroupResponse(error_code=int(Errors.INCONSISTENT_GROUP_PROTOCOL), member_id="")

    def classic_sync_to_consumer_group(
        self, group: ConsumerGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
    ) -> SyncGroupResponse | Pending:
        from engine.classic.api import SyncGroupResponse

        return SyncGroupResponse(error_code=int(Errors.UNKNOWN_MEMBER_ID))

    def classic_heartbeat_to_consumer_group(
        self, group: ConsumerGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
    ) -> HeartbeatResponse:
        from engine.classic.api import HeartbeatResponse

        return HeartbeatResponse(int(Errors.UNKNOWN_MEMBER_ID))

    def classic_leave_to_consumer_group(
        self, group: ConsumerGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
    ) -> LeaveGroupResponse:
        from engine.classic.api import LeaveGroupResponse, MemberResponse

        return LeaveGroupResponse(
            members=[
                MemberResponse(m.member_id, m.group_instance_id, int(Errors.UNKNOWN_MEMBER_ID))
                for m in req.members
            ]
        )

    def describe_consumer_group_as_classic(self, group: ConsumerGroup) -> DescribedGroup:
        # Kafka 4.x: a consumer group is Dead (GROUP_ID_NOT_FOUND) to DescribeGroups.
        from engine.classic.describe import dead_group

        return dead_group(group.group_id)

    def describe_streams_group_as_classic(self, group: StreamsGroup) -> DescribedGroup:
        # Kafka 4.4 (`classicGroup` throws): Dead, GROUP_ID_NOT_FOUND from v6.
        from engine.classic.api import DescribedGroup

        return DescribedGroup(
            group_id=group.group_id,
            group_state="Dead",
            error_message=f"Group {group.group_id} is not a classic group.",
        )

    def streams_heartbeat_to_classic_group(
        self, group: ClassicGroup, req: StreamsGroupHeartbeatRequest, op: Operation
    ) -> StreamsGroup:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a streams group.")

    def streams_member_leaving(self, group: StreamsGroup, member_id: str, op: Operation, reason: str) -> bool:
        return False

    def classic_join_to_streams_group(
        self, group: StreamsGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
    ) -> JoinGroupResponse:
        # Kafka 4.4 (measured): a JoinGroup on a streams group with members.
        raise CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL)

    def classic_sync_to_streams_group(
        self, group: StreamsGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
    ) -> SyncGroupResponse:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a classic group.")

    def classic_heartbeat_to_streams_group(
        self, group: StreamsGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
    ) -> HeartbeatResponse:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a classic group.")

    def classic_leave_to_streams_group(
        self, group: StreamsGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
    ) -> LeaveGroupResponse:
        from engine.classic.api import LeaveGroupResponse, MemberResponse

        return LeaveGroupResponse(
            members=[
                MemberResponse(m.member_id, m.group_instance_id, int(Errors.UNKNOWN_MEMBER_ID))
                for m in req.members
            ]
        )

    def connect_heartbeat_to_classic_group(
        self, group: ClassicGroup, req: ConnectHeartbeatRequest, op: Operation
    ) -> ConnectGroup:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a connect group.")

    def connect_member_leaving(self, group: ConnectGroup, member_id: str, op: Operation, reason: str) -> bool:
        return False

    def classic_join_to_connect_group(
        self, group: ConnectGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
    ) -> JoinGroupResponse:
        raise CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL)

    def classic_sync_to_connect_group(
        self, group: ConnectGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
    ) -> SyncGroupResponse:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a classic group.")

    def classic_heartbeat_to_connect_group(
        self, group: ConnectGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
    ) -> HeartbeatResponse:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a classic group.")

    def classic_leave_to_connect_group(
        self, group: ConnectGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
    ) -> LeaveGroupResponse:
        from engine.classic.api import LeaveGroupResponse, MemberResponse

        return LeaveGroupResponse(
            members=[
                MemberResponse(m.member_id, m.group_instance_id, int(Errors.UNKNOWN_MEMBER_ID))
                for m in req.members
            ]
        )
