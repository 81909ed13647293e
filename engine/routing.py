"""Which path answers a group request, for each type of group it reaches (KIP-848 "Supporting
Online Consumer Group Upgrade"; Kafka `GroupMetadataManager.consumerGroupHeartbeat`,
`classicGroupJoin`, `classicGroupSync`, `classicGroupHeartbeat`, `classicGroupLeave`).

Rules of this file:
* Everything that decides *which* handler runs lives in `ROUTES`: one row per API, one cell per
  kind of group the request finds. Reading the table is reading how the two protocols share
  groups; a handler never re-dispatches on the group's type.
* A cell also fixes the operation's replay mode, chosen before the operation is created and
  never changed: `True` when the path writes consumer-group records that the shard replays,
  `False` when it changes a classic group in place (its GroupMetadata record is a snapshot).
* Request checks that do not depend on the group (a missing group id, a session timeout out of
  range, Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`) run before the table, exactly
  as Kafka orders its errors.
* A path of one protocol into a group of the other type goes through the translation layer
  (`state.migration`, `engine.hooks.MigrationHooks`); on its own the engine refuses them as
  Kafka does when no conversion is possible.

The table:

    request        no group   cl.,empty   classic     cons.,empty  consumer    str.,empty  streams
    ConsumerGH     native(1)  replaced(2) upgrade(3)  native       native      NOT FOUND   NOT FOUND
    JoinGroup      native     native      native      replaced(4)  classic(5)  replaced(7) classic s.(8)
    SyncGroup      UNKNOWN    UNKNOWN     native      UNKNOWN      classic(5)  NOT FOUND   classic s.(8)
    Heartbeat      UNKNOWN    native      native      classic(5)   classic(5)  NOT FOUND   classic s.(8)
    LeaveGroup     UNKNOWN    native      native      classic(5)   classic(5)  UNKNOWN     classic s.(8)
    StreamsGH      streams(6) streams(6)  upgrade(9)  NOT FOUND    NOT FOUND   streams     streams

ConsumerGH / StreamsGH: ConsumerGroupHeartbeat / StreamsGroupHeartbeat; cl./cons./str.: classic,
consumer, streams groups.

UNKNOWN: UNKNOWN_MEMBER_ID (LeaveGroup: per member).
(1) a join (epoch 0) creates the group; anything else is GROUP_ID_NOT_FOUND.
(2) an empty classic group (even offsets only) becomes a consumer group whatever the migration
    policy, on a join; otherwise "not a consumer group".
(3) a non-empty classic group is converted when the policy allows it, on a join.
(4) an empty consumer group is replaced by a classic group whatever the policy.
(5) a classic member living inside the consumer group (`translation/classic_member.py`).
(6) `engine/streams/heartbeat.py`: a join creates the group, replacing an empty classic group
    (Kafka 4.4's offline migration); it looks the group up itself and answers GROUP_ID_NOT_FOUND
    ("not a streams group") for the cells marked NOT FOUND.
NOT FOUND: GROUP_ID_NOT_FOUND, "Group ... is not a consumer/classic/streams group".
(7) an empty streams group is replaced by a classic group (Kafka 4.4's offline migration back).
(8) (s. = Streams instance) a classic Kafka Streams instance living inside the streams group
    (`translation/streams_classic_member.py`); without the translation layer JoinGroup answers
    INCONSIST. (Kafka 4.4), SyncGroup and Heartbeat NOT FOUND, LeaveGroup UNKNOWN.
(9) a classic Kafka Streams group converts online when the joiner brings a topology and nothing
    blocks it (`translation/streams_upgrade.py`); otherwise NOT FOUND, with the reason logged.

Connect groups (groupshift extension, docs/connect-groups.md): ConnectGroupHeartbeat on a
non-empty classic group converts a classic Kafka Connect group online on a join
(`translation/connect_upgrade.py`; otherwise NOT FOUND); JoinGroup, SyncGroup, Heartbeat and
LeaveGroup on a connect group serve a classic Kafka Connect worker living inside it
(`translation/connect_classic_worker.py`; without the translation layer INCONSIST., NOT FOUND,
NOT FOUND, UNKNOWN); a JoinGroup on a connect group without workers replaces it with the classic
group the join creates, as for empty consumer and streams groups.
INCONSIST.: INCONSISTENT_GROUP_PROTOCOL (measured on Kafka 4.4.0).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple

from engine.classic.api import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
    SyncGroupRequest,
)
from engine.classic.group import ClassicGroup
from engine.classic.heartbeat import heartbeat_classic_group, leave_classic_group
from engine.classic.join import join_classic_group
from engine.classic.records import group_metadata_tombstone
from engine.classic.sync import sync_classic_group
from engine.connect import heartbeat as connect_heartbeat
from engine.connect.group import ConnectGroup
from engine.consumer import heartbeat as cg_heartbeat
from engine.consumer.api import ConsumerGroupHeartbeatRequest
from engine.consumer.group import ConsumerGroup
from engine.context import RequestContext
from engine.errors import CoordinatorError, Errors
from engine.offsets.operations import group_tombstones
from engine.operation import Operation
from engine.state import Group, ShardState
from engine.streams import heartbeat as streams_heartbeat
from engine.streams.group import StreamsGroup


class GroupKind(Enum):
    NONE = "no group"
    CLASSIC_EMPTY = "classic, empty"
    CLASSIC = "classic"
    CONSUMER_EMPTY = "consumer, empty"
    CONSUMER = "consumer"
    STREAMS_EMPTY = "streams, empty"
    STREAMS = "streams"
    CONNECT_EMPTY = "connect, empty"
    CONNECT = "connect"


def kind_of(group: Group | None) -> GroupKind:
    if group is None:
        return GroupKind.NONE
    if isinstance(group, ConsumerGroup):
        return GroupKind.CONSUMER if group.members else GroupKind.CONSUMER_EMPTY
    if isinstance(group, StreamsGroup):
        return GroupKind.STREAMS if group.members else GroupKind.STREAMS_EMPTY
    if isinstance(group, ConnectGroup):
        return GroupKind.CONNECT if group.members else GroupKind.CONNECT_EMPTY
    return GroupKind.CLASSIC_EMPTY if group.is_empty() else GroupKind.CLASSIC


# A path: (state, the group found (None when none), request, request context, operation).
Path = Callable[[ShardState, Any, Any, RequestContext, Operation], Any]


class Route(NamedTuple):
    replay: bool
    path: Path


# --- ConsumerGroupHeartbeat ----------------------------------------------------------------------


def _cgh_replace_empty_classic(
    s: ShardState, group: ClassicGroup, req: ConsumerGroupHeartbeatRequest, ctx: RequestContext, op: Operation
) -> Any:
    if req.member_epoch != 0:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a consumer group.")
    # Offsets are keyed by group id and stay (Kafka converts empty groups whatever the policy).
    op.records.append(group_metadata_tombstone(group.group_id))
    op.event(
        "group.converted",
        group=group.group_id,
        from_type="classic",
        to_type="consumer",
        reason="empty classic group",
    )
    return cg_heartbeat.heartbeat(s, None, req, ctx, op)


def _cgh_upgrade(
    s: ShardState, group: ClassicGroup, req: ConsumerGroupHeartbeatRequest, ctx: RequestContext, op: Operation
) -> Any:
    if req.member_epoch != 0:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a consumer group.")
    converted = s.migration.consumer_heartbeat_to_classic_group(group, True, op, req.client_assignors or ())
    return cg_heartbeat.heartbeat(s, converted, req, ctx, op)


# --- classic APIs --------------------------------------------------------------------------------


def _join_native(
    s: ShardState, group: ClassicGroup | None, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    return join_classic_group(s, group, req, ctx, op)


def _join_replace_empty_consumer(
    s: ShardState, group: ConsumerGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    return _classic_join_replacing_empty(s, group, req, ctx, op, "consumer")


def _classic_join_replacing_empty(
    s: ShardState, group: Any, req: JoinGroupRequest, ctx: RequestContext, op: Operation, from_type: str
) -> Any:
    """A JoinGroup on an empty consumer, streams or connect group: the classic group the join
    creates replaces it, committed offsets kept (Kafka's offline migration back to classic)."""
    if req.member_id:
        # A member id the empty group does not know: Kafka's getOrMaybeCreateClassicGroup refuses
        # it before anything changes, so the group (and the offsets an OffsetFetch finds through
        # it) stays.
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID)
    # The classic group the join creates replaces this one when the operation commits
    # (`Operation.put_group`); a failed append leaves this group, and its offsets, in place.
    group_tombstones(group, op.records)
    op.event(
        "group.converted",
        group=req.group_id,
        from_type=from_type,
        to_type="classic",
        reason=f"empty {from_type} group",
    )
    return join_classic_group(s, None, req, ctx, op)


