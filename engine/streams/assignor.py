"""Task assignment for a streams group, after Kafka 4.4's `streams/assignor/StickyTaskAssignor`:
active tasks, then standby replicas of the tasks that have state.

Kafka balances tasks over processes (a process = one Kafka Streams instance, which may run
several members, one per stream thread) and over the members of each process, keeping each task
where it was. A process's load is its task count (active and standby) over its number of
members. Two per-member quotas steer the sticky passes: the active quota (active tasks over
members, rounded up) and the total quota (active tasks plus standby replicas over members,
rounded up); each is recomputed over the members still under it whenever one reaches it.

Active tasks, in Kafka's order:

1. tasks ordered by partition, then subtopology (so that a member keeps the same partitions of
   every subtopology, as a range assignment pairs them): a task stays with the member that had
   it while that member is under the active quota;
2. a task still unplaced goes to a member that had it as a standby (the least loaded of them),
   if under the active quota: its state is already there;
3. the rest, ordered by subtopology, then partition: each goes to the process with the least
   load, to its member with the fewest tasks.

Standby tasks (when `num.standby.replicas` > 0; only tasks of subtopologies with state stores,
Kafka's `isStateful`: a subtopology with a changelog topic), ordered by partition then
subtopology, both descending, each wanted `num.standby.replicas` times:

4. a replica goes to the member that had the task active (if it lost it) and then to the members
   that had it as a standby, each only if its process holds no copy of the task yet and the
   member is under the total quota;
5. the replicas left, ordered by subtopology then partition, both descending: each to the least
   loaded process that holds no copy of the task, to its member with the fewest tasks; when
   every process already holds one, the replica is dropped (Kafka logs "not enough available
   capacity").

So a standby is never on the process that runs the task (hence never on the same member), never
twice on one process, and stays where it was while the balance allows.

"Had it as a standby" (passes 2 and 4) means, as in Kafka 4.4: the members holding the task as a
standby now, the most caught-up first by the changelog offset sum they report (TaskOffsets;
none reported counts as 0), then the members that only report offsets for it (state left on
their disk, e.g. an instance restarted under a new member id), again the most caught-up first.

Ties are Kafka's own (issue 31; checked against Kafka 4.4.0's class run from its jar:
tests/test_bench_streams_assignor.py, and once by hand on 9,500 random inputs with current and
standby tasks and offsets). Standby candidates of equal rank keep the order of Kafka's hash map
of members (`java_hash_order` of the member ids, as a Java `HashMap` iterates them). Equal
process loads come out of Kafka's `PriorityQueue` of processes in its heap order, the queue
filled in the iteration order of `processIdToState` (a `HashMap` sized by the member count and
filled by `computeIfAbsent`, which puts a new key first in its bucket); equal member counts
within a process come out of the process's `membersByLoad` queue, filled from its
`memberToTaskCounts` `HashMap` on the first least-loaded placement and dropped whenever a task
is placed on a named member. So four processes joining a two-partition word count one after
another get 0_1, 1_1 and 1_0 in the order Kafka gives them, not by process id. Within one hash
bucket the members are taken in the order they are passed (Kafka's: the group's member map).

With two processes, a word count's two subtopologies of four tasks each are spread 0_0, 0_1,
1_0, 1_1 and 0_2, 0_3, 1_2, 1_3, as Kafka 4.4 spreads them (e2e/test_streams_differential.py).

Kafka 4.4 produces no warm-up tasks: its refinement step after the assignor (`AssignmentRefiner`)
returns the assignment unchanged. Rack-aware standby placement (client tags) is not built.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from engine.streams.group import Tasks
from engine.streams.topology import java_hash_order

Task = tuple[str, int]
# `give(member id, task, active)`: places a task and updates the quotas.
_Give = Callable[[str, Task, bool], None]


def _quota(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


@dataclass(slots=True)
class StreamsAssignment:
    """member id -> active tasks, and member id -> standby tasks (every member present)."""

    active: dict[str, Tasks] = field(default_factory=dict)
    standby: dict[str, Tasks] = field(default_factory=dict)


@dataclass(slots=True)
class _Quota:
    """A per-member quota recomputed over the members still under it (Kafka's
    `maybeUpdate...TasksPerMember`)."""

    tasks: int
    members: int
    value: int = 0

    def __post_init__(self) -> None:
        self.value = _quota(self.tasks, self.members)

    def reached(self, count: int) -> None:
        if count == self.value:
            self.members -= 1
            self.tasks -= count
            self.value = _quota(self.tasks, self.members)


class _JavaPriorityQueue:
    """A `java.util.PriorityQueue` whose comparator is `key` (read at each comparison, as Kafka's
    `comparingDouble(ProcessState::load)` reads the process's load): the same binary heap, the
    same `siftUp` on `add` and `siftDown` on `poll`, so that equal keys come out in Java's
    order, which is not insertion order. An element's key changes only while it is out of the
    queue (Kafka polls a process, gives it a task, adds it back)."""

    def __init__(self, key: Callable[[str], float]) -> None:
        self.key = key
        self.heap: list[str] = []

    def add(self, item: str) -> None:
        heap, key = self.heap, self.key
        heap.append(item)
        k, x = len(heap) - 1, key(item)
        while k > 0:
            parent = (k - 1) >> 1
            if x >= key(heap[parent]):
                break
            heap[k] = heap[parent]
            k = parent
        heap[k] = item

    def poll(self) -> str | None:
        heap, key = self.heap, self.key
        if not heap:
            return None
        first, last = heap[0], heap.pop()
        n = len(heap)
        if n:
            k, x, half = 0, key(last), n >> 1
            while k < half:
                child = 2 * k + 1
                if child + 1 < n and key(heap[child]) > key(heap[child + 1]):
                    child += 1
                if x <= key(heap[child]):
                    break
                heap[k] = heap[child]
                k = child
            heap[k] = last
        return first


class _Placement:
    """The assignment being built: per member its tasks, per process the tasks it holds.

    Ties are Kafka's: equally loaded processes come out of its `PriorityQueue` of
    `ProcessState`s (filled from `processIdToState`, a `HashMap` sized by the member count and
    filled by `computeIfAbsent`), and equally loaded members of a process out of the process's
    `membersByLoad` queue (filled from its `memberToTaskCounts` `HashMap`, built on the first
    least-loaded placement and dropped whenever a task is placed on a named member)."""

    def __init__(self, members: Mapping[str, str], total_active: int, total: int) -> None:
        self.process_of = dict(members)
        # Kafka's `groupSpec.memberIds()`: the group's member ids in its hash map's order.
        order = java_hash_order(members)
        self.processes: dict[str, list[str]] = {}
        for mid in order:
            self.processes.setdefault(members[mid], []).append(mid)
        self.process_order = java_hash_order(
            [members[m] for m in order], len(members), compute_if_absent=True
        )
        for p, mids in self.processes.items():
            self.processes[p] = java_hash_order(mids)
        self.count = dict.fromkeys(members, 0)
        self.process_count = dict.fromkeys(self.processes, 0)
        self.held: dict[str, set[Task]] = {p: set() for p in self.processes}
        # A process's `membersByLoad` (None until a least-loaded placement builds it).
        self.member_queue: dict[str, _JavaPriorityQueue | None] = dict.fromkeys(self.processes)
        self.active: dict[str, dict[str, set[int]]] = {m: {} for m in members}
        self.standby: dict[str, dict[str, set[int]]] = {m: {} for m in members}
        self.active_quota = _Quota(total_active, len(members))
        self.total_quota = _Quota(total, len(members))

    def load(self, process: str) -> float:
        return self.process_count[process] / len(self.processes[process])

    def _add(self, mid: str, task: Task, active: bool) -> int:
        into = self.active if active else self.standby
        into[mid].setdefault(task[0], set()).add(task[1])
        process = self.process_of[mid]
        self.held[process].add(task)
        self.count[mid] += 1
        self.process_count[process] += 1
        return self.count[mid]

    def give(self, mid: str, task: Task, active: bool) -> int:
        """Kafka's `ProcessState.addTask`: the member's new task count."""
        self.member_queue[self.process_of[mid]] = None
        return self._add(mid, task, active)

    def give_least_loaded(self, process: str, task: Task, active: bool) -> int:
        """Kafka's `ProcessState.addTaskToLeastLoadedMember`: the member's new task count."""
        mids = self.processes[process]
        if len(mids) == 1:
            return self._add(mids[0], task, active)
        queue = self.member_queue[process]
        if queue is None:
            queue = self.member_queue[process] = _JavaPriorityQueue(self.count.__getitem__)
            for mid in mids:
                queue.add(mid)
        least = queue.poll()
        assert least is not None  # the process has members
        count = self._add(least, task, active)
        queue.add(least)
        return count

    def process_queue(self) -> _JavaPriorityQueue:
        """Kafka's `new PriorityQueue<>(comparingDouble(ProcessState::load))` with
        `addAll(processIdToState.values())`."""
        queue = _JavaPriorityQueue(self.load)
        for p in self.process_order:
            queue.add(p)
        return queue

    def holds(self, mid: str, task: Task) -> bool:
        """Whether `mid`'s process already has a copy of the task (active or standby)."""
        return task in self.held[self.process_of[mid]]

    def least_loaded_previous(self, candidates: list[str], task: Task | None) -> str | None:
        """Kafka's `findPrevMemberWithLeastLoad`: the first candidate, replaced by a later one only
        if both its process load and its own task count are lower; with `task`, candidates whose
        process already has a copy of it are skipped."""
        best: str | None = None
        best_load, best_count = 0.0, 0
        for mid in candidates:
            if task is not None and self.holds(mid, task):
                continue
            load, count = self.load(self.process_of[mid]), self.count[mid]
            if best is None or (load < best_load and count < best_count):
                best, best_load, best_count = mid, load, count
        return best


def assign(
    tasks: Mapping[str, int],
    stateful: Collection[str],
    members: Mapping[str, str],
    previous_active: Mapping[str, Tasks],
    previous_standby: Mapping[str, Tasks],
    standby_replicas: int,
    task_offsets: Mapping[str, Mapping[str, Mapping[int, int]]] | None = None,
) -> StreamsAssignment:
    """`tasks`: subtopology id -> number of tasks; `stateful`: the subtopologies with state;
    `members`: member id -> process id; `previous_*`: member id -> the tasks it holds now (Kafka
    4.4 passes the members' current assignment, not the last target); `standby_replicas`:
    `num.standby.replicas`; `task_offsets`: member id -> subtopology id -> partition -> the
    changelog offset sum the member reported."""
    if not members:
        return StreamsAssignment()
    total_active = sum(tasks.values())
    total = total_active + sum(n * standby_replicas for s, n in tasks.items() if s in stateful)
    plan = _Placement(members, total_active, total)

    def quotas(count: int, active: bool) -> None:
        if active:
            plan.active_quota.reached(count)
        plan.total_quota.reached(count)

    def give(mid: str, task: Task, active: bool) -> None:
        quotas(plan.give(mid, task, active), active)

    active_owner: dict[Task, str] = {}
    for mid, had in sorted(previous_active.items()):
        if mid in members:
            for s, parts in had.items():
                for p in parts:
                    active_owner[(s, p)] = mid
    standby_owners = _standby_candidates(members, previous_standby, task_offsets or {})

    all_tasks = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    # 1. active tasks back to their previous owner.
    left: list[Task] = []
    for task in sorted(all_tasks, key=lambda t: (t[1], t[0])):
        owner = active_owner.get(task)
        if owner is not None and plan.count[owner] < plan.active_quota.value:
            give(owner, task, True)
        else:
            left.append(task)
    # 2. active tasks to a member that had them as a standby.
    rest: list[Task] = []
    for task in left:
        found = plan.least_loaded_previous(standby_owners.get(task, []), None)
        if found is not None and plan.count[found] < plan.active_quota.value:
            give(found, task, True)
        else:
            rest.append(task)
    # 3. the rest to the least loaded process and member.
    queue = plan.process_queue()
    for task in sorted(rest):
        process = queue.poll()
        assert process is not None  # there are members, so processes
        quotas(plan.give_least_loaded(process, task, True), True)
        queue.add(process)

    if standby_replicas > 0:
        _assign_standby(
            plan, give, quotas, all_tasks, stateful, standby_replicas, active_owner, standby_owners
        )

    def frozen(subs: dict[str, set[int]]) -> Tasks:
        return {s: frozenset(ps) for s, ps in subs.items() if ps}

    return StreamsAssignment(
        {m: frozen(t) for m, t in plan.active.items()}, {m: frozen(t) for m, t in plan.standby.items()}
    )


def _standby_candidates(
    members: Mapping[str, str],
    previous_standby: Mapping[str, Tasks],
    task_offsets: Mapping[str, Mapping[str, Mapping[int, int]]],
) -> dict[Task, list[str]]:
    """Per task, the members whose state for it is nearest: current standby holders first, then
    members that only report offsets for it, each group by offset sum, highest first (Kafka
    4.4 `collectStandbyCandidates` / `rankStandbyCandidates`)."""
    ranked: dict[Task, list[tuple[int, int, str]]] = {}
    # Kafka walks the group's members in its hash map's order; equal ranks keep that order.
    for mid in java_hash_order(members):
        standby = previous_standby.get(mid, {})
        offsets = task_offsets.get(mid, {})
        for s, parts in standby.items():
            for p in parts:
                ranked.setdefault((s, p), []).append((0, -offsets.get(s, {}).get(p, 0), mid))
        for s, by_partition in offsets.items():
            for p, offset in by_partition.items():
                if p not in standby.get(s, ()):
                    ranked.setdefault((s, p), []).append((1, -offset, mid))
    # sorted() is stable
    return {task: [mid for _, _, mid in sorted(c, key=lambda x: x[:2])] for task, c in ranked.items()}


def _assign_standby(
    plan: _Placement,
    give: _Give,
    quotas: Callable[[int, bool], None],
    all_tasks: list[Task],
    stateful: Collection[str],
    replicas: int,
    active_owner: Mapping[Task, str],
    standby_owners: Mapping[Task, list[str]],
) -> None:
    wanted = sorted((t for t in all_tasks if t[0] in stateful), key=lambda t: (t[1], t[0]), reverse=True)
    later: list[tuple[Task, int]] = []
    # 4. sticky replicas: the previous active owner, then previous standby owners.
    # (`copy`, not `placed`: one name for an int here and a bool below made mypyc's compiled build
    # raise "bool object expected; got int", the dispatch.py `except` variable's kind of bug)
    for task in wanted:
        for copy in range(replicas):
            mid = active_owner.get(task)
            if mid is not None and not plan.holds(mid, task) and plan.count[mid] < plan.total_quota.value:
                give(mid, task, False)
                continue
            found = plan.least_loaded_previous(standby_owners.get(task, []), task)
            if found is not None and plan.count[found] < plan.total_quota.value:
                give(found, task, False)
                continue
            later.append((task, replicas - copy))
            break
    # 5. the rest to the least loaded process without a copy.
    queue = plan.process_queue()
    for task, missing in sorted(later, key=lambda x: x[0], reverse=True):
        for _ in range(missing):
            # Kafka's `assignStandbyToMemberWithLeastLoad`: poll until a process without a copy
            # (recursively), then add the polled ones back, the last polled first.
            polled: list[str] = []
            placed = False
            while (process := queue.poll()) is not None:
                polled.append(process)
                if task not in plan.held[process]:
                    quotas(plan.give_least_loaded(process, task, False), False)
                    placed = True
                    break
            for process in reversed(polled):
                queue.add(process)
            if not placed:
                break  # every process holds a copy: Kafka drops the replica too


def assign_active(
    tasks: Mapping[str, int], members: Mapping[str, str], previous: Mapping[str, Tasks]
) -> dict[str, Tasks]:
    """Active tasks only (no standby replicas): member id -> tasks."""
    return assign(tasks, (), members, previous, {}, 0).active
