"""Streams group APIs on the wire (KIP-1071): StreamsGroupHeartbeat (88) and
StreamsGroupDescribe (89) v0-1, StreamsGroupTopologyDescriptionUpdate (93) v0, as Kafka 4.4.0
serves them (the v1 and 93 schemas kio lacks are `protocol.kafka_schemas`).

What v1 carries (*javap*, 4.4.0 `GroupMetadataManager`, `StreamsGroupTopologyDescriptionManager`,
`GroupCoordinatorService`; *measured*, e2e/test_streams_differential.py):
- the heartbeat answers AcceptableRecoveryLag as an int64, the group's
  `streams.acceptable.recovery.lag`, else `group.streams.acceptable.recovery.lag` (10000), on a
  heartbeat that joined or stayed, the field's default -1 on a leave or an error (v0
  answers 0 in its int32 field); TopologyDescriptionRequired is set only when the broker has a
  topology description plugin (`group.streams.topology.description.plugin.class`, unset by
  default: "When not set, the feature is disabled"), which groupshift has not, so it stays false;
  the MISSING_CLIENT_TAGS status v1 allows belongs to rack-aware standby placement, not built;
- Describe v1 answers TopologyDescriptionStatus NOT_STORED (1) with a null description for each
  group described without error when IncludeTopologyDescription is set (Kafka without a plugin),
  NOT_REQUESTED (0) otherwise, and AssignorName, the task assignor of the next assignment;
- StreamsGroupTopologyDescriptionUpdate, after READ on the group (GROUP_AUTHORIZATION_FAILED), is
  refused as Kafka refuses it without a plugin: UNSUPPORTED_VERSION "The broker has no streams
  group topology description plugin configured." Nothing is stored, as in Kafka: the
  description lives in the plugin, and record type 17's tagged StoredDescriptionTopologyEpoch /
  FailedDescriptionTopologyEpoch stay at their default -1 ("none stored", true of groupshift).

Internal topics: the engine answers MISSING_INTERNAL_TOPICS with the repartition and changelog
topics the cluster lacks; in embedded mode the handler then creates them in the background
through the data plane (the file work runs off the loop, `DataPlane.create_topics`), as Kafka's
coordinator asks its controller, and a later heartbeat finds them in the metadata image. At most
one creation per topic name is in flight. With an authorizer, creation needs CREATE on the
CLUSTER or on each topic (`gateway/authorizer/checks.py` puts the principal's check on the
request context); a topic that may not be created stays missing and the status says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog

from engine.errors import Errors
from engine.streams.api import (
    MISSING_INTERNAL_TOPICS,
    InternalTopic,
    Status,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    TaskOffset,
)
from engine.streams.topology import java_hash_order
from gateway.dataplane.plane import NewTopic, TopicError
from gateway.groups.apis import GroupService, audited, engine_ctx, millis, then
from gateway.groups.group_apis import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS
from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build
from protocol.kafka_schemas import TOPOLOGY_DESCRIPTION_NOT_REQUESTED, TOPOLOGY_DESCRIPTION_NOT_STORED
from records.streams_group import (
    CopartitionGroup,
    Endpoint,
    KeyValue,
    StreamsGroupTopologyValue,
    Subtopology,
    TaskIds,
    TopicInfo,
)

log = structlog.get_logger("coordinator")

CreateTopics = Callable[[Sequence[Any]], Awaitable[Sequence[Any]]]
"""`DataPlane.create_topics` (embedded mode), None in upstream mode."""

# The attribute `gateway/authorizer/checks.py` sets on the request context: may the principal
# create this topic (CREATE on the CLUSTER or the TOPIC)?
MAY_CREATE_TOPIC = "authorizer.may_create_topic"

# What Kafka 4.4 answers at v0 (*measured*, e2e/test_streams_differential.py): AcceptableRecoveryLag
# 0 (the lag moved to v1 as an int64). TaskOffsetIntervalMs is the group's
# `streams.task.offset.interval.ms` (else the broker's) on a heartbeat that joined or stayed, 0
# on a leave and on an error.
ACCEPTABLE_RECOVERY_LAG = 0
# v1's AcceptableRecoveryLag when the answer carries none (a leave, an error): the field's default.
NO_RECOVERY_LAG = -1
NO_PLUGIN = "The broker has no streams group topology description plugin configured."


def register(registry: HandlerRegistry, service: GroupService, create_topics: CreateTopics | None) -> None:
    apis = StreamsApis(service, create_topics)
    registry.register(88, 0, 1, apis.streams_group_heartbeat)
    registry.register(89, 0, 1, apis.streams_group_describe)
    registry.register(93, 0, 0, apis.streams_group_topology_description_update)


def _kv(items: Any) -> tuple[KeyValue, ...]:
    return tuple(KeyValue(i.key, i.value) for i in items or ())


def _topic_infos(items: Any) -> tuple[TopicInfo, ...]:
    return tuple(
        TopicInfo(i.name, i.partitions, i.replication_factor, _kv(i.topic_configs)) for i in items or ()
    )


def _topology(t: Any) -> StreamsGroupTopologyValue | None:
    if t is None:
        return None
    return StreamsGroupTopologyValue(
        t.epoch,
        tuple(
            Subtopology(
                s.subtopology_id,
                tuple(s.source_topics),
                tuple(s.source_topic_regex),
                _topic_infos(s.state_changelog_topics),
                tuple(s.repartition_sink_topics),
                _topic_infos(s.repartition_source_topics),
                tuple(
                    CopartitionGroup(
                        tuple(c.source_topics),
                        tuple(c.source_topic_regex),
                        tuple(c.repartition_source_topics),
                    )
                    for c in s.copartition_groups
                ),
            )
            for s in t.subtopologies
        ),
    )


def _tasks(items: Any) -> tuple[TaskIds, ...] | None:
    if items is None:
        return None
    return tuple(TaskIds(t.subtopology_id, tuple(t.partitions)) for t in items)


def _offsets(items: Any) -> tuple[TaskOffset, ...] | None:
    if items is None:
        return None
    return tuple(TaskOffset(t.subtopology_id, t.partition, t.offset) for t in items)


def _wire_tasks(items: tuple[TaskIds, ...] | None) -> list[dict[str, Any]] | None:
    if items is None:
        return None
    return [{"subtopology_id": t.subtopology_id, "partitions": t.partitions} for t in items]


class StreamsApis:
    def __init__(self, service: GroupService, create_topics: CreateTopics | None) -> None:
        self.service = service
        self.create_topics = create_topics
        self._creating: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def streams_group_heartbeat(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        ep = req.user_endpoint
        ereq = StreamsGroupHeartbeatRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=millis(req.rebalance_timeout),
            topology=_topology(req.topology),
            active_tasks=_tasks(req.active_tasks),
            standby_tasks=_tasks(req.standby_tasks),
            warmup_tasks=_tasks(req.warmup_tasks),
            process_id=req.process_id,
            user_endpoint=None if ep is None else Endpoint(ep.host, ep.port),
            client_tags=None if req.client_tags is None else _kv(req.client_tags),
            shutdown_application=req.shutdown_application,
            endpoint_information_epoch=req.endpoint_information_epoch,
            task_offsets=_offsets(req.task_offsets),
            task_end_offsets=_offsets(req.task_end_offsets),
        )
        ectx = engine_ctx(ctx, req.__version__)
        result = self.service.runtime_for(req.group_id).run(
            audited(self.service, ctx, lambda c, now: c.streams_group_heartbeat(ereq, ectx, now))
        )

        def respond(r: StreamsGroupHeartbeatResponse) -> Any:
            status = r.status
            if r.internal_topics_to_create:
                status = self._create_internal_topics(ctx, r.internal_topics_to_create, status)
            stayed = r.error_code == 0 and r.member_epoch >= 0
            settings = self.service.effective_group_config(req.group_id)
            v1: dict[str, Any] = {}
            if req.__version__ >= 1:
                v1 = {
                    "acceptable_recovery_lag": settings["streams.acceptable.recovery.lag"]
                    if stayed
                    else NO_RECOVERY_LAG,
                    "topology_description_required": False,
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
                    "acceptable_recovery_lag": ACCEPTABLE_RECOVERY_LAG,
                    **v1,
                    "task_offset_interval": settings["streams.task.offset.interval.ms"] if stayed else 0,
                    "status": None
                    if status is None
                    else [{"status_code": s.code, "status_detail": s.detail} for s in status],
                    "active_tasks": _wire_tasks(r.active_tasks),
                    "standby_tasks": _wire_tasks(r.standby_tasks),
                    "warmup_tasks": _wire_tasks(r.warmup_tasks),
                    "endpoint_information_epoch": r.endpoint_information_epoch,
                    "partitions_by_user_endpoint": None
                    if r.partitions_by_user_endpoint is None
                    else [
                        {
                            "user_endpoint": {"host": e.endpoint.host, "port": e.endpoint.port},
                            "active_partitions": [{"topic": t, "partitions": list(p)} for t, p in e.active],
                            "standby_partitions": [{"topic": t, "partitions": list(p)} for t, p in e.standby],
                        }
                        for e in r.partitions_by_user_endpoint
                    ],
                },
            )

        return then(result, respond)

    def _create_internal_topics(
        self, ctx: RequestContext, topics: tuple[InternalTopic, ...], status: tuple[Status, ...] | None
    ) -> tuple[Status, ...] | None:
        """Start creating the missing internal topics the principal may create; the status of
        the others says they may not be created."""
        may_create: Callable[[str], bool] | None = ctx.attributes.get(MAY_CREATE_TOPIC)
        refused = sorted(t.name for t in topics if may_create is not None and not may_create(t.name))
        if self.create_topics is None:
            return status
        wanted = [t for t in topics if t.name not in refused and t.name not in self._creating]
        if wanted:
            self._creating.update(t.name for t in wanted)
            task = asyncio.get_running_loop().create_task(self._create(wanted))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if refused:
            detail = f"Unauthorized to CREATE on topics {', '.join(refused)}."
            status = (*(status or ()), Status(MISSING_INTERNAL_TOPICS, detail))
        return status

    async def _create(self, topics: list[InternalTopic]) -> None:
        assert self.create_topics is not None
        try:
            results = await self.create_topics(
                [NewTopic(t.name, t.partitions, {kv.key: kv.value for kv in t.configs}) for t in topics]
            )
            for t, r in zip(topics, results, strict=True):
                if isinstance(r, TopicError):
                    log.warning(
                        "streams.internal_topic_refused", topic=t.name, error=r.code.name, reason=r.message
                    )
                else:
                    log.info("streams.internal_topic_created", topic=t.name, partitions=t.partitions)
        finally:
            self._creating.difference_update(t.name for t in topics)

    def _assignor_name(self, group_id: str) -> str:
        """Describe v1's AssignorName: the group's `streams.assignor.name` while the broker lists
        it, else the first of `group.streams.assignors` (Kafka 4.4 `streamsGroupAssignor`)."""
        name = str(self.service.effective_group_config(group_id)["streams.assignor.name"])
        registered = self.service.config.streams_assignors
        return name if name in registered else registered[0]

    def streams_group_describe(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        described: dict[str, Any] = {}
        for shard_index, ids in self.service.by_shard(req.group_ids).items():
            for d in self.service.runtimes[shard_index].shard.describe_streams_groups(ids):
                described[d.group_id] = d

        def assignment(
            tasks: tuple[TaskIds, ...], standby: tuple[TaskIds, ...], warmup: tuple[TaskIds, ...]
        ) -> dict[str, Any]:
            return {
                "active_tasks": _wire_tasks(tasks),
                "standby_tasks": _wire_tasks(standby),
                "warmup_tasks": _wire_tasks(warmup),
            }

        def topic_infos(items: tuple[TopicInfo, ...]) -> list[dict[str, Any]]:
            return [
                {
                    "name": i.name,
                    "partitions": i.partitions,
                    "replication_factor": i.replication_factor,
                    "topic_configs": [{"key": kv.key, "value": kv.value} for kv in i.topic_configs],
                }
                for i in items
            ]

        out = []
        for gid in req.group_ids:
            d = described[gid]
            topology = None
            if d.topology is not None:
                topology = {
                    "epoch": d.topology.epoch,
                    "subtopologies": [
                        {
                            "subtopology_id": s.subtopology_id,
                            "source_topics": list(s.source_topics),
                            "repartition_sink_topics": list(s.repartition_sink_topics),
                            "state_changelog_topics": topic_infos(s.state_changelog_topics),
                            "repartition_source_topics": topic_infos(s.repartition_source_topics),
                        }
                        for s in d.topology.subtopologies
                    ],
                }
            members = []
            for dm in d.members:
                m = dm.member
                ep = m.user_endpoint
                members.append(
                    {
                        "member_id": m.member_id,
                        "member_epoch": m.member_epoch,
                        "instance_id": m.instance_id,
                        "rack_id": m.rack_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "topology_epoch": m.topology_epoch,
                        "process_id": m.process_id,
                        "user_endpoint": None if ep is None else {"host": ep.host, "port": ep.port},
                        # Kafka 4.4 answers them from the member's HashMap.
                        "client_tags": [
                            {"key": k, "value": tags[k]}
                            for tags in [{kv.key: kv.value for kv in m.client_tags}]
                            for k in java_hash_order(tags)
                        ],
                        "task_offsets": [
                            {"subtopology_id": s, "partition": p, "offset": o} for s, p, o in dm.task_offsets
                        ],
                        "task_end_offsets": [
                            {"subtopology_id": s, "partition": p, "offset": o}
                            for s, p, o in dm.task_end_offsets
                        ],
                        "assignment": assignment(dm.assignment, dm.standby, dm.warmup),
                        "target_assignment": assignment(
                            dm.target_assignment, dm.target_standby, dm.target_warmup
                        ),
                        "is_classic": False,
                    }
                )
            v1: dict[str, Any] = {}
            if req.__version__ >= 1:
                v1 = {
                    "topology_description": None,
                    "topology_description_status": TOPOLOGY_DESCRIPTION_NOT_STORED
                    if req.include_topology_description and d.error_code == 0
                    else TOPOLOGY_DESCRIPTION_NOT_REQUESTED,
                    "assignor_name": self._assignor_name(gid) if d.error_code == 0 else None,
                }
            out.append(
                {
                    **v1,
                    "error_code": d.error_code,
                    "error_message": d.error_message,
                    "group_id": gid,
                    "group_state": d.group_state,
                    "group_epoch": d.group_epoch,
                    "assignment_epoch": d.assignment_epoch,
                    "topology": topology,
                    "members": members,
                    "authorized_operations": GROUP_OPERATIONS
                    if req.include_authorized_operations and d.error_code == 0
                    else AUTHORIZED_OPERATIONS_OMITTED,
                }
            )
        return build(rtype, {"throttle_time": 0, "groups": out})

    def streams_group_topology_description_update(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        """Kafka 4.4 without a topology description plugin (its default) refuses every push
        before looking at the group: `throwIfStreamsGroupTopologyDescriptionUpdateInvalid`."""
        return build(
            response_type_of(req),
            {"throttle_time": 0, "error_code": int(Errors.UNSUPPORTED_VERSION), "error_message": NO_PLUGIN},
        )
