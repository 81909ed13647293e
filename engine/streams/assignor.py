"""Active-task assignment for a streams group, after Kafka 4.4's
`streams/assignor/StickyTaskAssignor` (active tasks only).

Kafka balances tasks over processes (a process = one Kafka Streams instance, which may run
several members, one per stream thread) and over the members of each process, keeping each task
where it was. The passes, in Kafka's order:

1. stickiness: tasks ordered by partition, then subtopology (so that a member keeps the same
   partitions of every subtopology, as a range assignment pairs them); a task stays with the
   member that had it while that member is under the per-member quota. The quota is the number
   of tasks over the number of members, rounded up, and is recomputed over the members still
   under it each time one reaches it;
2. the rest, ordered by subtopology, then partition (a range-like first assignment): each goes
   to the process with the least load (tasks per member), to its member with the fewest tasks.
   Ties go to the smaller process and member ids, so that the result is a function of the input
   (Kafka's priority queue breaks them by its heap order).

With two processes, a word count's two subtopologies of four tasks each are spread 0_0, 0_1,
1_0, 1_1 and 0_2, 0_3, 1_2, 1_3, as Kafka 4.4 spreads them (e2e/test_streams_differential.py).

Not yet: standby tasks (`group.streams.num.standby.replicas` > 0), warm-up tasks, lag- and
rack-awareness (docs/streams-groups.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.streams.group import Tasks


def _quota(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


def assign_active(
    tasks: Mapping[str, int], members: Mapping[str, str], previous: Mapping[str, Tasks]
) -> dict[str, Tasks]:
    """`tasks`: subtopology id -> number of tasks; `members`: member id -> process id;
    `previous`: member id -> the tasks it had. Returns member id -> tasks, every member present
    (possibly with none)."""
    if not members:
        return {}
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    processes: dict[str, list[str]] = {}
    for mid in sorted(members):
        processes.setdefault(members[mid], []).append(mid)
    load = dict.fromkeys(members, 0)
    all_tasks = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    # The per-member quota, and the tasks and members it is computed over.
    left_tasks, left_members = len(all_tasks), len(members)
    quota = _quota(left_tasks, left_members)

    def give(mid: str, task: tuple[str, int]) -> None:
        nonlocal left_tasks, left_members, quota
        out[mid].setdefault(task[0], set()).add(task[1])
        load[mid] += 1
        if load[mid] == quota:
            left_members -= 1
            left_tasks -= load[mid]
            quota = _quota(left_tasks, left_members)

    owner = {
        (s, p): mid
        for mid, had in sorted(previous.items())
        if mid in members
        for s, parts in had.items()
        for p in parts
    }
    rest = []
    for task in sorted(all_tasks, key=lambda t: (t[1], t[0])):
        had_it = owner.get(task)
        if had_it is not None and load[had_it] < quota:
            give(had_it, task)
        else:
            rest.append(task)

    def process_load(p: str) -> float:
        return sum(load[m] for m in processes[p]) / len(processes[p])

    for task in sorted(rest):
        p = min(processes, key=lambda q: (process_load(q), q))
        give(min(processes[p], key=lambda m: (load[m], m)), task)
    return {mid: {s: frozenset(ps) for s, ps in subs.items() if ps} for mid, subs in out.items()}
