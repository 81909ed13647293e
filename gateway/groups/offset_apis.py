"""Offsets on the wire: OffsetCommit (8, v2-v9), OffsetFetch (9, v1-v9, groups batched from v8),
OffsetDelete (47).

Version details (Kafka's request and response classes): OffsetCommit v2-v4 carry a retention
time; GroupInstanceId from v7; a request that fails as a whole answers its error on every
partition. OffsetFetch: null topics (all offsets) from v2; a top-level error code from v2; v8+
batches groups and carries errors per group; v9 adds member id and epoch. Errors before v8 that
belong to a group are reported at the top level.

Topics and partitions the metadata image lacks (Kafka `KafkaApis.handleOffsetCommitRequest` and
`handleOffsetDeleteRequest`): each such partition is answered UNKNOWN_TOPIC_OR_PARTITION before
the coordinator sees the request, which carries only the partitions that exist; the coordinator's
answers are merged after them (a topic's error partitions come first, topics keep the order in
which they first appear). An OffsetCommit with no partition left is answered without the
coordinator, so it creates no group.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from engine.offsets.api import (
    CommitPartition,
    CommitTopic,
    FetchTopic,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchGroupRequest,
)
from gateway.groups.apis import GroupService, audited, engine_ctx, millis, then
from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build


def register(registry: HandlerRegistry, service: GroupService) -> None:
    apis = OffsetApis(service)
    registry.register(8, 2, 9, apis.offset_commit)
    registry.register(9, 1, 9, apis.offset_fetch)
    registry.register(47, 0, 0, apis.offset_delete)


Answered = dict[str, list[tuple[int, Any]]]  # topic name -> (partition, error code), in order


def merge_answers(unknown: Answered, result_topics: Any) -> list[dict[str, Any]]:
    """Kafka's response builders: the partitions answered before the coordinator first, then the
    coordinator's, appended to a topic already present or as new topics at the end."""
    merged: Answered = {name: list(parts) for name, parts in unknown.items()}
    for t in result_topics:
        merged.setdefault(t.name, []).extend((p.partition_index, p.error_code) for p in t.partitions)
    return [
        {"name": name, "partitions": [{"partition_index": i, "error_code": e} for i, e in parts]}
        for name, parts in merged.items()
    ]


class OffsetApis:
    def __init__(self, service: GroupService) -> None:
        self.service = service

    def split_known(self, topics: Any, partitions_of: Any) -> tuple[Answered, list[tuple[Any, list[Any]]]]:
        """(unknown partitions answered UNKNOWN_TOPIC_OR_PARTITION, topics with the partitions
        the metadata image has)."""
        unknown: Answered = {}
        known: list[tuple[Any, list[Any]]] = []
        image = self.service.image
        for t in topics:
            ti = image.topic(t.name)
            keep = []
            for p in partitions_of(t):
                if ti is not None and 0 <= p.partition_index < ti.num_partitions:
                    keep.append(p)
                else:
                    unknown.setdefault(t.name, []).append(
                        (p.partition_index, ErrorCode.unknown_topic_or_partition)
                    )
            if keep:
                known.append((t, keep))
        return unknown, known

    def offset_commit(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        version = req.__version__
        retention = getattr(req, "retention_time", None)
        unknown, known = self.split_known(req.topics, lambda t: t.partitions)
        if not known:
            return build(rtype, {"throttle_time": 0, "topics": merge_answers(unknown, ())})
        ereq = OffsetCommitRequest(
            group_id=req.group_id,
            generation_id_or_member_epoch=req.generation_id_or_member_epoch,
            member_id=req.member_id,
            group_instance_id=getattr(req, "group_instance_id", None),
            retention_time_ms=-1 if retention is None else millis(retention),
            topics=[
                CommitTopic(
                    t.name,
                    [
                        CommitPartition(
                            p.partition_index,
                            p.committed_offset,
                            getattr(p, "committed_leader_epoch", -1),
                            p.committed_metadata,
                        )
                        for p in parts
                    ],
                )
                for t, parts in known
            ],
        )
        ectx = engine_ctx(ctx, version)
        result = self.service.runtime_for(req.group_id).run(
            audited(self.service, ctx, lambda c, now: c.offset_commit(ereq, ectx, now))
        )
        return then(
            result,
            lambda r: build(rtype, {"throttle_time": 0, "topics": merge_answers(unknown, r.topics)}),
        )

    def offset_fetch(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        version = req.__version__
        require_stable = bool(getattr(req, "require_stable", False))
        if version >= 8:
            wanted = [
                OffsetFetchGroupRequest(
                    g.group_id,
                    None
                    if g.topics is None
                    else [FetchTopic(t.name, list(t.partition_indexes)) for t in g.topics],
                    getattr(g, "member_id", None),
                    getattr(g, "member_epoch", -1),
                )
                for g in req.groups
            ]
        else:
            wanted = [
                OffsetFetchGroupRequest(
                    req.group_id,
                    None
                    if req.topics is None
                    else [FetchTopic(t.name, list(t.partition_indexes)) for t in req.topics],
                )
            ]
        answers = {}
        for shard_index, ids in self.service.by_shard(w.group_id for w in wanted).items():
            coord = self.service.runtimes[shard_index].shard
            for a in coord.offset_fetch([w for w in wanted if w.group_id in ids], require_stable):
                answers[a.group_id] = a

        def topics(a: Any) -> list[dict[str, Any]]:
            return [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "committed_offset": p.committed_offset,
                            "committed_leader_epoch": p.committed_leader_epoch,
                            "metadata": p.metadata,
                            "error_code": p.error_code or a.error_code,
                        }
                        for p in t.partitions
                    ],
                }
                for t in a.topics
            ]

        if version >= 8:
            return build(
                rtype,
                {
                    "throttle_time": 0,
                    "groups": [
                        {
                            "group_id": w.group_id,
                            "topics": topics(answers[w.group_id]),
                            "error_code": answers[w.group_id].error_code,
                        }
                        for w in wanted
                    ],
                },
            )
        a = answers[wanted[0].group_id]
        return build(rtype, {"throttle_time": 0, "topics": topics(a), "error_code": a.error_code})

    def offset_delete(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        unknown, known = self.split_known(req.topics, lambda t: t.partitions)
        ereq = OffsetDeleteRequest(
            req.group_id, [FetchTopic(t.name, [p.partition_index for p in parts]) for t, parts in known]
        )
        ectx = engine_ctx(ctx, req.__version__)
        result = self.service.runtime_for(req.group_id).run(lambda c, now: c.offset_delete(ereq, ectx, now))
        return then(
            result,
            lambda r: build(
                rtype,
                {
                    "throttle_time": 0,
                    "error_code": r.error_code,
                    # a group-level error replaces the partitions answered before (Kafka's merge)
                    "topics": merge_answers({} if r.error_code else unknown, r.topics),
                },
            ),
        )
