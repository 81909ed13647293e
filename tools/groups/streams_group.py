"""`groupshift groups describe` of a streams group (KIP-1071), as Kafka 4.4's
`kafka-streams-groups.sh --describe` (StreamsGroupCommand) shows one, in its words.

A streams group is read with StreamsGroupDescribe (API 89, v1 where served, as Kafka 4.4 and
groupshift serve it: v1 adds the assignor name and, from a broker with a topology description
plugin, the topology description; v0 otherwise). Its
members own *tasks* (subtopology id, partition), not partitions: active, standby and warm-up
ones, each with a target the coordinator is moving the member to. The views:

- offsets (the default): one row per partition the group's active tasks read (each task reads
  its partition of every source and repartition source topic of its subtopology, as Kafka's
  tool works them out), GROUP TOPIC PARTITION OFFSET-LAG; `--verbose` adds CURRENT-OFFSET,
  LEADER-EPOCH and LOG-END-OFFSET. Lag without a commit is the partition's log-end minus its
  earliest offset (everything is still to read), as Kafka's tool computes it. groupshift also
  lists committed partitions no active task reads (an empty group's offsets), which Kafka's
  tool leaves out (docs/deviations.md).
- `--members`: GROUP MEMBER PROCESS CLIENT-ID ASSIGNMENTS (`ACTIVE: 0:[0,1]; 1:[2]; STANDBY:
  ...`), `--verbose` adding TARGET-ASSIGNMENT-EPOCH, TOPOLOGY-EPOCH, MEMBER-PROTOCOL (streams,
  or classic for a member that joined with JoinGroup), MEMBER-EPOCH and the TARGET-ACTIVE/
  -STANDBY/-WARMUP tasks. groupshift adds HOST (the member's client host, as the consumer views
  show it) and GROUP-INSTANCE-ID when a member is static.
- `--state`: GROUP COORDINATOR (ID) ASSIGNOR STATE #MEMBERS (`--verbose`: GROUP-EPOCH and
  TARGET-ASSIGNMENT-EPOCH before #MEMBERS); groupshift adds TYPE, as for the other groups.
  ASSIGNOR is StreamsGroupDescribe v1's AssignorName (`-` from a broker serving only v0).

An empty group says "Streams group 'G' has no active members." on stderr and prints no member
table; `--json` gives the same values as objects.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from tools.groups.output import ERROR, MISSING, OK, Style, table
from tools.groups.wire import (
    EARLIEST,
    LATEST,
    RETRIABLE_COORDINATOR_ERRORS,
    AdminWire,
    KafkaError,
    Node,
    code_of,
)

GROUP_ID_NOT_FOUND = 69
# A Kafka 4.x whose `group.coordinator.rebalance.protocols` leaves out `streams` answers every
# group of StreamsGroupDescribe UNSUPPORTED_VERSION: it has no streams groups to describe.
UNSUPPORTED_VERSION = 35
TaskIds = dict[str, list[int]]  # subtopology id -> partitions
KINDS = ("active", "standby", "warmup")


def _subtopology_key(subtopology: str) -> tuple[int, str]:
    """Kafka Streams numbers subtopologies 0, 1, ...; numbers sort as numbers, names after."""
    return (int(subtopology), "") if subtopology.isdigit() else (1 << 31, subtopology)


@dataclass(frozen=True)
class Tasks:
    """A member's active, standby and warm-up tasks (one assignment, current or target)."""

    active: TaskIds = field(default_factory=dict)
    standby: TaskIds = field(default_factory=dict)
    warmup: TaskIds = field(default_factory=dict)

    def of(self, kind: str) -> TaskIds:
        return {"active": self.active, "standby": self.standby, "warmup": self.warmup}[kind]

    def count(self, kind: str = "active") -> int:
        return sum(len(ps) for ps in self.of(kind).values())

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        return {
            kind: [
                {"subtopology": s, "partitions": ps}
                for s, ps in sorted(self.of(kind).items(), key=lambda kv: _subtopology_key(kv[0]))
            ]
            for kind in KINDS
        }


