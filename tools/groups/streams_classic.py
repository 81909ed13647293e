"""A classic Kafka Streams group as the operator tools show it (issue 31, part 3): a classic
group of protocol type `consumer` whose members run Kafka Streams' `StreamsPartitionAssignor`
(protocol `stream`), read from DescribeGroups' member metadata (a ConsumerProtocolSubscription
whose user data is Streams' SubscriptionInfo) and member assignment (a ConsumerProtocolAssignment
whose user data is Streams' AssignmentInfo), decoded by translation.streams_classic_protocol.

`groups describe --members`, `groups migration` and `groups list` show such a group's members
with their tasks (active and standby, from the AssignmentInfo the leader sent), process id and
`application.server` endpoint, in the shape of the streams-group views (tools.groups.
streams_group). `conversion_blockers` (translation/streams_conversion_rules.py, the rules the
engine's conversion applies) lists what would stop converting the group to a KIP-1071 streams
group online; `check upgrade` and the migration view print it (docs/streams-classic-groups.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tools.groups.output import Style, table
from tools.groups.streams_group import TaskIds, Tasks, assignments_string
from translation.embedded_protocol import SchemaError, parse_assignment
from translation.streams_classic_protocol import (
    STREAMS_PROTOCOL_NAME,
    TaskId,
    decode_assignment_info,
    parse_streams_member_metadata,
)
from translation.streams_conversion_rules import MIN_OFFSET_SUMS_VERSION, conversion_blockers

__all__ = ["MIN_OFFSET_SUMS_VERSION", "conversion_blockers"]

# Kafka Streams names its consumers `<client.id>-StreamThread-<n>-consumer`.
STREAM_THREAD_MARK = "-streamthread-"


def is_streams_client(client_id: str) -> bool:
    return STREAM_THREAD_MARK in client_id.lower()


def is_streams_classic(
    protocol_type: str | None, protocol: str | None, client_ids: Iterable[str] = ()
) -> bool:
    """A classic group of Kafka Streams instances: protocol `stream` in a `consumer` group, or
    Streams consumers (by their client ids) under another protocol name (a custom assignor)."""
    if protocol_type != "consumer":
        return False
    return protocol == STREAMS_PROTOCOL_NAME or any(is_streams_client(c) for c in client_ids)


def _task_ids(tasks: Iterable[TaskId]) -> TaskIds:
    out: TaskIds = {}
    for t in tasks:
        key = str(t.subtopology) if t.topology is None else f"{t.topology}__{t.subtopology}"
        out.setdefault(key, []).append(t.partition)
    return {s: sorted(set(ps)) for s, ps in out.items()}


@dataclass
class ClassicStreamsMember:
    """One Streams instance's consumer in the classic group, both embedded layers decoded."""

    member_id: str
    client_id: str
    host: str
    instance_id: str | None = None
    process_id: str | None = None
    endpoint: str | None = None
    subscription_version: int | None = None
    latest_supported_version: int | None = None
    topics: tuple[str, ...] = ()
    previous: Tasks = field(default_factory=Tasks)  # what the subscription says it had
    assignment: Tasks = field(default_factory=Tasks)  # what the leader's AssignmentInfo gave it
    assignment_version: int | None = None
    subscription_error: int = 0
    assignment_error: int = 0
    client_tags: dict[str, str] = field(default_factory=dict)
    decode_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "client_id": self.client_id,
            "host": self.host,
            "protocol": "classic",
            "process_id": self.process_id,
            "user_endpoint": self.endpoint,
            "subscription_version": self.subscription_version,
            "latest_supported_version": self.latest_supported_version,
            "assignment_version": self.assignment_version,
            "subscribed_topics": list(self.topics),
            "client_tags": self.client_tags,
            "assignment": self.assignment.to_json(),
            "previous": self.previous.to_json(),
            "subscription_error_code": self.subscription_error,
            "assignment_error_code": self.assignment_error,
            "decode_error": self.decode_error,
        }


def decode_member(
    member_id: str,
    client_id: str,
    host: str,
    instance_id: str | None,
    metadata: bytes | None,
    assignment: bytes | None,
) -> ClassicStreamsMember:
    """The member's decoded Streams view; what does not decode is kept as `decode_error`."""
    m = ClassicStreamsMember(member_id, client_id, host, instance_id)
    try:
        if metadata:
            member = parse_streams_member_metadata(metadata)
            info = member.info
            m.subscription_version = info.version
            m.latest_supported_version = info.latest_supported_version
            m.topics = tuple(sorted(member.subscription.topics))
            if not info.is_future:
                m.process_id = str(info.process_id)
                m.endpoint = info.endpoint
                m.previous = Tasks(_task_ids(info.active_tasks), _task_ids(info.standby_or_state_tasks))
                m.subscription_error = info.error_code
                m.client_tags = info.tags
        if assignment:
            a = parse_assignment(assignment)
            if a.user_data:
                ainfo = decode_assignment_info(a.user_data)
                m.assignment_version = ainfo.version
                m.assignment_error = ainfo.error_code
                if not ainfo.is_future:
                    m.assignment = Tasks(
                        _task_ids(ainfo.active_tasks), _task_ids(t for t, _ in ainfo.standby_tasks)
                    )
    except SchemaError as e:
        m.decode_error = str(e)
    return m