def _join_classic_member(
    s: ShardState, group: ConsumerGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    return s.migration.classic_join_to_consumer_group(group, req, ctx, op)


def _unknown_member(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID)


def _sync_native(
    s: ShardState, group: ClassicGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    return sync_classic_group(s, group, req, ctx, op)


def _sync_classic_member(
    s: ShardState, group: ConsumerGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    return s.migration.classic_sync_to_consumer_group(group, req, ctx, op)


def _heartbeat_native(
    s: ShardState, group: ClassicGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
) -> HeartbeatResponse:
    return heartbeat_classic_group(s, group, req, op)


def _heartbeat_classic_member(
    s: ShardState, group: ConsumerGroup, req: HeartbeatRequest, ctx: RequestContext, op: Operation
) -> HeartbeatResponse:
    return s.migration.classic_heartbeat_to_consumer_group(group, req, ctx, op)


def _heartbeat_no_group(
    s: ShardState, group: None, req: HeartbeatRequest, ctx: RequestContext, op: Operation
) -> Any:
    raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Group {req.group_id} not found.")


def _leave_native(
    s: ShardState, group: ClassicGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
) -> LeaveGroupResponse:
    return leave_classic_group(s, group, req, op)


def _leave_classic_member(
    s: ShardState, group: ConsumerGroup, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
) -> LeaveGroupResponse:
    return s.migration.classic_leave_to_consumer_group(group, req, ctx, op)


def _leave_no_group(
    s: ShardState, group: None, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
) -> LeaveGroupResponse:
    return LeaveGroupResponse(
        members=[
            MemberResponse(m.member_id, m.group_instance_id, int(Errors.UNKNOWN_MEMBER_ID))
            for m in req.members
        ]
    )


# --- streams groups (KIP-1071) -------------------------------------------------------------------


def _streams_heartbeat(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    """Looks the group up itself: a new group, an empty classic group it replaces, a group of
    another type it refuses (`engine.streams.heartbeat`)."""
    return streams_heartbeat.heartbeat(s, req, ctx, op)


def _not_a_consumer_group(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")


def _not_a_classic_group(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    """Kafka `getOrMaybeCreateClassicGroup` on a group of another type (a streams group)."""
    raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a classic group.")


def _join_streams_group(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    """JoinGroup on a streams group (*measured*, Kafka 4.4.0): an empty one is replaced by the
    classic group the join creates, its committed offsets kept (Kafka 4.4's offline migration
    back to classic); one with members answers INCONSISTENT_GROUP_PROTOCOL."""
    if not group.is_empty():
        raise CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL)
    return _classic_join_replacing_empty(s, group, req, ctx, op, "streams")


def _join_classic_streams_member(
    s: ShardState, group: Any, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    """JoinGroup on a streams group with members: a classic Kafka Streams instance living in the
    streams group (translation/streams_classic_member.py); Kafka answers
    INCONSISTENT_GROUP_PROTOCOL, as `RefuseMigration` does."""
    return s.migration.classic_join_to_streams_group(group, req, ctx, op)


def _sync_classic_streams_member(
    s: ShardState, group: Any, req: SyncGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    return s.migration.classic_sync_to_streams_group(group, req, ctx, op)


def _heartbeat_classic_streams_member(
    s: ShardState, group: Any, req: HeartbeatRequest, ctx: RequestContext, op: Operation
) -> Any:
    return s.migration.classic_heartbeat_to_streams_group(group, req, ctx, op)


def _leave_classic_streams_member(
    s: ShardState, group: Any, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    return s.migration.classic_leave_to_streams_group(group, req, ctx, op)


def _leave_streams_group(
    s: ShardState, group: Any, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
) -> LeaveGroupResponse:
    return LeaveGroupResponse(
        members=[
            MemberResponse(m.member_id, m.group_instance_id, int(Errors.UNKNOWN_MEMBER_ID))
            for m in req.members
        ]
    )


def _not_a_streams_group(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a streams group.")


def _join_connect_group(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    """JoinGroup on a connect group: a classic Kafka Connect worker living in the connect group
    (translation/connect_classic_worker.py); without the translation layer
    INCONSISTENT_GROUP_PROTOCOL."""
    return s.migration.classic_join_to_connect_group(group, req, ctx, op)


def _join_replace_empty_connect(
    s: ShardState, group: ConnectGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    """A JoinGroup on a connect group without workers (its work perhaps still held for departed
    ones): the classic group the join creates replaces it, as an empty consumer or streams group
    is replaced (a Kafka Connect cluster starting on a group whose SDK workers are all gone runs
    on its own; nobody would compute for it in the connect group)."""
    return _classic_join_replacing_empty(s, group, req, ctx, op, "connect")


def _sync_classic_connect_worker(
    s: ShardState, group: Any, req: SyncGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    return s.migration.classic_sync_to_connect_group(group, req, ctx, op)


def _heartbeat_classic_connect_worker(
    s: ShardState, group: Any, req: HeartbeatRequest, ctx: RequestContext, op: Operation
) -> Any:
    return s.migration.classic_heartbeat_to_connect_group(group, req, ctx, op)


def _leave_classic_connect_worker(
    s: ShardState, group: Any, req: LeaveGroupRequest, ctx: RequestContext, op: Operation
) -> Any:
    return s.migration.classic_leave_to_connect_group(group, req, ctx, op)


def _connect_upgrade(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    """A joining ConnectGroupHeartbeat on a non-empty classic group: a classic Kafka Connect
    group converts online (translation/connect_upgrade.py); anything else is "not a connect
    group"."""
    if req.member_epoch != 0:
        return _not_a_connect_group(s, group, req, ctx, op)
    converted = s.migration.connect_heartbeat_to_classic_group(group, req, op)
    return connect_heartbeat.heartbeat(s, converted, req, ctx, op)


def _connect_heartbeat(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    return connect_heartbeat.heartbeat(s, group, req, ctx, op)


def _not_a_connect_group(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    """ConnectGroupHeartbeat on a group of another type (docs/connect-groups.md): refused, as a
    consumer-group heartbeat on a streams group is."""
    raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a connect group.")


def _connect_on_simple(s: ShardState, group: Any, req: Any, ctx: RequestContext, op: Operation) -> Any:
    """An empty classic group: a simple (offsets-only) one is taken over by the connect group,
    as the records' replay allows; an empty group with a protocol type is refused."""
    if group.is_simple():
        return connect_heartbeat.heartbeat(s, None, req, ctx, op)
    return _not_a_connect_group(s, group, req, ctx, op)


# --- the table -----------------------------------------------------------------------------------

K = GroupKind
REPLAY, IN_PLACE = True, False

ROUTES: dict[str, dict[GroupKind, Route]] = {
    "ConsumerGroupHeartbeat": {
        K.NONE: Route(REPLAY, cg_heartbeat.heartbeat),
        K.CLASSIC_EMPTY: Route(REPLAY, _cgh_replace_empty_classic),
        K.CLASSIC: Route(REPLAY, _cgh_upgrade),
        K.CONSUMER_EMPTY: Route(REPLAY, cg_heartbeat.heartbeat),
        K.CONSUMER: Route(REPLAY, cg_heartbeat.heartbeat),
        K.STREAMS_EMPTY: Route(IN_PLACE, _not_a_consumer_group),
        K.STREAMS: Route(IN_PLACE, _not_a_consumer_group),
        K.CONNECT_EMPTY: Route(IN_PLACE, _not_a_consumer_group),
        K.CONNECT: Route(IN_PLACE, _not_a_consumer_group),
    },
    "JoinGroup": {
        K.NONE: Route(IN_PLACE, _join_native),
        K.CLASSIC_EMPTY: Route(IN_PLACE, _join_native),
        K.CLASSIC: Route(IN_PLACE, _join_native),
        K.CONSUMER_EMPTY: Route(IN_PLACE, _join_replace_empty_consumer),
        K.CONSUMER: Route(REPLAY, _join_classic_member),
        K.STREAMS_EMPTY: Route(IN_PLACE, _join_streams_group),
        K.STREAMS: Route(REPLAY, _join_classic_streams_member),
        K.CONNECT_EMPTY: Route(IN_PLACE, _join_replace_empty_connect),
        K.CONNECT: Route(REPLAY, _join_connect_group),
    },
    "SyncGroup": {
        K.NONE: Route(IN_PLACE, _unknown_member),
        K.CLASSIC_EMPTY: Route(IN_PLACE, _unknown_member),
        K.CLASSIC: Route(IN_PLACE, _sync_native),
        K.CONSUMER_EMPTY: Route(IN_PLACE, _unknown_member),
        K.CONSUMER: Route(IN_PLACE, _sync_classic_member),
        K.STREAMS_EMPTY: Route(IN_PLACE, _not_a_classic_group),
        K.STREAMS: Route(REPLAY, _sync_classic_streams_member),
        K.CONNECT_EMPTY: Route(REPLAY, _sync_classic_connect_worker),
        K.CONNECT: Route(REPLAY, _sync_classic_connect_worker),
    },
    "Heartbeat": {
        K.NONE: Route(IN_PLACE, _heartbeat_no_group),
        K.CLASSIC_EMPTY: Route(IN_PLACE, _heartbeat_native),
        K.CLASSIC: Route(IN_PLACE, _heartbeat_native),
        K.CONSUMER_EMPTY: Route(IN_PLACE, _heartbeat_classic_member),
        K.CONSUMER: Route(IN_PLACE, _heartbeat_classic_member),
        K.STREAMS_EMPTY: Route(IN_PLACE, _not_a_classic_group),
        K.STREAMS: Route(IN_PLACE, _heartbeat_classic_streams_member),
        K.CONNECT_EMPTY: Route(IN_PLACE, _heartbeat_classic_connect_worker),
        K.CONNECT: Route(IN_PLACE, _heartbeat_classic_connect_worker),
    },
    "LeaveGroup": {
        K.NONE: Route(IN_PLACE, _leave_no_group),
        K.CLASSIC_EMPTY: Route(IN_PLACE, _leave_native),
        K.CLASSIC: Route(IN_PLACE, _leave_native),
        K.CONSUMER_EMPTY: Route(REPLAY, _leave_classic_member),
        K.CONSUMER: Route(REPLAY, _leave_classic_member),
        K.STREAMS_EMPTY: Route(IN_PLACE, _leave_streams_group),
        K.STREAMS: Route(REPLAY, _leave_classic_streams_member),
        K.CONNECT_EMPTY: Route(REPLAY, _leave_classic_connect_worker),
        K.CONNECT: Route(REPLAY, _leave_classic_connect_worker),
    },
    "StreamsGroupHeartbeat": {
        K.NONE: Route(REPLAY, _streams_heartbeat),
        K.CLASSIC_EMPTY: Route(REPLAY, _streams_heartbeat),
        K.CLASSIC: Route(REPLAY, _streams_heartbeat),
        K.CONSUMER_EMPTY: Route(REPLAY, _streams_heartbeat),
        K.CONSUMER: Route(REPLAY, _streams_heartbeat),
        K.STREAMS_EMPTY: Route(REPLAY, _streams_heartbeat),
        K.STREAMS: Route(REPLAY, _streams_heartbeat),
        K.CONNECT_EMPTY: Route(IN_PLACE, _not_a_streams_group),
        K.CONNECT: Route(IN_PLACE, _not_a_streams_group),
    },
    "ConnectGroupHeartbeat": {
        K.NONE: Route(REPLAY, _connect_heartbeat),
        K.CLASSIC_EMPTY: Route(REPLAY, _connect_on_simple),
        K.CLASSIC: Route(REPLAY, _connect_upgrade),
        K.CONSUMER_EMPTY: Route(IN_PLACE, _not_a_connect_group),
        K.CONSUMER: Route(IN_PLACE, _not_a_connect_group),
        K.STREAMS_EMPTY: Route(IN_PLACE, _not_a_connect_group),
        K.STREAMS: Route(IN_PLACE, _not_a_connect_group),
        K.CONNECT_EMPTY: Route(REPLAY, _connect_heartbeat),
        K.CONNECT: Route(REPLAY, _connect_heartbeat),
    },
}


# Each API's cell for a non-empty consumer group, which every steady heartbeat reaches: the shard
# takes it without computing the group's kind.
CONSUMER_ROUTES: dict[str, Route] = {api: row[K.CONSUMER] for api, row in ROUTES.items()}


def route(api: str, group: Group | None) -> Route:
    return ROUTES[api][kind_of(group)]
