"""Active-task assignment for a streams group, sticky and balanced (after Kafka 4.4's
`streams/assignor/StickyTaskAssignor`, active tasks only).

Kafka balances tasks over processes (a process = one Kafka Streams instance, which may run
several members, one per stream thread) and then over the members of each process, keeping
each task where it was. This does the same in two passes:

1. every process gets a quota proportional to its number of members (the remainder to the
   processes with the most members, then by process id); a task stays with the member that
   had it (in its target assignment) while that member's process is under quota and the
   member under its own share;
2. each remaining task goes to the least-loaded process, to its least-loaded member (ties by
   id, so the result is a function of the input).

Not yet: standby tasks (`group.streams.num.standby.replicas` > 0), warm-up tasks, lag- and
rack-awareness (docs/streams-groups.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.streams.group import Tasks


def assign_active(
    tasks: Mapping[str, int], members: Mapping[str, str], previous: Mapping[str, Tasks]
) -> dict[str, Tasks]:
    """`tasks`: subtopology id -> number of tasks; `members`: member id -> process id;
    `previous`: member id -> the tasks it had (its target assignment). Returns member id ->
    tasks, every member present (possibly with none)."""
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    if not members:
        return {}
    all_tasks = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    processes: dict[str, list[str]] = {}
    for mid in sorted(members):
        processes.setdefault(members[mid], []).append(mid)
    total_members = len(members)
    n = len(all_tasks)
    base = {p: n * len(ms) // total_members for p, ms in processes.items()}
    left = n - sum(base.values())
    for p in sorted(processes, key=lambda p: (-len(processes[p]), p)):
        if left <= 0:
            break
        base[p] += 1
        left -= 1
    member_share = {
        mid: -(-base[p] // len(ms)) for p, ms in processes.items() for mid in ms
    }  # ceil: a member may keep up to its process's share split evenly, rounded up
    load_p = dict.fromkeys(processes, 0)
    load_m = dict.fromkeys(members, 0)
    taken: set[tuple[str, int]] = set()
    valid = set(all_tasks)
    for mid in sorted(members):
        p = members[mid]
        for s, parts in sorted(previous.get(mid, {}).items()):
            for part in sorted(parts):
                t = (s, part)
                if t in valid and t not in taken and load_p[p] < base[p] and load_m[mid] < member_share[mid]:
                    out[mid].setdefault(s, set()).add(part)
                    taken.add(t)
                    load_p[p] += 1
                    load_m[mid] += 1
    for t in all_tasks:
        if t in taken:
            continue
        p = min(processes, key=lambda q: (load_p[q] - base[q], load_p[q], q))
        mid = min(processes[p], key=lambda m: (load_m[m], m))
        out[mid].setdefault(t[0], set()).add(t[1])
        load_p[p] += 1
        load_m[mid] += 1
    return {mid: {s: frozenset(ps) for s, ps in subs.items() if ps} for mid, subs in out.items()}
