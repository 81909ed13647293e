"""Migration benchmark: how long partitions go unowned when a group changes, per protocol.

    python -m bench.migration [--json] [--quick] [--cases eager,cooperative,consumer,mixed]

Starts a real `groupshift serve` on 127.0.0.1 (ephemeral port, temporary data directory), creates
one topic (900 partitions by default), produces a modest backlog, and runs real clients, one
process each (`bench.migration_worker`), in four groups:

  eager        kafka-python 3.0.12, classic protocol, range assignor (eager rebalance)
  cooperative  confluent-kafka (librdkafka), classic protocol, cooperative-sticky (KIP-429)
  consumer     confluent-kafka, group.protocol=consumer (KIP-848), server assignor uniform
  mixed        5 confluent cooperative-sticky classic members + 5 group.protocol=consumer members
               in one group (the classic group is upgraded to a consumer group when the first
               consumer-protocol member joins); the member added later speaks the consumer
               protocol (the direction of an upgrade)

Each group forms with `--members` members and settles; then
  * rolling restart: each original member is closed and replaced by a new one of the same kind,
    one at a time, the next only once the new member owns a partition; figure: partition-seconds
    unowned, integrated from the first close until the group is settled again;
  * add: one more member subscribes; figures: seconds until the group is settled (every
    partition owned by a live member and every member owning floor or ceil of
    partitions/members), and the partition-seconds unowned in that time.

Ownership comes only from the clients' own rebalance callbacks (assign/revoke/lost), stamped with
time.monotonic() in the worker processes (one system-wide clock). A member stops owning its
partitions the moment it starts closing.

All protocols get the same heartbeat interval and session timeout: client configs for classic
members, the broker's group.consumer.* configs for consumer-protocol members (KIP-848 moves them
to the broker).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from e2e.harness import REPO, GatewayProcess

TOPIC = "migration"
PAYLOAD = b"x" * 64

CASES: dict[str, dict[str, Any]] = {
    "eager": {
        "label": "classic eager (kafka-python, range)",
        "initial": ["kp-eager"],
        "added": "kp-eager",
    },
    "cooperative": {
        "label": "classic cooperative (librdkafka, cooperative-sticky)",
        "initial": ["ck-cooperative"],
        "added": "ck-cooperative",
    },
    "consumer": {
        "label": "consumer protocol (librdkafka, KIP-848)",
        "initial": ["ck-consumer"],
        "added": "ck-consumer",
    },
    "mixed": {
        "label": "mixed 50/50 (librdkafka cooperative-sticky + KIP-848)",
        "initial": ["ck-cooperative", "ck-consumer"],  # halves, classic first
        "added": "ck-consumer",
    },
    # not run by default: the same protocols with the other client library
    "eager-librdkafka": {
        "label": "classic eager (librdkafka, range)",
        "initial": ["ck-eager"],
        "added": "ck-eager",
    },
    "cooperative-kafka-python": {
        "label": "classic cooperative (kafka-python, cooperative-sticky)",
        "initial": ["kp-cooperative"],
        "added": "kp-cooperative",
    },
    "mixed-eager": {
        "label": "mixed 50/50 (kafka-python range + KIP-848)",
        "initial": ["kp-eager", "ck-consumer"],
        "added": "ck-consumer",
    },
}
DEFAULT_CASES = ["eager", "cooperative", "consumer", "mixed"]


@dataclass(frozen=True)
class Settings:
    partitions: int = 900
    members: int = 10
    heartbeat_ms: int = 3000
    session_ms: int = 45000
    initial_delay_ms: int = 3000
    process_ms: float = 0.0
    slow_members: int = 0  # the first N members of each group (and their replacements) ...
    slow_poll_ms: float = 0.0  # ... spend this long after every poll (a slow poll loop)
    max_poll_records: int = 500
    records_per_partition: int | None = None  # None: 10, or a backlog for the run when processing
    phase_timeout_s: float = 240.0
    fsync: str = "batch"
    client_debug: bool = False

    def gateway_sets(self) -> list[str]:
        hb, s = self.heartbeat_ms, self.session_ms
        return [
            f"group.initial.rebalance.delay.ms={self.initial_delay_ms}",
            f"group.min.session.timeout.ms={min(s, 6000)}",
            f"group.consumer.heartbeat.interval.ms={hb}",
            f"group.consumer.min.heartbeat.interval.ms={min(hb, 5000)}",
            f"group.consumer.max.heartbeat.interval.ms={max(hb, 15000)}",
            f"group.consumer.session.timeout.ms={s}",
            f"group.consumer.min.session.timeout.ms={min(s, 45000)}",
            f"group.consumer.max.session.timeout.ms={max(s, 60000)}",
            f"coordinator.fsync.policy={self.fsync}",
        ]

    def backlog(self) -> int:
        """Records per partition produced before the run.

        Without processing time, a few records per partition (every member fetches real records
        when it gets partitions). With processing time, enough that a saturated member (one that
        takes max.poll.records per poll, then works on each) never runs dry during a case of
        BACKLOG_S seconds: a member drains 1000/process_ms records/s from its share of partitions.
        """
        if self.records_per_partition is not None:
            return self.records_per_partition
        if not self.process_ms:
            return 10
        per_partition_per_s = 1000.0 / self.process_ms / (self.partitions / (self.members + 1))
        return min(5000, math.ceil(per_partition_per_s * BACKLOG_S))


BACKLOG_S = 300.0

QUICK = Settings(
    partitions=60,
    members=3,
    heartbeat_ms=200,
    session_ms=3000,
    initial_delay_ms=0,
    records_per_partition=2,
    phase_timeout_s=20.0,
)


class BenchError(RuntimeError):
    pass


# -- members ---------------------------------------------------------------------------------


class Member:
    """One worker process: its consumer's callbacks arrive as events on the shared tracker."""

    def __init__(self, tracker: Tracker, name: str, kind: str, spec: dict[str, Any], log_dir: Path) -> None:
        self.name, self.kind, self.tracker = name, kind, tracker
        self.log_path = log_dir / f"{name}.log"
        self.ready = threading.Event()
        self.exited = threading.Event()
        with self.log_path.open("ab") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.migration_worker",
                    json.dumps({**spec, "name": name, "kind": kind}),
                ],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                text=True,
            )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event["ev"] == "ready":
                self.ready.set()
            self.tracker.add(self.name, event)
        self.proc.wait()
        self.exited.set()
        self.tracker.add(self.name, {"ev": "exit", "t": time.monotonic(), "code": self.proc.returncode})

    def send(self, cmd: str) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()

    def stop(self, timeout: float) -> None:
        self.send("close")
        if not self.exited.wait(timeout):
            self.proc.kill()
            self.exited.wait(5)