@dataclass
class StreamsMember:
    member_id: str
    process_id: str
    client_id: str
    host: str
    member_epoch: int
    topology_epoch: int
    is_classic: bool
    instance_id: str | None = None
    rack_id: str | None = None
    user_endpoint: str | None = None
    assignment: Tasks = field(default_factory=Tasks)
    target: Tasks = field(default_factory=Tasks)

    @property
    def protocol(self) -> str:
        return "classic" if self.is_classic else "streams"

    def to_json(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "process_id": self.process_id,
            "client_id": self.client_id,
            "host": self.host,
            "rack_id": self.rack_id,
            "user_endpoint": self.user_endpoint,
            "protocol": self.protocol,
            "member_epoch": self.member_epoch,
            "topology_epoch": self.topology_epoch,
            "assignment": self.assignment.to_json(),
            "target_assignment": self.target.to_json(),
        }


@dataclass(frozen=True)
class DescribedNode:
    """One node of a topology description (KIP-1331): 1 source, 2 processor, 3 sink."""

    name: str
    node_type: int
    source_topics: tuple[str, ...] = ()
    sink_topic: str | None = None
    stores: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": NODE_TYPES.get(self.node_type, str(self.node_type)),
            "source_topics": list(self.source_topics),
            "sink_topic": self.sink_topic,
            "stores": list(self.stores),
            "successors": list(self.successors),
        }


@dataclass(frozen=True)
class TopologyDescription:
    subtopologies: tuple[tuple[str, tuple[DescribedNode, ...]], ...]
    global_stores: tuple[tuple[DescribedNode, DescribedNode], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "subtopologies": [
                {"subtopology": sid, "nodes": [n.to_json() for n in nodes]}
                for sid, nodes in self.subtopologies
            ],
            "global_stores": [
                {"source": a.to_json(), "processor": b.to_json()} for a, b in self.global_stores
            ],
        }


NODE_TYPES = {1: "source", 2: "processor", 3: "sink"}
# StreamsGroupDescribe v1's TopologyDescriptionStatus, as Kafka's admin client names them
TOPOLOGY_STATUSES = {0: "NOT_REQUESTED", 1: "NOT_STORED", 2: "ERROR", 3: "AVAILABLE"}
AVAILABLE = 3


def _node(n: Any) -> DescribedNode:
    return DescribedNode(
        str(n.name),
        int(n.node_type),
        tuple(str(t) for t in n.source_topics),
        None if n.sink_topic is None else str(n.sink_topic),
        tuple(str(t) for t in n.stores),
        tuple(str(t) for t in n.successors),
    )


def _description(d: Any) -> TopologyDescription | None:
    if d is None:
        return None
    return TopologyDescription(
        tuple((str(s.subtopology_id), tuple(_node(n) for n in s.nodes)) for s in d.subtopologies),
        tuple((_node(g.source), _node(g.processor)) for g in d.global_stores),
    )


def _names(names: Iterable[str]) -> str:
    return ", ".join(sorted(set(names))) or "none"


def _node_text(node: DescribedNode, predecessors: dict[str, set[str]]) -> str:
    """One node as Kafka 4.4's TopologyDescriptionFormatter writes it (Kafka Streams' own
    TopologyDescription layout): sets sorted, `none` for an empty successor/predecessor set."""
    preds = _names(predecessors.get(node.name, ()))
    if node.node_type == 1:
        topics = ", ".join(sorted(set(node.source_topics)))
        return f"Source: {node.name} (topics: [{topics}])\n      --> {_names(node.successors)}"
    if node.node_type == 2:
        stores = ", ".join(sorted(set(node.stores)))
        return (
            f"Processor: {node.name} (stores: [{stores}])\n      --> {_names(node.successors)}"
            f"\n      <-- {preds}"
        )
    if node.node_type == 3:
        return f"Sink: {node.name} (topic: {node.sink_topic})\n      <-- {preds}"
    raise ValueError(f"Unknown topology node type: {node.node_type}")


def _predecessors(nodes: Iterable[DescribedNode]) -> dict[str, set[str]]:
    """Kafka's admin client rebuilds each node's predecessors from the successors it is told."""
    out: dict[str, set[str]] = {}
    for n in nodes:
        for s in n.successors:
            out.setdefault(s, set()).add(n.name)
    return out


