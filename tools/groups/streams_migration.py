"""`groupshift groups migration GROUP` of a streams group (KIP-1071): the migration view with
tasks instead of partitions.

A streams group's members own tasks (subtopology id, partition; written `0_1` as Kafka Streams
writes task ids). One poll (StreamsGroupDescribe, `tools.groups.streams_group`) reports:

- the group's state, group, target-assignment and topology epochs, and its members by protocol:
  `streams` (StreamsGroupHeartbeat) or `classic` (a Kafka Streams 3.x/4.x instance still on
  JoinGroup/SyncGroup, which a streams group describes with `is_classic`);
- per member its process, epoch, active tasks, standby and warm-up tasks, the active tasks
  *pending revocation* (owned but no longer in its target: KIP-1071 revokes before it assigns,
  so no task is active on two members) and those *awaiting* (in its target, still held by
  another member). Across `--watch` polls each pending task's age is tracked from the poll that
  first saw it, and a task pending longer than `--stuck-after` names its member;
- the next step. A streams group converts back to a classic group only when it is empty (Kafka
  4.4's offline migration, which groupshift serves the same way): the view says so, and that an
  empty classic group becomes a streams group when the first `group.protocol=streams` instance
  joins.

The consumer-group view (`tools.groups.migration`) hands a group over here when the coordinator
describes it as a streams group; `--watch`, `--json` and the change story work the same.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tools.groups.output import Style, table
from tools.groups.streams_group import StreamsGroup, StreamsMember, TaskIds

Task = tuple[str, int]  # (subtopology id, partition)


def task_name(task: Task) -> str:
    return f"{task[0]}_{task[1]}"


def _flat(tasks: TaskIds) -> set[Task]:
    return {(s, p) for s, ps in tasks.items() for p in ps}


def _sort_key(task: Task) -> tuple[int, str, int]:
    s, p = task
    return (int(s), "", p) if s.isdigit() else (1 << 31, s, p)


def task_list(tasks: set[Task]) -> str:
    """`0_0,0_1,1_3`: Kafka Streams' task ids, sorted; "" for none."""
    return ",".join(task_name(t) for t in sorted(tasks, key=_sort_key))


def pending_tasks(m: StreamsMember) -> set[Task]:
    """Active tasks the member still runs that its target no longer has."""
    return _flat(m.assignment.active) - _flat(m.target.active)


@dataclass
class StreamsTracker:
    """What persists across polls: when each (member, task) pending revocation was first seen,
    and the previous poll (for the change story)."""

    first_pending: dict[tuple[str, Task], float] = field(default_factory=dict)
    previous: StreamsGroup | None = None

    def observe(self, group: StreamsGroup, at: float) -> None:
        now = {(m.member_id, t) for m in group.members for t in pending_tasks(m)}
        for key in now:
            self.first_pending.setdefault(key, at)
        for key in list(self.first_pending):
            if key not in now:
                del self.first_pending[key]


def report(group: StreamsGroup, at: float, tracker: StreamsTracker, stuck_after: float) -> dict[str, Any]:
    """The view of one poll of a streams group."""
    owners = {t: m.member_id for m in group.members for t in _flat(m.assignment.active)}
    by_protocol = Counter(m.protocol for m in group.members)
    members = []
    pending_rows = []
    for m in sorted(group.members, key=lambda m: (m.protocol, m.process_id, m.member_id)):
        pending = pending_tasks(m)
        awaiting = _flat(m.target.active) - _flat(m.assignment.active)
        members.append(
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "process_id": m.process_id,
                "client_id": m.client_id,
                "host": m.host,
                "protocol": m.protocol,
                "member_epoch": m.member_epoch,
                "active": sorted((task_name(t) for t in _flat(m.assignment.active)), key=_name_key),
                "standby": sorted((task_name(t) for t in _flat(m.assignment.standby)), key=_name_key),
                "warmup": sorted((task_name(t) for t in _flat(m.assignment.warmup)), key=_name_key),
                "target_active": sorted((task_name(t) for t in _flat(m.target.active)), key=_name_key),
                "pending_revocation": sorted((task_name(t) for t in pending), key=_name_key),
                "awaiting": [
                    {"task": task_name(t), "held_by": owners.get(t)} for t in sorted(awaiting, key=_sort_key)
                ],
            }
        )
        for t in sorted(pending, key=_sort_key):
            since = tracker.first_pending.get((m.member_id, t), at)
            pending_rows.append(
                {
                    "task": task_name(t),
                    "member_id": m.member_id,
                    "process_id": m.process_id,
                    "protocol": m.protocol,
                    "pending_for_s": round(at - since, 1),
                }
            )
    if not group.members:
        phase = "empty"
    elif by_protocol.get("classic"):
        phase = "migrating"
    else:
        phase = "streams"
    return {
        "group": group.group_id,
        "exists": True,
        "observed_at": at,
        "phase": phase,
        "type": "streams",
        "state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "topology_epoch": group.topology_epoch,
        "members_by_protocol": dict(sorted(by_protocol.items())),
        "members": members,
        "pending_revocation": pending_rows,
        "conversion": {
            "direction": None,
            "allowed": not group.members,
            "refusals": [],
            "unknown": [],
            "policy": None,
            "note": "a streams group becomes a classic group only once empty (offline migration)",
        },
        "next_step": next_step(group, phase, by_protocol, pending_rows, stuck_after),
    }


