"""StreamsGroupDescribe (KIP-1071; Kafka 4.4 `StreamsGroup.asDescribedGroup`): the group's
state, epochs, topology and each member's current and target tasks. A missing group, or a
group of another type, is answered with GROUP_ID_NOT_FOUND as Kafka does."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from engine.errors import Errors
from engine.state import ShardState
from engine.streams.group import StreamsGroup, StreamsMember, task_ids
from engine.streams.topology import configure
from records.streams_group import StreamsGroupTopologyValue, TaskIds, TopicInfo


@dataclass(frozen=True, slots=True)
class DescribedStreamsMember:
    """`assignment` / `target_assignment`: active tasks; the standby and warm-up tasks beside."""

    member: StreamsMember
    assignment: tuple[TaskIds, ...]
    target_assignment: tuple[TaskIds, ...]
    standby: tuple[TaskIds, ...] = ()
    warmup: tuple[TaskIds, ...] = ()
    target_standby: tuple[TaskIds, ...] = ()
    target_warmup: tuple[TaskIds, ...] = ()
    # (subtopology id, partition, offset) as the member last reported them
    task_offsets: tuple[tuple[str, int, int], ...] = ()
    task_end_offsets: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedStreamsGroup:
    group_id: str
    error_code: int = 0
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0  # what Kafka 4.4 answers for a group it does not describe (measured)
    assignment_epoch: int = 0
    topology: StreamsGroupTopologyValue | None = None
    members: tuple[DescribedStreamsMember, ...] = ()


def _with_counts(
    topology: StreamsGroupTopologyValue | None, partitions: dict[str, int] | None
) -> StreamsGroupTopologyValue | None:
    """The topology with its internal topics' partition counts as configured against the
    cluster's topics, once it is ready (Kafka describes the configured topology: a repartition
    or changelog topic the application left undefined shows the count the coordinator chose)."""
    if topology is None or partitions is None:
        return topology

    def counted(infos: tuple[TopicInfo, ...]) -> tuple[TopicInfo, ...]:
        return tuple(replace(i, partitions=partitions.get(i.name, i.partitions)) for i in infos)

    return replace(
        topology,
        subtopologies=tuple(
            replace(
                sub,
                state_changelog_topics=counted(sub.state_changelog_topics),
                repartition_source_topics=counted(sub.repartition_source_topics),
            )
            for sub in topology.subtopologies
        ),
    )


def _flat(offsets: dict[str, dict[int, int]]) -> tuple[tuple[str, int, int], ...]:
    return tuple((s, p, o) for s, by in sorted(offsets.items()) for p, o in sorted(by.items()))


def describe_streams_groups(st: ShardState, group_ids: Iterable[str]) -> list[DescribedStreamsGroup]:
    out = []
    for gid in group_ids:
        if not gid:  # Kafka 4.4 `GroupCoordinatorService.streamsGroupDescribe`: no message
            out.append(DescribedStreamsGroup(gid, int(Errors.INVALID_GROUP_ID)))
            continue
        group = st.groups.get(gid)
        if not isinstance(group, StreamsGroup):
            message = f"Group {gid} not found." if group is None else f"Group {gid} is not a streams group."
            out.append(DescribedStreamsGroup(gid, int(Errors.GROUP_ID_NOT_FOUND), message))
            continue
        configured = None if group.topology is None else configure(group.topology, st.image)
        ready = configured is not None and configured.tasks is not None
        members = tuple(
            DescribedStreamsMember(
                m,
                task_ids(m.active),
                task_ids(group.targets.get(mid, {})),
                task_ids(m.standby),
                task_ids(m.warmup),
                task_ids(group.standby_targets.get(mid, {})),
                task_ids(group.warmup_targets.get(mid, {})),
                _flat(group.task_offsets[mid].offsets if mid in group.task_offsets else {}),
                _flat(group.task_offsets[mid].end_offsets if mid in group.task_offsets else {}),
            )
            for mid, m in sorted(group.members.items())
        )
        out.append(
            DescribedStreamsGroup(
                gid,
                group_state=group.state(ready),
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                topology=_with_counts(group.topology, None if configured is None else configured.partitions),
                members=members,
            )
        )
    return out