def topology_text(description: TopologyDescription) -> str:
    """The description as Kafka 4.4's `kafka-streams-groups.sh --describe --topology` prints it
    (`TopologyDescriptionFormatter.format`, subtopologies and nodes in the broker's order, the
    global stores numbered after the subtopologies)."""
    parts = ["Topologies:\n"]
    for sid, nodes in description.subtopologies:
        preds = _predecessors(nodes)
        parts.append(f"   Sub-topology: {sid}\n")
        parts += [f"    {_node_text(n, preds)}\n" for n in nodes]
        parts.append("\n")
    for i, (source, processor) in enumerate(description.global_stores, start=len(description.subtopologies)):
        preds = _predecessors((source, processor))
        parts.append(f"   Sub-topology: {i} for global store (will not generate tasks)\n")
        parts.append(f"    {_node_text(source, preds)}\n    {_node_text(processor, preds)}\n\n")
    return "".join(parts)


@dataclass
class StreamsGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    topology_epoch: int | None  # None: no topology yet (no member has joined)
    input_topics: dict[str, list[str]]  # subtopology id -> its source and repartition source topics
    coordinator: Node | None
    members: list[StreamsMember]
    # the subtopologies' source topics proper (no repartition topic): what Kafka's tool calls the
    # group's input topics, the scope of its --all-input-topics
    source_topics: frozenset[str] = frozenset()
    assignor: str | None = None  # StreamsGroupDescribe v1's AssignorName (None from v0)
    # StreamsGroupDescribe v1's TopologyDescriptionStatus (None from v0) and, when AVAILABLE, the
    # description: [(subtopology id, [node])], [(source node, processor node)] (`_description`)
    topology_status: int | None = None
    topology_description: TopologyDescription | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group_id,
            "exists": True,
            "state": self.state,
            "type": "streams",
            "assignor": self.assignor,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "topology_epoch": self.topology_epoch,
            "subtopologies": [
                {"subtopology": s, "input_topics": ts}
                for s, ts in sorted(self.input_topics.items(), key=lambda kv: _subtopology_key(kv[0]))
            ],
            "coordinator": None
            if self.coordinator is None
            else {
                "id": self.coordinator.node_id,
                "host": self.coordinator.host,
                "port": self.coordinator.port,
            },
            "num_members": len(self.members),
            "described_with": "StreamsGroupDescribe",
        }


def _task_ids(entries: Iterable[Any]) -> TaskIds:
    out: TaskIds = {}
    for t in entries:
        out.setdefault(str(t.subtopology_id), []).extend(int(p) for p in t.partitions)
    return {s: sorted(set(ps)) for s, ps in out.items()}


def _tasks(assignment: Any) -> Tasks:
    return Tasks(
        _task_ids(assignment.active_tasks),
        _task_ids(assignment.standby_tasks),
        _task_ids(assignment.warmup_tasks),
    )


def from_described(described: Any, coordinator: Node | None) -> StreamsGroup:
    """The group of one StreamsGroupDescribe `DescribedGroup` (v0 or v1, error code 0)."""
    topology = described.topology
    input_topics: dict[str, list[str]] = {}
    sources: set[str] = set()
    if topology is not None:
        for sub in topology.subtopologies or ():
            sources.update(str(t) for t in sub.source_topics)
            topics = [str(t) for t in sub.source_topics]
            topics += [str(t.name) for t in sub.repartition_source_topics]
            input_topics[str(sub.subtopology_id)] = topics
    members = []
    for m in described.members:
        endpoint = m.user_endpoint
        members.append(
            StreamsMember(
                member_id=str(m.member_id),
                process_id=str(m.process_id),
                client_id=str(m.client_id),
                host=str(m.client_host),
                member_epoch=int(m.member_epoch),
                topology_epoch=int(m.topology_epoch),
                is_classic=bool(m.is_classic),
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                user_endpoint=None if endpoint is None else f"{endpoint.host}:{int(endpoint.port)}",
                assignment=_tasks(m.assignment),
                target=_tasks(m.target_assignment),
            )
        )
    return StreamsGroup(
        group_id=str(described.group_id),
        state=str(described.group_state),
        group_epoch=int(described.group_epoch),
        assignment_epoch=int(described.assignment_epoch),
        topology_epoch=None if topology is None else int(topology.epoch),
        input_topics=input_topics,
        coordinator=coordinator,
        members=members,
        source_topics=frozenset(sources),
        assignor=getattr(described, "assignor_name", None),
        topology_status=getattr(described, "topology_description_status", None),
        topology_description=_description(getattr(described, "topology_description", None)),
    )