@dataclass
class Event:
    t: float
    member: str
    ev: str
    parts: tuple[int, ...] = ()
    records: int = 0
    got: dict[str, list[list[int]]] | None = None  # closing: offsets received, per partition


class Tracker:
    """Every member's events, and the current ownership as they arrive."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.events: list[Event] = []
        self.cond = threading.Condition()
        self.errors: list[str] = []
        self.live: set[str] = set()
        self.owned: dict[str, set[int]] = {}

    def add(self, member: str, raw: dict[str, Any]) -> None:
        e = Event(
            float(raw["t"]),
            member,
            raw["ev"],
            tuple(raw.get("parts", ())),
            int(raw.get("records", 0)),
            raw.get("got"),
        )
        with self.cond:
            self.events.append(e)
            if e.ev == "error":
                self.errors.append(f"{member}: {raw.get('error')}")
            elif e.ev == "exit" and member in self.live:
                self.errors.append(f"{member}: exited with {raw.get('code')} while a live member")
            apply(self.live, self.owned, e)
            self.cond.notify_all()

    def wait(self, predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate(self):
                if self.errors:
                    raise BenchError("; ".join(self.errors))
                left = deadline - time.monotonic()
                if left <= 0:
                    counts = {m: len(self.owned.get(m, ())) for m in sorted(self.live)}
                    raise BenchError(f"timed out after {timeout:.0f}s waiting for {what}; owned: {counts}")
                self.cond.wait(min(left, 0.5))

    def settled(self) -> bool:
        return settled(self.live, self.owned, self.partitions)


def apply(live: set[str], owned: dict[str, set[int]], e: Event) -> None:
    """One event on the ownership state (used live and in the time-ordered replay)."""
    if e.ev == "subscribe":
        live.add(e.member)
        owned[e.member] = set()
    elif e.ev in ("closing", "exit"):
        live.discard(e.member)
        owned.pop(e.member, None)
    elif e.member in live:
        if e.ev == "assign":
            owned[e.member].update(e.parts)
        elif e.ev in ("revoke", "lost"):
            owned[e.member].difference_update(e.parts)


def settled(live: set[str], owned: dict[str, set[int]], partitions: int) -> bool:
    if not live:
        return False
    lo, hi = partitions // len(live), -(-partitions // len(live))
    if any(not lo <= len(owned[m]) <= hi for m in live):
        return False
    return sum(len(owned[m]) for m in live) == partitions and len(set().union(*owned.values())) == partitions


def unowned(owned: dict[str, set[int]], partitions: int) -> int:
    return partitions - len(set().union(*owned.values())) if owned else partitions


@dataclass
class Window:
    """A time-ordered replay of the events between `start` and the first settled state after it."""

    start: float
    settle_s: float | None = None
    unowned_partition_s: float = 0.0
    max_unowned: int = 0
    overlaps: int = 0  # moments when two live members held the same partition (should be 0)


def replay(events: list[Event], partitions: int, start: float, end_by: float, settle_after: float) -> Window:
    live: set[str] = set()
    owned: dict[str, set[int]] = {}
    w = Window(start)
    last_t, last_unowned = start, None
    for e in sorted(events, key=lambda e: e.t):
        if e.t > end_by:
            break
        if e.t >= start and last_unowned is not None:
            w.unowned_partition_s += last_unowned * (e.t - last_t)
            last_t = e.t
        apply(live, owned, e)
        if e.t < start:
            continue
        last_unowned = unowned(owned, partitions)
        w.max_unowned = max(w.max_unowned, last_unowned)
        if sum(len(s) for s in owned.values()) != len(set().union(*owned.values()) if owned else ()):
            w.overlaps += 1
        if e.t >= settle_after and settled(live, owned, partitions):
            w.settle_s = e.t - start
            return w
    if last_unowned is None:  # nothing happened after start: state as of start
        last_unowned = unowned(owned, partitions)
    w.unowned_partition_s += last_unowned * (end_by - last_t)
    return w


# -- one case --------------------------------------------------------------------------------


@dataclass
class CaseResult:
    case: str
    label: str
    members: list[str]
    form_s: float = 0.0
    roll_unowned_partition_s: float = 0.0
    roll_s: float = 0.0
    roll_max_unowned: int = 0
    roll_step_s: list[float] = field(default_factory=list)
    add_settle_s: float = 0.0
    add_first_assignment_s: float | None = None
    add_unowned_partition_s: float = 0.0
    add_max_unowned: int = 0
    overlaps: int = 0
    records: int = 0  # records the members received (and "processed")
    records_never_received: int = 0  # offsets below the produced end that no member was given
    records_received_again: int = 0  # offsets given to more than one member (at-least-once)
    records_skipped: int = 0  # offsets below the group's committed offset that no member was given
    gateway_cpu_s: float = 0.0


class Case:
    def __init__(self, name: str, settings: Settings, gw: GatewayProcess, group: str, log_dir: Path) -> None:
        self.name, self.s, self.log_dir = name, settings, log_dir
        self.spec = CASES[name]
        self.tracker = Tracker(settings.partitions)
        self.spec_common: dict[str, Any] = {
            "bootstrap": gw.bootstrap,
            "group": group,
            "topic": TOPIC,
            "heartbeat_ms": settings.heartbeat_ms,
            "session_ms": settings.session_ms,
            "process_ms": settings.process_ms,
            "client_debug": settings.client_debug,
            "max_poll_records": settings.max_poll_records,
        }
        self.members: list[Member] = []
        self.committed: dict[int, int] | None = None

    def kinds(self) -> list[str]:
        initial: list[str] = self.spec["initial"]
        n = self.s.members
        if len(initial) == 1:
            return initial * n
        half = n // 2
        return [initial[0]] * half + [initial[1]] * (n - half)

    def spawn(self, kind: str, slow: bool = False) -> Member:
        spec = {**self.spec_common, "poll_gap_ms": self.s.slow_poll_ms if slow else 0.0}
        m = Member(self.tracker, f"{self.name}-{len(self.members):02d}", kind, spec, self.log_dir)
        self.members.append(m)
        return m

    def go(self, m: Member) -> float:
        t = time.monotonic()
        m.send("go")
        return t

    def run(self) -> CaseResult:
        s, tr = self.s, self.tracker
        kinds = self.kinds()
        first = [self.spawn(k, i < s.slow_members) for i, k in enumerate(kinds)]
        spares = [self.spawn(k, i < s.slow_members) for i, k in enumerate(kinds)]
        added = self.spawn(self.spec["added"])
        for m in self.members:
            if not m.ready.wait(60):
                raise BenchError(f"{m.name} did not start: {tr.errors}")
        res = CaseResult(self.name, self.spec["label"], sorted({*kinds, self.spec["added"]}))

        # form the group (the mixed group forms classic, then is upgraded by its KIP-848 half)
        t0 = time.monotonic()
        waves = (
            [first]
            if len(set(kinds)) == 1
            else [[m for m in first if m.kind == kinds[0]], [m for m in first if m.kind != kinds[0]]]
        )
        joined = 0
        for wave in waves:
            for m in wave:
                self.go(m)
            joined += len(wave)
            tr.wait(
                lambda t, n=joined: t.settled() and len(t.live) == n,
                s.phase_timeout_s,
                f"{self.name}: group to form",
            )
        res.form_s = time.monotonic() - t0

        # rolling restart: close one, start its replacement, wait until it owns a partition
        roll_start = time.monotonic()
        for old, new in zip(first, spares, strict=True):
            step = time.monotonic()
            old.send("close")
            if not old.exited.wait(s.phase_timeout_s):
                raise BenchError(f"{old.name} did not close")
            self.go(new)
            tr.wait(
                lambda t, n=new.name: bool(t.owned.get(n)),
                s.phase_timeout_s,
                f"{self.name}: {new.name} to own a partition",
            )
            res.roll_step_s.append(round(time.monotonic() - step, 3))
        tr.wait(lambda t: t.settled(), s.phase_timeout_s, f"{self.name}: group to settle after the roll")
        roll_end = time.monotonic()
        with tr.cond:
            events = list(tr.events)
        closing = [e.t for e in events if e.ev == "closing" and e.t >= roll_start]
        last_in = max(e.t for e in events if e.ev == "subscribe" and e.member == spares[-1].name)
        w = replay(events, s.partitions, min(closing), roll_end + 1.0, last_in)
        if w.settle_s is None:
            raise BenchError(f"{self.name}: the replay of the roll never settles")
        res.roll_unowned_partition_s = w.unowned_partition_s
        res.roll_s = w.settle_s
        res.roll_max_unowned = w.max_unowned
        res.overlaps += w.overlaps

        # add one member
        self.go(added)
        tr.wait(
            lambda t: added.name in t.live and t.settled(),
            s.phase_timeout_s,
            f"{self.name}: group to settle after the add",
        )
        add_end = time.monotonic()
        with tr.cond:
            events = list(tr.events)
        t_add = next(e.t for e in events if e.member == added.name and e.ev == "subscribe")
        w = replay(events, s.partitions, t_add, add_end + 1.0, t_add)
        if w.settle_s is None:
            raise BenchError(f"{self.name}: the replay of the add never settles")
        res.add_settle_s = w.settle_s
        res.add_unowned_partition_s = w.unowned_partition_s
        res.add_max_unowned = w.max_unowned
        res.overlaps += w.overlaps
        first_assign = [e.t for e in events if e.member == added.name and e.ev == "assign" and e.parts]
        res.add_first_assignment_s = min(first_assign) - t_add if first_assign else None
        return res

    def close(self, result: CaseResult | None) -> None:
        for m in self.members:
            m.send("close")
        for m in self.members:
            if not m.exited.wait(30):
                m.proc.kill()
        if result is not None:
            with self.tracker.cond:
                closing = [e for e in self.tracker.events if e.ev == "closing"]
            result.records = sum(e.records for e in closing)
            seen: dict[int, Counter[int]] = {}
            for e in closing:
                for p, runs in (e.got or {}).items():
                    c = seen.setdefault(int(p), Counter())
                    for first, last in runs:
                        c.update(range(first, last + 1))
            end = self.s.backlog()
            result.records_never_received = sum(
                sum(1 for o in range(end) if o not in seen.get(p, ())) for p in range(self.s.partitions)
            )
            result.records_received_again = sum(n - 1 for c in seen.values() for n in c.values() if n > 1)
            committed = committed_offsets(self.spec_common["bootstrap"], self.spec_common["group"], self.s)
            self.committed = committed
            result.records_skipped = sum(
                sum(1 for o in range(max(0, committed.get(p, 0))) if o not in seen.get(p, ()))
                for p in range(self.s.partitions)
            )


def committed_offsets(bootstrap: str, group: str, s: Settings) -> dict[int, int]:
    """The group's committed offset per partition (-1001 where none), via OffsetFetch."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, p) for p in range(s.partitions)])
    res = admin.list_consumer_group_offsets([req])[group].result(30)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


