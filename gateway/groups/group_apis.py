"""Group membership APIs on the wire: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69)
for KIP-848 groups; JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13),
DescribeGroups (15), ListGroups (16) and DeleteGroups (42).

Version details handled here (Kafka's request/response classes do the same):
* JoinGroup v0 has no rebalance timeout (the session timeout is used); ProtocolType in the
  response from v7, and ProtocolName is nullable only from v7 (an empty string before);
* LeaveGroup v0-v2 carry one member id and answer with a top-level error;
* ConsumerGroupHeartbeat/Describe are advertised only while the consumer protocol is enabled
  (`group.coordinator.rebalance.protocols`), and answer UNSUPPORTED_VERSION otherwise;
* with `group.consumer.client.assignors.enable`, ConsumerGroupHeartbeat reads groupshift's
  ClientAssignors tag from the frame and answers COMPUTE_ASSIGNMENT as a response tag
  (docs/client-side-assignors.md); flag off, the frame's tags are not looked at.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from engine.classic.api import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)
from engine.classic.member import Protocol
from engine.consumer.api import ConsumerGroupHeartbeatRequest
from engine.errors import Errors
from gateway.groups.apis import GroupService, audited, engine_ctx, gather, millis, then
from gateway.registry import HandlerRegistry, RequestContext
from protocol import client_assignment_wire as caw
from protocol.codec import api_schema, response_type_of
from protocol.entity_builder import build
from protocol.heartbeat_wire import SteadyConsumerGroupHeartbeat, SteadyHeartbeat
from protocol.varint import encode_uvarint
from records.consumer_group import ClientAssignorMetadata, TopicPartitions

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# KIP-430 without an authorizer: every operation Kafka supports on a GROUP resource is allowed
# (`AclEntry.supportedOperations(GROUP)`: READ 3, DELETE 6, DESCRIBE 8, ALTER_CONFIGS 10,
# DESCRIBE_CONFIGS 11, as a bitfield; measured 3400 on Kafka 4.3.1).
GROUP_AUTHORIZED_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))


def group_authorized_operations(include: bool, error_code: int) -> int:
    """What DescribeGroups v3+ answers: the bitfield when asked for, on groups described without
    an error (Kafka's `KafkaApis.handleDescribeGroupsRequest`)."""
    return GROUP_AUTHORIZED_OPERATIONS if include and not error_code else AUTHORIZED_OPERATIONS_OMITTED


# The same bitfield, as ConsumerGroupDescribe answers it when asked.
GROUP_OPERATIONS = GROUP_AUTHORIZED_OPERATIONS

# The common ConsumerGroupHeartbeat answer (no assignment, no error message), encoded directly;
# v0 and v1 share the layout. Byte-identical to the compiled writer (tests/test_group_api_fast_paths).
_CGH_HEAD = struct.Struct(">ihB")  # throttle time 0, error code, null error message
_CGH_TAIL = b"\xff\x00"  # null assignment, no tagged fields
_EPOCH_AND_INTERVAL = struct.Struct(">ii")


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    n = len(raw) + 1
    if n < 0x80:  # nearly every member id: inline, no call
        return bytes((n,)) + raw
    return encode_uvarint(n) + raw


def steady_cgh_body(error_code: int, member_id: str | None, member_epoch: int, interval_ms: int) -> bytes:
    """The body of a ConsumerGroupHeartbeatResponse v0/v1 with a null message and assignment."""
    return b"".join(
        (
            _CGH_HEAD.pack(0, error_code, 0),
            _compact_string(member_id),
            _EPOCH_AND_INTERVAL.pack(member_epoch, interval_ms),
            _CGH_TAIL,
        )
    )


def _response_type(api_key: int, version: int) -> Any:
    schema = api_schema(api_key, version)
    assert schema is not None  # a served version
    return schema.response_type


def _cgh_disabled(rtype: Any) -> Any:
    """Kafka's answer while the consumer protocol is off (`group.coordinator.rebalance.protocols`)."""
    return build(
        rtype,
        {
            "throttle_time": 0,
            "error_code": int(Errors.UNSUPPORTED_VERSION),
            "error_message": "The consumer group protocol is disabled.",
            "member_id": None,
            "member_epoch": -1,
            "heartbeat_interval": 0,
            "assignment": None,
        },
    )


def _cgh_error(rtype: Any, code: Errors, message: str) -> Any:
    return build(
        rtype,
        {
            "throttle_time": 0,
            "error_code": int(code),
            "error_message": message,
            "member_id": None,
            "member_epoch": -1,
            "heartbeat_interval": 0,
            "assignment": None,
        },
    )


def _cgh_answer(rtype: Any, version: int, r: Any) -> Any:
    """The ConsumerGroupHeartbeat answer to the engine response `r`: the steady body encoded
    directly, with groupshift's tags when the engine set them, else kio's entity."""
    if r.compute_assignment_epoch is not None or r.assignment_metadata is not None:
        return with_extension_tags(rtype, version, r)
    if r.assignment is None and r.error_message is None:
        return steady_cgh_body(r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms)
    assignment = None
    if r.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": tp.topic_id, "partitions": tp.partitions} for tp in r.assignment
            ]
        }
    return build(
        rtype,
        {
            "throttle_time": 0,
            "error_code": r.error_code,
            "error_message": r.error_message,
            "member_id": r.member_id,
            "member_epoch": r.member_epoch,
            "heartbeat_interval": r.heartbeat_interval_ms,
            "assignment": assignment,
        },
    )


