"""`groupshift groups migration GROUP [--watch [--interval S] [--count N]] [--plot FILE.png]
[--events FILE] [--json]`: the live story of an online migration (KIP-848 "Supporting Online
Consumer Group Upgrade" / downgrade).

One poll reads the group (ConsumerGroupDescribe or DescribeGroups, see `snapshot`) and the
broker-level settings that decide conversions (DescribeConfigs on the BROKER resource:
`group.consumer.migration.policy`, `group.consumer.max.size`, `group.max.size`; a broker that
does not list them leaves those checks unknown rather than guessed) and reports:

- the group type, state, group and target-assignment epochs, members by protocol and by client;
- who owns what, and per member the partitions *pending revocation* (owned but no longer in its
  target: the member must give them up; a classic member does so in its next JoinGroup/SyncGroup
  round, a consumer-protocol member on its next heartbeat) and *awaiting* (in its target, still
  held by another member). Across `--watch` polls each pending partition's age is tracked from
  the poll that first saw it;
- whether a conversion would be refused right now and why. Upgrade (classic group, a
  consumer-protocol member joins): the policy must allow upgrades, the protocol type must be
  `consumer`, the members must fit `group.consumer.max.size`, and no member's assignment may
  carry userData (a client-side assignor's state, which the server cannot take over; librdkafka's
  cooperative-sticky does this, KAFKA-18134). Downgrade (the last consumer-protocol member
  leaves): the policy must allow downgrades and the remaining members fit `group.max.size`.
  Empty groups convert whatever the policy;
- the next step an operator should take. First of all, whether the server serves the KIP-848
  consumer protocol at all (`tools.groups.capabilities`: Kafka 3.7-3.9 without `consumer` in
  `group.coordinator.rebalance.protocols`, or Kafka 4.x with the `group.version` feature at 0,
  list ConsumerGroupHeartbeat and then answer UNSUPPORTED_VERSION): if not, no upgrade is
  advised, the two ways out are.

`--watch` prints what changed between polls (joins, leaves, conversions, epochs, partitions
moving between owners) and, with `--json`, one JSON object per poll. `--plot` draws who owned
which partition when (see `plot`) from the polls, or from the gateway's JSON event log given with
`--events`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

from tools.groups.capabilities import ServerCapabilities, probe_server
from tools.groups.output import ERROR, NOT_FOUND, OK, Style, emit_json, error, table
from tools.groups.snapshot import Group, describe
from tools.groups.wire import BROKER_RESOURCE, AdminWire, KafkaError, WireError

TP = tuple[str, int]
UPGRADE_POLICIES = ("bidirectional", "upgrade")
DOWNGRADE_POLICIES = ("bidirectional", "downgrade")


def tp_name(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


@dataclass
class Observation:
    """One poll: when, the group, and the broker settings it was judged against."""

    at: float
    group: Group
    settings: dict[str, str | None]
    server: ServerCapabilities | None = None  # asked once per run, not per poll

    def owners(self) -> dict[TP, str]:
        return {tp: m.member_id for m in self.group.members for tp in m.partitions}


@dataclass
class Tracker:
    """What persists across polls: when each (member, partition) pending revocation was first
    seen, and every observation (for the change story and the plot)."""

    first_pending: dict[tuple[str, TP], float] = field(default_factory=dict)
    observations: list[Observation] = field(default_factory=list)

    def observe(self, obs: Observation) -> None:
        now_pending = set()
        for m in obs.group.members:
            for tp in pending_revocation(m.assignment, m.target):
                now_pending.add((m.member_id, tp))
                self.first_pending.setdefault((m.member_id, tp), obs.at)
        for key in list(self.first_pending):
            if key not in now_pending:
                del self.first_pending[key]
        self.observations.append(obs)


def _flat(parts: dict[str, list[int]] | None) -> set[TP]:
    return {(t, p) for t, ps in (parts or {}).items() for p in ps}


def pending_revocation(assigned: dict[str, list[int]], target: dict[str, list[int]] | None) -> list[TP]:
    if target is None:
        return []
    return sorted(_flat(assigned) - _flat(target))


def broker_settings(admin: AdminWire) -> dict[str, str | None]:
    """The conversion-deciding broker settings; None where the broker does not say."""
    names = ("group.consumer.migration.policy", "group.consumer.max.size", "group.max.size")
    found: dict[str, Any] = {}
    try:
        node = admin.node_ids()[0]
        found = admin.describe_configs(BROKER_RESOURCE, str(node))
    except (KafkaError, WireError, IndexError):
        pass
    return {n: (found[n]["value"] if n in found else None) for n in names}


def conversion_check(
    group: Group, settings: dict[str, str | None], server: ServerCapabilities | None = None
) -> dict[str, Any]:
    """Which conversion the group faces next and every reason it would be refused now."""
    policy = settings.get("group.consumer.migration.policy")
    reasons: list[str] = []
    unknown: list[str] = []
    no_kip848 = server is not None and server.serves_consumer_protocol is False
    if no_kip848 and server is not None and (group.group_type == "classic" or not group.members):
        return {
            "direction": "upgrade",
            "allowed": False,
            "refusals": ["the server does not serve the KIP-848 consumer protocol: " + server.reason],
            "unknown": [],
            "policy": policy,
            "note": None,
            "ways_out": list(server.ways_out()),
        }
    if not group.exists or not group.members:
        return {
            "direction": None,
            "allowed": True,
            "refusals": [],
            "unknown": [],
            "policy": policy,
            "note": "an empty group converts whatever the policy",
        }
    if group.group_type == "classic":
        direction = "upgrade"
        if policy is None:
            unknown.append("group.consumer.migration.policy (not listed by the broker)")
        elif policy.lower() not in UPGRADE_POLICIES:
            reasons.append(
                f"group.consumer.migration.policy is {policy}: upgrades of non-empty groups are refused"
            )
        if group.protocol_type != "consumer":
            reasons.append(
                f"protocol type is {group.protocol_type!r}, not 'consumer' (Connect, Streams and "
                "custom protocols never convert)"
            )
        max_size = settings.get("group.consumer.max.size")
        if max_size is not None and len(group.members) > int(max_size):
            reasons.append(f"{len(group.members)} members exceed group.consumer.max.size={max_size}")
        for m in group.members:
            if m.user_data:
                reasons.append(
                    f"member {m.member_id} (client {m.client_id}) has assignment userData: a client-side "
                    "custom assignor (e.g. librdkafka cooperative-sticky, KAFKA-18134) the server cannot "
                    "take over"
                )
            if m.decode_error:
                reasons.append(
                    f"member {m.member_id}'s embedded consumer protocol does not parse: {m.decode_error}"
                )
    else:
        direction = "downgrade"
        classic = [m for m in group.members if m.protocol == "classic"]
        if policy is None:
            unknown.append("group.consumer.migration.policy (not listed by the broker)")
        elif policy.lower() not in DOWNGRADE_POLICIES:
            reasons.append(
                f"group.consumer.migration.policy is {policy}: the group stays a consumer group when its "
                "last consumer-protocol member leaves"
            )
        max_size = settings.get("group.max.size")
        if max_size is not None and len(classic) > int(max_size):
            reasons.append(f"{len(classic)} classic members exceed group.max.size={max_size}")
    return {
        "direction": direction,
        "allowed": not reasons,
        "refusals": reasons,
        "unknown": unknown,
        "policy": policy,
        "note": None,
    }


def report(obs: Observation, tracker: Tracker, stuck_after: float) -> dict[str, Any]:
    g = obs.group
    if not g.exists:
        return {
            "group": g.group_id,
            "exists": False,
            "phase": "not found",
            "next_step": "The group does not exist: start its consumers (any protocol).",
        }
    by_protocol = Counter(m.protocol or "unknown" for m in g.members)
    by_client = Counter((m.client_id, m.protocol or "unknown") for m in g.members)
    owners = {tp: m for m in g.members for tp in m.partitions}
    members = []
    pending_rows = []
    for m in sorted(g.members, key=lambda m: (m.protocol or "", m.client_id, m.member_id)):
        pending = pending_revocation(m.assignment, m.target)
        awaiting = sorted(_flat(m.target) - _flat(m.assignment)) if m.target is not None else []
        members.append(
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "protocol": m.protocol,
                "member_epoch": m.member_epoch,
                "owns": [tp_name(tp) for tp in m.partitions],
                "target": None if m.target is None else [tp_name(tp) for tp in sorted(_flat(m.target))],
                "pending_revocation": [tp_name(tp) for tp in pending],
                "awaiting": [
                    {"partition": tp_name(tp), "held_by": owners[tp].member_id if tp in owners else None}
                    for tp in awaiting
                ],
            }
        )
        for tp in pending:
            since = tracker.first_pending.get((m.member_id, tp), obs.at)
            pending_rows.append(
                {
                    "partition": tp_name(tp),
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "protocol": m.protocol,
                    "pending_for_s": round(obs.at - since, 1),
                }
            )
    conversion = conversion_check(g, obs.settings, obs.server)
    if not g.members:
        phase = "empty"
    elif g.group_type == "classic":
        phase = "classic"
    elif by_protocol.get("classic"):
        phase = "migrating"
    else:
        phase = "consumer"
    return {
        "group": g.group_id,
        "exists": True,
        "observed_at": obs.at,
        "phase": phase,
        "type": g.group_type,
        "state": g.state,
        "protocol_type": g.protocol_type,
        "assignor": g.assignor,
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "members_by_protocol": dict(sorted(by_protocol.items())),
        "members_by_client": [
            {"client_id": c, "protocol": p, "members": n} for (c, p), n in sorted(by_client.items())
        ],
        "members": members,
        "pending_revocation": pending_rows,
        "conversion": conversion,
        "settings": obs.settings,
        "next_step": next_step(g, phase, by_protocol, pending_rows, conversion, stuck_after),
    }


def next_step(
    g: Group,
    phase: str,
    by_protocol: Counter[str],
    pending: list[dict[str, Any]],
    conversion: dict[str, Any],
    stuck_after: float,
) -> str:
    if conversion.get("ways_out") and phase in ("empty", "classic"):
        ways = conversion["ways_out"]
        return (
            "Do not start group.protocol=consumer members here: "
            + "; ".join(conversion["refusals"])
            + f". Either {ways[0]}, or {ways[1]}."
        )
    if phase == "empty":
        return "The group is empty: the protocol of the next member to join decides its type (any policy)."
    if phase == "classic":
        if conversion["refusals"]:
            return (
                "Fix before upgrading: "
                + "; ".join(conversion["refusals"])
                + ". Until then a group.protocol=consumer member is refused with GROUP_ID_NOT_FOUND "
                "(librdkafka treats that as fatal)."
            )
        return "Restart one member with group.protocol=consumer: it converts the group (upgrade)."
    stuck = [p for p in pending if p["pending_for_s"] >= stuck_after]
    if stuck:
        p = max(stuck, key=lambda p: p["pending_for_s"])
        return (
            f"Member {p['member_id']} (client {p['client_id']}, {p['protocol']}) has held {p['partition']} "
            f"for {p['pending_for_s']}s after its revocation: check that it is polling "
            "(max.poll.interval.ms), or restart it."
        )
    if pending:
        who = sorted({p["member_id"] for p in pending})
        return (
            f"Wait: {len(pending)} partition(s) pending revocation from {len(who)} member(s); "
            "classic members "
            "release them in their next JoinGroup/SyncGroup round, consumer members on their next heartbeat."
        )
    if phase == "migrating":
        classic = by_protocol.get("classic", 0)
        return (
            f"Roll the remaining {classic} classic member(s) to group.protocol=consumer, one at a time "
            "(the group becomes classic again only if every consumer-protocol member leaves"
            + (
                ""
                if conversion["allowed"]
                else ", which is refused now: " + "; ".join(conversion["refusals"])
            )
            + ")."
        )
    if g.state not in ("Stable", "Empty"):
        return f"Wait for the group to reconcile (state {g.state})."
    return "Done: every member uses the consumer protocol and the group is stable."


def changes(prev: Observation | None, cur: Observation) -> list[str]:
    """What happened between two polls, in words."""
    if prev is None:
        return []
    out: list[str] = []
    a, b = prev.group, cur.group
    if a.exists != b.exists:
        out.append("group created" if b.exists else "group deleted")
    if a.exists and b.exists and a.group_type != b.group_type:
        out.append(f"group converted {a.group_type} -> {b.group_type}")
    if a.state != b.state:
        out.append(f"state {a.state} -> {b.state}")
    if a.group_epoch != b.group_epoch and b.group_epoch is not None:
        out.append(f"group epoch {a.group_epoch if a.group_epoch is not None else '-'} -> {b.group_epoch}")
    before = {m.member_id: m for m in a.members}
    after = {m.member_id: m for m in b.members}
    for mid in sorted(after.keys() - before.keys()):
        m = after[mid]
        out.append(f"member {mid} joined ({m.protocol or 'unknown'}, client {m.client_id})")
    for mid in sorted(before.keys() - after.keys()):
        m = before[mid]
        out.append(f"member {mid} left ({m.protocol or 'unknown'}, client {m.client_id})")
    for mid in sorted(before.keys() & after.keys()):
        if before[mid].protocol != after[mid].protocol and after[mid].protocol:
            out.append(f"member {mid} now {after[mid].protocol}")
    o1, o2 = prev.owners(), cur.owners()
    for tp in sorted(o1.keys() | o2.keys()):
        x, y = o1.get(tp), o2.get(tp)
        if x != y:
            out.append(f"{tp_name(tp)}: {x or 'unowned'} -> {y or 'unowned'}")
    return out


def render(rep: dict[str, Any], style: Style) -> str:
    if not rep["exists"]:
        return f"Group {rep['group']}: does not exist.\nNext step: {rep['next_step']}\n"
    lines = [
        style.bold(f"Group {rep['group']}")
        + f": type {rep['type']}, state {rep['state']}, phase {rep['phase']}, group epoch "
        + f"{rep['group_epoch'] if rep['group_epoch'] is not None else '-'}, target assignment epoch "
        + f"{rep['assignment_epoch'] if rep['assignment_epoch'] is not None else '-'}, "
        + f"assignor {rep['assignor'] or '-'}",
        "Members by protocol: "
        + (", ".join(f"{p} {n}" for p, n in rep["members_by_protocol"].items()) or "none"),
    ]
    if rep["members"]:
        rows = [
            [
                m["member_id"],
                m["client_id"],
                m["protocol"],
                m["member_epoch"],
                ",".join(m["owns"]) or None,
                ",".join(m["pending_revocation"]) or None,
                ",".join(a["partition"] for a in m["awaiting"]) or None,
            ]
            for m in rep["members"]
        ]
        headers = ["CONSUMER-ID", "CLIENT-ID", "PROTOCOL", "EPOCH", "OWNS", "PENDING-REVOCATION", "AWAITING"]
        lines.append(table(headers, rows, style, {5: lambda v: v != "-"}))
    for p in rep["pending_revocation"]:
        lines.append(
            style.warn(f"pending revocation: {p['partition']} on {p['member_id']} for {p['pending_for_s']}s")
        )
    conv = rep["conversion"]
    if conv["direction"]:
        verdict = style.good("allowed") if conv["allowed"] else style.bad("refused")
        lines.append(f"{conv['direction'].capitalize()} now: {verdict}")
        for r in conv["refusals"]:
            lines.append(f"  - {r}")
        for u in conv["unknown"]:
            lines.append(f"  ? unknown: {u}")
    lines.append(style.bold("Next step: ") + rep["next_step"])
    return "\n".join(lines) + "\n"


def run(admin: AdminWire, args: argparse.Namespace, out: TextIO, style: Style) -> int:
    tracker = Tracker()
    settings = broker_settings(admin)
    server = probe_server(admin, args.bootstrap_server)
    polls = 0
    prev: Observation | None = None
    last: dict[str, Any] = {}
    try:
        while True:
            try:
                obs = Observation(time.time(), describe(admin, args.group), settings, server)
            except (WireError, KafkaError) as e:
                if not args.watch:
                    raise
                # A watch outlives a restarting gateway or a moving coordinator: say so, go on.
                admin.reset()
                if args.json:
                    out.write(json.dumps({"group": args.group, "poll_error": str(e)}) + "\n")
                else:
                    out.write(style.warn(f"poll failed: {e}") + "\n")
                out.flush()
                polls += 1
                if args.count and polls >= args.count:
                    break
                time.sleep(args.interval)
                continue
            tracker.observe(obs)
            last = report(obs, tracker, args.stuck_after)
            story = changes(prev, obs)
            if args.json:
                if args.watch:
                    out.write(json.dumps({**last, "changes": story}) + "\n")
                else:
                    emit_json(last, out)
            else:
                if args.watch:
                    stamp = time.strftime("%H:%M:%S", time.localtime(obs.at))
                    out.write(style.bold(f"--- {stamp} poll {polls + 1}") + "\n")
                    for c in story:
                        out.write(f"* {c}\n")
                out.write(render(last, style))
            out.flush()
            prev = obs
            polls += 1
            if not args.watch or (args.count and polls >= args.count):
                break
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    if args.plot:
        from tools.groups.plot import ownership_from_events, ownership_from_observations, plot_ownership

        try:
            import matplotlib  # noqa: F401
        except ImportError:
            error("--plot needs matplotlib: pip install 'groupshift[plot]'")
            return ERROR
        try:
            spans = (
                ownership_from_events(args.events, args.group)
                if args.events
                else ownership_from_observations(tracker.observations)
            )
        except (OSError, ValueError) as e:
            error(str(e))
            return ERROR
        plot_ownership(spans, args.plot, title=f"group {args.group}: partition ownership")
        if not args.json:
            out.write(f"Wrote {args.plot}\n")
    return OK if last.get("exists") else NOT_FOUND