# -- setup -----------------------------------------------------------------------------------


def create_topic(gw: GatewayProcess, s: Settings) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic  # where it is defined (and typed)

    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    admin.create_topics([NewTopic(TOPIC, s.partitions, 1)])[TOPIC].result(30)
    if s.backlog():
        producer = Producer(
            {
                "bootstrap.servers": gw.bootstrap,
                "linger.ms": 50,
                "batch.size": 1 << 20,
                "queue.buffering.max.messages": 2_000_000,
                "enable.metrics.push": False,
            }
        )
        for p in range(s.partitions):
            for _ in range(s.backlog()):
                producer.produce(TOPIC, value=PAYLOAD, partition=p)
            producer.poll(0)
        if producer.flush(120):
            raise BenchError("producer did not flush")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run(s: Settings, cases: list[str], progress: Any, keep_logs: str | None = None) -> dict[str, Any]:
    results = []
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="groupshift-migbench-") as tmp:
        log_dir = Path(keep_logs) if keep_logs else Path(tmp)
        log_dir.mkdir(parents=True, exist_ok=True)
        gw = GatewayProcess.start(Path(tmp) / "data", sets=s.gateway_sets(), log_path=log_dir / "gateway.log")
        try:
            create_topic(gw, s)
            stamp = int(time.time())
            for name in cases:
                progress(f"{name}: ...")
                cpu = process_cpu_s(gw.proc.pid)
                case = Case(name, s, gw, f"bench-{name}-{stamp}", log_dir)
                r = None
                try:
                    r = case.run()
                    r.gateway_cpu_s = process_cpu_s(gw.proc.pid) - cpu
                finally:
                    case.close(r)
                    if keep_logs:
                        with (log_dir / f"{name}-events.jsonl").open("w") as f:
                            f.writelines(json.dumps(asdict(e)) + "\n" for e in case.tracker.events)
                        if case.committed is not None:
                            (log_dir / f"{name}-committed.json").write_text(json.dumps(case.committed))
                results.append(r)
                progress(
                    f"{name}: add settles in {r.add_settle_s:.2f}s, roll unowned "
                    f"{r.roll_unowned_partition_s:.0f} partition-s"
                )
                if not gw.alive():
                    raise BenchError("gateway died:\n" + gw.log_tail())
            warnings = [e for e in gw.events() if e.get("level") in ("error", "critical")]
        finally:
            gw.stop()
    return {
        "benchmark": "migration",
        "settings": {**asdict(s), "records_per_partition": s.backlog()},
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "gateway_errors": len(warnings),
        "results": [asdict(r) for r in results],
    }


