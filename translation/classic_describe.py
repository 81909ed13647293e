"""DescribeGroups of a consumer group, in classic shape (Kafka `describeGroups`; KIP-848
"Supporting Online Consumer Group Upgrade"). The engine hands a consumer group reached by
DescribeGroups to the migration hooks; this is what `translation.migration.Migration` answers.

Difference from shipped Kafka, on purpose: Kafka 4.x answers DescribeGroups for a consumer group
with GROUP_ID_NOT_FOUND ("Dead"), which hides KIP-848 groups from tools that only speak
DescribeGroups (kafka-python's admin client, many exporters). groupshift describes them in
classic shape instead: protocol type `consumer`, the server assignor as protocol, each member's
subscription (a classic member's own metadata; for a consumer-protocol member a
ConsumerProtocolSubscription v3 built from its subscription) and its current assignment.
ConsumerGroupDescribe still answers GROUP_ID_NOT_FOUND for classic groups, so admin clients
that try it first fall back to DescribeGroups exactly as against Kafka.
"""

from __future__ import annotations

from engine.classic.api import DescribedGroup, DescribedGroupMember
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import ConsumerGroupMember
from engine.state import ShardState
from translation.embedded_protocol import (
    SchemaError,
    Subscription,
    read_version,
    serialize_assignment,
    serialize_subscription,
)


def describe_consumer_group_as_classic(shard: ShardState, g: ConsumerGroup) -> DescribedGroup:
    image = shard.image
    members = []
    for m in g.members.values():
        by_name: dict[str, list[int]] = {}
        for tid, parts in m.assigned_partitions.items():
            t = image.topic_by_id(tid)
            if t is not None:
                by_name.setdefault(t.name, []).extend(sorted(parts))
        version = _member_protocol_version(m)
        members.append(
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=_member_metadata(m, sorted(by_name.items())),
                member_assignment=serialize_assignment(sorted(by_name.items()), version),
            )
        )
    return DescribedGroup(
        group_id=g.group_id,
        group_state=g.state().value,
        protocol_type="consumer",
        protocol_data=g.preferred_server_assignor() or shard.config.consumer_assignors[0],
        members=tuple(members),
    )


def _member_protocol_version(m: ConsumerGroupMember) -> int:
    if m.classic_member_metadata is not None and m.classic_member_metadata.supported_protocols:
        try:
            return read_version(m.classic_member_metadata.supported_protocols[0].metadata)
        except SchemaError:
            return 0
    return 3


def _member_metadata(m: ConsumerGroupMember, owned: list[tuple[str, list[int]]]) -> bytes:
    if m.classic_member_metadata is not None and m.classic_member_metadata.supported_protocols:
        return m.classic_member_metadata.supported_protocols[0].metadata
    topics = tuple(sorted(m.subscribed_topic_names))
    return serialize_subscription(
        Subscription(3, topics, None, tuple((t, tuple(p)) for t, p in owned), m.member_epoch, m.rack_id)
    )
