"""Server assignors on Kafka's `ServerSideAssignorBenchmark` grid (Kafka's assignor benchmarks).

Kafka measures its assignors with JMH over members x partitions-per-member x topics, homogeneous
and bucketed heterogeneous subscriptions, full and incremental assignments. Running the same grid
here makes our figures comparable with the numbers published on the Apache PRs, and the goal rows
say whether the pure-Python assignors are fast enough for the coordinator's hot path.

Inputs are built outside the timed region, then frozen out of the garbage collector's sight
(`gc.freeze`), as a long-running coordinator's group state effectively is; the collector itself
stays on while timing. The result stays alive until the clock has stopped (a coordinator keeps
it as the new target). Each row reports the median wall-clock time of several timed runs after
warmup runs, plus the median CPU time of the same runs: on a shared machine the CPU time is the
steadier figure, and the load average printed with the results says how shared it was.

Beside each row, Apache Kafka's own `UniformAssignor` / `RangeAssignor` (the broker's
`kafka-group-coordinator` jar, `bench.kafka_assignors`) run on the same inputs, built from the
same topic ids, in one JVM started with Kafka's start-script flags; which of the two goes first
alternates row by row. `ratio` is groupshift's median time over Kafka's (below 1: groupshift is
faster), for wall clock and for CPU (Kafka's CPU is its assigning thread's: see the Java file).

    python -m bench.assignors [--json] [--quick] [--kafka VERSION | --no-kafka]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass

from bench.kafka_assignors import KafkaAssignors, KafkaAssignorsUnavailable
from engine import assignors
from engine.assignment import Assignment
from engine.assignors.base import (
    GroupSpec,
    MapTopicDescriber,
    MemberSubscription,
    SubscriptionType,
)
from engine.metadata import TopicId

# AssignorBenchmarkUtils: heterogeneous members are spread over at most this many buckets, each
# subscribing to its own slice of the topics.
MAX_BUCKET_COUNT = 5

HOMOGENEOUS = SubscriptionType.HOMOGENEOUS
HETEROGENEOUS = SubscriptionType.HETEROGENEOUS


@dataclass(frozen=True)
class Case:
    assignor: str
    subscription: SubscriptionType
    incremental: bool  # False: nobody has a previous target; True: members-1 had one, 1 joins
    members: int
    ratio: int  # partitions per member
    topics: int

    @property
    def partitions_per_topic(self) -> int:
        return self.members * self.ratio // self.topics

    def label(self) -> str:
        kind = "incremental" if self.incremental else "full"
        return (
            f"{self.assignor:<7} {self.subscription.value.lower():<13} {kind:<11} "
            f"{self.members:>6} {self.ratio:>5} {self.topics:>6}"
        )


@dataclass(frozen=True)
class Goal:
    name: str
    case: Case
    goal_ms: float


GOALS = (
    *(
        Goal(
            f"uniform homogeneous full, 10,000 members x 100,000 partitions, {t} topics",
            Case("uniform", HOMOGENEOUS, False, 10_000, 10, t),
            45.0,
        )
        for t in (10, 100, 1000)
    ),
    *(
        Goal(
            f"uniform homogeneous incremental, 1 member joins 10,000, {t} topics",
            Case("uniform", HOMOGENEOUS, True, 10_000, 10, t),
            30.0,
        )
        for t in (10, 100, 1000)
    ),
    Goal(
        "uniform heterogeneous full, 5,000 members x 50 partitions each, 10 topics",
        Case("uniform", HETEROGENEOUS, False, 5_000, 50, 10),
        150.0,
    ),
)


def grid(quick: bool) -> Iterator[Case]:
    member_counts = (100, 1_000) if quick else (100, 1_000, 10_000)
    for assignor in ("uniform", "range"):
        for subscription in (HOMOGENEOUS, HETEROGENEOUS):
            for incremental in (False, True):
                for members in member_counts:
                    for topics in (10, 100, 1_000):
                        yield Case(assignor, subscription, incremental, members, 10, topics)


# ----------------------------------------------------------------------------------- inputs


def topic_ids(count: int, seed: int) -> list[TopicId]:
    rng = random.Random(seed)
    return [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(count)]


def subscriptions(case: Case, ids: Sequence[TopicId], members: int) -> list[frozenset[TopicId]]:
    """One subscription per member; members of a bucket share one set, as Kafka's share a list."""
    if case.subscription is HOMOGENEOUS:
        everything = frozenset(ids)
        return [everything] * members
    buckets = min(MAX_BUCKET_COUNT, members)
    topics_per_bucket = -(-len(ids) // buckets)
    members_per_bucket = -(-members // buckets)
    sets = [frozenset(ids[b * topics_per_bucket : (b + 1) * topics_per_bucket]) for b in range(buckets)]
    return [sets[i // members_per_bucket] for i in range(members)]


def inverted(result: dict[str, Assignment]) -> dict[TopicId, dict[int, str]]:
    out: dict[TopicId, dict[int, str]] = {}
    for member_id, assignment in result.items():
        for topic_id, parts in assignment.items():
            out.setdefault(topic_id, {}).update(dict.fromkeys(parts, member_id))
    return out


def build_inputs(case: Case) -> tuple[GroupSpec, MapTopicDescriber]:
    ids = case_topic_ids(case)
    describer = MapTopicDescriber(dict.fromkeys(ids, case.partitions_per_topic))
    existing = case.members - 1 if case.incremental else case.members
    subs = subscriptions(case, ids, existing)
    members = {
        f"member{i}": MemberSubscription(f"member{i}", None, None, subs[i], {}) for i in range(existing)
    }
    spec = GroupSpec(members, case.subscription, {})
    if not case.incremental:
        return spec, describer

    previous = assignors.get(case.assignor).assign(spec, describer)
    members = {
        member_id: MemberSubscription(member_id, None, None, m.subscribed_topic_ids, previous[member_id])
        for member_id, m in members.items()
    }
    if case.subscription is HOMOGENEOUS:
        joining = frozenset(ids)  # its own set, built like every other member's
    else:
        joining = members[f"member{case.members - 2}"].subscribed_topic_ids
    members["newMember"] = MemberSubscription("newMember", None, None, joining, {})
    return GroupSpec(members, case.subscription, inverted(previous)), describer


# ---------------------------------------------------------------------------------- timing


@dataclass
class Row:
    assignor: str
    subscription: str
    assignment: str
    members: int
    ratio: int
    topics: int
    partitions: int
    median_ms: float  # wall clock
    min_ms: float  # wall clock
    cpu_median_ms: float
    runs: int
    kafka_median_ms: float | None = None
    kafka_cpu_median_ms: float | None = None
    kafka_runs: int | None = None

    @property
    def versus_kafka(self) -> float | None:
        """groupshift's median wall-clock time over Kafka's on the same inputs."""
        return None if not self.kafka_median_ms else self.median_ms / self.kafka_median_ms

    @property
    def cpu_versus_kafka(self) -> float | None:
        return None if not self.kafka_cpu_median_ms else self.cpu_median_ms / self.kafka_cpu_median_ms


MIN_RUNS = 5
MAX_RUNS = 15


def timed_runs(run: Callable[[], object], budget_s: float) -> tuple[list[float], list[float]]:
    """Warm up, then time runs until `budget_s` is spent (`MIN_RUNS` to `MAX_RUNS` runs).

    Returns wall-clock and CPU milliseconds per run.
    """
    start = time.perf_counter()
    run()
    if time.perf_counter() - start < budget_s / 10:
        run()
    wall: list[float] = []
    cpu: list[float] = []
    while len(wall) < MIN_RUNS or (len(wall) < MAX_RUNS and sum(wall) < budget_s * 1000):
        gc.collect()
        t0 = time.perf_counter()
        c0 = time.process_time()
        result = run()
        c1 = time.process_time()
        t1 = time.perf_counter()
        del result  # freed after the clock: the coordinator would keep it
        wall.append((t1 - t0) * 1000)
        cpu.append((c1 - c0) * 1000)
    return wall, cpu


def case_topic_ids(case: Case) -> list[TopicId]:
    return topic_ids(case.topics, seed=case.members * 7919 + case.topics)


def measure_kafka(kafka: KafkaAssignors, case: Case, budget_s: float) -> tuple[list[float], list[float]]:
    """Kafka's assignor on `case`'s inputs; refuses a result that does not assign every partition."""
    wall, cpu, assigned = kafka.measure(
        case.assignor,
        case.subscription.value,
        case.incremental,
        case.members,
        case.ratio,
        case_topic_ids(case),
        budget_s,
    )
    expected = case.partitions_per_topic * case.topics
    if assigned != expected:
        raise RuntimeError(f"Kafka's {case.assignor} assigned {assigned} of {expected} partitions: {case}")
    return wall, cpu


def measure(
    case: Case, budget_s: float, kafka: KafkaAssignors | None = None, kafka_first: bool = False
) -> Row:
    kafka_times = measure_kafka(kafka, case, budget_s) if kafka is not None and kafka_first else None
    spec, describer = build_inputs(case)
    assignor = assignors.get(case.assignor)
    gc.collect()
    gc.freeze()
    try:
        wall, cpu = timed_runs(lambda: assignor.assign(spec, describer), budget_s)
    finally:
        gc.unfreeze()
    if kafka is not None and kafka_times is None:
        kafka_times = measure_kafka(kafka, case, budget_s)
    kafka_wall, kafka_cpu = kafka_times if kafka_times is not None else ([], [])
    return Row(
        case.assignor,
        case.subscription.value,
        "incremental" if case.incremental else "full",
        case.members,
        case.ratio,
        case.topics,
        case.partitions_per_topic * case.topics,
        round(statistics.median(wall), 3),
        round(min(wall), 3),
        round(statistics.median(cpu), 3),
        len(wall),
        round(statistics.median(kafka_wall), 3) if kafka_wall else None,
        round(statistics.median(kafka_cpu), 3) if kafka_cpu else None,
        len(kafka_wall) if kafka_wall else None,
    )


# ---------------------------------------------------------------------------------- output

HEADER = (
    f"{'assignor':<7} {'subscription':<13} {'assignment':<11} {'members':>6} {'ratio':>5} "
    f"{'topics':>6} {'partitions':>10} {'ms/op':>9} {'min':>9} {'cpu ms':>9}"
)
KAFKA_HEADER = f" {'kafka ms':>9} {'kafka cpu':>9} {'ratio':>6} {'cpu':>6}"


def _ratio(value: float | None) -> str:
    return f"{value:>6.2f}" if value is not None else f"{'-':>6}"


def row_line(row: Row) -> str:
    case = Case(
        row.assignor,
        SubscriptionType(row.subscription),
        row.assignment == "incremental",
        row.members,
        row.ratio,
        row.topics,
    )
    line = (
        f"{case.label()} {row.partitions:>10} {row.median_ms:>9.3f} {row.min_ms:>9.3f} "
        f"{row.cpu_median_ms:>9.3f}"
    )
    if row.kafka_median_ms is None or row.kafka_cpu_median_ms is None:
        return line
    return (
        f"{line} {row.kafka_median_ms:>9.3f} {row.kafka_cpu_median_ms:>9.3f} "
        f"{_ratio(row.versus_kafka)} {_ratio(row.cpu_versus_kafka)}"
    )


def row_json(row: Row) -> dict[str, object]:
    return {**asdict(row), "versus_kafka": row.versus_kafka, "cpu_versus_kafka": row.cpu_versus_kafka}


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.assignors", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--quick", action="store_true", help="members 100 and 1,000 only")
    parser.add_argument(
        "--kafka",
        default="4.4.0",
        metavar="VERSION",
        help="the Apache Kafka release whose assignors run beside ours (default 4.4.0)",
    )
    parser.add_argument("--no-kafka", action="store_true", help="groupshift's assignors only")
    args = parser.parse_args(argv)
    budget = 0.3 if args.quick else 1.5
    load_before = load()

    kafka: KafkaAssignors | None = None
    if not args.no_kafka:
        try:
            kafka = KafkaAssignors(args.kafka)
        except KafkaAssignorsUnavailable as exc:
            print(f"bench.assignors: {exc} (--no-kafka runs groupshift's alone)", file=sys.stderr)
            return 2
    try:
        return _run(args, budget, load_before, kafka)
    except KafkaAssignorsUnavailable as exc:
        print(f"bench.assignors: {exc}", file=sys.stderr)
        return 2
    finally:
        if kafka is not None:
            kafka.close()


def _run(args: argparse.Namespace, budget: float, load_before: str, kafka: KafkaAssignors | None) -> int:
    rows: list[Row] = []
    if not args.json:
        print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load_before}")
        print("ms/op: median wall clock; min: fastest run; cpu ms: median CPU time")
        if kafka is not None:
            print(f"kafka: Apache Kafka {kafka.version}'s assignor, same inputs; ratio: groupshift / Kafka")
        print(HEADER + (KAFKA_HEADER if kafka is not None else ""))
    for i, case in enumerate(grid(args.quick)):
        row = measure(case, budget, kafka, kafka_first=i % 2 == 1)
        rows.append(row)
        if not args.json:
            print(row_line(row), flush=True)

    goals: list[dict[str, object]] = []
    for goal in GOALS:
        row = measure(goal.case, budget)
        goals.append(
            {
                "goal": goal.name,
                "goal_ms": goal.goal_ms,
                "measured_ms": row.median_ms,
                "cpu_ms": row.cpu_median_ms,
                "met": row.median_ms <= goal.goal_ms,
                "row": asdict(row),
            }
        )

    if args.json:
        report = {
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "load_average": {"before": load_before, "after": load()},
            "kafka": kafka.version if kafka is not None else None,
            "rows": [row_json(r) for r in rows],
            "goals": goals,
        }
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print()
        print(f"{'goal':<75} {'goal ms':>8} {'ms/op':>9} {'cpu ms':>9}")
        for g in goals:
            mark = "ok" if g["met"] else "MISSED"
            print(
                f"{g['goal']:<75} {g['goal_ms']:>8.1f} {g['measured_ms']:>9.3f} {g['cpu_ms']:>9.3f}  {mark}"
            )
        print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
