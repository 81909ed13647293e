"""Metadata (key 3, v0-v13): topics, partitions and the one broker, by name or by topic id.

Kafka behaviour reproduced (`KafkaApis.handleTopicMetadataRequest`):
  * all topics when `topics` is null (v1+) or empty (v0 only);
  * v12+ may ask by topic id (librdkafka does, after a KIP-848 assignment): an unknown id gets
    UNKNOWN_TOPIC_ID with a null name; v10/v11 must use names, so an id or a null name there is
    INVALID_REQUEST;
  * an unknown name is created with `num.partitions` when `auto.create.topics.enable` and the
    request's `allow_auto_topic_creation` (v4+, implied before) allow it and the name is legal;
    otherwise UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for an illegal name.
    Kafka answers LEADER_NOT_AVAILABLE while an auto-created topic gets its leader; creation
    completes before the answer here (the file work on a worker thread, one batch per request),
    so the topic is answered in full at once;
  * this node is leader, only replica and only ISR member of every partition, at leader epoch 0;
    topic ids are the stable non-zero ids of the registry; cluster id and controller id are
    this node's.
Authorized-operations fields are filled (everything allowed, as without an authorizer) only
when requested, else left at Kafka's "not requested" value.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.cluster import ClusterView
from gateway.dataplane.plane import DataPlane
from gateway.dataplane.topics import TopicInfo, topic_name_error
from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

LEADER_EPOCH = 0
NOT_REQUESTED = -(2**31)
# AclOperation codes allowed on a topic / the cluster when there is no authorizer.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12, 13, 14))


def _error_topic(code: ErrorCode, name: str | None, topic_id: uuid.UUID | None) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": NOT_REQUESTED,
    }


class MetadataApi:
    def __init__(self, plane: DataPlane, cluster: ClusterView) -> None:
        self.plane = plane
        self.cluster = cluster

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(API_KEY, MIN_VERSION, MAX_VERSION, self.handle)

    def _topic(self, t: TopicInfo, topic_ops: int) -> dict[str, Any]:
        node = self.cluster.node.node_id
        replicas = (node,)
        return {
            "error_code": ErrorCode.none,
            "name": t.name,
            "topic_id": t.topic_id,
            "is_internal": False,
            "partitions": [
                {
                    "error_code": ErrorCode.none,
                    "partition_index": i,
                    "leader_id": node,
                    "leader_epoch": LEADER_EPOCH,
                    "replica_nodes": replicas,
                    "isr_nodes": replicas,
                    "offline_replicas": (),
                }
                for i in range(t.partitions)
            ],
            "topic_authorized_operations": topic_ops,
        }

    def _requested(self, request: Any, version: int, topic_ops: int) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        wanted = request.topics
        by_id = version >= 12 and any(t.topic_id is not None and t.topic_id.int != 0 for t in wanted)
        seen: set[Any] = set()
        for rt in wanted:
            topic_id = getattr(rt, "topic_id", None)
            has_id = topic_id is not None and topic_id.int != 0
            if version in (10, 11) and (rt.name is None or has_id):
                # Names are not nullable in v10/v11 responses either.
                entries.append(_error_topic(ErrorCode.invalid_request, rt.name or "", topic_id))
                continue
            if by_id:
                if topic_id is None or not has_id or topic_id in seen:
                    continue
                seen.add(topic_id)
                found = self.plane.topic_by_id(topic_id)
                entries.append(
                    self._topic(found, topic_ops)
                    if found is not None
                    else _error_topic(ErrorCode.unknown_topic_id, None, topic_id)
                )
                continue
            name = rt.name
            if name is None or name in seen:
                continue
            seen.add(name)
            found = self.plane.topic(name)  # auto-created already, if it may be (`handle`)
            if found is not None:
                entries.append(self._topic(found, topic_ops))
            elif topic_name_error(name) is not None:
                entries.append(_error_topic(ErrorCode.invalid_topic_exception, name, None))
            else:
                entries.append(_error_topic(ErrorCode.unknown_topic_or_partition, name, None))
        return entries

    async def _auto_create(self, request: Any, version: int) -> None:
        """Create the unknown legal names the request asks for, all in one batch whose file work
        runs off the event loop (a Metadata request naming hundreds of new topics must not stall
        other clients); a creation that fails leaves the name unknown."""
        wanted = request.topics
        if not wanted or not getattr(request, "allow_auto_topic_creation", True):
            return
        ids = [getattr(t, "topic_id", None) for t in wanted]
        if version >= 10 and any(i is not None and i.int != 0 for i in ids):
            # v12+ asks by id (nothing is created); in v10/v11 an id makes that entry invalid
            wanted = (
                []
                if version >= 12
                else [t for t, i in zip(wanted, ids, strict=True) if i is None or i.int == 0]
            )
        names = [t.name for t in wanted if t.name is not None and self.plane.topic(t.name) is None]
        if names:
            await self.plane.auto_create(names)

    async def handle(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        version = request.__version__
        if request.topics is not None and not (version == 0 and not request.topics):
            await self._auto_create(request, version)
        topic_ops = (
            TOPIC_OPERATIONS
            if getattr(request, "include_topic_authorized_operations", False)
            else NOT_REQUESTED
        )
        if request.topics is None or (version == 0 and not request.topics):
            topics = [self._topic(t, topic_ops) for t in self.plane.topics.all()]
        else:
            topics = self._requested(request, version, topic_ops)
        brokers = self.cluster.brokers_for(ctx)
        return build(
            response_type_of(request),
            {
                "throttle_time": 0,
                "brokers": [
                    {"node_id": node.node_id, "host": node.host, "port": node.port, "rack": None}
                    for node in brokers
                ],
                "cluster_id": self.cluster.cluster_id,
                "controller_id": self.cluster.controller_id,
                "topics": topics,
                "cluster_authorized_operations": (
                    CLUSTER_OPERATIONS
                    if getattr(request, "include_cluster_authorized_operations", False)
                    else NOT_REQUESTED
                ),
                "error_code": ErrorCode.none,
            },
        )
