"""Rebalance health of one group from groupshift's JSON event log (gateway/groups/events.py).

Read from the log, per group and in time order:

* **ownership**: `member.assignment_changed` carries a classic generation's whole assignment
  (`assigned`) or a KIP-848 reconciliation step (`added`, `revoked`, `pending_revocation`); a
  member owns its assigned partitions plus those pending revocation (it has not released them
  yet, KIP-848 "Assignment reconciliation"). `member.left` / `member.fenced` /
  `member.removed` end what the member owned. A partition of the group (one it has ever seen
  assigned) is *unowned* while no member owns it: its records are not consumed. The integral
  over time is the group's **unowned partition-seconds**;
* **membership changes**: `member.joined`, `member.left`, `member.fenced`, `member.removed`;
* **eager rebalances**: a classic member of an eager assignor (every one but
  `cooperative-sticky`) gives up all its partitions before it rejoins, which the log does not
  show (the gateway logs a classic member's assignment only when a generation installs a
  different one): from `group.rebalance_prepared` to `group.stable` the members of an eager
  group own nothing, then own again what they owned unless the new generation changed it;
* **rebalances**: a classic rebalance starts at `group.rebalance_prepared` and ends at the next
  `group.stable`; a consumer-group rebalance starts at `group.epoch_bumped` and ends when every
  member is STABLE with nothing pending (the `state` and `pending_assignment` of its last
  assignment change) -- the **time to stable**;
* **conversion**: the first `group.converted` to a consumer group splits the timeline into
  *before* and *after*; the **migration** runs from there until no classic-protocol member is
  left, and each membership change inside it is one migration step (KIP-848 "Supporting Online
  Consumer Group Upgrade": members are restarted one at a time with the new protocol).

A group whose last event is `group.deleted` is marked `deleted` (the report leaves it out of
its lists of groups; its rebalances still count in the hourly rates).

Unowned time is reported per membership change (before and after the conversion) and per
migration step, so a rolling upgrade can be compared with the ordinary churn of the same group.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tools.event_log import MEMBER_ENDS, event_member, event_time, partition_names, read_event

MEMBERSHIP = MEMBER_ENDS | {"member.joined"}
KEPT = MEMBERSHIP | {
    "member.assignment_changed",
    "group.rebalance_prepared",
    "group.generation_started",
    "group.stable",
    "group.epoch_bumped",
    "group.target_assignment_computed",
    "group.converted",
    "group.conversion_refused",
    "group.deleted",
}

# Spark DDL of a parsed event and of a health row.
EVENT_SCHEMA = (
    "cluster string, `group` string, ts double, seq long, event string, member string, "
    "protocol string, state string, to_type string, assigned array<string>, added array<string>, "
    "revoked array<string>, pending_revocation array<string>, pending_assignment array<string>"
)
HEALTH_SCHEMA = (
    "cluster string, `group` string, first_ts double, last_ts double, hours double, rebalances int, "
    "rebalances_per_hour double, stable_rebalances int, mean_time_to_stable_s double, "
    "max_time_to_stable_s double, converted_at double, conversion string, changes_before int, "
    "unowned_ps_before double, unowned_ps_per_change_before double, changes_after int, "
    "unowned_ps_after double, unowned_ps_per_change_after double, migration_steps int, "
    "unowned_ps_migration double, unowned_ps_per_step double, conversion_refusals int, deleted boolean"
)
HEALTH_COLUMNS = [c.strip().split(" ")[0].strip("`") for c in HEALTH_SCHEMA.split(",")]
EVENT_COLUMNS = [c.strip().split(" ")[0].strip("`") for c in EVENT_SCHEMA.split(",")]


def parse_event(line: str, cluster: str, seq: int) -> dict[str, Any] | None:
    """One event-log line as an EVENT_SCHEMA row; None for lines the health view does not use
    (other events, non-JSON lines such as a traceback)."""
    if '"group' not in line:
        return None
    e = read_event(line)
    if e is None:
        return None
    name = e.get("event")
    group = e.get("group")
    if name not in KEPT or not isinstance(group, str):
        return None
    t = event_time(e)
    if t is None:
        return None
    proto = e.get("protocol")
    return {
        "cluster": cluster,
        "group": group,
        "ts": t,
        "seq": seq,
        "event": name,
        "member": event_member(e),
        "protocol": proto if isinstance(proto, str) else None,
        "state": e.get("state") if isinstance(e.get("state"), str) else None,
        "to_type": e.get("to_type") if isinstance(e.get("to_type"), str) else None,
        "assigned": partition_names(e.get("assigned", e.get("partitions"))),
        "added": partition_names(e.get("added")),
        "revoked": partition_names(e.get("revoked")),
        "pending_revocation": partition_names(e.get("pending_revocation")),
        "pending_assignment": partition_names(e.get("pending_assignment")),
    }


@dataclass
class _Phase:
    changes: int = 0
    unowned: float = 0.0


def health(
    cluster: str, group: str, events: Sequence[dict[str, Any]], window: tuple[float, float] | None = None
) -> dict[str, Any]:
    """The HEALTH_SCHEMA row of one group from its parsed events (any order: sorted here).
    `window` is the time span the cluster's log covers (its first and last event): rates are
    per hour of that span, since a quiet group logs nothing for hours."""
    evs = sorted(events, key=lambda e: (e["ts"], e["seq"]))
    assigned: dict[str, set[str]] = {}
    pending: dict[str, set[str]] = {}
    steady: dict[str, bool] = {}  # member -> STABLE with nothing pending (consumer groups)
    protocols: dict[str, str] = {}
    known: set[str] = set()
    suspended: dict[str, set[str]] = {}  # eager members' partitions during a classic rebalance
    group_protocol: str | None = None
    before, after, migration = _Phase(), _Phase(), _Phase()
    converted_at: float | None = None
    conversion: str | None = None
    migrating = False
    refusals = 0
    rebalances = 0
    durations: list[float] = []
    open_classic: float | None = None
    open_consumer: float | None = None
    last_t = evs[0]["ts"] if evs else 0.0

    def unowned() -> int:
        owned: set[str] = set()
        for m in assigned:
            owned |= assigned[m]
        for m in pending:
            owned |= pending[m]
        return len(known - owned)

    for e in evs:
        t = e["ts"]
        gap = unowned() * max(0.0, t - last_t)
        (after if converted_at is not None else before).unowned += gap
        if migrating:
            migration.unowned += gap
        last_t = t
        name = e["event"]
        member = e["member"]
        if e["protocol"] and name in ("member.joined", "member.assignment_changed"):
            protocols[member] = e["protocol"]
        if name in MEMBERSHIP:
            (after if converted_at is not None else before).changes += 1
            if migrating:
                migration.changes += 1
        if name == "member.assignment_changed":
            full = e["assigned"]
            if full is not None:
                assigned[member] = set(full)
                pending[member] = set(e["pending_revocation"] or ())
            else:
                revoked = set(e["revoked"] or ())
                assigned[member] = (assigned.get(member, set()) - revoked) | set(e["added"] or ())
                pending[member] = set(e["pending_revocation"] or ())
            known |= assigned[member] | pending[member]
            if e["state"] is not None:
                steady[member] = e["state"] == "STABLE" and not e["pending_assignment"]
        elif name in MEMBER_ENDS:
            suspended.pop(member, None)
            assigned.pop(member, None)
            pending.pop(member, None)
            steady.pop(member, None)
            protocols.pop(member, None)
        elif name == "group.generation_started":
            group_protocol = e["protocol"]
        elif name == "group.rebalance_prepared":
            rebalances += 1
            if open_classic is None:
                open_classic = t
            if group_protocol != "cooperative-sticky":
                for m in list(assigned):
                    suspended.setdefault(m, set()).update(assigned.pop(m))
        elif name == "group.stable":
            for m, parts in suspended.items():
                assigned[m] = parts
            suspended.clear()
            if open_classic is not None:
                durations.append(t - open_classic)
                open_classic = None
        elif name == "group.epoch_bumped":
            rebalances += 1
            if open_consumer is None:
                open_consumer = t
            steady = dict.fromkeys(steady, False)
        elif name == "group.converted":
            if e["to_type"] == "consumer" and converted_at is None:
                converted_at = t
                conversion = "upgrade"
                migrating = True
                open_classic = None
            elif e["to_type"] == "classic" and converted_at is None:
                converted_at = t
                conversion = "downgrade"
                open_consumer = None
        elif name == "group.conversion_refused":
            refusals += 1
        settles = name in ("member.assignment_changed", "group.target_assignment_computed")
        if open_consumer is not None and settles and all(steady.get(m, True) for m in assigned):
            durations.append(t - open_consumer)
            open_consumer = None
        moves = name in MEMBER_ENDS or name in ("member.joined", "member.assignment_changed")
        if migrating and moves and assigned and not any(protocols.get(m) == "classic" for m in assigned):
            migrating = False
    first = evs[0]["ts"] if evs else None
    last = evs[-1]["ts"] if evs else None
    lo, hi = window if window is not None else (first or 0.0, last or 0.0)
    hours = max(hi - lo, 1.0) / 3600.0

    def per(p: _Phase) -> float | None:
        return p.unowned / p.changes if p.changes else None

    return {
        "cluster": cluster,
        "group": group,
        "first_ts": first,
        "last_ts": last,
        "hours": hours,
        "rebalances": rebalances,
        "rebalances_per_hour": rebalances / hours,
        "stable_rebalances": len(durations),
        "mean_time_to_stable_s": sum(durations) / len(durations) if durations else None,
        "max_time_to_stable_s": max(durations) if durations else None,
        "converted_at": converted_at,
        "conversion": conversion,
        "changes_before": before.changes,
        "unowned_ps_before": before.unowned,
        "unowned_ps_per_change_before": per(before),
        "changes_after": after.changes,
        "unowned_ps_after": after.unowned,
        "unowned_ps_per_change_after": per(after),
        "migration_steps": migration.changes,
        "unowned_ps_migration": migration.unowned,
        "unowned_ps_per_step": per(migration),
        "conversion_refusals": refusals,
        # the group's last event deleted it (DeleteGroups, or expired with no members and no
        # offsets): its history stays here, but it is no group of the fleet any more
        "deleted": bool(evs) and evs[-1]["event"] == "group.deleted",
    }


def events_of(lines: Iterable[str], cluster: str) -> list[dict[str, Any]]:
    out = []
    for i, line in enumerate(lines):
        e = parse_event(line, cluster, i)
        if e is not None:
            out.append(e)
    return out
