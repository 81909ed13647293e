"""ConsumerGroupPrepareAssignment (32000) and ConsumerGroupInstallAssignment (32001): groupshift's
extension APIs for KIP-848's client-side assignors, as the KIP designed them (Kafka never shipped
them). Registered, and so advertised by ApiVersions, only with
`group.consumer.client.assignors.enable`; flag off, the keys are unknown as they are to Kafka.

The wire shapes are `protocol.client_assignment_wire`'s; the rules are the engine's
(`engine.consumer.client_assignment`). docs/client-side-assignors.md has both.
"""

from __future__ import annotations

from typing import Any

from engine.assignment import Assignment
from engine.consumer import client_assignment as ca
from engine.errors import Errors
from gateway.groups.apis import GroupService, audited, then
from gateway.registry import HandlerRegistry, RequestContext
from protocol import client_assignment_wire as caw
from records.consumer_group import ClientAssignmentMetadata


def register(registry: HandlerRegistry, service: GroupService) -> None:
    if not service.config.consumer_client_assignors_enable:
        return
    apis = ClientAssignmentApis(service)
    v = caw.EXTENSION_VERSION
    registry.register(caw.PREPARE_ASSIGNMENT_KEY, v, v, apis.prepare_assignment)
    registry.register(caw.INSTALL_ASSIGNMENT_KEY, v, v, apis.install_assignment)


def _to_wire(a: Assignment) -> tuple[caw.WireTopicPartitions, ...]:
    return tuple(caw.WireTopicPartitions(t, tuple(p)) for t, p in a.items())


def _prepared(r: ca.PrepareAssignmentResponse) -> caw.PrepareAssignmentResponse:
    return caw.PrepareAssignmentResponse(
        error_code=r.error_code,
        error_message=r.error_message,
        group_epoch=r.group_epoch,
        assignor_name=r.assignor_name,
        members=tuple(
            caw.PreparedMember(
                m.member_id,
                m.member_epoch,
                m.instance_id,
                m.rack_id,
                m.subscribed_topic_ids,
                m.reason,
                m.metadata_version,
                m.metadata,
                _to_wire(m.target),
            )
            for m in r.members
        ),
        topics=tuple(caw.PreparedTopic(t.topic_id, t.topic_name, t.num_partitions) for t in r.topics),
    )


class ClientAssignmentApis:
    def __init__(self, service: GroupService) -> None:
        self.service = service

    def prepare_assignment(self, ctx: RequestContext, header: Any, req: caw.PrepareAssignmentRequest) -> Any:
        ereq = ca.PrepareAssignmentRequest(req.group_id, req.member_id, req.member_epoch)
        principal = ctx.principal
        result = self.service.runtime_for(req.group_id).run(
            audited(self.service, ctx, lambda shard, now: shard.prepare_assignment(ereq, now, principal))
        )
        return then(result, _prepared)

    def install_assignment(self, ctx: RequestContext, header: Any, req: caw.InstallAssignmentRequest) -> Any:
        members: dict[str, Assignment] = {}
        metadata: dict[str, ClientAssignmentMetadata] = {}
        for m in req.members:
            if not -(2**15) <= m.metadata_version < 2**15:
                return caw.InstallAssignmentResponse(
                    int(Errors.INVALID_REQUEST),
                    f"Invalid assignment: MetadataVersion {m.metadata_version} of member {m.member_id} "
                    "is not an int16.",
                )
            if m.metadata or m.metadata_version:
                metadata[m.member_id] = ClientAssignmentMetadata(m.metadata_version, m.metadata)
            target: dict[Any, tuple[int, ...]] = {}
            for tp in m.partitions:
                # a topic listed twice is merged; the engine refuses a partition given twice
                target[tp.topic_id] = tuple(sorted((*target.get(tp.topic_id, ()), *tp.partitions)))
            if m.member_id in members:
                return caw.InstallAssignmentResponse(
                    int(Errors.INVALID_REQUEST), f"Invalid assignment: member {m.member_id} is listed twice."
                )
            members[m.member_id] = target
        ereq = ca.InstallAssignmentRequest(
            req.group_id, req.member_id, req.member_epoch, req.group_epoch, req.error, members, metadata
        )
        principal = ctx.principal
        result = self.service.runtime_for(req.group_id).run(
            audited(self.service, ctx, lambda shard, now: shard.install_assignment(ereq, now, principal))
        )
        return then(result, lambda r: caw.InstallAssignmentResponse(r.error_code, r.error_message))
