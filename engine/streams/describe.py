"""StreamsGroupDescribe (KIP-1071; Kafka 4.4 `StreamsGroup.asDescribedGroup`): the group's
state, epochs, topology and each member's current and target tasks. A missing group, or a
group of another type, is answered with GROUP_ID_NOT_FOUND as Kafka does."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.errors import Errors
from engine.state import ShardState
from engine.streams.group import StreamsGroup, StreamsMember, task_ids
from engine.streams.topology import configure
from records.streams_group import StreamsGroupTopologyValue, TaskIds


@dataclass(frozen=True, slots=True)
class DescribedStreamsMember:
    member: StreamsMember
    assignment: tuple[TaskIds, ...]
    target_assignment: tuple[TaskIds, ...]


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


def describe_streams_groups(st: ShardState, group_ids: Iterable[str]) -> list[DescribedStreamsGroup]:
    out = []
    for gid in group_ids:
        group = st.groups.get(gid)
        if not isinstance(group, StreamsGroup):
            message = f"Group {gid} not found." if group is None else f"Group {gid} is not a streams group."
            out.append(DescribedStreamsGroup(gid, int(Errors.GROUP_ID_NOT_FOUND), message))
            continue
        ready = group.topology is not None and configure(group.topology, st.image).tasks is not None
        members = tuple(
            DescribedStreamsMember(m, task_ids(m.active), task_ids(group.targets.get(mid, {})))
            for mid, m in sorted(group.members.items())
        )
        out.append(
            DescribedStreamsGroup(
                gid,
                group_state=group.state(ready),
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                topology=group.topology,
                members=members,
            )
        )
    return out
