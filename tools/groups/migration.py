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

A streams group (KIP-1071) gets the same view with tasks instead of partitions:
`tools.groups.streams_migration`. A classic Kafka Streams group (protocol `stream`) gets its
instances' tasks, process ids and endpoints (decoded from Streams' AssignmentInfo) instead of the
partition table, and whether anything blocks converting it to a streams group
(`tools.groups.streams_classic`). A classic Kafka Connect group (protocol type `connect`) gets
its workers' URLs, config offsets, connectors and tasks (decoded from Connect's own protocol)
and what would block converting it to a connect group (`tools.groups.connect_classic`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tools.event_log import event_time, read_event
from tools.groups import connect_classic, connect_group, streams_classic, streams_migration
from tools.groups.capabilities import ServerCapabilities, probe_server
from tools.groups.output import ERROR, NOT_FOUND, OK, Style, emit_json, error, partition_ranges, table
from tools.groups.snapshot import Group, describe
from tools.groups.streams_group import describe_streams
from tools.groups.wire import BROKER_RESOURCE, AdminWire, KafkaError, WireError

TP = tuple[str, int]
UPGRADE_POLICIES = ("bidirectional", "upgrade")
DOWNGRADE_POLICIES = ("bidirectional", "downgrade")


def tp_name(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


def _tp_of(name: str) -> TP:
    topic, _, p = name.rpartition("-")
    return (topic, int(p))


def name_ranges(names: Iterable[str]) -> str:
    """`partition_ranges` of "topic-partition" names (the JSON report's form)."""
    return partition_ranges(_tp_of(n) for n in names)


@dataclass
class Observation:
    """One poll: when, the group, and the broker settings it was judged against."""

    at: float
    group: Group
    settings: dict[str, str | None]
    server: ServerCapabilities | None = None  # asked once per run, not per poll
    # a connect group on the new protocol (ListGroups type `Connect`), which DescribeGroups
    # describes with protocol type `connect` as it does a classic Kafka Connect cluster's group
    new_connect_group: bool = False

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


EXPECT_CHOICES = ("upgrade", "downgrade")


@dataclass(frozen=True)
class Conversion:
    """The group changed type: classic -> consumer is an upgrade, consumer -> classic a
    downgrade (KIP-848's online migration, either way)."""

    at: float
    from_type: str
    to_type: str
    source: str  # "poll" (seen between two polls) or "event log"

    @property
    def direction(self) -> str:
        return "upgrade" if self.to_type == "consumer" else "downgrade"

    def describe(self) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(self.at))
        return f"converted {self.from_type} -> {self.to_type} at {stamp} ({self.source})"


def conversions_seen(observations: Sequence[Observation]) -> list[Conversion]:
    """The conversions between consecutive polls of one run."""
    out = []
    for a, b in itertools.pairwise(observations):
        ta, tb = a.group.group_type, b.group.group_type
        if a.group.exists and b.group.exists and ta != tb and {ta, tb} == {"classic", "consumer"}:
            out.append(Conversion(b.at, str(ta), str(tb), "poll"))
    return out


def conversions_from_events(path: str | Path, group: str) -> list[Conversion]:
    """The `group.converted` events of `group` in the gateway's JSON event log (engine.routing
    logs them with `from_type` and `to_type`)."""
    out = []
    for line in Path(path).read_text(errors="replace").splitlines():
        e = read_event(line)
        if e is None or e.get("event") != "group.converted" or e.get("group") != group:
            continue
        t = event_time(e)
        if t is not None and e.get("from_type") and e.get("to_type"):
            out.append(Conversion(t, str(e["from_type"]), str(e["to_type"]), "event log"))
    return out


def _protocol_counts(obs: Observation) -> Counter[str]:
    return Counter(m.protocol or "unknown" for m in obs.group.members)


def infer_intent(
    observations: Sequence[Observation], expected: str | None, events: Sequence[Conversion] = ()
) -> dict[str, Any]:
    """Which way the group is going, so that the next step points that way.

    Inferred from the last conversion (seen between polls, or logged by the gateway) and, after
    it, the members: in a consumer group, consumer-protocol members leaving while classic ones
    join is a rollback under way (its conversion happens only when the last one leaves).
    `expected` (`--expect upgrade|downgrade`) wins; when the inference disagrees with it, the
    group is moving away from the expected direction and the report says so."""
    conversions = sorted([*conversions_seen(observations), *events], key=lambda c: c.at)
    inferred: str | None = None
    because = "no conversion seen"
    if conversions:
        last = conversions[-1]
        inferred, because = last.direction, f"the group {last.describe()}"
    after = [o for o in observations if not conversions or o.at >= conversions[-1].at]
    if len(after) >= 2 and after[-1].group.group_type == "consumer":
        first, now = _protocol_counts(after[0]), _protocol_counts(after[-1])
        fewer_consumer = now["consumer"] < first["consumer"]
        more_classic = now["classic"] > first["classic"]
        more_consumer = now["consumer"] > first["consumer"]
        fewer_classic = now["classic"] < first["classic"]
        # Only with classic members in the group: consumer-protocol members leaving a group of
        # consumer-protocol members only is a scale-in, not a rollback.
        if now["classic"] and (fewer_consumer or more_classic) and not (more_consumer or fewer_classic):
            inferred = "downgrade"
            because = (
                f"consumer-protocol members {first['consumer']} -> {now['consumer']}, classic "
                f"{first['classic']} -> {now['classic']} since "
                + (f"the group {conversions[-1].describe()}" if conversions else "the first poll")
            )
        elif first["classic"] and (more_consumer or fewer_classic) and not (fewer_consumer or more_classic):
            inferred = "upgrade"
            because = (
                f"consumer-protocol members {first['consumer']} -> {now['consumer']}, classic "
                f"{first['classic']} -> {now['classic']} since "
                + (f"the group {conversions[-1].describe()}" if conversions else "the first poll")
            )
    away = expected is not None and inferred is not None and inferred != expected
    return {
        "direction": expected or inferred,
        "expected": expected,
        "inferred": inferred,
        "because": because,
        "away_from_expected": away,
    }


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


def report(
    obs: Observation, tracker: Tracker, stuck_after: float, intent: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The view of one poll; `intent` is `infer_intent`'s (inferred from the tracker's polls
    alone when not given)."""
    if intent is None:
        intent = infer_intent(tracker.observations, None)
    g = obs.group
    if not g.exists:
        return {
            "group": g.group_id,
            "exists": False,
            "phase": "not found",
            "next_step": "The group does not exist: start its consumers (any protocol).",
            "intent": intent,
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
    classic_streams = streams_classic.view_of(g)
    classic_connect = None if obs.new_connect_group else connect_classic.view_of(g)
    if classic_connect is not None:
        # Its way forward is a connect group (SDK workers), not a consumer group.
        conversion = {
            "direction": None,
            "allowed": False,
            "refusals": [],
            "unknown": [],
            "policy": obs.settings.get("group.consumer.migration.policy"),
            "note": "a Kafka Connect group converts to a connect group, not to a consumer group",
        }
    if classic_streams is not None:
        # Its way forward is a streams group: the consumer-group upgrade's verdict and advice
        # (group.protocol=consumer) do not apply to Kafka Streams instances.
        conversion = {
            "direction": None,
            "allowed": False,
            "refusals": [],
            "unknown": [],
            "policy": obs.settings.get("group.consumer.migration.policy"),
            "note": "a Kafka Streams group converts to a streams group, not to a consumer group",
        }
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
        "kafka_streams": None if classic_streams is None else classic_streams.to_json(),
        "kafka_connect": None if classic_connect is None else classic_connect.to_json(),
        "settings": obs.settings,
        "intent": intent,
        "next_step": streams_classic.next_step(classic_streams)
        if classic_streams is not None
        else connect_classic.next_step(classic_connect)
        if classic_connect is not None
        else next_step(g, phase, by_protocol, pending_rows, conversion, stuck_after, intent),
    }


def next_step(
    g: Group,
    phase: str,
    by_protocol: Counter[str],
    pending: list[dict[str, Any]],
    conversion: dict[str, Any],
    stuck_after: float,
    intent: dict[str, Any] | None = None,
) -> str:
    """The one thing to do now, pointing the way the group is going (`intent`: an upgrade
    unless a rollback is inferred or expected)."""
    direction = (intent or {}).get("direction") or "upgrade"
    away = ""
    if intent and intent.get("away_from_expected"):
        away = (
            f"The group is moving away from the expected direction ({intent['expected']}): "
            f"{intent['because']}. "
        )
    if direction == "downgrade":
        return away + _rollback_step(g, phase, by_protocol, pending, conversion, stuck_after)
    if away and phase == "classic" and not conversion["refusals"]:
        return (
            away + "If that rollback was not meant, restart one member with group.protocol=consumer: "
            "it converts the group (upgrade)."
        )
    return away + _upgrade_step(g, phase, by_protocol, pending, conversion, stuck_after)


def _upgrade_step(
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
    if (step := _pending_step(pending, stuck_after)) is not None:
        return step
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


def _pending_step(pending: list[dict[str, Any]], stuck_after: float) -> str | None:
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
    return None


def _rollback_step(
    g: Group,
    phase: str,
    by_protocol: Counter[str],
    pending: list[dict[str, Any]],
    conversion: dict[str, Any],
    stuck_after: float,
) -> str:
    """The next step of a downgrade (KIP-848's rollback: consumer-protocol members restart as
    classic ones; the group converts back when the last consumer-protocol member leaves)."""
    if phase == "empty":
        return (
            "The group is empty: start its members with group.protocol=classic; the first to join "
            "decides its type."
        )
    if phase == "classic":
        if g.state not in ("Stable", "Empty"):
            return f"Rolled back: the group is classic again; wait for it to settle (state {g.state})."
        return (
            f"Rollback done: the group is classic again and its {len(g.members)} member(s) use the "
            "classic protocol. Nothing left to do."
        )
    if (step := _pending_step(pending, stuck_after)) is not None:
        return step
    consumer = by_protocol.get("consumer", 0)
    refused = (
        ""
        if conversion["allowed"]
        else " That conversion is refused now: " + "; ".join(conversion["refusals"]) + "; fix it first."
    )
    return (
        f"Roll the remaining {consumer} consumer-protocol member(s) back to group.protocol=classic, "
        "one at a time: the group becomes classic again when the last of them leaves." + refused
    )


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
    if rep.get("kafka_streams"):
        lines += streams_classic.render_lines(rep["kafka_streams"])
    elif rep.get("kafka_connect"):
        lines += connect_classic.render_lines(rep["kafka_connect"])
    elif rep["members"]:
        rows = [
            [
                m["member_id"],
                m["client_id"],
                m["protocol"],
                m["member_epoch"],
                name_ranges(m["owns"]) or None,
                name_ranges(m["pending_revocation"]) or None,
                name_ranges(a["partition"] for a in m["awaiting"]) or None,
            ]
            for m in rep["members"]
        ]
        headers = ["CONSUMER-ID", "CLIENT-ID", "PROTOCOL", "EPOCH", "OWNS", "PENDING-REVOCATION", "AWAITING"]
        lines.append(table(headers, rows, style, {5: lambda v: v != "-"}))
    pending: dict[tuple[str, float], list[str]] = {}
    for p in rep["pending_revocation"]:
        pending.setdefault((p["member_id"], p["pending_for_s"]), []).append(p["partition"])
    for (member, age), names in pending.items():
        lines.append(style.warn(f"pending revocation: {name_ranges(names)} on {member} for {age}s"))
    intent = rep.get("intent")
    if intent:
        if intent["expected"]:
            said = f"{intent['expected']} (--expect)"
            if intent["inferred"] and intent["away_from_expected"]:
                said += style.bad(f", but the group is going the other way: {intent['because']}")
        elif intent["inferred"]:
            said = f"{intent['inferred']} (inferred: {intent['because']})"
        else:
            said = "upgrade assumed (no conversion seen; during a rollback give --expect downgrade)"
        lines.append(f"Direction: {said}")
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


RECENT_CHANGES = 12  # the change story kept under a redrawn view


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


class Screen:
    """Where `--watch` writes each poll's view. On a terminal the view is redrawn in place
    (ANSI: cursor up to the previous view's first line, clear to the end of the screen), so the
    operator watches one view change rather than scrolling blocks; piped into a file or a pager
    each poll's block is appended as it is, without escape codes."""

    CURSOR_UP_LINES = "\x1b[{n}F"  # CPL: to the first column, n lines up
    CLEAR_BELOW = "\x1b[J"  # ED 0: clear from the cursor to the end of the screen

    def __init__(self, out: TextIO, redraw: bool) -> None:
        self.out = out
        self.redraws = redraw
        self.lines = 0  # lines of the view on screen now (0: nothing to take back)

    def show(self, block: str, keep: bool = False) -> None:
        """Replace the view on screen with `block` (append it when not redrawing); `keep`: a
        line that stays (a poll error), above the next view."""
        if self.redraws and self.lines:
            self.out.write(self.CURSOR_UP_LINES.format(n=self.lines) + self.CLEAR_BELOW)
        self.out.write(block)
        self.lines = 0 if keep else block.count("\n")


def _logged_conversions(args: argparse.Namespace) -> list[Conversion]:
    """The group's conversions in the gateway's event log, when `--events` names one."""
    if not getattr(args, "events", None):
        return []
    try:
        return conversions_from_events(args.events, args.group)
    except OSError:
        return []


def run(admin: AdminWire, args: argparse.Namespace, out: TextIO, style: Style) -> int:
    tracker = Tracker()
    streams_tracker = streams_migration.StreamsTracker()
    expect: str | None = getattr(args, "expect", None)
    screen = Screen(out, redraw=bool(args.watch and not args.json and _is_terminal(out)))
    recent: list[str] = []
    settings = broker_settings(admin)
    server = probe_server(admin, args.bootstrap_server)
    polls = 0
    prev: Observation | None = None
    last: dict[str, Any] = {}
    try:
        while True:
            try:
                group = describe(admin, args.group)
                new_connect = connect_group.is_connect_group(admin, group)
                obs = Observation(time.time(), group, settings, server, new_connect)
            except (WireError, KafkaError) as e:
                if not args.watch:
                    raise
                # A watch outlives a restarting gateway or a moving coordinator: say so, go on.
                admin.reset()
                if args.json:
                    out.write(json.dumps({"group": args.group, "poll_error": str(e)}) + "\n")
                elif screen.redraws:  # part of the view on a terminal, kept above the next one
                    screen.show(style.warn(f"poll failed: {e}") + "\n", keep=True)
                else:  # a piped watch: the view on stdout, errors on stderr
                    print(style.warn(f"poll failed: {e}"), file=sys.stderr, flush=True)
                out.flush()
                polls += 1
                if args.count and polls >= args.count:
                    break
                time.sleep(args.interval)
                continue
            streams = None if obs.group.exists else describe_streams(admin, args.group)
            if streams is not None:  # a streams group: the same view with tasks
                last, story = streams_migration.poll(streams, streams_tracker, args.stuck_after)
                text = streams_migration.render(last, style)
            else:
                tracker.observe(obs)
                intent = infer_intent(tracker.observations, expect, _logged_conversions(args))
                last = report(obs, tracker, args.stuck_after, intent)
                story = changes(prev, obs)
                text = render(last, style)
            if args.json:
                if args.watch:
                    out.write(json.dumps({**last, "changes": story}) + "\n")
                else:
                    emit_json(last, out)
            elif args.watch:
                stamp = time.strftime("%H:%M:%S", time.localtime(obs.at))
                recent.extend(f"{stamp} {c}" for c in story)
                del recent[:-RECENT_CHANGES]
                header = style.bold(f"--- {stamp} poll {polls + 1}") + "\n"
                if screen.redraws:
                    block = header + "".join(f"* {c}\n" for c in recent) + text
                else:
                    block = header + "".join(f"* {c}\n" for c in story) + text
                screen.show(block)
            else:
                out.write(text)
            out.flush()
            prev = obs
            polls += 1
            if not args.watch or (args.count and polls >= args.count):
                break
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    if args.plot and streams_tracker.previous is not None:
        error("--plot draws partitions of consumer and classic groups; a streams group's tasks are not drawn")
        return ERROR
    if args.plot:
        from tools.groups.plot import ownership_from_events, ownership_from_observations, plot_ownership

        try:
            import matplotlib  # noqa: F401
        except ImportError:
            error("--plot needs matplotlib: pip install 'groupshift[plot]'")
            return ERROR
        try:
            if args.events:
                spans = ownership_from_events(args.events, args.group)
                converted = conversions_from_events(args.events, args.group)
            else:
                spans = ownership_from_observations(tracker.observations)
                converted = conversions_seen(tracker.observations)
        except (OSError, ValueError) as e:
            error(str(e))
            return ERROR
        marks = [(c.at, f"{c.from_type} -> {c.to_type}") for c in converted]
        plot_ownership(spans, args.plot, title=f"group {args.group}: partition ownership", conversions=marks)
        if not args.json:
            out.write(f"Wrote {args.plot}\n")
    if not last:  # no poll ever answered: the cluster was unreachable, not the group missing
        return ERROR
    return OK if last.get("exists") else NOT_FOUND