def describe_streams(
    admin: AdminWire, group_id: str, attempts: int = 5, topology: bool = False
) -> StreamsGroup | None:
    """The streams group, or None when there is none by that id (GROUP_ID_NOT_FOUND: no group,
    or a group of another type) or the coordinator does not serve StreamsGroupDescribe (not
    listed, or UNSUPPORTED_VERSION: streams groups are off). Asks
    again while the coordinator is loading or has moved, as `snapshot.describe` does."""
    for attempt in range(attempts):
        try:
            coordinator = admin.node(admin.coordinator(group_id))
            described = admin.streams_group_describe(group_id, include_topology_description=topology)
            if described is None:
                return None
            code = code_of(described.error_code)
            if code in (GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION):
                return None
            if code != 0:
                raise KafkaError(
                    code, f"StreamsGroupDescribe for group {group_id!r}", described.error_message
                )
            return from_described(described, coordinator)
        except KafkaError as e:
            if e.code not in RETRIABLE_COORDINATOR_ERRORS or attempt == attempts - 1:
                raise
            admin.reset()
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


# -- what the views print --------------------------------------------------------------------


def task_ids_string(tasks: TaskIds, label: str) -> str:
    """`ACTIVE: 0:[0,1]; 1:[2]; ` as Kafka's tool writes one kind of tasks ("" for none)."""
    if not tasks:
        return ""
    parts = "".join(
        f"{s}:[{','.join(str(p) for p in ps)}]; "
        for s, ps in sorted(tasks.items(), key=lambda kv: _subtopology_key(kv[0]))
    )
    return f"{label}: {parts}"


def assignments_string(current: Tasks, target: Tasks | None = None) -> str:
    """The ASSIGNMENTS cell: the current active, standby and warm-up tasks, then (with --verbose)
    the target's as TARGET-ACTIVE, TARGET-STANDBY, TARGET-WARMUP, as Kafka's tool prints it."""
    text = "".join(task_ids_string(current.of(k), k.upper()) for k in KINDS)
    if target is not None:
        text += "".join(task_ids_string(target.of(k), f"TARGET-{k.upper()}") for k in KINDS)
    return text.rstrip()


def input_partitions(group: StreamsGroup) -> set[tuple[str, int]]:
    """The partitions the group's active tasks read: task (s, p) reads partition p of every
    source and repartition source topic of subtopology s (Kafka's tool: getTopicPartitions)."""
    out: set[tuple[str, int]] = set()
    for m in group.members:
        for sub, parts in m.assignment.active.items():
            for topic in group.input_topics.get(sub, ()):
                out.update((topic, p) for p in parts)
    return out


def offset_rows(admin: AdminWire, group: StreamsGroup) -> list[dict[str, Any]]:
    committed = admin.offset_fetch(group.group_id)
    partitions = sorted(input_partitions(group) | set(committed))
    latest = admin.list_offsets(partitions, LATEST) if partitions else {}
    uncommitted = [tp for tp in partitions if tp not in committed]
    earliest = admin.list_offsets(uncommitted, EARLIEST) if uncommitted else {}
    rows = []
    for tp in partitions:
        c = committed.get(tp)
        end = latest.get(tp)
        start = c[0] if c else earliest.get(tp)
        rows.append(
            {
                "group": group.group_id,
                "topic": tp[0],
                "partition": tp[1],
                "current_offset": c[0] if c else None,
                "leader_epoch": c[1] if c else None,
                "log_end_offset": end,
                "lag": end - start if end is not None and end >= 0 and start is not None else None,
            }
        )
    return rows


def offsets_table(rows: list[dict[str, Any]], verbose: bool, style: Style) -> str:
    if verbose:
        headers = [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LEADER-EPOCH",
            "LOG-END-OFFSET",
            "OFFSET-LAG",
        ]
        keys = ["group", "topic", "partition", "current_offset", "leader_epoch", "log_end_offset", "lag"]
    else:
        headers = ["GROUP", "TOPIC", "PARTITION", "OFFSET-LAG"]
        keys = ["group", "topic", "partition", "lag"]
    lag = len(headers) - 1
    return table(
        headers, [[r[k] for k in keys] for r in rows], style, {lag: lambda v: v not in (MISSING, "0")}
    )


