"""Streams-group task assignment (KIP-1071): groupshift's assignor beside Apache Kafka 4.4's own.

Issue 31 asks for the task assignment time of 1,000 members x 10,000 tasks with standby replicas
against Kafka's assignor. groupshift's `engine.streams.assignor.assign` (after Kafka 4.4's
`StickyTaskAssignor`) and Kafka's `StickyTaskAssignor` itself (the broker's
`kafka-group-coordinator` jar, run by `bench.kafka_assignors.KafkaTaskAssignor` in one JVM with
Kafka's start-script flags) get the same inputs in the same run:

* members `member<i>` on process `process<i // members per process>` (a Kafka Streams instance
  with that many stream threads), no client tags, no task offsets;
* `subtopologies` subtopologies "0".."n-1" of `partitions` tasks each, every one stateful (a
  changelog topic), so each task wants `standby` replicas;
* fresh: nobody holds a task; sticky: the assignor's own fresh result over all members but the
  last is what the members hold, and the last member joins empty (each side starts from its own
  previous result, as `bench.assignors`' incremental rows do).

Both results are checked before a row is printed, so that the timing compares like with like:
every task active exactly once, on a member of the group; no standby on a process that runs the
task or holds another copy of it; every task with min(standby, processes - 1) standby replicas.
A row also shows the spread of active tasks per member and, for sticky rows, how many active
tasks changed member. Timing as `bench.assignors`: inputs built outside the clock, warm-up runs,
then 5 to 15 timed runs within the budget; medians of wall clock and CPU time; which side runs
first alternates row by row. `ratio`: groupshift's median over Kafka's (below 1: groupshift is
faster).

    python -m bench.streams_assignor [--json] [--quick] [--kafka VERSION | --no-kafka]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass

from bench.assignors import load, timed_runs
from bench.kafka_assignors import KafkaAssignorsUnavailable, KafkaTaskAssignment, KafkaTaskAssignor
from engine.streams.assignor import StreamsAssignment, assign

MEMBERS_PER_PROCESS = 4
# member id -> (active tasks, standby tasks), each subtopology id -> partitions: both sides'
# results in one shape for the checks.
Placed = dict[str, tuple[dict[str, frozenset[int]], dict[str, frozenset[int]]]]


@dataclass(frozen=True)
class Case:
    members: int
    subtopologies: int
    partitions: int  # per subtopology
    standby: int  # num.standby.replicas
    sticky: bool
    members_per_process: int = MEMBERS_PER_PROCESS

    @property
    def tasks(self) -> int:
        return self.subtopologies * self.partitions

    def label(self) -> str:
        kind = "sticky" if self.sticky else "fresh"
        return f"{self.members:>7} {self.tasks:>6} {self.standby:>7} {kind:<6}"


def grid(quick: bool) -> Iterator[Case]:
    """100 members x 1,000 tasks and the issue's 1,000 members x 10,000 tasks (10 subtopologies),
    0, 1 and 2 standby replicas, fresh and sticky."""
    sizes = ((100, 100),) if quick else ((100, 100), (1_000, 1_000))
    for members, partitions in sizes:
        for standby in (0, 1, 2):
            for sticky in (False, True):
                yield Case(members, 10, partitions, standby, sticky)


# ----------------------------------------------------------------------------------- inputs


def build_members(count: int, per_process: int) -> dict[str, str]:
    """member id -> process id, as KafkaTaskAssignor.java builds them."""
    return {f"member{i}": f"process{i // per_process}" for i in range(count)}


@dataclass
class Inputs:
    tasks: dict[str, int]
    members: dict[str, str]
    previous: StreamsAssignment | None


def build_inputs(case: Case) -> Inputs:
    tasks = {str(s): case.partitions for s in range(case.subtopologies)}
    previous = None
    if case.sticky:
        before = build_members(case.members - 1, case.members_per_process)
        previous = assign(tasks, tasks.keys(), before, {}, {}, case.standby)
    return Inputs(tasks, build_members(case.members, case.members_per_process), previous)


def run_groupshift(case: Case, inputs: Inputs) -> StreamsAssignment:
    prev = inputs.previous
    return assign(
        inputs.tasks,
        inputs.tasks.keys(),
        inputs.members,
        prev.active if prev is not None else {},
        prev.standby if prev is not None else {},
        case.standby,
    )


# ----------------------------------------------------------------------------------- checks


def placed_from_groupshift(result: StreamsAssignment) -> Placed:
    members = set(result.active) | set(result.standby)
    return {
        m: (
            {s: frozenset(p) for s, p in result.active.get(m, {}).items() if p},
            {s: frozenset(p) for s, p in result.standby.get(m, {}).items() if p},
        )
        for m in members
    }


def placed_from_kafka(result: KafkaTaskAssignment) -> Placed:
    return {
        m: (
            {s: frozenset(p) for s, p in active.items() if p},
            {s: frozenset(p) for s, p in standby.items() if p},
        )
        for m, (active, standby) in result.items()
    }


def problems(case: Case, members: Mapping[str, str], placed: Placed) -> list[str]:
    """What makes `placed` an invalid assignment of `case` (empty: valid)."""
    out: list[str] = []
    strangers = set(placed) - set(members)
    if strangers:
        out.append(f"tasks given to {len(strangers)} non-members, e.g. {sorted(strangers)[0]}")
    active_on: dict[tuple[str, int], list[str]] = {}
    copies: dict[tuple[str, int], list[str]] = {}  # task -> the processes holding a copy
    for mid, (active, standby) in placed.items():
        process = members.get(mid, mid)
        for s, parts in active.items():
            for p in parts:
                active_on.setdefault((s, p), []).append(process)
                copies.setdefault((s, p), []).append(process)
        for s, parts in standby.items():
            for p in parts:
                copies.setdefault((s, p), []).append(process)
    every = {(str(s), p) for s in range(case.subtopologies) for p in range(case.partitions)}
    unknown = (set(active_on) | set(copies)) - every
    if unknown:
        out.append(f"{len(unknown)} tasks not in the topology, e.g. {sorted(unknown)[0]}")
    not_once = [t for t in every if len(active_on.get(t, [])) != 1]
    if not_once:
        t = sorted(not_once)[0]
        out.append(f"{len(not_once)} tasks not active exactly once, e.g. {t} on {active_on.get(t, [])}")
    doubled = [t for t, ps in copies.items() if len(ps) != len(set(ps))]
    if doubled:
        t = sorted(doubled)[0]
        out.append(f"{len(doubled)} tasks with two copies on one process, e.g. {t} on {copies[t]}")
    wanted = min(case.standby, len(set(members.values())) - 1)
    short = [t for t in every if len(copies.get(t, [])) - 1 != wanted]
    if short:
        t = sorted(short)[0]
        out.append(
            f"{len(short)} tasks without {wanted} standby replicas, e.g. {t}: {len(copies.get(t, [])) - 1}"
        )
    return out


def active_spread(members: Mapping[str, str], placed: Placed) -> tuple[int, int]:
    """The fewest and the most active tasks of a member."""
    counts = [sum(len(p) for p in placed.get(m, ({}, {}))[0].values()) for m in members]
    return min(counts), max(counts)


def moved(previous: Placed, now: Placed) -> int:
    """Active tasks whose member changed."""
    owner = {(s, p): m for m, (active, _) in previous.items() for s, ps in active.items() for p in ps}
    return sum(
        1 for m, (active, _) in now.items() for s, ps in active.items() for p in ps if owner[(s, p)] != m
    )


def check(case: Case, members: Mapping[str, str], placed: Placed, side: str) -> None:
    found = problems(case, members, placed)
    if found:
        raise RuntimeError(f"{side}'s assignment of {case} is invalid: " + "; ".join(found))


# ----------------------------------------------------------------------------------- timing


@dataclass
class Row:
    members: int
    tasks: int
    standby: int
    assignment: str  # fresh | sticky
    median_ms: float
    cpu_median_ms: float
    runs: int
    active_min: int
    active_max: int
    moved: int | None
    kafka_median_ms: float | None = None
    kafka_cpu_median_ms: float | None = None
    kafka_runs: int | None = None
    kafka_active_min: int | None = None
    kafka_active_max: int | None = None
    kafka_moved: int | None = None

    @property
    def versus_kafka(self) -> float | None:
        return None if not self.kafka_median_ms else self.median_ms / self.kafka_median_ms

    @property
    def cpu_versus_kafka(self) -> float | None:
        return None if not self.kafka_cpu_median_ms else self.cpu_median_ms / self.kafka_cpu_median_ms


def _kafka(
    kafka: KafkaTaskAssignor, case: Case, members: dict[str, str], budget_s: float
) -> dict[str, object]:
    run = kafka.measure(
        case.members,
        case.members_per_process,
        case.subtopologies,
        case.partitions,
        case.standby,
        case.sticky,
        budget_s,
    )
    placed = placed_from_kafka(run.assignment)
    check(case, members, placed, "Kafka")
    low, high = active_spread(members, placed)
    return {
        "kafka_median_ms": round(statistics.median(run.wall), 3),
        "kafka_cpu_median_ms": round(statistics.median(run.cpu), 3),
        "kafka_runs": len(run.wall),
        "kafka_active_min": low,
        "kafka_active_max": high,
        "kafka_moved": None if run.previous is None else moved(placed_from_kafka(run.previous), placed),
    }


def measure(
    case: Case, budget_s: float, kafka: KafkaTaskAssignor | None = None, kafka_first: bool = False
) -> Row:
    inputs = build_inputs(case)
    kafka_side = _kafka(kafka, case, inputs.members, budget_s) if kafka is not None and kafka_first else {}
    gc.collect()
    gc.freeze()
    try:
        wall, cpu = timed_runs(lambda: run_groupshift(case, inputs), budget_s)
    finally:
        gc.unfreeze()
    placed = placed_from_groupshift(run_groupshift(case, inputs))
    check(case, inputs.members, placed, "groupshift")
    low, high = active_spread(inputs.members, placed)
    if kafka is not None and not kafka_first:
        kafka_side = _kafka(kafka, case, inputs.members, budget_s)
    previous = None if inputs.previous is None else placed_from_groupshift(inputs.previous)
    return Row(
        case.members,
        case.tasks,
        case.standby,
        "sticky" if case.sticky else "fresh",
        round(statistics.median(wall), 3),
        round(statistics.median(cpu), 3),
        len(wall),
        low,
        high,
        None if previous is None else moved(previous, placed),
        **kafka_side,  # type: ignore[arg-type]
    )


# ----------------------------------------------------------------------------------- output

HEADER = f"{'members':>7} {'tasks':>6} {'standby':>7} {'run':<6} {'ms/op':>9} {'cpu ms':>9}" + (
    f" {'active':>7} {'moved':>6}"
)
KAFKA_HEADER = f" {'kafka ms':>9} {'kafka cpu':>9} {'active':>7} {'moved':>6} {'ratio':>6} {'cpu':>6}"


def _ratio(value: float | None) -> str:
    return f"{value:>6.2f}" if value is not None else f"{'-':>6}"


def row_line(row: Row) -> str:
    case = Case(row.members, 1, row.tasks, row.standby, row.assignment == "sticky")
    spread = f"{row.active_min}-{row.active_max}"
    line = f"{case.label()} {row.median_ms:>9.3f} {row.cpu_median_ms:>9.3f} {spread:>7} {row.moved!s:>6}"
    if row.kafka_median_ms is None or row.kafka_cpu_median_ms is None:
        return line
    kspread = f"{row.kafka_active_min}-{row.kafka_active_max}"
    return (
        f"{line} {row.kafka_median_ms:>9.3f} {row.kafka_cpu_median_ms:>9.3f} {kspread:>7}"
        f" {row.kafka_moved!s:>6}"
        f" {_ratio(row.versus_kafka)} {_ratio(row.cpu_versus_kafka)}"
    )


def row_json(row: Row) -> dict[str, object]:
    return {**asdict(row), "versus_kafka": row.versus_kafka, "cpu_versus_kafka": row.cpu_versus_kafka}


def run(cases: Sequence[Case], budget_s: float, kafka: KafkaTaskAssignor | None, as_json: bool) -> list[Row]:
    load_before = load()
    if not as_json:
        print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load_before}")
        print(
            f"{MEMBERS_PER_PROCESS} members per process; ms/op, cpu ms: medians; active: fewest-most active "
            "tasks of a member; moved: active tasks that changed member (sticky)"
        )
        if kafka is not None:
            print(
                f"kafka: Apache Kafka {kafka.version}'s StickyTaskAssignor, same inputs;"
                " ratio: groupshift / Kafka"
            )
        print(HEADER + (KAFKA_HEADER if kafka is not None else ""), flush=True)
    rows: list[Row] = []
    for i, case in enumerate(cases):
        row = measure(case, budget_s, kafka, kafka_first=i % 2 == 1)
        rows.append(row)
        if not as_json:
            print(row_line(row), flush=True)
    if as_json:
        report = {
            "benchmark": "streams_assignor",
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "load_average": {"before": load_before, "after": load()},
            "members_per_process": MEMBERS_PER_PROCESS,
            "kafka": kafka.version if kafka is not None else None,
            "rows": [row_json(r) for r in rows],
        }
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print(f"load average after: {load()}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.streams_assignor", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--quick", action="store_true", help="100 members x 1,000 tasks only, shorter budget")
    parser.add_argument(
        "--kafka",
        default="4.4.0",
        metavar="VERSION",
        help="the Apache Kafka release whose StickyTaskAssignor runs beside ours (default 4.4.0)",
    )
    parser.add_argument("--no-kafka", action="store_true", help="groupshift's assignor only")
    args = parser.parse_args(argv)
    budget = 0.3 if args.quick else 1.5
    kafka: KafkaTaskAssignor | None = None
    try:
        if not args.no_kafka:
            kafka = KafkaTaskAssignor(args.kafka)
        run(list(grid(args.quick)), budget, kafka, args.json)
    except KafkaAssignorsUnavailable as exc:
        print(f"bench.streams_assignor: {exc} (--no-kafka runs groupshift's alone)", file=sys.stderr)
        return 2
    finally:
        if kafka is not None:
            kafka.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
