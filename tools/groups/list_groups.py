"""`groupshift groups list [--state S[,S]] [--type classic|consumer[,...]]`.

As Kafka's `kafka-consumer-groups.sh --list`: consumer groups only (protocol type `consumer`, or
empty for a group that only commits offsets); without filters one group id per line, with
`--state`/`--type` a GROUP [TYPE] [STATE] table. Filters go to the broker in ListGroups (states
v4+, KIP-518; types v5+, KIP-848) and are applied here as well for brokers that ignore them.
Types print as Kafka's `GroupType` does (`Classic`, `Consumer`).
"""

from __future__ import annotations

import argparse
from typing import TextIO

from tools.groups.output import OK, USAGE, Style, emit_json, error, table
from tools.groups.wire import AdminWire

CONSUMER_STATES = (
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
    "Assigning",
    "Reconciling",
)
TYPES = ("classic", "consumer")


def _split(value: str | None) -> list[str]:
    return [] if not value else [v.strip() for v in value.split(",") if v.strip()]


def run(admin: AdminWire, args: argparse.Namespace, out: TextIO, style: Style) -> int:
    states = _split(args.state)
    types = [t.lower() for t in _split(args.type)]
    known_states = {s.lower(): s for s in CONSUMER_STATES}
    bad = [s for s in states if s.lower() not in known_states]
    if bad:
        error(f"Invalid state list '{args.state}'. Valid states are: {', '.join(CONSUMER_STATES)}")
        return USAGE
    if any(t not in TYPES for t in types):
        error(f"Invalid types list '{args.type}'. Valid types are: classic, consumer")
        return USAGE
    states = [known_states[s.lower()] for s in states]
    rows = [
        g
        for g in admin.list_groups(states, [t.capitalize() for t in types])
        if (g["protocol_type"] or "") in ("consumer", "")
        and (not states or (g["state"] or "").lower() in {s.lower() for s in states})
        and (not types or g["type"] is None or g["type"].lower() in types)
    ]
    for g in rows:
        g["type"] = (g["type"] or "Unknown").capitalize()
        g["state"] = g["state"] or "Unknown"
    if args.json:
        emit_json([{"group": g["group"], "type": g["type"], "state": g["state"]} for g in rows], out)
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
    out.write(table(headers, [[g[key[h]] for h in headers] for g in rows], style) + "\n")
    return OK