def _name_key(name: str) -> tuple[int, str, int]:
    s, _, p = name.rpartition("_")
    return _sort_key((s, int(p)))


def next_step(
    group: StreamsGroup,
    phase: str,
    by_protocol: Counter[str],
    pending: list[dict[str, Any]],
    stuck_after: float,
) -> str:
    if phase == "empty":
        return (
            "The streams group is empty: starting its instances with group.protocol=streams keeps it a "
            "streams group; a classic (group.protocol=classic) instance makes it a classic group again, "
            "its committed offsets kept (offline migration, as Kafka 4.4 does it)."
        )
    stuck = [p for p in pending if p["pending_for_s"] >= stuck_after]
    if stuck:
        p = max(stuck, key=lambda p: p["pending_for_s"])
        return (
            f"Member {p['member_id']} (process {p['process_id']}) has kept task {p['task']} for "
            f"{p['pending_for_s']}s after its revocation: check that its stream thread is running "
            "(max.poll.interval.ms), or restart the instance."
        )
    if pending:
        who = {p["member_id"] for p in pending}
        return (
            f"Wait: {len(pending)} task(s) pending revocation from {len(who)} member(s); each "
            "gives them up on its next heartbeat, and only then do they move (revoke before assign)."
        )
    if phase == "migrating":
        return (
            f"{by_protocol['classic']} member(s) still use the classic protocol: restart them with "
            "group.protocol=streams, one at a time."
        )
    if group.state not in ("Stable", "Empty"):
        return f"Wait for the group to reconcile (state {group.state})."
    return "Done: every member uses the streams protocol and the group is stable."


def changes(prev: StreamsGroup | None, cur: StreamsGroup) -> list[str]:
    """What happened between two polls of a streams group, in words."""
    if prev is None:
        return []
    out: list[str] = []
    if prev.state != cur.state:
        out.append(f"state {prev.state} -> {cur.state}")
    if prev.group_epoch != cur.group_epoch:
        out.append(f"group epoch {prev.group_epoch} -> {cur.group_epoch}")
    before = {m.member_id: m for m in prev.members}
    after = {m.member_id: m for m in cur.members}
    for mid in sorted(after.keys() - before.keys()):
        out.append(f"member {mid} joined ({after[mid].protocol}, process {after[mid].process_id})")
    for mid in sorted(before.keys() - after.keys()):
        out.append(f"member {mid} left ({before[mid].protocol}, process {before[mid].process_id})")
    o1 = {t: m.member_id for m in prev.members for t in _flat(m.assignment.active)}
    o2 = {t: m.member_id for m in cur.members for t in _flat(m.assignment.active)}
    for t in sorted(o1.keys() | o2.keys(), key=_sort_key):
        if o1.get(t) != o2.get(t):
            out.append(f"task {task_name(t)}: {o1.get(t) or 'unowned'} -> {o2.get(t) or 'unowned'}")
    return out


def render(rep: dict[str, Any], style: Style) -> str:
    lines = [
        style.bold(f"Group {rep['group']}")
        + f": type streams, state {rep['state']}, phase {rep['phase']}, group epoch {rep['group_epoch']}, "
        + f"target assignment epoch {rep['assignment_epoch']}, topology epoch "
        + f"{rep['topology_epoch'] if rep['topology_epoch'] is not None else '-'}",
        "Members by protocol: "
        + (", ".join(f"{p} {n}" for p, n in rep["members_by_protocol"].items()) or "none"),
    ]
    if rep["members"]:
        rows = [
            [
                m["member_id"],
                m["process_id"],
                m["protocol"],
                m["member_epoch"],
                ",".join(m["active"]) or None,
                ",".join(m["standby"]) or None,
                ",".join(m["warmup"]) or None,
                ",".join(m["pending_revocation"]) or None,
                ",".join(a["task"] for a in m["awaiting"]) or None,
            ]
            for m in rep["members"]
        ]
        headers = [
            "MEMBER",
            "PROCESS",
            "PROTOCOL",
            "EPOCH",
            "ACTIVE",
            "STANDBY",
            "WARMUP",
            "PENDING-REVOCATION",
            "AWAITING",
        ]
        lines.append(table(headers, rows, style, {7: lambda v: v != "-"}))
    pending: dict[tuple[str, float], list[str]] = {}
    for p in rep["pending_revocation"]:
        pending.setdefault((p["member_id"], p["pending_for_s"]), []).append(p["task"])
    for (member, age), names in pending.items():
        lines.append(style.warn(f"pending revocation: tasks {','.join(names)} on {member} for {age}s"))
    lines.append(style.bold("Next step: ") + rep["next_step"])
    return "\n".join(lines) + "\n"


def poll(
    group: StreamsGroup, tracker: StreamsTracker, stuck_after: float
) -> tuple[dict[str, Any], list[str]]:
    """One poll: the report and what changed since the previous poll of this run."""
    at = time.time()
    tracker.observe(group, at)
    rep = report(group, at, tracker, stuck_after)
    story = changes(tracker.previous, group)
    tracker.previous = group
    return rep, story
