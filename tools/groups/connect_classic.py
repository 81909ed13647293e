"""A classic Kafka Connect group as the operator tools show it (issue 32): distributed Connect
workers in a classic group of protocol type `connect` (Connect's `WorkerCoordinator`), the
protocol one of Connect's sub-protocols (`default`, `compatible`, `sessioned`), read from
DescribeGroups' member metadata (the worker's WorkerState / ExtendedWorkerState: URL, config
offset and, from version 1, the allocation it runs) and member assignment (what the leader's
assignor wrote it in the last SyncGroup), decoded by translation.connect_classic_protocol.

What a worker runs: with `default` (eager) the leader's assignment lists all of it; with the
incremental sub-protocols the assignment is a delta, so it is the allocation its JoinGroup
reported, minus the assignment's `revoked`, plus its `assignment` (Connect's
`WorkerCoordinator.onJoinComplete` applies it so).

`groups describe` (the default view and `--members`: workers commit no offsets to the group)
lists GROUP WORKER-ID HOST CLIENT-ID URL SUB-PROTOCOL CONFIG-OFFSET #CONNECTORS #TASKS,
`--verbose` adding VERSION LEADER CONNECTORS TASKS REVOKED; `--state` says TYPE `Classic (Kafka
Connect)`; the JSON of every view carries `"kafka_connect": true`. `groups migration` shows
the workers and what would block converting the group to a connect group
(`conversion_blockers`, translation/connect_conversion_rules.py), which `check upgrade` prints
too (docs/connect-groups.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tools.groups.output import MISSING, Style, table
from translation.connect_classic_protocol import (
    CONNECT_PROTOCOL_V0,
    PROTOCOL_TYPE,
    decode_assignment,
    decode_metadata,
    task_name,
)
from translation.connect_conversion_rules import CONVERSION_BUILT, conversion_blockers
from translation.embedded_protocol import SchemaError

__all__ = ["CONVERSION_BUILT", "conversion_blockers"]


@dataclass
class ClassicConnectWorker:
    """One worker of a classic Connect group, its metadata and assignment decoded."""

    member_id: str
    client_id: str
    host: str
    instance_id: str | None = None
    url: str | None = None
    config_offset: int | None = None
    metadata_version: int | None = None
    # what it reported running at its JoinGroup (v1+ allocation)
    allocated_connectors: tuple[str, ...] = ()
    allocated_tasks: tuple[str, ...] = ()
    # the leader's assignment of the last SyncGroup
    assignment_version: int | None = None
    leader: str | None = None
    leader_url: str | None = None
    assignment_offset: int | None = None
    assigned_connectors: tuple[str, ...] = ()
    assigned_tasks: tuple[str, ...] = ()
    revoked_connectors: tuple[str, ...] = ()
    revoked_tasks: tuple[str, ...] = ()
    delay_ms: int = 0
    assignment_error: int = 0
    # what it runs now (see the module docstring)
    connectors: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    decode_error: str | None = None

    @property
    def running(self) -> tuple[str, ...]:
        return self.connectors + self.tasks

    def to_json(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "client_id": self.client_id,
            "host": self.host,
            "protocol": "classic",
            "url": self.url,
            "config_offset": self.config_offset,
            "metadata_version": self.metadata_version,
            "connectors": list(self.connectors),
            "tasks": list(self.tasks),
            "allocation": {
                "connectors": list(self.allocated_connectors),
                "tasks": list(self.allocated_tasks),
            },
            "assignment": {
                "version": self.assignment_version,
                "error": self.assignment_error,
                "leader": self.leader,
                "leader_url": self.leader_url,
                "config_offset": self.assignment_offset,
                "connectors": list(self.assigned_connectors),
                "tasks": list(self.assigned_tasks),
                "revoked_connectors": list(self.revoked_connectors),
                "revoked_tasks": list(self.revoked_tasks),
                "delay_ms": self.delay_ms,
            },
            "decode_error": self.decode_error,
        }


def _ordered(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def decode_worker(
    member_id: str,
    client_id: str,
    host: str,
    instance_id: str | None,
    metadata: bytes | None,
    assignment: bytes | None,
) -> ClassicConnectWorker:
    """The worker's decoded view; what does not decode is kept as `decode_error` (a describe
    must still show the worker)."""
    w = ClassicConnectWorker(member_id, client_id, host, instance_id)
    try:
        if metadata:
            m = decode_metadata(metadata)
            w.url, w.config_offset, w.metadata_version = m.url, m.config_offset, m.version
            w.allocated_connectors = m.connectors
            w.allocated_tasks = tuple(task_name(t) for t in m.tasks)
        connectors, tasks = list(w.allocated_connectors), list(w.allocated_tasks)
        if assignment:
            a = decode_assignment(assignment)
            w.assignment_version, w.assignment_error = a.version, a.error
            w.leader, w.leader_url, w.assignment_offset = a.leader, a.leader_url, a.config_offset
            w.assigned_connectors = a.connectors
            w.assigned_tasks = tuple(task_name(t) for t in a.tasks)
            w.revoked_connectors = a.revoked_connectors
            w.revoked_tasks = tuple(task_name(t) for t in a.revoked_tasks)
            w.delay_ms = a.delay
            if a.version == CONNECT_PROTOCOL_V0:  # eager: the whole assignment
                connectors, tasks = [], []
            connectors = [c for c in connectors if c not in w.revoked_connectors]
            tasks = [t for t in tasks if t not in w.revoked_tasks]
            connectors += w.assigned_connectors
            tasks += w.assigned_tasks
        w.connectors, w.tasks = _ordered(connectors), _ordered(tasks)
    except SchemaError as e:
        w.decode_error = str(e)
    return w


def is_connect_classic(protocol_type: str | None, group_type: str | None) -> bool:
    """A classic group of Kafka Connect workers (a connect group on the new protocol is
    described with protocol type `connect` too, but its type is `connect`)."""
    return group_type == "classic" and protocol_type == PROTOCOL_TYPE


@dataclass
class ClassicConnectView:
    protocol: str | None
    workers: list[ClassicConnectWorker]
    blockers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def convertible(self) -> bool:
        return not self.blockers

    @property
    def leader(self) -> tuple[str | None, str | None]:
        """The Connect leader (member id, URL) as the assignments name it."""
        for w in self.workers:
            if w.leader:
                return w.leader, w.leader_url
        return None, None

    def to_json(self) -> dict[str, Any]:
        leader, leader_url = self.leader
        return {
            "protocol": self.protocol,
            "leader": leader,
            "leader_url": leader_url,
            "convertible": self.convertible and CONVERSION_BUILT,
            "blockers": [{"check": n, "reason": r} for n, r in self.blockers],
            "conversion_built": CONVERSION_BUILT,
            "members": [
                {
                    "member_id": w.member_id,
                    "url": w.url,
                    "config_offset": w.config_offset,
                    "metadata_version": w.metadata_version,
                    "connectors": list(w.connectors),
                    "tasks": list(w.tasks),
                    "decode_error": w.decode_error,
                }
                for w in self.workers
            ],
        }


def view_of(group: Any) -> ClassicConnectView | None:
    """The Connect view of a tools.groups.snapshot.Group, None when it is not a classic Connect
    group."""
    if not group.exists or not is_connect_classic(group.protocol_type, group.group_type):
        return None
    workers = [
        decode_worker(m.member_id, m.client_id, m.host, m.instance_id, m.metadata, m.raw_assignment)
        for m in group.members
    ]
    workers.sort(key=lambda w: (w.url or "", w.member_id))
    return ClassicConnectView(group.assignor, workers, conversion_blockers(group.assignor, workers))


def members_table(group_id: str, view: ClassicConnectView, verbose: bool, style: Style) -> str:
    headers = ["GROUP", "WORKER-ID", "HOST", "CLIENT-ID", "URL", "SUB-PROTOCOL", "CONFIG-OFFSET"]
    headers += ["#CONNECTORS", "#TASKS"]
    if verbose:
        headers += ["VERSION", "LEADER", "CONNECTORS", "TASKS", "REVOKED"]
    leader, _ = view.leader
    rows: list[list[object]] = []
    for w in view.workers:
        row: list[object] = [
            group_id,
            w.member_id,
            w.host,
            w.client_id,
            w.url or w.decode_error or MISSING,
            view.protocol or MISSING,
            MISSING if w.config_offset is None else w.config_offset,
            len(w.connectors),
            len(w.tasks),
        ]
        if verbose:
            row += [
                MISSING if w.metadata_version is None else w.metadata_version,
                "yes" if leader == w.member_id else "no",
                ",".join(w.connectors) or MISSING,
                ",".join(w.tasks) or MISSING,
                ",".join(w.revoked_connectors + w.revoked_tasks) or MISSING,
            ]
        rows.append(row)
    return table(headers, rows, style)


def next_step(view: ClassicConnectView) -> str:
    """The migration view's advice for a classic Connect group."""
    if view.blockers:
        return (
            f"Resolve what blocks a conversion to a connect group ({len(view.blockers)} above); until "
            "then an SDK worker joining is refused and the group stays classic."
        )
    return (
        "Nothing in the group blocks a conversion to a connect group: the first SDK worker joining "
        "(group.connect.enable=true, a migration policy allowing upgrades) converts it online, the "
        "classic workers keeping their work; it converts back when the last SDK worker leaves."
    )


def render_lines(view: dict[str, Any]) -> list[str]:
    """The migration view's lines for a classic Connect group (`ClassicConnectView.to_json()`)."""
    lines = [
        f"Kafka Connect workers (classic protocol, sub-protocol {view['protocol'] or '-'}, leader "
        f"{view['leader'] or '-'} at {view['leader_url'] or '-'}), connectors and tasks each runs:"
    ]
    for m in view["members"]:
        lines.append(
            f"  {m['member_id']}  url {m['url'] or '-'}  config offset "
            f"{'-' if m['config_offset'] is None else m['config_offset']}  connectors "
            f"{','.join(m['connectors']) or '-'}  tasks {','.join(m['tasks']) or '-'}"
            + (f"  ({m['decode_error']})" if m["decode_error"] else "")
        )
    if view["blockers"]:
        lines.append("Conversion to a connect group: blocked")
        lines += [f"  - {b['reason']}" for b in view["blockers"]]
    else:
        lines.append("Conversion to a connect group: nothing in the group blocks it")
    if not view["conversion_built"]:
        lines.append("  - groupshift does not convert classic Connect groups yet (docs/connect-groups.md)")
    return lines
