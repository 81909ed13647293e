"""Kafka 4.4 wire schemas the wire library (kio 0.6.5) does not have, in kio's entity shape.

Apache Kafka 4.4.0 serves StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89) at v0-1 and
StreamsGroupTopologyDescriptionUpdate (93) at v0 (KIP-1331, the topology description plugin;
KIP-1357, the assignor name); kio generated its classes from an older Kafka and has only v0 of
88 and 89. The classes below are written from Kafka 4.4.0's JSON message specs
(`common/message/StreamsGroup*.json` in kafka-clients-4.4.0.jar), field for field and in order:

- 88 v1 request: the same fields as v0 (Kafka bumped it with the response so v1 is negotiated);
  the nested structs are kio's v0 ones, which v1 shares.
- 88 v1 response: `AcceptableRecoveryLagLegacy` (int32, v0 only) becomes `AcceptableRecoveryLag`
  (int64) after `TaskOffsetIntervalMs`; `TopologyDescriptionRequired` (bool) after
  `WarmupTasks`.
- 89 v1 request: `IncludeTopologyDescription` (bool) after `IncludeAuthorizedOperations`.
- 89 v1 response: each described group adds `TopologyDescription` (nullable struct),
  `TopologyDescriptionStatus` (int8) and `AssignorName` (nullable string) after
  `AuthorizedOperations`.
- 93 v0: request GroupId, MemberId, TopologyEpoch, TopologyDescription; response
  ThrottleTimeMs, ErrorCode, ErrorMessage.

Every one is flexible (request header v2, response header v1) and has no tagged fields, so
kio's reader and writer and groupshift's compiled writer and length guard work on them as on
kio's own classes. `request_schema` / `response_schema` look a (key, version) up in kio first,
then here; `tests/test_kafka_schemas.py` pins the bytes against frames Kafka's own Java classes
wrote.
"""

# No `from __future__ import annotations`: kio reads the field types as classes.
import datetime
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.streams_group_describe.v0 import response as describe_v0
from kio.schema.streams_group_heartbeat.v0 import request as heartbeat_req_v0
from kio.schema.streams_group_heartbeat.v0 import response as heartbeat_resp_v0
from kio.schema.types import GroupId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

STREAMS_GROUP_HEARTBEAT = 88
STREAMS_GROUP_DESCRIBE = 89
STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE = 93

# Kafka's TopologyDescriptionNode.NodeType (StreamsGroupTopologyDescriptionUpdateRequest.json).
NODE_SOURCE = 1
NODE_PROCESSOR = 2
NODE_SINK = 3

# StreamsGroupDescribeResponse v1's TopologyDescriptionStatus.
TOPOLOGY_DESCRIPTION_NOT_REQUESTED = 0
TOPOLOGY_DESCRIPTION_NOT_STORED = 1
TOPOLOGY_DESCRIPTION_ERROR = 2
TOPOLOGY_DESCRIPTION_AVAILABLE = 3


# --- StreamsGroupHeartbeat v1 ----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_HEARTBEAT)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    endpoint_information_epoch: i32 = field(metadata={"kafka_type": "int32"})
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rack_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rebalance_timeout: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"},
        default=i32Timedelta.parse(datetime.timedelta(milliseconds=-1)),
    )
    topology: heartbeat_req_v0.Topology | None = field(default=None)
    active_tasks: tuple[heartbeat_req_v0.TaskIds, ...] | None
    standby_tasks: tuple[heartbeat_req_v0.TaskIds, ...] | None
    warmup_tasks: tuple[heartbeat_req_v0.TaskIds, ...] | None
    process_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    user_endpoint: heartbeat_req_v0.Endpoint | None = field(default=None)
    client_tags: tuple[heartbeat_req_v0.KeyValue, ...] | None
    task_offsets: tuple[heartbeat_req_v0.TaskOffset, ...] | None
    task_end_offsets: tuple[heartbeat_req_v0.TaskOffset, ...] | None
    shutdown_application: bool = field(metadata={"kafka_type": "bool"}, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_HEARTBEAT)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    heartbeat_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    task_offset_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    acceptable_recovery_lag: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """The maximum acceptable lag (v1; v0 had an int32 before TaskOffsetIntervalMs)."""
    status: tuple[heartbeat_resp_v0.Status, ...] | None
    active_tasks: tuple[heartbeat_resp_v0.TaskIds, ...] | None
    standby_tasks: tuple[heartbeat_resp_v0.TaskIds, ...] | None
    warmup_tasks: tuple[heartbeat_resp_v0.TaskIds, ...] | None
    topology_description_required: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """True when the broker wants the member to send StreamsGroupTopologyDescriptionUpdate."""
    endpoint_information_epoch: i32 = field(metadata={"kafka_type": "int32"})
    partitions_by_user_endpoint: tuple[heartbeat_resp_v0.EndpointToPartitions, ...] | None


