"""CreateTopics (19, v2-v7), DeleteTopics (20, v1-v6), CreatePartitions (37, v0-v3).

Kafka behaviour reproduced (`ControllerApis` / `ReplicationControlManager` / `Topic.validate`):
  * topic names are validated as Kafka does (see `topics.topic_name_error`), and names that
    collide on '.' vs '_' are refused -> INVALID_TOPIC_EXCEPTION; an existing name ->
    TOPIC_ALREADY_EXISTS; a request naming a topic twice -> INVALID_REQUEST for that topic;
  * `num_partitions` / `replication_factor` of -1 take the broker defaults (KIP-464):
    `num.partitions` and 1; partitions <= 0 -> INVALID_PARTITIONS; this is a one-node
    cluster, so a replication factor other than 1 (or -1) -> INVALID_REPLICATION_FACTOR;
    explicit replica assignments must put each partition on this node only, numbered 0..n-1
    -> else INVALID_REPLICA_ASSIGNMENT (and they exclude num_partitions/replication_factor);
  * `validate_only` checks without creating;
  * topic configs are validated as Kafka's controller does (unknown name, null or bad value
    -> INVALID_CONFIG with Kafka's message) and stored with the topic; v5+ answers list every
    config of the new topic as Kafka does (by name; overrides as given, DYNAMIC_TOPIC_CONFIG);
  * DeleteTopics v6 may name topics by id (unknown -> UNKNOWN_TOPIC_ID) or name (unknown ->
    UNKNOWN_TOPIC_OR_PARTITION);
  * CreatePartitions only increases the count -> INVALID_PARTITIONS otherwise.
Every successful change is durable before the answer and is reported to topic listeners.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.cluster import ClusterView
from gateway.dataplane.configs import TOPIC_DEFS, ConfigValueError, check_topic_config
from gateway.dataplane.plane import DataPlane, NewTopic, TopicError
from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37


def _replication_error(factor: int) -> TopicError:
    return TopicError(
        ErrorCode.invalid_replication_factor,
        f"Unable to replicate the partition {factor} time(s): The target replication factor of "
        f"{factor} cannot be reached because only 1 broker(s) are registered.",
    )


def _config_entry(name: str, value: str | None, source: int) -> dict[str, Any]:
    return {"name": name, "value": value, "read_only": False, "config_source": source, "is_sensitive": False}


class TopicsAdminApi:
    def __init__(self, plane: DataPlane, cluster: ClusterView) -> None:
        self.plane = plane
        self.cluster = cluster

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(CREATE_TOPICS, 2, 7, self.create_topics)
        registry.register(DELETE_TOPICS, 1, 6, self.delete_topics)
        registry.register(CREATE_PARTITIONS, 0, 3, self.create_partitions)

    # -- CreateTopics -------------------------------------------------------------------------

    def _check_assignments(self, assignments: Any) -> int:
        node = self.cluster.node.node_id
        indexes = sorted(a.partition_index for a in assignments)
        if indexes != list(range(len(indexes))):
            raise TopicError(
                ErrorCode.invalid_replica_assignment,
                "Partitions should be a consecutive 0-based integer sequence",
            )
        for a in assignments:
            if list(a.broker_ids) != [node]:
                raise TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Replica assignment {list(a.broker_ids)} for partition {a.partition_index} "
                    f"is not [{node}]: this cluster has the single node {node}",
                )
        return len(indexes)

    def _partitions_for(self, t: Any) -> int:
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise TopicError(
                    ErrorCode.invalid_request,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            return self._check_assignments(t.assignments)
        if t.replication_factor not in (-1, 1):
            if t.replication_factor <= 0:
                raise TopicError(
                    ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                )
            raise _replication_error(t.replication_factor)
        if t.num_partitions == -1:
            return self.plane.num_partitions
        if t.num_partitions <= 0:
            raise TopicError(
                ErrorCode.invalid_partitions,
                "Number of partitions was set to an invalid non-positive value.",
            )
        return int(t.num_partitions)

    async def create_topics(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        """Every topic is checked here; those to create are created together by the data plane,
        their files made off the event loop (a request of many topics or partitions must not
        stall other clients)."""
        counts = Counter(t.name for t in request.topics)
        results: list[dict[str, Any]] = []
        to_create: dict[int, NewTopic] = {}  # index in results -> topic to create
        defaults = self._defaults(request)
        for t in request.topics:
            out: dict[str, Any] = {
                "name": t.name,
                "topic_id": None,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": [],
                "error_message": None,
            }
            try:
                if counts[t.name] > 1:
                    raise TopicError(
                        ErrorCode.invalid_request,
                        "Create topics request from client contains multiple entries for the "
                        f"following topics: {t.name}",
                    )
                partitions = self._partitions_for(t)
                self.plane.check_new_topic(t.name, partitions)
                configs = self._configs(t.configs)
                if not request.validate_only:
                    to_create[len(results)] = NewTopic(t.name, partitions, configs)
                out.update(
                    error_code=ErrorCode.none,
                    num_partitions=partitions,
                    replication_factor=1,
                    configs=self._described(configs, defaults),
                )
            except TopicError as e:
                out.update(error_code=e.code, error_message=e.message, configs=[])
            results.append(out)
        if to_create:
            created = await self.plane.create_topics(list(to_create.values()))
            for index, info in zip(to_create, created, strict=True):
                if isinstance(info, TopicError):
                    results[index].update(
                        error_code=info.code,
                        error_message=info.message,
                        num_partitions=-1,
                        replication_factor=-1,
                        configs=[],
                    )
                else:
                    results[index]["topic_id"] = info.topic_id
        return build(response_type_of(request), {"throttle_time": 0, "topics": results})

    def _configs(self, creatable: Any) -> dict[str, str]:
        """The topic's config overrides, validated (a later duplicate wins, as in Kafka)."""
        configs: dict[str, str] = {}
        for c in creatable or ():
            try:
                check_topic_config(c.name, c.value)
            except ConfigValueError as e:
                raise TopicError(ErrorCode.invalid_config, e.message) from None
            configs[c.name] = c.value
        return configs

    def _defaults(self, request: Any) -> list[tuple[str, Any]]:
        """(name, response entry) of every topic config of a topic without overrides, looked up
        and built once per request: a CreateTopics of hundreds of topics describes them all, and
        they share these entries (immutable)."""
        store = self.plane.configs
        names = sorted(TOPIC_DEFS)
        entries = []
        for name in names:
            entry = store.topic_entry("", name)
            entries.append(_config_entry(name, entry["value"], entry["config_source"]))
        if request.__version__ < 5:  # no `configs` in the answer
            return []
        topic = {
            "name": "",
            "topic_id": None,
            "error_code": ErrorCode.none,
            "error_message": None,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": entries,
        }
        template: Any = build(response_type_of(request), {"throttle_time": 0, "topics": [topic]})
        return list(zip(names, template.topics[0].configs, strict=True))

    def _described(self, overrides: dict[str, str], defaults: list[tuple[str, Any]]) -> list[Any]:
        """CreateTopics v5+ `configs`: every topic config, by name (overrides as given)."""
        return [
            _config_entry(name, overrides[name], 1)
            if name in overrides
            else default  # 1: DYNAMIC_TOPIC_CONFIG
            for name, default in defaults
        ]

    # -- DeleteTopics -------------------------------------------------------------------------

    async def delete_topics(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        if request.__version__ >= 6:
            wanted = [(t.name, t.topic_id) for t in request.topics]
        else:
            wanted = [(name, None) for name in request.topic_names]
        results = []
        for name, topic_id in wanted:
            has_id = topic_id is not None and topic_id.int != 0
            out: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_message": None}
            try:
                if has_id and name is not None:
                    raise TopicError(ErrorCode.invalid_request, "Only one of name or topic id may be set.")
                if has_id:
                    info = self.plane.topic_by_id(topic_id)
                    if info is None:
                        raise TopicError(
                            ErrorCode.unknown_topic_id, "This server does not host this topic ID."
                        )
                    name = info.name
                if name is None:
                    raise TopicError(ErrorCode.invalid_request, "Neither name nor topic id set.")
                deleted = await self.plane.delete_topic(name)
                out.update(name=deleted.name, topic_id=deleted.topic_id, error_code=ErrorCode.none)
            except TopicError as e:
                out.update(error_code=e.code, error_message=e.message)
            results.append(out)
        return build(response_type_of(request), {"throttle_time": 0, "responses": results})

    # -- CreatePartitions ---------------------------------------------------------------------

    async def create_partitions(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        async with self.plane.topic_changes:  # not while a creation writes the registry
            return await self._create_partitions(request)

    async def _create_partitions(self, request: Any) -> Any:
        counts = Counter(t.name for t in request.topics)
        node = self.cluster.node.node_id
        results = []
        for t in request.topics:
            out: dict[str, Any] = {"name": t.name, "error_message": None}
            try:
                if counts[t.name] > 1:
                    raise TopicError(ErrorCode.invalid_request, "Duplicate topic in request.")
                current = self.plane.check_partition_increase(t.name, t.count)
                if t.assignments is not None:
                    if len(t.assignments) != t.count - current.partitions:
                        raise TopicError(
                            ErrorCode.invalid_replica_assignment,
                            f"Increasing the number of partitions by "
                            f"{t.count - current.partitions} but {len(t.assignments)} "
                            "assignments provided.",
                        )
                    if any(list(a.broker_ids) != [node] for a in t.assignments):
                        raise TopicError(
                            ErrorCode.invalid_replica_assignment,
                            f"Every new partition must be assigned to [{node}], the only node.",
                        )
                if not request.validate_only:
                    await self.plane.add_partitions(t.name, t.count)
                out["error_code"] = ErrorCode.none
            except TopicError as e:
                out.update(error_code=e.code, error_message=e.message)
            results.append(out)
        return build(response_type_of(request), {"throttle_time": 0, "results": results})
