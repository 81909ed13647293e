"""ConsumerGroupDescribe for consumer groups (KIP-848 "ConsumerGroupDescribe API"; Kafka
`GroupMetadataManager.consumerGroupDescribe`, `ConsumerGroup.asDescribedGroup`).

Missing groups and classic groups answer GROUP_ID_NOT_FOUND, so admin clients fall back to
DescribeGroups, as with Kafka. A member's assignment is what it still holds: its assigned
partitions and those pending revocation (Kafka `asConsumerGroupDescribeMember`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from engine.assignment import Assignment
from engine.consumer.api import DescribedConsumerGroup, DescribedMember, DescribedTopicPartitions
from engine.consumer.client_assignment import choose
from engine.consumer.group import ConsumerGroup
from engine.errors import Errors
from engine.metadata import MetadataImage, TopicId
from engine.state import ShardState


def describe_consumer_groups(st: ShardState, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
    out: list[DescribedConsumerGroup] = []
    for gid in group_ids:
        g = st.groups.get(gid)
        if g is None:
            out.append(DescribedConsumerGroup(gid, int(Errors.GROUP_ID_NOT_FOUND), f"Group {gid} not found."))
        elif not isinstance(g, ConsumerGroup):
            out.append(
                DescribedConsumerGroup(
                    gid, int(Errors.GROUP_ID_NOT_FOUND), f"Group {gid} is not a consumer group."
                )
            )
        else:
            out.append(describe_consumer_group(st, g))
    return out


def describe_consumer_group(st: ShardState, g: ConsumerGroup) -> DescribedConsumerGroup:
    image = st.image
    members = tuple(
        DescribedMember(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            subscribed_topic_regex=m.subscribed_topic_regex or "",  # Kafka's member default
            # Kafka `asConsumerGroupDescribeMember`: what the member still holds, i.e. its
            # assigned partitions and those pending revocation.
            assignment=_names(image, _held(m.assigned_partitions, m.partitions_pending_revocation)),
            target_assignment=_names(image, g.target(m.member_id)),
            member_type=0 if m.uses_classic_protocol else 1,
            state=m.state.name,
        )
        for m in g.members.values()
    )
    return DescribedConsumerGroup(
        group_id=g.group_id,
        group_state=g.state().value,
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        assignor_name=_assignor_name(st, g),
        members=members,
    )


def _assignor_name(st: ShardState, g: ConsumerGroup) -> str:
    """The server assignor, or the client assignor in use (docs/client-side-assignors.md): the
    name every member supports, when a member can run it."""
    if st.config.consumer_client_assignors_enable:
        choice = choose(g.members.values())
        if choice is not None and choice.assigning_member is not None:
            return choice.name
    return g.preferred_server_assignor() or st.config.consumer_assignors[0]


def _names(image: MetadataImage, assignment: Assignment) -> tuple[DescribedTopicPartitions, ...]:
    out = []
    for t, parts in assignment.items():
        topic = image.topic_by_id(t)
        out.append(DescribedTopicPartitions(t, topic.name if topic else "", tuple(sorted(parts))))
    return tuple(out)


def _held(
    assigned: Mapping[TopicId, tuple[int, ...]], pending: Mapping[TopicId, tuple[int, ...]]
) -> dict[TopicId, tuple[int, ...]]:
    """Assigned partitions plus those pending revocation, topic by topic."""
    out = dict(assigned)
    for t, parts in pending.items():
        out[t] = tuple(sorted({*out.get(t, ()), *parts}))
    return out