# -- output ----------------------------------------------------------------------------------


def rounded(doc: dict[str, Any]) -> dict[str, Any]:
    for r in doc["results"]:
        for k, v in r.items():
            if isinstance(v, float):
                r[k] = round(v, 3)
    return doc


def print_table(doc: dict[str, Any]) -> None:
    s = doc["settings"]
    slow = f" ({s['slow_members']} slow: {s['slow_poll_ms']:.0f} ms per poll)" if s["slow_members"] else ""
    settings = (
        f"{s['partitions']} partitions, {s['members']} members (+1 added); heartbeat {s['heartbeat_ms']} ms, "
        f"session {s['session_ms']} ms (every protocol), group.initial.rebalance.delay.ms "
        f"{s['initial_delay_ms']}; processing {s['process_ms']} ms/record{slow}; "
        f"{s['records_per_partition']} records/partition; coordinator fsync {s['fsync']}"
    )
    print(textwrap.fill(settings, width=100))
    print(f"load average before {doc['load_average_before']}, after {doc['load_average_after']}")
    print()
    print(f"{'':<54} {'--------- add one member ---------':>34}  {'------ rolling restart ------':>29}")
    print(
        f"{'case':<54} {'settle':>7} {'1st':>7} {'unowned':>9} {'max':>5}  "
        f"{'unowned':>9} {'time':>7} {'max':>5}  {'gw cpu':>6}"
    )
    print(f"{'':<54} {'s':>7} {'s':>7} {'part-s':>9} {'':>5}  {'part-s':>9} {'s':>7} {'':>5}  {'s':>6}")
    for r in doc["results"]:
        first = "-" if r["add_first_assignment_s"] is None else f"{r['add_first_assignment_s']:.2f}"
        print(
            f"{r['label']:<54} {r['add_settle_s']:>7.2f} {first:>7} {r['add_unowned_partition_s']:>9.0f} "
            f"{r['add_max_unowned']:>5}  {r['roll_unowned_partition_s']:>9.0f} {r['roll_s']:>7.1f} "
            f"{r['roll_max_unowned']:>5}  {r['gateway_cpu_s']:>6.1f}"
        )
    print(
        "\nsettle: from the new member's first poll until every partition is owned by a live member and"
        "\nevery member owns floor or ceil of partitions/members; 1st: until the new member owns a partition;"
        "\nunowned: partition-seconds with no live owner (from the clients' callbacks); max: most partitions"
        "\nunowned at once; roll time: first close until settled after the last replacement."
    )
    print(
        "records received (again, skipped): "
        + "; ".join(
            f"{r['case']} {r['records']} ({r['records_received_again']}, {r['records_skipped']})"
            for r in doc["results"]
        )
    )
    if any(r["records_skipped"] for r in doc["results"]):
        print("WARNING: records below a committed offset were never given to any member (data loss)")
    if any(r["overlaps"] for r in doc["results"]):
        print(
            "\nWARNING: a partition was held by two live members at once:",
            {r["case"]: r["overlaps"] for r in doc["results"]},
        )
    print_reading(doc)


