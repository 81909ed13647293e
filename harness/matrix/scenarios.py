"""The scenarios of a matrix cell and the run of one cell.

Each scenario drives verifiable consumers through steps; after every step the run waits until
the group is settled (`CellRun.settle`): the server lists the group with the expected type
(ListGroups v5) and state Stable, the live members' own assignments split all partitions
without overlap, and every record acknowledged so far has been consumed. The time from the
step's action to that moment is the step's *time to full ownership*. A step that does not settle
within `SETTLE_TIMEOUT` fails the cell with what was last seen.

Scenarios (`P` is the cell's starting protocol, `Q` the other one):

* `add-remove`: two members, a third joins, the first leaves.
* `static-bounce`: three static members; the second is stopped and restarted with the same
  `group.instance.id`. The others must see no revocation and the bounced member must get its
  partitions back (KIP-345: no rebalance for a static member that returns in time).
* `offline-migration`: two members of P; all stop; two members of Q start (the empty group is
  replaced by a group of the other type, under every policy).
* `rolling-upgrade`: three classic members replaced one by one by consumer-protocol members;
  the group becomes a consumer group when the first one joins (KIP-848 online upgrade).
* `rolling-downgrade`: the reverse; the group becomes classic when the last consumer-protocol
  member leaves (online downgrade).
* `flapping`: one classic member stays, a second one switches protocol three times; the group
  type follows it (bidirectional policy).

Members of the consumer protocol are the cell's client when it speaks it, otherwise the newest
client of its family (`clients.partner`); members of the classic protocol are always the cell's
client with the cell's assignor.

Kafka Streams cells (`kafka-streams@VERSION`, harness/matrix/streams_clients.py) run the same
scenarios with `streams` (KIP-1071) in place of `consumer`: the other protocol is `streams`, a
group with a `streams` member is listed as a streams group and its members counted with
StreamsGroupDescribe, the `streams` members are Kafka Streams 4.4 instances when the cell's
release is 3.x. Each member is one instance (one stream thread), a partition one task, so the
checks read as "no task active on two instances at once". An offline migration waits for the
group to empty (Kafka Streams sends no LeaveGroup on close). A member that stops on an error it
printed ends the cell at once with it: Kafka 4.4 refuses the online roll of a classic Kafka
Streams group (GROUP_ID_NOT_FOUND to the first `streams` member), and the reason says so as
Kafka's behaviour.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.matrix import clients as cl
from harness.matrix.backends import Backend, admin, create_topic
from harness.matrix.checks import MemberLog, Verdict, judge
from harness.matrix.grid import Cell
from harness.matrix.runtime import ClientHandle, ClientSpec, Runtime

PARTITIONS = 6
ALL = frozenset(range(PARTITIONS))
RATE = 40.0  # records a second
SETTLE_TIMEOUT = 60.0
START_TIMEOUT = 90.0
HOLD = 1.0  # seconds of steady consumption after each settled step


#: How Kafka 4.4 refuses a member of the other protocol into a Kafka Streams group with members:
#: a `streams` member joining a classic group gets GROUP_ID_NOT_FOUND ("Group G is not a streams
#: group."), a classic member joining a streams group INCONSISTENT_GROUP_PROTOCOL; Kafka Streams
#: treats both as fatal (the instance stops with it, VerifiableStreams prints `client_error`).
KAFKA_STREAMS_REFUSALS = ("is not a streams group", "InconsistentGroupProtocolException")


class StepFailed(AssertionError):
    pass


@dataclass
class Step:
    label: str
    expect_type: str
    started: float
    seconds: float | None = None
    observed_type: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "expect_type": self.expect_type,
            "observed_type": self.observed_type,
            "started": self.started,
            "seconds_to_full_ownership": None if self.seconds is None else round(self.seconds, 3),
            "error": self.error,
        }


class Member:
    """One verifiable consumer process and its event stream."""

    def __init__(self, log: MemberLog, handle: ClientHandle) -> None:
        self.log = log
        self.handle = handle
        self.owned: set[int] = set()
        self.started = threading.Event()
        self.done = threading.Event()
        self.noise: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True, name=f"read-{log.name}").start()

    @property
    def name(self) -> str:
        return self.log.name

    @property
    def live(self) -> bool:
        return self.started.is_set() and not self.done.is_set()

    def _read(self) -> None:
        try:
            for line in self.handle.lines():
                try:
                    event = json.loads(line)
                except ValueError:
                    self.noise.append(line)
                    continue
                if not isinstance(event, dict):
                    continue
                with self._lock:
                    self.log.events.append(event)
                    name = event.get("name")
                    parts = {int(p["partition"]) for p in event.get("partitions", []) if "partition" in p}
                    if name == "startup_complete":
                        self.started.set()
                    elif name == "partitions_assigned":
                        self.owned |= parts
                    elif name == "partitions_revoked":
                        self.owned -= parts
        finally:
            self.log.exited_at = time.time()
            with self._lock:
                self.owned.clear()
            self.done.set()

    def snapshot(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self.owned)

    def stop(self, timeout: float = 45.0) -> None:
        self.handle.terminate()
        if not self.done.wait(timeout):
            self.handle.kill()
            self.done.wait(10)
        with contextlib.suppress(TimeoutError):
            self.handle.wait(10)


class Producer(threading.Thread):
    """Writes RATE records a second round-robin over the partitions until stopped, remembering
    every acknowledged (partition, offset): what "every acknowledged record consumed" checks."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True, name=f"produce-{topic}")
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: set[tuple[int, int]] = set()
        self.failures: list[str] = []
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        from confluent_kafka import Producer as KafkaProducer

        def delivered(err: Any, msg: Any) -> None:
            with self._lock:
                if err is not None:
                    self.failures.append(str(err))
                else:
                    self.acked.add((msg.partition(), msg.offset()))

        try:
            p = KafkaProducer(
                {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "acks": "all", "log_level": 3}
            )
            start, sent = time.monotonic(), 0
            while not self._halt.is_set():
                due = int((time.monotonic() - start) * RATE) + 1
                while sent < due:
                    p.produce(
                        self.topic,
                        value=str(sent).encode(),
                        partition=sent % PARTITIONS,
                        on_delivery=delivered,
                    )
                    sent += 1
                p.poll(0.02)
            left = p.flush(60)
            if left:
                self.failures.append(f"{left} records unacknowledged after 60 s")
        except BaseException as e:
            self.error = e

    def snapshot(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self.acked)

    def stop(self) -> set[tuple[int, int]]:
        self._halt.set()
        self.join(90)
        if self.error is not None:
            raise StepFailed(f"producer failed: {self.error!r}")
        if self.failures:
            raise StepFailed(f"produce failures: {self.failures[:3]}")
        return self.snapshot()


