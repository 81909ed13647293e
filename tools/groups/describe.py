"""`groupshift groups describe GROUP... | --group G... | --all-groups [--offsets] [--members
[--verbose]] [--state [--verbose]]`.

Kafka's `kafka-consumer-groups.sh --describe` (ConsumerGroupCommand), in its words:

- offsets (the default): one row per partition, GROUP TOPIC PARTITION CURRENT-OFFSET
  LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID; members with the most partitions first, then
  committed partitions no member owns (consumer columns `-`). LAG = LOG-END-OFFSET minus the
  committed offset, `-` without a commit. `--verbose` adds LEADER-EPOCH.
- `--members`: GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID #PARTITIONS, and with
  `--verbose` CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT (and UPGRADED when
  the group mixes protocols). groupshift adds a last column, PROTOCOL (`classic`/`consumer`, from
  ConsumerGroupDescribe v1's `member_type`), which Kafka's tool shows only as UPGRADED.
- `--state`: GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS, `--verbose` adding
  GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH; groupshift adds TYPE.

An empty group prints "Consumer group 'G' has no active members." and a rebalancing one a
warning, on stderr, as Kafka's tool does. A group that does not exist exits 3. Several groups
(or `--all-groups`, every consumer group ListGroups returns) are described one after the other,
as Kafka's tool does; with `--json` they are one list of the single-group objects.

A classic Kafka Streams group (protocol type `consumer`, protocol `stream`) is described as a
classic group, except that `--members` shows its members with their tasks, process id and
`application.server` endpoint, decoded from Streams' own SubscriptionInfo / AssignmentInfo, in the
streams-group shape (`tools.groups.streams_classic`), and `--state` says `Classic (Kafka
Streams)`; the JSON of every view carries `"kafka_streams": true`.

A classic Kafka Connect group (distributed workers, protocol type `connect`) shows its workers
with their URL, config offset, sub-protocol, connectors and tasks, decoded from Connect's own
metadata and assignments, in the default view and `--members` (`tools.groups.connect_classic`),
and `--state` says `Classic (Kafka Connect)`; the JSON of every view carries `"kafka_connect"`.

A streams group (KIP-1071, which ConsumerGroupDescribe and DescribeGroups do not describe) is
described with StreamsGroupDescribe in the views of Kafka's `kafka-streams-groups.sh
--describe`: see `tools.groups.streams_group`. `--all-groups` takes in the streams groups too.

A connect group (groupshift's Connect workers on the new protocol, described by DescribeGroups
in the classic shape) shows its workers with their URL, connectors and tasks in the default
view and `--members` (workers commit no offsets to the group), and TYPE `Connect` in `--state`:
see `tools.groups.connect_group`. `--all-groups` takes in the connect groups too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, TextIO

from tools.groups import connect_classic, connect_group, streams_classic, streams_group
from tools.groups.list_groups import listed_kind
from tools.groups.output import (
    ERROR,
    MISSING,
    NOT_FOUND,
    OK,
    Style,
    assignment_string,
    emit_json,
    error,
    table,
)
from tools.groups.snapshot import Group, describe
from tools.groups.streams_group import describe_streams
from tools.groups.wire import LATEST, AdminWire

REBALANCING = {"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}


def offset_rows(admin: AdminWire, group: Group) -> list[dict[str, Any]]:
    committed = admin.offset_fetch(group.group_id)
    rows: list[dict[str, Any]] = []
    owned: set[tuple[str, int]] = set()
    members = sorted((m for m in group.members if m.partitions), key=lambda m: -len(m.partitions))
    for m in members:
        for tp in m.partitions:
            owned.add(tp)
            rows.append({"tp": tp, "consumer_id": m.member_id, "host": m.host, "client_id": m.client_id})
    for tp in sorted(set(committed) - owned):
        rows.append({"tp": tp, "consumer_id": None, "host": None, "client_id": None})
    ends = admin.list_offsets([r["tp"] for r in rows], LATEST) if rows else {}
    out = []
    for r in rows:
        topic, part = r["tp"]
        c = committed.get(r["tp"])
        end = ends.get(r["tp"])
        offset = c[0] if c else None
        out.append(
            {
                "group": group.group_id,
                "topic": topic,
                "partition": part,
                "leader_epoch": c[1] if c else None,
                "current_offset": offset,
                "log_end_offset": end,
                "lag": end - offset if offset is not None and end is not None and end >= 0 else None,
                "consumer_id": r["consumer_id"],
                "host": r["host"],
                "client_id": r["client_id"],
            }
        )
    return out


def _notice(group: Group, err: TextIO) -> None:
    if group.state == "Empty":
        err.write(f"\nConsumer group '{group.group_id}' has no active members.\n")
    elif group.state in REBALANCING:
        err.write(f"\nWarning: Consumer group '{group.group_id}' is rebalancing.\n")


def named_groups(admin: AdminWire, args: argparse.Namespace) -> list[str]:
    """The groups the command line names, in order and once each, or with `--all-groups` every
    consumer and streams group of the cluster (ListGroups, as Kafka's tools list them)."""
    if args.all_groups:
        return sorted(g["group"] for g in admin.list_groups() if listed_kind(g) is not None)
    named = [*getattr(args, "group_names", []), *getattr(args, "groups", []), *args.group_options]
    return list(dict.fromkeys(named))


def run(admin: AdminWire, args: argparse.Namespace, out: TextIO, style: Style) -> int:
    """Describe each named group; exit 3 when one does not exist (the others still shown)."""
    group_ids = named_groups(admin, args)
    if len(group_ids) == 1 and not args.all_groups:  # one group: the JSON object Kafka's users know
        return describe_one(admin, group_ids[0], args, out, style, lambda v: emit_json(v, out))
    found: list[Any] = []
    codes = [describe_one(admin, g, args, out, style, found.append) for g in group_ids]
    if args.json:
        emit_json(found, out)
    return NOT_FOUND if NOT_FOUND in codes else OK


def describe_one(
    admin: AdminWire,
    group_id: str,
    args: argparse.Namespace,
    out: TextIO,
    style: Style,
    emit: Callable[[Any], None],
) -> int:
    """One group's description: tables on `out`, or its JSON value handed to `emit`."""
    group = describe(admin, group_id)
    if not group.exists:
        streams = describe_streams(admin, group_id, topology=getattr(args, "topology", False))
        if streams is not None:
            return streams_group.describe_one(admin, streams, args, out, sys.stderr, style, emit)
        if args.json:
            emit({"group": group_id, "exists": False})
        error(f"Consumer group '{group_id}' does not exist.")
        return NOT_FOUND
    if getattr(args, "topology", False):
        error(f"Group '{group_id}' is not a streams group: --topology describes streams groups only.")
        return ERROR
    mode = (
        "offsets"
        if args.offsets or not (args.members or args.show_state)
        else ("members" if args.members else "state")
    )
    if not args.json:
        _notice(group, sys.stderr)
    if connect_group.is_connect_group(admin, group):
        group.group_type = "connect"
        if mode != "state":
            workers = connect_group.workers_of(group)
            if args.json:
                emit({**_summary(group), "members": [w.to_json() for w in workers]})
            elif workers:
                out.write("\n" + connect_group.members_table(group, workers, args.verbose, style) + "\n\n")
            return OK
    classic_connect = connect_classic.view_of(group)
    if classic_connect is not None and mode != "state":
        if args.json:
            emit({**_summary(group), "members": [w.to_json() for w in classic_connect.workers]})
        elif classic_connect.workers:
            out.write(
                "\n" + connect_classic.members_table(group_id, classic_connect, args.verbose, style) + "\n\n"
            )
        return OK
    classic_streams = streams_classic.view_of(group)
    if mode == "offsets":
        rows = offset_rows(admin, group)
        if args.json:
            emit({**_summary(group), "offsets": rows})
            return OK
        headers = ["GROUP", "TOPIC", "PARTITION"]
        keys = ["group", "topic", "partition"]
        if args.verbose:
            headers.append("LEADER-EPOCH")
            keys.append("leader_epoch")
        headers += ["CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        keys += ["current_offset", "log_end_offset", "lag", "consumer_id", "host", "client_id"]
        if rows:
            lag_col = headers.index("LAG")
            highlight = {lag_col: lambda v: v not in (MISSING, "0")}
            out.write("\n" + table(headers, [[r[k] for k in keys] for r in rows], style, highlight) + "\n\n")
        return OK
    if mode == "members" and classic_streams is not None:
        if args.json:
            emit({**_summary(group), "members": [m.to_json() for m in classic_streams.members]})
        elif group.members:
            out.write(
                "\n" + streams_classic.members_table(group_id, classic_streams, args.verbose, style) + "\n\n"
            )
        return OK
    if mode == "members":
        if args.json:
            emit({**_summary(group), "members": [m.to_json() for m in group.members]})
            return OK
        with_instance = any(m.instance_id for m in group.members)
        protocols = {m.protocol for m in group.members}
        mixed = {"classic", "consumer"} <= protocols
        headers = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else [])
        headers += ["HOST", "CLIENT-ID", "#PARTITIONS"]
        if args.verbose:
            headers += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
            if mixed:
                headers.append("UPGRADED")
        headers.append("PROTOCOL")
        member_rows: list[list[object]] = []
        for m in group.members:
            row: list[object] = [group.group_id, m.member_id]
            if with_instance:
                row.append(m.instance_id)
            row += [m.host, m.client_id, len(m.partitions)]
            if args.verbose:
                row += [
                    m.member_epoch,
                    assignment_string(m.assignment),
                    group.assignment_epoch,
                    assignment_string(m.target),
                ]
                if mixed:
                    row.append("true" if m.protocol == "consumer" else "false")
            row.append(m.protocol)
            member_rows.append(row)
        out.write("\n" + table(headers, member_rows, style) + "\n\n")
        return OK
    # state
    if args.json:
        emit(_summary(group))
        return OK
    c = group.coordinator
    coordinator = f"{c.host}:{c.port}  ({c.node_id})" if c else MISSING
    headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    row = [group.group_id, coordinator, group.assignor, group.state]
    if args.verbose:
        headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [group.group_epoch, group.assignment_epoch]
    headers += ["#MEMBERS", "TYPE"]
    kind = (group.group_type or "unknown").capitalize()
    if classic_streams is not None:
        kind += " (Kafka Streams)"
    elif classic_connect is not None:
        kind += " (Kafka Connect)"
    row += [len(group.members), kind]
    out.write("\n" + table(headers, [row], style) + "\n\n")
    return OK


def _summary(group: Group) -> dict[str, Any]:
    d = group.to_json()
    d.pop("members")
    d["num_members"] = len(group.members)
    d["kafka_streams"] = streams_classic.view_of(group) is not None
    d["kafka_connect"] = connect_classic.view_of(group) is not None
    return d
