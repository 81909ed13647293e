"""DescribeGroups for classic groups and ListGroups for every group type (Kafka's classic group protocol;
Kafka `describeGroups`, `listGroups`). Consumer groups are described in classic shape by the
translation layer, which owns the embedded consumer protocol."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.classic.api import DescribedGroup, DescribedGroupMember
from engine.classic.group import ClassicGroup
from engine.classic.state import ClassicGroupState
from engine.connect.group import ConnectGroup
from engine.consumer.api import ListedGroup
from engine.consumer.group import ConsumerGroup
from engine.streams.group import StreamsGroup


def describe_classic_group(group: ClassicGroup) -> DescribedGroup:
    stable = group.is_in_state(ClassicGroupState.STABLE)
    members = tuple(
        DescribedGroupMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata(group.protocol_name) if stable else b"",
            # Kafka's `describeNoMetadata` keeps the last assignment while the group rebalances
            member_assignment=m.assignment,
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        group_id=group.group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        members=members,
    )


def dead_group(group_id: str) -> DescribedGroup:
    return DescribedGroup(group_id=group_id, group_state=ClassicGroupState.DEAD.value)


def list_groups(
    groups: Iterable[Any], states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()
) -> list[ListedGroup]:
    """Filters are case-insensitive, as Kafka's; an empty filter matches everything."""
    states = {s.strip().lower() for s in states_filter}
    types = {t.strip().lower() for t in types_filter}
    out: list[ListedGroup] = []
    for g in groups:
        if isinstance(g, ClassicGroup):
            listed = ListedGroup(g.group_id, g.protocol_type or "", g.state.value, "classic")
        elif isinstance(g, ConsumerGroup):
            listed = ListedGroup(g.group_id, "consumer", g.state().value, "consumer")
        elif isinstance(g, StreamsGroup):
            listed = ListedGroup(g.group_id, "streams", g.state(g.validated_topology_epoch >= 0), "streams")
        elif isinstance(g, ConnectGroup):
            listed = ListedGroup(g.group_id, "connect", g.state(), "connect")
        else:
            continue
        if states and listed.group_state.lower() not in states:
            continue
        if types and listed.group_type not in types:
            continue
        out.append(listed)
    return out