def print_reading(doc: dict[str, Any]) -> None:
    """The mechanics behind the figures, with this run's numbers filled in."""
    by = {r["case"]: r for r in doc["results"]}
    hb = doc["settings"]["heartbeat_ms"] / 1000
    lines = []
    if "eager" in by:
        r = by["eager"]
        lines.append(
            "classic eager: a rebalance revokes every partition of every member (up to "
            f"{r['add_max_unowned']} unowned at once) and the JoinGroup barrier holds them until the last "
            "member has rejoined from its poll loop; the roll pays that once per step "
            f"({r['roll_unowned_partition_s']:.0f} partition-s)."
        )
    if "cooperative" in by:
        r = by["cooperative"]
        lines.append(
            "classic cooperative: members keep what does not move, but a move takes two barriers "
            f"(revoke, then assign), each opened by a heartbeat ({hb:g} s) and closed by the slowest "
            f"poll loop: the add settles in {r['add_settle_s']:.1f} s."
        )
    if "consumer" in by:
        r = by["consumer"]
        lines.append(
            "consumer protocol: no barrier; each owner revokes on its own next heartbeat and poll, the "
            "new owner takes the partitions on its next heartbeat (first partition after "
            f"{r['add_first_assignment_s'] or 0:.1f} s, settled after {r['add_settle_s']:.1f} s: whole "
            "heartbeat intervals, plus the slowest revoker). In the roll a leaver's partitions go to "
            "whoever heartbeats first, usually its replacement's first heartbeat: "
            f"{r['roll_unowned_partition_s']:.0f} partition-s unowned."
        )
    if "mixed" in by:
        r = by["mixed"]
        lines.append(
            "mixed: once a consumer-protocol member joins, the group is a consumer group; its classic "
            "members are reconciled one by one (JoinGroup/SyncGroup answered per member, no group-wide "
            "barrier), so a classic member waits only for its own rejoin: add "
            f"{r['add_settle_s']:.1f} s, roll {r['roll_unowned_partition_s']:.0f} partition-s."
        )
    if lines:
        print("\nReading")
        for line in lines:
            print(textwrap.fill(line, width=100, initial_indent="- ", subsequent_indent="  "))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.migration",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: {QUICK.partitions} partitions, {QUICK.members} members, "
        f"heartbeat {QUICK.heartbeat_ms} ms, session {QUICK.session_ms} ms",
    )
    p.add_argument(
        "--cases",
        default=",".join(DEFAULT_CASES),
        help=f"comma-separated, from {', '.join(CASES)} (default {','.join(DEFAULT_CASES)})",
    )
    d = Settings()
    p.add_argument("--partitions", type=int)
    p.add_argument("--members", type=int, help=f"initial members (default {d.members})")
    p.add_argument("--heartbeat-ms", type=int, help=f"all protocols (default {d.heartbeat_ms})")
    p.add_argument("--session-ms", type=int, help=f"all protocols (default {d.session_ms})")
    p.add_argument(
        "--initial-delay-ms",
        type=int,
        help=f"group.initial.rebalance.delay.ms (default {d.initial_delay_ms})",
    )
    p.add_argument(
        "--process-ms", type=float, help="simulated processing time per record received (default 0)"
    )
    p.add_argument("--slow-members", type=int, help="how many members of each group are slow (default 0)")
    p.add_argument(
        "--slow-poll-ms", type=float, help="the slow members spend this long after every poll, records or not"
    )
    p.add_argument("--max-poll-records", type=int, help=f"default {d.max_poll_records}")
    p.add_argument(
        "--records-per-partition",
        type=int,
        help="produced before the run (default 10, or a 300 s backlog with --process-ms)",
    )
    p.add_argument("--phase-timeout", type=float, dest="phase_timeout_s")
    p.add_argument("--logs", metavar="DIR", help="keep the gateway's and the workers' logs in DIR")
    p.add_argument(
        "--client-debug",
        action="store_true",
        default=None,
        help="clients log their group protocol (kafka-python DEBUG, librdkafka cgrp,protocol)",
    )
    p.add_argument("--fsync", choices=["batch", "none"], help="coordinator.fsync.policy (default batch)")
    args = p.parse_args(argv)

    base = QUICK if args.quick else d
    overrides = {k: v for k, v in vars(args).items() if k in Settings.__dataclass_fields__ and v is not None}
    s = Settings(**{**asdict(base), **overrides})
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        p.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    doc = rounded(run(s, cases, progress, args.logs))
    bad = [r for r in doc["results"] for v in r.values() if isinstance(v, float) and not math.isfinite(v)]
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
    else:
        print_table(doc)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
