"""One group as an operator sees it, from whichever describe API the coordinator serves.

A KIP-848 consumer group is read with ConsumerGroupDescribe (v1 adds `member_type`, KIP-1099:
0 a classic member living in the consumer group, 1 a consumer-protocol member), which alone has
member epochs and target assignments. A classic group (or a broker without ConsumerGroupDescribe,
Kafka < 3.7) is read with DescribeGroups, whose members' assignments are decoded from the
embedded consumer protocol (`ConsumerProtocolAssignment`) when the protocol type is `consumer`.
Kafka's admin client does the same: ConsumerGroupDescribe first, DescribeGroups when it answers
GROUP_ID_NOT_FOUND ("not a consumer group"), UNSUPPORTED_VERSION (Kafka 3.x without the consumer
protocol enabled) or is not supported. A group DescribeGroups calls
`Dead` with no members does not exist.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tools.groups.wire import RETRIABLE_COORDINATOR_ERRORS, AdminWire, KafkaError, Node, code_of
from translation.embedded_protocol import SchemaError, parse_assignment, parse_subscription

GROUP_ID_NOT_FOUND = 69
# Kafka 3.7-3.9 list ConsumerGroupDescribe in ApiVersions but, with the consumer protocol not
# enabled (`group.coordinator.rebalance.protocols` without `consumer`), answer each group
# UNSUPPORTED_VERSION: describe it with DescribeGroups then, as Kafka's admin client does.
UNSUPPORTED_VERSION = 35
TopicPartitions = dict[str, list[int]]


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None = None
    protocol: str | None = None  # "classic" | "consumer" | None (broker did not say)
    member_epoch: int | None = None
    assignment: TopicPartitions = field(default_factory=dict)
    target: TopicPartitions | None = None
    subscribed: list[str] = field(default_factory=list)
    assignor: str | None = None
    user_data: bool = False  # the classic assignment carries userData (a client-side assignor's state)
    decode_error: str | None = None
    # DescribeGroups' raw member metadata and assignment (classic groups), for the views that
    # decode a protocol's own user data (tools.groups.streams_classic); not in the JSON.
    metadata: bytes | None = field(default=None, repr=False)
    raw_assignment: bytes | None = field(default=None, repr=False)

    @property
    def partitions(self) -> list[tuple[str, int]]:
        return sorted((t, p) for t, ps in self.assignment.items() for p in ps)

    @property
    def target_partitions(self) -> list[tuple[str, int]] | None:
        if self.target is None:
            return None
        return sorted((t, p) for t, ps in self.target.items() for p in ps)

    def to_json(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "client_id": self.client_id,
            "host": self.host,
            "protocol": self.protocol,
            "member_epoch": self.member_epoch,
            "assignment": [{"topic": t, "partition": p} for t, p in self.partitions],
            "target_assignment": None
            if self.target_partitions is None
            else [{"topic": t, "partition": p} for t, p in self.target_partitions],
            "subscribed_topics": self.subscribed,
            "assignor": self.assignor,
            "assignment_user_data": self.user_data,
        }


@dataclass
class Group:
    group_id: str
    exists: bool
    state: str
    group_type: str | None  # "consumer" | "classic"
    protocol_type: str | None
    assignor: str | None
    group_epoch: int | None
    assignment_epoch: int | None
    coordinator: Node | None
    members: list[Member]
    source: str  # which API described it

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group_id,
            "exists": self.exists,
            "state": self.state,
            "type": self.group_type,
            "protocol_type": self.protocol_type,
            "assignor": self.assignor,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "coordinator": None
            if self.coordinator is None
            else {
                "id": self.coordinator.node_id,
                "host": self.coordinator.host,
                "port": self.coordinator.port,
            },
            "members": [m.to_json() for m in self.members],
            "described_with": self.source,
        }


def _parts(assignment: Any) -> TopicPartitions:
    out: TopicPartitions = {}
    for tp in assignment.topic_partitions:
        out.setdefault(str(tp.topic_name), []).extend(int(p) for p in tp.partitions)
    return {t: sorted(ps) for t, ps in out.items()}


def describe(admin: AdminWire, group_id: str, attempts: int = 5) -> Group:
    """The group, asking again when its coordinator is loading or has moved."""
    for attempt in range(attempts):
        try:
            return _describe(admin, group_id)
        except KafkaError as e:
            if e.code not in RETRIABLE_COORDINATOR_ERRORS or attempt == attempts - 1:
                raise
            admin.reset()
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _describe(admin: AdminWire, group_id: str) -> Group:
    coordinator_id = admin.coordinator(group_id)
    coordinator = admin.node(coordinator_id)
    answer = admin.consumer_group_describe(group_id)
    if answer is not None:
        g, version = answer
        code = code_of(g.error_code)
        if code == 0:
            members = [
                Member(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    host=m.client_host,
                    instance_id=m.instance_id,
                    protocol={0: "classic", 1: "consumer"}.get(int(m.member_type)) if version >= 1 else None,
                    member_epoch=int(m.member_epoch),
                    assignment=_parts(m.assignment),
                    target=_parts(m.target_assignment),
                    subscribed=sorted(str(t) for t in m.subscribed_topic_names),
                )
                for m in g.members
            ]
            return Group(
                group_id,
                exists=True,
                state=g.group_state,
                group_type="consumer",
                protocol_type="consumer",
                assignor=g.assignor_name or None,
                group_epoch=int(g.group_epoch),
                assignment_epoch=int(g.assignment_epoch),
                coordinator=coordinator,
                members=members,
                source="ConsumerGroupDescribe",
            )
        if code not in (GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION):
            raise KafkaError(code, f"ConsumerGroupDescribe for group {group_id!r}", g.error_message)
    d = admin.describe_group(group_id)
    code = code_of(d.error_code)
    if code not in (0, GROUP_ID_NOT_FOUND):
        raise KafkaError(code, f"DescribeGroups for group {group_id!r}", getattr(d, "error_message", None))
    if code == GROUP_ID_NOT_FOUND or (d.group_state == "Dead" and not d.members):
        return Group(group_id, False, "Dead", None, None, None, None, None, coordinator, [], "DescribeGroups")
    members = []
    for m in d.members:
        mem = Member(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.client_host,
            instance_id=getattr(m, "group_instance_id", None),
            protocol="classic" if d.protocol_type == "consumer" else None,
            assignor=d.protocol_data or None,
            metadata=bytes(m.member_metadata) if m.member_metadata else None,
            raw_assignment=bytes(m.member_assignment) if m.member_assignment else None,
        )
        if d.protocol_type == "consumer":
            try:
                if m.member_assignment:
                    a = parse_assignment(m.member_assignment)
                    mem.assignment = {t: sorted(ps) for t, ps in a.partitions if ps}
                    mem.user_data = bool(a.user_data)
                if m.member_metadata:
                    mem.subscribed = sorted(parse_subscription(m.member_metadata).topics)
            except SchemaError as e:
                mem.decode_error = str(e)
        members.append(mem)
    # An empty consumer-protocol group described by DescribeGroups has no type to tell; a
    # Kafka 4 broker describes its consumer groups with ConsumerGroupDescribe above.
    return Group(
        group_id,
        exists=True,
        state=d.group_state,
        group_type="classic",
        protocol_type=d.protocol_type or None,
        assignor=d.protocol_data or None,
        group_epoch=None,
        assignment_epoch=None,
        coordinator=coordinator,
        members=members,
        source="DescribeGroups",
    )