@dataclass
class CellResult:
    cell: Cell
    verdict: str  # pass | fail
    reason: str
    seconds: float
    steps: list[Step] = field(default_factory=list)
    members: list[MemberLog] = field(default_factory=list)
    verdict_detail: Verdict | None = None
    versions: dict[str, str] = field(default_factory=dict)
    t0: float = 0.0
    t1: float = 0.0
    lanes: list[str] = field(default_factory=list)  # named timeline lanes (Kafka Connect cells)


class CellRun:
    def __init__(self, cell: Cell, backend: Backend, runtime: Runtime, workdir: Path) -> None:
        self.cell, self.backend, self.runtime, self.workdir = cell, backend, runtime, workdir
        tag = uuid.uuid4().hex[:8]
        self.topic = f"matrix-{cell.scenario}-{tag}"
        self.group = f"matrix-{cell.scenario}-{tag}-group"
        self.members: list[Member] = []
        self.steps: list[Step] = []
        self.producer: Producer | None = None
        self._n = 0
        self._last_seen = ""

    # -- members -------------------------------------------------------------------------------

    def client_for(self, protocol: str) -> ClientSpec:
        spec = self.cell.spec
        if not cl.speaks(spec, protocol):
            return cl.partner(spec)
        return spec

    @property
    def new(self) -> str:
        """The cell's protocol other than classic (`consumer`, or `streams` for Kafka Streams),
        which is also the type of the group its members form."""
        return cl.new_protocol(self.cell.spec)

    def start(self, protocol: str, instance_id: str | None = None) -> Member:
        return self.start_many([(protocol, instance_id)])[0]

    def start_many(self, wanted: list[tuple[str, str | None]]) -> list[Member]:
        out = []
        for protocol, instance_id in wanted:
            spec = self.client_for(protocol)
            self._n += 1
            name = f"{'c' if protocol == 'classic' else 's' if protocol == 'streams' else 'k'}{self._n}"
            argv = cl.consumer_argv(
                spec,
                bootstrap=self.backend.bootstrap,
                topic=self.topic,
                group=self.group,
                protocol=protocol,
                assignor=self.cell.assignor,
                instance_id=instance_id,
                client_id=f"{name}-{self.group}",
                config_dir=self.workdir / "config",
            )
            handle = self.runtime.spawn(spec, argv, {"MATRIX_STDERR_DIR": str(self.workdir / "stderr")})
            log = MemberLog(name, spec.key, protocol, instance_id)
            m = Member(log, handle)
            self.members.append(m)
            out.append(m)
        deadline = time.monotonic() + START_TIMEOUT
        for m in out:
            while not m.started.wait(0.2):
                if m.done.is_set() or time.monotonic() > deadline:
                    tail = self._stderr_tail(m)
                    raise StepFailed(f"{m.log.client} ({m.name}) did not start: {tail}")
        return out

    def _stderr_tail(self, m: Member) -> str:
        path = getattr(m.handle, "stderr_path", None)
        if path is None or not Path(path).exists():
            return "; ".join(m.noise[-3:])
        lines = [ln for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
        return " | ".join(lines[-3:])[-600:]

    def _client_errors(self) -> str:
        """The first error line each live member's client wrote on stderr, so that a refusal
        (e.g. GROUP_ID_NOT_FOUND for an upgrade the server will not do) shows in the reason."""
        out = []
        for m in self.live:
            path = getattr(m.handle, "stderr_path", None)
            if path is None or not Path(path).exists():
                continue
            for line in Path(path).read_text(errors="replace").splitlines():
                if any(f"] {level} " in line for level in ("WARN", "INFO", "DEBUG")):
                    continue  # a Java client's log line below ERROR (Kafka Streams 4.x warns of
                    # "Processing exception handler is not enabled" at every start)
                if "error" in line.lower() or "exception" in line.lower():
                    out.append(f"{m.name}: {line.strip()[:300]}")
                    break
        return ("; client errors: " + " | ".join(out)) if out else ""

    def _refused(self) -> str:
        """A member that stopped on an error it printed (`client_error`: VerifiableStreams'
        uncaught exception, e.g. the coordinator refusing it), said in the server's terms: no
        step can settle without it, so the cell ends now rather than at SETTLE_TIMEOUT."""
        for m in self.members:
            if not m.done.is_set():
                continue
            errors = []  # printed before any SIGTERM of the runner's (exit runs the hook too)
            for e in m.log.events:
                if e.get("name") == "shutdown_requested":
                    break
                if e.get("name") == "client_error":
                    errors.append(e)
            if not errors:
                continue
            error = str(errors[0].get("error", ""))
            who = f"{m.log.client} {m.log.protocol} member {m.name}"
            if self.backend.name.startswith("kafka-") and any(r in error for r in KAFKA_STREAMS_REFUSALS):
                return (
                    f"{self.backend.name} ({self.backend.version}) refused the {who}: {error} "
                    "(Kafka's behaviour: it migrates a Kafka Streams group between protocols only "
                    "offline, once empty; groupshift converts it online)"
                )
            return f"the {who} stopped on an error: {error}"
        return ""

    @property
    def live(self) -> list[Member]:
        return [m for m in self.members if m.live]

    # -- settling ------------------------------------------------------------------------------

    def _group(self) -> tuple[str | None, str | None, int | None]:
        """(type, state) from ListGroups, and the number of members the coordinator describes:
        ConsumerGroupDescribe for a consumer group (classic members included, KIP-1099),
        StreamsGroupDescribe for a streams group (every member: groupshift's classic Kafka
        Streams instances inside one too), DescribeGroups for a classic one."""
        try:
            with admin(self.backend.bootstrap) as a:
                for row in a.list_groups():
                    if row["group"] == self.group:
                        t = None if row["type"] is None else str(row["type"]).lower()
                        members: int | None = None
                        if t == "consumer":
                            described = a.consumer_group_describe(self.group)
                            if described is not None:
                                members = len(described[0].members)
                        elif t == "streams":
                            streams = a.streams_group_describe(self.group)
                            if streams is not None and streams.error_code == 0:
                                members = len(streams.members)
                        else:
                            members = len(a.describe_group(self.group).members)
                        return t, row["state"], members
        except Exception as e:
            return None, f"ListGroups/describe failed: {e}", None
        return None, None, None

    def _split_ok(self) -> bool:
        live = self.live
        if not live:
            return False
        owned = [m.snapshot() for m in live]
        if sum(len(o) for o in owned) != PARTITIONS or frozenset().union(*owned) != ALL:
            return False
        return len(live) > PARTITIONS or all(o for o in owned)

    def settle(self, label: str, expect_type: str, started: float | None = None) -> Step:
        step = Step(label, expect_type, started if started is not None else time.time())
        self.steps.append(step)
        deadline = time.monotonic() + SETTLE_TIMEOUT
        assert self.producer is not None
        while True:
            refused = self._refused()
            if refused:
                step.error = f"{label}: {refused}"
                raise StepFailed(step.error)
            if self._split_ok():
                gtype, state, described = self._group()
                step.observed_type = gtype
                live = len(self.live)
                if gtype == expect_type and state == "Stable" and described == live:
                    break
                self._last_seen = (
                    f"group listed as ({gtype}, {state}), {described} members described, {live} live"
                )
            else:
                self._last_seen = "members own " + ", ".join(
                    f"{m.name}:{sorted(m.snapshot())}" for m in self.live
                )
            if time.monotonic() > deadline:
                step.error = (
                    f"{label}: not settled as a {expect_type} group within {SETTLE_TIMEOUT:.0f}s; "
                    f"{self._last_seen}{self._client_errors()}"
                )
                raise StepFailed(step.error)
            time.sleep(0.1)
        step.seconds = time.time() - step.started
        time.sleep(HOLD)
        self.caught_up(label)
        return step

    def wait_empty(self, timeout: float = 30.0) -> None:
        """Until the coordinator describes the group with no member (its state Empty), e.g.
        once stopped members that sent no leave have been expired."""
        deadline = time.monotonic() + timeout
        while True:
            gtype, state, described = self._group()
            if state in ("Empty", None) or described == 0:
                return
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"the group ({gtype}, {state}) still has {described} members {timeout:.0f}s after "
                    "every member stopped"
                )
            time.sleep(0.2)

    def consumed(self) -> set[tuple[int, int]]:
        out: set[tuple[int, int]] = set()
        for m in self.members:
            for e in list(m.log.events):
                if e.get("name") == "records_consumed":
                    for s in e.get("partitions", []):
                        p = int(s["partition"])
                        out.update((p, o) for o in range(int(s["minOffset"]), int(s["maxOffset"]) + 1))
        return out

    def caught_up(self, label: str, timeout: float = 45.0) -> None:
        assert self.producer is not None
        target = self.producer.snapshot()
        deadline = time.monotonic() + timeout
        while True:
            missing = target - self.consumed()
            if not missing:
                return
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"{label}: {len(missing)} acknowledged records unconsumed after {timeout:.0f}s, "
                    f"e.g. {sorted(missing)[:3]}"
                )
            time.sleep(0.2)

    def action(self, label: str, expect_type: str, do: Callable[[], Any]) -> Step:
        t = time.time()
        do()
        return self.settle(label, expect_type, t)

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> CellResult:
        t0 = time.time()
        reason, verdict_detail = "", None
        acked: set[tuple[int, int]] = set()
        try:
            create_topic(self.backend.bootstrap, self.topic, PARTITIONS)
            self.producer = Producer(self.backend.bootstrap, self.topic)
            self.producer.start()
            SCENARIO_FUNCS[self.cell.scenario](self)
            acked = self.producer.stop()
            self.caught_up("final drain")
        except StepFailed as e:
            reason = str(e)
        except Exception as e:
            reason = f"{type(e).__name__}: {e}"
        finally:
            if self.producer is not None and self.producer.is_alive():
                with contextlib.suppress(StepFailed):
                    acked = self.producer.stop()
            for m in sorted(self.members, key=lambda m: m.log.protocol != "classic"):
                if not m.done.is_set():
                    m.stop()
        end = time.time()
        logs = [m.log for m in self.members]
        self.write_events(logs)
        if not reason:
            verdict_detail = judge(logs, acked, end)
            extra = self.scenario_checks(logs)
            problems = verdict_detail.violations + extra
            wrong_type = [s for s in self.steps if s.observed_type != s.expect_type]
            problems += [
                f"{s.label}: group type {s.observed_type}, expected {s.expect_type}" for s in wrong_type
            ]
            if problems:
                reason = problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
        else:
            verdict_detail = judge(logs, acked, end)
        return CellResult(
            self.cell,
            "fail" if reason else "pass",
            reason or self.summary(verdict_detail),
            end - t0,
            self.steps,
            logs,
            verdict_detail,
            t0=t0,
            t1=end,
        )

    def write_events(self, logs: list[MemberLog]) -> None:
        """Each member's event stream as it printed it, for post-mortems (events/NAME.jsonl)."""
        with contextlib.suppress(OSError):
            d = self.workdir / "events"
            d.mkdir(parents=True, exist_ok=True)
            for log in logs:
                (d / f"{log.name}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log.events))

    def summary(self, v: Verdict | None) -> str:
        if v is None:
            return ""
        slowest = max((s.seconds or 0.0 for s in self.steps), default=0.0)
        return (
            f"{v.records} records, {v.duplicates} duplicates, {v.handovers} hand-overs, "
            f"slowest step {slowest:.1f}s to full ownership"
        )

    def scenario_checks(self, logs: list[MemberLog]) -> list[str]:
        if self.cell.scenario != "static-bounce":
            return []
        bounce = next((s for s in self.steps if s.label.startswith("bounce")), None)
        if bounce is None:
            return []
        t_start = bounce.started * 1000
        t_end = t_start + (bounce.seconds or 0) * 1000
        bad = []
        for log in logs:
            if log.instance_id == "static-2":
                continue
            for e in log.named("partitions_revoked"):
                if t_start <= e["timestamp"] <= t_end and e.get("partitions"):
                    bad.append(
                        f"{log.name} lost partitions while static member static-2 bounced: a rebalance"
                    )
        old = [m for m in self.members if m.log.instance_id == "static-2"]
        if len(old) == 2 and bounce.seconds is not None:
            before: frozenset[int] = getattr(self, "_bounced_before", frozenset())
            after: frozenset[int] = getattr(self, "_bounced_after", frozenset())
            if before and after != before:
                bad.append(f"the bounced static member came back with {sorted(after)}, had {sorted(before)}")
        return bad


# -- scenarios ---------------------------------------------------------------------------------


def other(protocol: str, new: str = "consumer") -> str:
    """The protocol a migration goes to from `protocol`; `new` is the cell's non-classic one."""
    return new if protocol == "classic" else "classic"


def add_remove(run: CellRun) -> None:
    p = run.cell.protocol
    ids = ["static-1", "static-2", "static-3"] if run.cell.static else [None, None, None]
    t = time.time()
    first, _ = run.start_many([(p, ids[0]), (p, ids[1])])
    run.settle("two members", p, t)
    run.action("a member added", p, lambda: run.start(p, ids[2]))
    run.action("a member removed", p, first.stop)


def static_bounce(run: CellRun) -> None:
    p = run.cell.protocol
    t = time.time()
    members = run.start_many([(p, f"static-{i}") for i in (1, 2, 3)])
    run.settle("three static members", p, t)
    bounced = members[1]
    run._bounced_before = bounced.snapshot()  # type: ignore[attr-defined]

    def bounce() -> None:
        bounced.stop()
        run.start(p, "static-2")

    run.action("bounce of static-2", p, bounce)
    run._bounced_after = run.members[-1].snapshot()  # type: ignore[attr-defined]


def offline_migration(run: CellRun) -> None:
    p, q = run.cell.protocol, other(run.cell.protocol, run.new)
    ids = [["static-1", "static-2"] if run.cell.static else [None, None]][0]
    t = time.time()
    old = run.start_many([(p, ids[0]), (p, ids[1])])
    run.settle(f"two {p} members", p, t)

    def restart() -> None:
        for m in old:
            m.stop()
        if run.new == "streams":
            # Kafka Streams instances leave no classic group on close (their consumer sends no
            # LeaveGroup), so the group empties only when their sessions expire: an offline
            # migration starts the new instances then, as an operator would
            run.wait_empty()
        run.start_many([(q, ids[0]), (q, ids[1])])

    run.action(f"all restarted as {q}", q, restart)


def _rolling(run: CellRun, start: str) -> None:
    end = other(start, run.new)
    ids = ["static-1", "static-2", "static-3"] if run.cell.static else [None, None, None]
    t = time.time()
    members = run.start_many([(start, i) for i in ids])
    run.settle(f"three {start} members", start, t)
    for i, m in enumerate(members):
        # online upgrade: consumer (streams) from the first consumer (streams) member on;
        # downgrade: consumer (streams) until the last such member has left
        expect = run.new if start == "classic" or i < len(members) - 1 else "classic"

        def replace(m: Member = m, i: int = i) -> None:
            m.stop()
            run.start(end, ids[i])

        run.action(f"member {i + 1} restarted as {end}", expect, replace)


def rolling_upgrade(run: CellRun) -> None:
    _rolling(run, "classic")


def rolling_downgrade(run: CellRun) -> None:
    _rolling(run, run.new)


def flapping(run: CellRun) -> None:
    p = run.cell.protocol
    t = time.time()
    _, flapper = run.start_many([("classic", None), (p, None)])
    run.settle(f"a classic and a {p} member", "consumer" if p == "consumer" else "classic", t)
    current = p
    for n in range(3):
        current = other(current)
        old = flapper

        def switch(old: Member = old, to: str = current) -> None:
            nonlocal flapper
            old.stop()
            flapper = run.start(to)

        run.action(f"switch {n + 1} to {current}", "consumer" if current == "consumer" else "classic", switch)


SCENARIO_FUNCS: dict[str, Callable[[CellRun], None]] = {
    "add-remove": add_remove,
    "static-bounce": static_bounce,
    "offline-migration": offline_migration,
    "rolling-upgrade": rolling_upgrade,
    "rolling-downgrade": rolling_downgrade,
    "flapping": flapping,
}