def members_table(group: StreamsGroup, verbose: bool, style: Style) -> str:
    static = any(m.instance_id for m in group.members)
    if verbose:
        headers = ["GROUP", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER"]
    else:
        headers = ["GROUP", "MEMBER"]
    headers += ["GROUP-INSTANCE-ID"] if static else []
    headers += ["MEMBER-PROTOCOL", "MEMBER-EPOCH"] if verbose else []
    headers += ["PROCESS", "HOST", "CLIENT-ID", "ASSIGNMENTS"]
    rows: list[list[object]] = []
    for m in group.members:
        row: list[object] = [group.group_id]
        if verbose:
            row += [group.assignment_epoch, m.topology_epoch]
        row.append(m.member_id)
        if static:
            row.append(m.instance_id)
        if verbose:
            row += [m.protocol, m.member_epoch]
        row += [
            m.process_id,
            m.host,
            m.client_id,
            assignments_string(m.assignment, m.target if verbose else None),
        ]
        rows.append(row)
    return table(headers, rows, style)


def state_table(group: StreamsGroup, verbose: bool, style: Style) -> str:
    c = group.coordinator
    coordinator = f"{c.host}:{c.port} ({c.node_id})" if c else MISSING
    headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNOR", "STATE"]
    row: list[object] = [group.group_id, coordinator, group.assignor, group.state]
    if verbose:
        headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [group.group_epoch, group.assignment_epoch]
    headers += ["#MEMBERS", "TYPE"]
    row += [len(group.members), "Streams"]
    return table(headers, [row], style)


def describe_one(
    admin: AdminWire,
    group: StreamsGroup,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    style: Style,
    emit: Callable[[Any], None],
) -> int:
    """One streams group in the view the options ask for: tables on `out`, or its JSON value
    handed to `emit`."""
    if getattr(args, "topology", False):
        return _describe_topology(group, args, out, emit)
    if args.offsets or not (args.members or args.show_state):
        mode = "offsets"
    else:
        mode = "members" if args.members else "state"
    if not args.json and group.state == "Empty":
        err.write(f"\nStreams group '{group.group_id}' has no active members.\n")
    if mode == "state":
        if args.json:
            emit(group.to_json())
        else:
            out.write("\n" + state_table(group, args.verbose, style) + "\n\n")
        return OK
    if mode == "members":
        if args.json:
            emit({**group.to_json(), "members": [m.to_json() for m in group.members]})
        elif group.members:
            out.write("\n" + members_table(group, args.verbose, style) + "\n\n")
        return OK
    rows = offset_rows(admin, group)
    if args.json:
        emit({**group.to_json(), "offsets": rows})
    elif rows:
        out.write("\n" + offsets_table(rows, args.verbose, style) + "\n\n")
    return OK


def _describe_topology(
    group: StreamsGroup, args: argparse.Namespace, out: TextIO, emit: Callable[[Any], None]
) -> int:
    """`--topology`: the description the broker's topology description plugin stored, in Kafka's
    layout, else Kafka's tool's words for why there is none (a blank line, then "Error: ..." on
    stdout, as its `printError` writes them); exit 1 without a description."""
    status = group.topology_status
    description = group.topology_description
    if args.json:
        emit(
            {
                **group.to_json(),
                "topology_description_status": None
                if status is None
                else TOPOLOGY_STATUSES.get(status, status),
                "topology_description": None if description is None else description.to_json(),
            }
        )
        return OK if status == AVAILABLE else ERROR
    if status == AVAILABLE and description is not None:
        out.write(topology_text(description) + "\n")
        return OK
    gid = group.group_id
    if status is None:
        reason = (
            f"The broker serves only StreamsGroupDescribe v0, which has no topology description for '{gid}'."
        )
    elif status == 1:
        reason = f"No topology description is stored for streams group '{gid}'."
    elif status == 2:
        reason = (
            f"The broker failed to fetch the topology description for streams group '{gid}'. "
            "See the broker logs for details."
        )
    else:
        reason = (
            f"No topology description is available for streams group '{gid}' "
            f"(status: {TOPOLOGY_STATUSES.get(status, status)})."
        )
    out.write(f"\nError: {reason}\n")
    return ERROR
