"""`groupshift groups list [--state S[,S]] [--type classic|consumer|streams|connect[,...]]`.

As Kafka's `kafka-consumer-groups.sh --list` and `kafka-streams-groups.sh --list` together:
consumer groups (protocol type `consumer`, or empty for a group that only commits offsets) and
streams groups (KIP-1071, type `Streams`); without filters one group id per line, with
`--state`/`--type` a GROUP [TYPE] [STATE] table. Filters go to the broker in ListGroups (states
v4+, KIP-518; types v5+, KIP-848: `--type streams` sends `Streams`, as kafka-streams-groups.sh
does) and are applied here as well for brokers that ignore them. Types print as Kafka's
`GroupType` does (`Classic`, `Consumer`, `Streams`). groupshift's connect groups (Connect
workers on the new protocol, docs/connect-groups.md) are listed too, as type `Connect` (ListGroups
v5's type; `--type connect` sends `Connect`). Other groups (a classic Kafka Connect cluster's,
share groups) are left out, as Kafka's two tools leave them out.

A classic group of Kafka Streams instances (protocol type `consumer`, protocol `stream`: only
DescribeGroups tells it) is marked in the tables that show TYPE as `Classic (Kafka Streams)` and
in `--json` with `"kafka_streams": true`; telling it costs one DescribeGroups per non-empty
classic group, asked only for those two outputs.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tools.groups.output import OK, USAGE, Style, emit_json, error, table
from tools.groups.streams_classic import is_streams_classic
from tools.groups.wire import AdminWire, KafkaError, WireError

GROUP_STATES = (
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
    "Assigning",
    "Reconciling",
    "NotReady",  # a streams group whose topology cannot run yet (KIP-1071)
)
TYPES = ("classic", "consumer", "streams", "connect")


def listed_kind(group: dict[str, Any]) -> str | None:
    """ "consumer", "streams" or "connect" for a ListGroups entry this tool lists, None for the
    others: a streams group by its type (ListGroups v5+) or protocol type, a connect group by its
    type alone (a classic Kafka Connect group has protocol type `connect` too), a consumer group
    by its protocol type (`consumer`, or empty: a group that only commits offsets)."""
    if (group["type"] or "").lower() == "streams" or group["protocol_type"] == "streams":
        return "streams"
    if (group["type"] or "").lower() == "connect":
        return "connect"
    if (group["protocol_type"] or "") in ("consumer", ""):
        return "consumer"
    return None


def type_matches(group: dict[str, Any], types: list[str]) -> bool:
    """Whether a ListGroups entry is of one of `types` (none: any). A broker older than
    ListGroups v5 gives no type: a streams group is still told by its protocol type, while a
    consumer-protocol group may be classic or consumer and is kept for either."""
    if not types:
        return True
    if group["type"] is not None:
        return str(group["type"]).lower() in types
    if listed_kind(group) == "streams":
        return "streams" in types
    return bool({"classic", "consumer"} & set(types))


def kafka_streams_classic(admin: AdminWire, group: dict[str, Any]) -> bool:
    """Whether a listed group is a classic group of Kafka Streams instances (DescribeGroups'
    protocol name, or its members' Streams client ids); False when it cannot be described."""
    if (group["type"] or "classic").lower() != "classic" or group["protocol_type"] != "consumer":
        return False
    if (group["state"] or "").lower() in ("empty", "dead"):
        return False
    try:
        d = admin.describe_group(group["group"])
    except (KafkaError, WireError):
        return False
    return is_streams_classic(d.protocol_type, d.protocol_data, (m.client_id for m in d.members))


def _split(value: str | None) -> list[str]:
    return [] if not value else [v.strip() for v in value.split(",") if v.strip()]


def run(admin: AdminWire, args: argparse.Namespace, out: TextIO, style: Style) -> int:
    states = _split(args.state)
    types = [t.lower() for t in _split(args.type)]
    known_states = {s.lower(): s for s in GROUP_STATES}
    bad = [s for s in states if s.lower() not in known_states]
    if bad:
        error(f"Invalid state list '{args.state}'. Valid states are: {', '.join(GROUP_STATES)}")
        return USAGE
    if any(t not in TYPES for t in types):
        error(f"Invalid types list '{args.type}'. Valid types are: {', '.join(TYPES)}")
        return USAGE
    states = [known_states[s.lower()] for s in states]
    rows = [
        g
        for g in admin.list_groups(states, [t.capitalize() for t in types])
        if listed_kind(g) is not None
        and (not states or (g["state"] or "").lower() in {s.lower() for s in states})
        and type_matches(g, types)
    ]
    marks = args.json or args.type is not None
    for g in rows:
        g["kafka_streams"] = marks and kafka_streams_classic(admin, g)
        g["type"] = (g["type"] or "Unknown").capitalize()
        g["state"] = g["state"] or "Unknown"
    if args.json:
        emit_json(
            [
                {
                    "group": g["group"],
                    "type": g["type"],
                    "state": g["state"],
                    "kafka_streams": g["kafka_streams"],
                }
                for g in rows
            ],
            out,
        )
        return OK
    if args.state is None and args.type is None:
        for g in rows:
            out.write(g["group"] + "\n")
        return OK
    headers = ["GROUP"]
    if args.type is not None:
        headers.append("TYPE")
    if args.state is not None:
        headers.append("STATE")
    key = {"GROUP": "group", "TYPE": "type", "STATE": "state"}
    for g in rows:
        if g["kafka_streams"]:
            g["type"] += " (Kafka Streams)"
    out.write(table(headers, [[g[key[h]] for h in headers] for g in rows], style) + "\n")
    return OK