def read_heartbeat_client_assignors(
    frame: bytes | None, version: int
) -> tuple[ClientAssignorMetadata, ...] | None:
    """The heartbeat's client-assignor tag (docs/client-side-assignors.md), None when absent;
    raises ValueError when malformed."""
    if frame is None:
        return None
    wire = caw.read_client_assignors(frame, caw.body_offset(frame), version)
    if wire is None:
        return None
    return tuple(
        ClientAssignorMetadata(
            a.name, a.minimum_version, a.maximum_version, a.reason, a.metadata_version, a.metadata
        )
        for a in wire
    )


def with_extension_tags(rtype: Any, version: int, r: Any) -> bytes:
    """The heartbeat response body with COMPUTE_ASSIGNMENT and/or the assignor's metadata for the
    member (top-level tags Kafka's clients skip; docs/client-side-assignors.md)."""
    assignment = None
    if r.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": tp.topic_id, "partitions": tp.partitions} for tp in r.assignment
            ]
        }
    response = build(
        rtype,
        {
            "throttle_time": 0,
            "error_code": r.error_code,
            "error_message": r.error_message,
            "member_id": r.member_id,
            "member_epoch": r.member_epoch,
            "heartbeat_interval": r.heartbeat_interval_ms,
            "assignment": assignment,
        },
    )
    schema = api_schema(68, version)
    assert schema is not None
    parts: list[bytes] = []
    schema.write_body(parts.append, response)
    tags: dict[int, bytes] = {}
    if r.compute_assignment_epoch is not None:
        tags[caw.COMPUTE_ASSIGNMENT_TAG] = caw.compute_assignment_field(r.compute_assignment_epoch)
    if r.assignment_metadata is not None:
        meta = r.assignment_metadata
        tags[caw.ASSIGNMENT_METADATA_TAG] = caw.assignment_metadata_field(meta.version, meta.metadata)
    return caw.with_top_level_tags(b"".join(parts), tags)


def register(registry: HandlerRegistry, service: GroupService) -> None:
    apis = GroupApis(service)
    enabled = service.config.consumer_protocol_enabled
    registry.register(
        68,
        0,
        1,
        apis.consumer_group_heartbeat,
        enabled=lambda: enabled,
        steady=apis.steady_consumer_group_heartbeat,
    )
    registry.register(69, 0, 1, apis.consumer_group_describe, enabled=lambda: enabled)
    registry.register(11, 0, 9, apis.join_group)
    registry.register(14, 0, 5, apis.sync_group)
    registry.register(12, 0, 4, apis.heartbeat, steady=apis.steady_heartbeat)
    registry.register(13, 0, 5, apis.leave_group)
    registry.register(15, 0, 6, apis.describe_groups)
    registry.register(16, 0, 5, apis.list_groups)
    registry.register(42, 0, 2, apis.delete_groups)


