"""Connect groups on the new protocol (groupshift's extension, docs/connect-groups.md) in
`groupshift groups list` and `groups describe`.

The Connect draft defines no describe API, so groupshift describes a connect group through
DescribeGroups in the classic shape (docs/connect-groups.md, "Describe and list"): protocol type
`connect`, protocol the chosen Connect assignor, each worker's member metadata `MemberEpoch int32,
ConfigOffset int64, Url (the rest, UTF-8)` and member assignment the connectors and tasks it runs
(`protocol.connect_wire`'s `Work`). A classic Kafka Connect group (distributed workers on
JoinGroup/SyncGroup) also has protocol type `connect`, with Connect's own metadata; only
ListGroups v5 tells the two apart (type `Connect` against `Classic`), so a group described with
protocol type `connect` costs one ListGroups filtered on that type.

Views, as `kafka-consumer-groups.sh --describe` shapes them (Kafka has no tool for Connect
groups): `--members` (and the default, since workers commit no offsets to the group) lists
GROUP WORKER-ID HOST CLIENT-ID URL #CONNECTORS #TASKS, `--verbose` adding EPOCH CONFIG-OFFSET
CONNECTORS TASKS; `--state` is the common state table with TYPE `Connect`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from protocol.connect_wire import read_work
from protocol.extension_wire import BoundedReader, MalformedExtension
from tools.groups.output import MISSING, Style, table
from tools.groups.snapshot import Group
from tools.groups.wire import AdminWire, KafkaError, WireError

_HEAD = struct.Struct(">iq")


@dataclass(frozen=True)
class ConnectWorkerView:
    """One worker as DescribeGroups carries it."""

    member_id: str
    client_id: str
    host: str
    url: str | None
    member_epoch: int | None
    config_offset: int | None
    connectors: tuple[str, ...]
    tasks: tuple[str, ...]  # "connector-N", as Connect's ConnectorTaskId prints
    decode_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "client_id": self.client_id,
            "host": self.host,
            "url": self.url,
            "member_epoch": self.member_epoch,
            "config_offset": self.config_offset,
            "connectors": list(self.connectors),
            "tasks": list(self.tasks),
            "decode_error": self.decode_error,
        }


def is_connect_group(admin: AdminWire, group: Group) -> bool:
    """Whether a group DescribeGroups described with protocol type `connect` is a connect group
    on the new protocol (ListGroups says type `Connect`) rather than a classic Connect cluster."""
    if not group.exists or group.protocol_type != "connect":
        return False
    try:
        listed = admin.list_groups((), ("Connect",))
    except (KafkaError, WireError):
        return False
    return any(g["group"] == group.group_id and (g["type"] or "").lower() == "connect" for g in listed)


def worker_of(
    member_id: str, client_id: str, host: str, metadata: bytes | None, assignment: bytes | None
) -> ConnectWorkerView:
    """Decode one worker's member metadata and assignment; bytes that do not parse leave the
    fields empty and say why (a describe must still show the worker)."""
    url: str | None = None
    epoch: int | None = None
    offset: int | None = None
    connectors: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    problem: str | None = None
    try:
        if metadata:
            if len(metadata) < _HEAD.size:
                raise MalformedExtension(f"member metadata of {len(metadata)} bytes")
            epoch, offset = _HEAD.unpack_from(metadata, 0)
            url = metadata[_HEAD.size :].decode()
        if assignment:
            work = read_work(BoundedReader(assignment))
            connectors = tuple(work.connectors)
            tasks = tuple(f"{t.connector}-{t.task}" for t in work.tasks)
    except (MalformedExtension, UnicodeDecodeError) as e:
        problem = str(e)
    return ConnectWorkerView(member_id, client_id, host, url, epoch, offset, connectors, tasks, problem)


def workers_of(group: Group) -> list[ConnectWorkerView]:
    return [worker_of(m.member_id, m.client_id, m.host, m.metadata, m.raw_assignment) for m in group.members]


def members_table(group: Group, workers: list[ConnectWorkerView], verbose: bool, style: Style) -> str:
    headers = ["GROUP", "WORKER-ID", "HOST", "CLIENT-ID", "URL", "#CONNECTORS", "#TASKS"]
    if verbose:
        headers += ["EPOCH", "CONFIG-OFFSET", "CONNECTORS", "TASKS"]
    rows: list[list[object]] = []
    for w in workers:
        row: list[object] = [
            group.group_id,
            w.member_id,
            w.host,
            w.client_id,
            w.url or MISSING,
            len(w.connectors),
            len(w.tasks),
        ]
        if verbose:
            row += [
                MISSING if w.member_epoch is None else w.member_epoch,
                MISSING if w.config_offset is None else w.config_offset,
                ",".join(w.connectors) or MISSING,
                ",".join(w.tasks) or MISSING,
            ]
        rows.append(row)
    return table(headers, rows, style)