@dataclass
class ClassicStreamsView:
    protocol: str | None
    members: list[ClassicStreamsMember]
    blockers: list[tuple[str, str]]

    @property
    def convertible(self) -> bool:
        return not self.blockers

    def to_json(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "convertible": self.convertible,
            "blockers": [{"check": n, "reason": r} for n, r in self.blockers],
            "conversion_built": True,
            "members": [
                {
                    "member_id": m.member_id,
                    "process_id": m.process_id,
                    "endpoint": m.endpoint,
                    "subscription_version": m.subscription_version,
                    "active": m.assignment.to_json()["active"],
                    "standby": m.assignment.to_json()["standby"],
                }
                for m in self.members
            ],
        }


def view_of(group: Any) -> ClassicStreamsView | None:
    """The Streams view of a tools.groups.snapshot.Group, None when it is not a classic Streams
    group."""
    if group.group_type != "classic" or not is_streams_classic(
        group.protocol_type, group.assignor, (m.client_id for m in group.members)
    ):
        return None
    members = [
        decode_member(m.member_id, m.client_id, m.host, m.instance_id, m.metadata, m.raw_assignment)
        for m in group.members
    ]
    return ClassicStreamsView(group.assignor, members, conversion_blockers(group.assignor, members))


def members_table(group_id: str, view: ClassicStreamsView, verbose: bool, style: Style) -> str:
    """The streams-group `--members` view for classic members: GROUP MEMBER [GROUP-INSTANCE-ID]
    PROCESS HOST CLIENT-ID ENDPOINT ASSIGNMENTS, `--verbose` adding MEMBER-PROTOCOL, VERSION
    (the SubscriptionInfo version) and PREVIOUS (the tasks the subscription reports)."""
    static = any(m.instance_id for m in view.members)
    headers = ["GROUP", "MEMBER"] + (["GROUP-INSTANCE-ID"] if static else [])
    headers += ["MEMBER-PROTOCOL", "VERSION"] if verbose else []
    headers += ["PROCESS", "HOST", "CLIENT-ID", "ENDPOINT", "ASSIGNMENTS"]
    headers += ["PREVIOUS"] if verbose else []
    rows: list[list[object]] = []
    for m in view.members:
        row: list[object] = [group_id, m.member_id] + ([m.instance_id] if static else [])
        if verbose:
            row += ["classic", m.subscription_version]
        row += [
            m.process_id,
            m.host,
            m.client_id,
            m.endpoint,
            assignments_string(m.assignment) or m.decode_error,
        ]
        if verbose:
            row.append(assignments_string(m.previous))
        rows.append(row)
    return table(headers, rows, style)


def next_step(view: ClassicStreamsView) -> str:
    """The migration view's advice for a classic Streams group."""
    if view.blockers:
        return (
            f"Resolve what blocks a conversion to a streams group ({len(view.blockers)} above), or "
            "stop every instance and start them with group.protocol=streams (offline migration)."
        )
    return (
        "Nothing blocks a conversion to a streams group, but groupshift does not convert classic "
        "Streams groups online yet: stop every instance, then start them with group.protocol=streams "
        "(offline migration; committed offsets are kept)."
    )


def _tasks_text(entries: list[dict[str, Any]]) -> str:
    return " ".join(f"{e['subtopology']}:[{','.join(str(p) for p in e['partitions'])}]" for e in entries)


def render_lines(view: dict[str, Any]) -> list[str]:
    """The migration view's lines for a classic Streams group (`ClassicStreamsView.to_json()`):
    tasks per instance, then whether it could convert to a streams group."""
    lines = ["Kafka Streams instances (classic protocol), tasks from the leader's AssignmentInfo:"]
    for m in view["members"]:
        active, standby = _tasks_text(m["active"]), _tasks_text(m["standby"])
        lines.append(
            f"  {m['member_id']}  process {m['process_id'] or '-'}  endpoint {m['endpoint'] or '-'}  "
            f"active {active or '-'}  standby {standby or '-'}"
        )
    if view["convertible"]:
        lines.append("Conversion to a streams group: nothing in the group blocks it")
    else:
        lines.append("Conversion to a streams group: blocked")
        lines += [f"  - {b['reason']}" for b in view["blockers"]]
    return lines