class GroupApis:
    def __init__(self, service: GroupService) -> None:
        self.service = service
        self.consumer_enabled = service.config.consumer_protocol_enabled
        self.client_assignors_enabled = service.config.consumer_client_assignors_enable
        self._heartbeat_bodies: dict[tuple[type, int], bytes] = {}

    # --- KIP-848 -------------------------------------------------------------------------------

    def consumer_group_heartbeat(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        if not self.consumer_enabled:
            return _cgh_disabled(rtype)
        version = req.__version__
        owned = req.topic_partitions
        client_assignors = None
        if self.client_assignors_enabled:
            try:
                client_assignors = read_heartbeat_client_assignors(ctx.frame, version)
            except ValueError as e:
                return _cgh_error(rtype, Errors.INVALID_REQUEST, f"Malformed ClientAssignors field: {e}")
        ereq = ConsumerGroupHeartbeatRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=millis(req.rebalance_timeout),
            subscribed_topic_names=req.subscribed_topic_names,
            subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
            server_assignor=req.server_assignor,
            topic_partitions=None
            if owned is None
            else [TopicPartitions(tp.topic_id, tuple(tp.partitions)) for tp in owned],
            client_assignors=client_assignors,
        )
        return self._consumer_heartbeat(ctx, version, rtype, ereq)

    def steady_consumer_group_heartbeat(self, ctx: RequestContext, req: SteadyConsumerGroupHeartbeat) -> Any:
        """`consumer_group_heartbeat` for a request `protocol.heartbeat_wire` read: no
        subscription, regex, owned partitions or tagged fields on the wire (so no
        ClientAssignors tag either), every other field as the member sent it."""
        version = req.version
        rtype = _response_type(68, version)
        if not self.consumer_enabled:
            return _cgh_disabled(rtype)
        ereq = ConsumerGroupHeartbeatRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            subscribed_topic_names=None,
            subscribed_topic_regex=None,
            server_assignor=req.server_assignor,
            topic_partitions=None,
            client_assignors=None,
        )
        return self._consumer_heartbeat(ctx, version, rtype, ereq)

    def _consumer_heartbeat(
        self, ctx: RequestContext, version: int, rtype: Any, ereq: ConsumerGroupHeartbeatRequest
    ) -> Any:
        ectx = engine_ctx(ctx, version)
        result = self.service.runtime_for(ereq.group_id).run(
            audited(self.service, ctx, lambda c, now: c.consumer_group_heartbeat(ereq, ectx, now))
        )

        if isinstance(result, asyncio.Future):
            return then(result, lambda r: _cgh_answer(rtype, version, r))
        return _cgh_answer(rtype, version, result)  # answered now: no closure, no `then`

    def consumer_group_describe(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        if not self.consumer_enabled:
            return build(
                rtype,
                {
                    "throttle_time": 0,
                    "groups": [
                        {
                            "error_code": int(Errors.UNSUPPORTED_VERSION),
                            "error_message": None,
                            "group_id": g,
                            "group_state": "",
                            "group_epoch": -1,
                            "assignment_epoch": -1,
                            "assignor_name": "",
                            "members": [],
                            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
                        }
                        for g in req.group_ids
                    ],
                },
            )
        groups: dict[str, Any] = {}
        for shard_index, ids in self.service.by_shard(req.group_ids).items():
            for d in self.service.runtimes[shard_index].shard.describe_consumer_groups(ids):
                groups[d.group_id] = d

        def assignment(parts: Any) -> dict[str, Any]:
            return {
                "topic_partitions": [
                    {"topic_id": p.topic_id, "topic_name": p.topic_name, "partitions": p.partitions}
                    for p in parts
                ]
            }

        out = []
        for gid in req.group_ids:
            d = groups[gid]
            out.append(
                {
                    "error_code": d.error_code,
                    "error_message": d.error_message,
                    "group_id": gid,
                    "group_state": d.group_state,
                    "group_epoch": d.group_epoch,
                    "assignment_epoch": d.assignment_epoch,
                    "assignor_name": d.assignor_name,
                    # Kafka `handleConsumerGroupDescribe`: only for groups described without error.
                    "authorized_operations": GROUP_OPERATIONS
                    if req.include_authorized_operations and d.error_code == 0
                    else AUTHORIZED_OPERATIONS_OMITTED,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "instance_id": m.instance_id,
                            "rack_id": m.rack_id,
                            "member_epoch": m.member_epoch,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "subscribed_topic_names": m.subscribed_topic_names,
                            "subscribed_topic_regex": m.subscribed_topic_regex,
                            "assignment": assignment(m.assignment),
                            "target_assignment": assignment(m.target_assignment),
                            "member_type": m.member_type,
                        }
                        for m in d.members
                    ],
                }
            )
        return build(rtype, {"throttle_time": 0, "groups": out})

    # --- classic -------------------------------------------------------------------------------

    def join_group(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        version = req.__version__
        ereq = JoinGroupRequest(
            group_id=req.group_id,
            session_timeout_ms=millis(req.session_timeout),
            rebalance_timeout_ms=millis(getattr(req, "rebalance_timeout", None)),
            member_id=req.member_id,
            protocol_type=req.protocol_type,
            protocols=tuple(Protocol(p.name, bytes(p.metadata)) for p in req.protocols),
            group_instance_id=getattr(req, "group_instance_id", None),
            reason=getattr(req, "reason", None),
        )
        ectx = engine_ctx(ctx, version)
        result = self.service.runtime_for(req.group_id).run(
            audited(self.service, ctx, lambda c, now: c.join_group(ereq, ectx, now))
        )

        def respond(r: Any) -> Any:
            name = r.protocol_name
            if name is None and version < 7:
                name = ""  # nullable only from v7
            return build(
                rtype,
                {
                    "throttle_time": 0,
                    "error_code": r.error_code,
                    "generation_id": r.generation_id,
                    "protocol_type": r.protocol_type,
                    "protocol_name": name,
                    "leader": r.leader,
                    "skip_assignment": r.skip_assignment,
                    "member_id": r.member_id,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "metadata": m.metadata,
                        }
                        for m in r.members
                    ],
                },
            )

        return then(result, respond)

    def sync_group(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        version = req.__version__
        ereq = SyncGroupRequest(
            group_id=req.group_id,
            generation_id=req.generation_id,
            member_id=req.member_id,
            group_instance_id=getattr(req, "group_instance_id", None),
            protocol_type=getattr(req, "protocol_type", None),
            protocol_name=getattr(req, "protocol_name", None),
            assignments=[(a.member_id, bytes(a.assignment)) for a in req.assignments],
        )
        ectx = engine_ctx(ctx, version)
        result = self.service.runtime_for(req.group_id).run(
            audited(self.service, ctx, lambda c, now: c.sync_group(ereq, ectx, now))
        )
        return then(
            result,
            lambda r: build(
                rtype,
                {
                    "throttle_time": 0,
                    "error_code": r.error_code,
                    "protocol_type": r.protocol_type,
                    "protocol_name": r.protocol_name,
                    "assignment": r.assignment,
                },
            ),
        )

    def heartbeat(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        ereq = HeartbeatRequest(
            req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None)
        )
        return self._heartbeat(ctx, req.__version__, ereq)

    def steady_heartbeat(self, ctx: RequestContext, req: SteadyHeartbeat) -> Any:
        """`heartbeat` for a request `protocol.heartbeat_wire` read."""
        ereq = HeartbeatRequest(req.group_id, req.generation_id, req.member_id, req.group_instance_id)
        return self._heartbeat(ctx, req.version, ereq)

    def _heartbeat(self, ctx: RequestContext, version: int, ereq: HeartbeatRequest) -> Any:
        rtype = _response_type(12, version)
        ectx = engine_ctx(ctx, version)
        result = self.service.runtime_for(ereq.group_id).run(
            audited(self.service, ctx, lambda c, now: c.heartbeat(ereq, ectx, now))
        )
        if isinstance(result, asyncio.Future):
            return then(result, lambda r: self._heartbeat_body(rtype, r.error_code))
        return self._heartbeat_body(rtype, result.error_code)

    def _heartbeat_body(self, rtype: Any, error_code: int) -> bytes:
        """A Heartbeat response is its error code: encode each (version, code) once."""
        key = (rtype, error_code)
        body = self._heartbeat_bodies.get(key)
        if body is None:
            schema = api_schema(rtype.__api_key__, rtype.__version__)
            assert schema is not None
            parts: list[bytes] = []
            schema.write_body(parts.append, build(rtype, {"throttle_time": 0, "error_code": error_code}))
            body = self._heartbeat_bodies[key] = b"".join(parts)
        return body

    def leave_group(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        version = req.__version__
        if version < 3:
            members = [MemberIdentity(req.member_id)]
        else:
            members = [
                MemberIdentity(m.member_id, m.group_instance_id, getattr(m, "reason", None))
                for m in req.members
            ]
        ereq = LeaveGroupRequest(req.group_id, members)
        ectx = engine_ctx(ctx, version)
        result = self.service.runtime_for(req.group_id).run(
            audited(self.service, ctx, lambda c, now: c.leave_group(ereq, ectx, now))
        )

        def respond(r: Any) -> Any:
            if version < 3:
                error = r.error_code or (r.members[0].error_code if r.members else 0)
                return build(rtype, {"throttle_time": 0, "error_code": error})
            return build(
                rtype,
                {
                    "throttle_time": 0,
                    "error_code": r.error_code,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "error_code": m.error_code,
                        }
                        for m in r.members
                    ],
                },
            )

        return then(result, respond)

    def describe_groups(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        described: dict[str, Any] = {}
        for shard_index, ids in self.service.by_shard(req.groups).items():
            for d in self.service.runtimes[shard_index].shard.describe_groups(ids):
                described[d.group_id] = d
        include = bool(getattr(req, "include_authorized_operations", False))
        version = req.__version__
        out = []
        for gid in req.groups:
            d = described[gid]
            error_code, error_message = d.error_code, d.error_message
            if version >= 6 and not error_code and d.group_state == "Dead":
                # KIP-1043: v6 says GROUP_ID_NOT_FOUND where older versions answer Dead
                # (with the group's own reason when it exists with another type)
                error_code = Errors.GROUP_ID_NOT_FOUND
                error_message = error_message or f"Group {gid} not found."
            out.append(
                {
                    "error_code": error_code,
                    "error_message": error_message,
                    "group_id": gid,
                    "group_state": d.group_state,
                    "protocol_type": d.protocol_type,
                    "protocol_data": d.protocol_data,
                    "authorized_operations": group_authorized_operations(include, error_code),
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "member_metadata": m.member_metadata,
                            "member_assignment": m.member_assignment,
                        }
                        for m in d.members
                    ],
                }
            )
        return build(rtype, {"throttle_time": 0, "groups": out})

    def list_groups(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        states = getattr(req, "states_filter", ()) or ()
        types = getattr(req, "types_filter", ()) or ()
        groups = []
        for r in self.service.runtimes:
            for g in r.shard.list_groups(states, types):
                groups.append(
                    {
                        "group_id": g.group_id,
                        "protocol_type": g.protocol_type,
                        "group_state": g.group_state,
                        "group_type": g.group_type,
                    }
                )
        return build(rtype, {"throttle_time": 0, "error_code": 0, "groups": groups})

    def delete_groups(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        ectx = engine_ctx(ctx, req.__version__)
        names = list(dict.fromkeys(req.groups_names))  # each group answered once, as Kafka does
        parts = []
        for shard_index, ids in self.service.by_shard(names).items():

            def delete(c: Any, now: int, ids: list[str] = ids) -> Any:
                return c.delete_groups(ids, ectx, now)

            parts.append(self.service.runtimes[shard_index].run(delete))

        def respond(results: list[Any]) -> Any:
            codes = {r.group_id: r.error_code for rs in results for r in rs}
            return build(
                rtype,
                {"throttle_time": 0, "results": [{"group_id": g, "error_code": codes[g]} for g in names]},
            )

        return gather(parts, respond)