# --- the topology description (KIP-1331), shared by 89 v1 and 93 v0 ---------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionNode:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    node_type: i8 = field(metadata={"kafka_type": "int8"})
    """1 SOURCE, 2 PROCESSOR, 3 SINK."""
    source_topics: tuple[TopicName, ...] = field(metadata={"kafka_type": "string"}, default=())
    sink_topic: TopicName | None = field(metadata={"kafka_type": "string"}, default=None)
    stores: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    successors: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionSubtopology:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    nodes: tuple[TopologyDescriptionNode, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionGlobalStore:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    source: TopologyDescriptionNode
    processor: TopologyDescriptionNode


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescription:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopologies: tuple[TopologyDescriptionSubtopology, ...]
    global_stores: tuple[TopologyDescriptionGlobalStore, ...]


# --- StreamsGroupDescribe v1 -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_DESCRIBE)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_ids: tuple[GroupId, ...] = field(metadata={"kafka_type": "string"}, default=())
    include_authorized_operations: bool = field(metadata={"kafka_type": "bool"})
    include_topology_description: bool = field(metadata={"kafka_type": "bool"}, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroupV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_DESCRIBE)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    group_state: str = field(metadata={"kafka_type": "string"})
    group_epoch: i32 = field(metadata={"kafka_type": "int32"})
    assignment_epoch: i32 = field(metadata={"kafka_type": "int32"})
    topology: describe_v0.Topology | None = field(default=None)
    members: tuple[describe_v0.Member, ...]
    authorized_operations: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-2147483648))
    topology_description: TopologyDescription | None = field(default=None)
    topology_description_status: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    """0 NOT_REQUESTED, 1 NOT_STORED, 2 ERROR, 3 AVAILABLE."""
    assignor_name: str | None = field(metadata={"kafka_type": "string"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_DESCRIBE)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    groups: tuple[DescribedGroupV1, ...]


# --- StreamsGroupTopologyDescriptionUpdate v0 ------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    topology_epoch: i32 = field(metadata={"kafka_type": "int32"})
    topology_description: TopologyDescription


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)


# --- lookup ----------------------------------------------------------------------------------

SCHEMAS: dict[tuple[int, int], tuple[type, type]] = {
    (STREAMS_GROUP_HEARTBEAT, 1): (StreamsGroupHeartbeatRequestV1, StreamsGroupHeartbeatResponseV1),
    (STREAMS_GROUP_DESCRIBE, 1): (StreamsGroupDescribeRequestV1, StreamsGroupDescribeResponseV1),
    (STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, 0): (
        StreamsGroupTopologyDescriptionUpdateRequest,
        StreamsGroupTopologyDescriptionUpdateResponse,
    ),
}
"""(api key, version) -> (request class, response class), for the pairs kio lacks."""

NAMES = {STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE: "StreamsGroupTopologyDescriptionUpdate"}
"""Kafka's name of each API kio has no version of at all."""


def request_schema(api_key: int, version: int) -> Any:
    """kio's request class of (api key, version), else this module's; KioIndexError if neither."""
    try:
        return load_request_schema(api_key, version)
    except KioIndexError:
        if (api_key, version) in SCHEMAS:
            return SCHEMAS[api_key, version][0]
        raise


def response_schema(api_key: int, version: int) -> Any:
    """kio's response class of (api key, version), else this module's; KioIndexError if neither."""
    try:
        return load_response_schema(api_key, version)
    except KioIndexError:
        if (api_key, version) in SCHEMAS:
            return SCHEMAS[api_key, version][1]
        raise
