"""The matrix's Kafka Connect family (`kafka-connect@VERSION`, scenario `sdk-worker-conversion`).

A Kafka Connect cell runs a real Connect cluster on the cell's backend, the way
e2e/test_connect_runtime.py does (harness/kafka_dist/connect.py: the workers, their REST API
and logs, the SDK worker's side): three distributed workers of the cell's release
(`ConnectDistributed`, `connect.protocol=sessioned`: a classic group of protocol type
`connect` whose leader runs Connect's IncrementalCooperativeAssignor) run a FileStreamSource
connector (one task) and a FileStreamSink connector (three tasks) moving the lines of a file
through a three-partition topic into another file. Then:

1. **three classic workers**: every worker's status API shows one placement of the two
   connectors and four tasks, RUNNING, spread over the three; the group is listed classic
   and described Stable, `connect` / `sessioned`, three members;
2. **worker 3 replaced by an SDK worker**: worker 3 stops (a clean shutdown: its tasks
   stopped, LeaveGroup) and the project's SDK worker (connect_worker/, ConnectGroupHeartbeat,
   given the same connectors and task counts) joins: groupshift converts the group to a connect
   group (listed `connect`, described Stable, `incremental`, three members), the two classic
   workers run exactly what the SDK worker does not (their logs), every connector and task once;
3. **the SDK worker left**: the group is converted back (listed classic, `sessioned`, two
   members) and the two classic workers run everything (status API).

Each step's time is its *time to full ownership*, as for consumer cells; a step that does not
settle within `SETTLE_TIMEOUT` fails the cell with what was last seen there (group listing,
description, placement). At the end lines appended to the input file must reach the output
file, and the checks over the whole run, from the workers' own logs ("Creating task" /
"Stopping task", "Creating connector" / "Stopping connector") and the SDK worker's callbacks:

- no connector or task ran on two workers at once (every pair named in the reason);
- the SDK worker got a share, and each item it ran ran on a classic worker before it (revoked
  there first) and again after it left.

Kafka has no connect groups (the SDK worker's API is groupshift's extension), so a Connect cell
has no Kafka twin (grid.py drops it with that reason). The cell's windows (report.html's
timeline) are one lane per connector or task, in the order `lanes` names them (results.json's
`lanes`; a window's `partition` is its lane).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connect_worker import ConnectWorkerThread
from harness.kafka_dist.connect import (
    QUICK_SETTINGS,
    SHAPE,
    ConnectError,
    ConnectWorker,
    SdkSpans,
    agreed_placement,
    alive,
    connect_dist,
    converted_placement,
    described,
    every_item,
    file_connectors,
    overlaps,
    ownership_intervals,
    running_now,
    sdk_worker,
    spread,
    worker_properties,
)
from harness.matrix.backends import Backend, admin, create_topic
from harness.matrix.checks import MemberLog, Verdict, Window
from harness.matrix.grid import Cell
from harness.matrix.scenarios import SETTLE_TIMEOUT, CellResult, Step, StepFailed

SDK_CLIENT = "connect-sdk"
SDK_URL = "http://sdk-worker:8083"
WORKERS = 3
TOPIC_PARTITIONS = 3
START_TIMEOUT = 90.0
DRAIN_TIMEOUT = 60.0


def lanes() -> list[str]:
    """The connectors and tasks in the order of the timeline's lanes (p0, p1, ...)."""
    return sorted(every_item(SHAPE))


class ConnectCellRun:
    """One Kafka Connect cell: its workers, its SDK worker, its steps."""

    def __init__(self, cell: Cell, backend: Backend, workdir: Path) -> None:
        self.cell, self.backend, self.workdir = cell, backend, workdir
        tag = uuid.uuid4().hex[:8]
        self.group = f"matrix-connect-{tag}"
        self.topic = f"matrix-connect-{tag}-lines"
        self.workers: list[ConnectWorker] = []
        self.steps: list[Step] = []
        self.spans = SdkSpans(SDK_URL)
        self.sdk: Any = None
        self.sdk_thread: ConnectWorkerThread | None = None
        self.sdk_joined: float | None = None
        self.sdk_left: float | None = None
        self.input_file = workdir / "input.txt"
        self.output_file = workdir / "output.txt"
        self.lines: list[str] = []
        self._last_seen = ""

    # -- pieces --------------------------------------------------------------------------------

    def start_worker(self) -> ConnectWorker:
        props = worker_properties(self.backend.bootstrap, self.group, QUICK_SETTINGS)
        w = ConnectWorker(
            connect_dist(self.cell.spec.version), self.workdir / f"worker-{len(self.workers) + 1}", props
        )
        self.workers.append(w)
        return w

    def write_lines(self, what: str, n: int) -> None:
        new = [f"line {i} {what}" for i in range(n)]
        self.lines += new
        with self.input_file.open("a") as f:
            f.write("".join(f"{line}\n" for line in new))

    def output_lines(self) -> set[str]:
        try:
            return set(self.output_file.read_text().splitlines())
        except FileNotFoundError:
            return set()

    def listed_type(self) -> str | None:
        """The group's type as ListGroups v5 lists it (classic, connect), None if not listed."""
        with admin(self.backend.bootstrap) as a:
            for row in a.list_groups():
                if row["group"] == self.group:
                    return None if row["type"] is None else str(row["type"]).lower()
        return None

    def settle(self, label: str, expect_type: str, started: float, check: Callable[[], str]) -> Step:
        """Until `check()` says nothing is missing (""), or fail the cell with what it last said;
        `check` also names the group's listed type, kept as the step's observed type."""
        step = Step(label, expect_type, started)
        self.steps.append(step)
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            if self.sdk is not None and self.sdk.error is not None:
                step.error = f"{label}: the SDK worker failed: {self.sdk.error}"
                raise StepFailed(step.error)
            try:
                step.observed_type = self.listed_type()
                missing = check()
            except (ConnectError, OSError, RuntimeError) as e:
                missing = f"{type(e).__name__}: {e}"
            if not missing:
                break
            self._last_seen = missing
            if time.monotonic() > deadline:
                step.error = (
                    f"{label}: not settled as a {expect_type} group within {SETTLE_TIMEOUT:.0f}s; "
                    f"{self._last_seen}"
                )
                raise StepFailed(step.error)
            time.sleep(0.5)
        step.seconds = time.time() - step.started
        return step

    def _classic(self, expect_members: int) -> str:
        """ "" once the group is classic with `expect_members` sessioned workers that agree on
        a placement spread over all of them; else what is not so yet."""
        seen = described(self.backend.bootstrap, self.group)
        if seen != ("Stable", "connect", "sessioned", expect_members):
            return f"group described as {seen}, expected (Stable, connect, sessioned, {expect_members})"
        if spread(self.workers, SHAPE) is None:
            where = agreed_placement(self.workers, SHAPE)
            return f"the workers' status APIs agree on no placement over all of them: {where}"
        return ""

    def _converted(self) -> str:
        seen = described(self.backend.bootstrap, self.group)
        members = len(alive(self.workers)) + 1
        if seen != ("Stable", "connect", "incremental", members):
            return f"group described as {seen}, expected (Stable, connect, incremental, {members})"
        if converted_placement(self.workers, self.spans, SHAPE) is None:
            return (
                f"the SDK worker runs {sorted(self.spans.open)}, the classic workers' logs "
                f"{ {k: sorted(v) for k, v in running_now(self.workers).items()} }: not every "
                "connector and task exactly once"
            )
        return ""

    # -- the scenario --------------------------------------------------------------------------

    def scenario(self) -> None:
        create_topic(self.backend.bootstrap, self.topic, TOPIC_PARTITIONS)
        t = time.time()
        for _ in range(WORKERS):
            self.start_worker()
        for w in self.workers:
            try:
                w.wait_rest(START_TIMEOUT)
            except ConnectError as e:
                raise StepFailed(f"{self.cell.spec.key} worker did not start: {str(e)[-600:]}") from None
        self.write_lines("before the conversion", 100)
        for name, config in file_connectors(self.input_file, self.output_file, self.topic).items():
            self._put_connector(name, config)
        self.settle(f"{WORKERS} classic workers", "classic", t, lambda: self._classic(WORKERS))

        t = time.time()
        self.workers[-1].stop()
        self.sdk = sdk_worker(self.backend.bootstrap, self.group, self.spans, SHAPE)
        self.sdk_thread = ConnectWorkerThread(self.sdk, name=f"sdk-{self.group}")
        self.sdk_thread.start()
        self.sdk_joined = time.time()
        self.settle(f"worker {WORKERS} replaced by an SDK worker", "connect", t, self._converted)

        t = time.time()
        self._sdk_leave()
        self.settle("the SDK worker left", "classic", t, lambda: self._classic(WORKERS - 1))

        self.write_lines("after the conversions", 50)
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while not self.output_lines() >= set(self.lines):
            if time.monotonic() > deadline:
                missing = set(self.lines) - self.output_lines()
                raise StepFailed(
                    f"final drain: {len(missing)} of {len(self.lines)} input lines not in the sink's "
                    f"file after {DRAIN_TIMEOUT:.0f}s, e.g. {sorted(missing)[:2]}"
                )
            time.sleep(0.5)

    def _put_connector(self, name: str, config: dict[str, str]) -> None:
        """Create a connector through the first worker (forwarded to the leader), again while the
        group is still forming (409: "... worker rebalance")."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                self.workers[0].rest("PUT", f"/connectors/{name}/config", config)
                return
            except ConnectError as e:
                if time.monotonic() > deadline:
                    raise StepFailed(
                        f"connector {name} not created within {START_TIMEOUT:.0f}s: {e}"
                    ) from None
            time.sleep(0.5)

    def _sdk_leave(self) -> None:
        if self.sdk_thread is not None and self.sdk_left is None:
            self.sdk_thread.close()
            self.spans.left()
            self.sdk_left = time.time()

    def _stop_all(self) -> None:
        with contextlib.suppress(Exception):
            self._sdk_leave()
        for w in self.workers:  # all told at once: Connect's clean shutdown takes seconds each
            if w.proc.poll() is None:
                w.proc.terminate()
        for w in self.workers:
            w.stop()

    # -- the verdict ---------------------------------------------------------------------------

    def checks(self, intervals: dict[str, list[tuple[int, int, str]]]) -> list[str]:
        """Over the whole run: nothing on two workers at once, and the SDK worker's share ran on
        a classic worker before it and after it left."""
        problems = [f"a connector or task on two workers at once: {o}" for o in overlaps(intervals)]
        taken = {item for _, _, item in self.spans.spans}
        if not taken:
            problems.append("the SDK worker never ran a connector or task")
        for item in sorted(taken):
            owners = [worker for _, _, worker in sorted(intervals[item])]
            i = owners.index(SDK_URL)
            if not (0 < i < len(owners) - 1):
                problems.append(
                    f"{item} ran on {owners}: not on a classic worker both before the SDK worker and after it"
                )
        for s in self.steps:
            if s.observed_type != s.expect_type:
                problems.append(f"{s.label}: group listed as {s.observed_type}, expected {s.expect_type}")
        return problems

    def run(self) -> CellResult:
        t0 = time.time()
        reason = ""
        intervals: dict[str, list[tuple[int, int, str]]] = {}
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            self.input_file.touch()
            self.scenario()
        except StepFailed as e:
            reason = str(e)
        except Exception as e:
            reason = f"{type(e).__name__}: {e}"
        finally:
            # judged before the rest stop: what still runs runs until now
            with contextlib.suppress(Exception):
                intervals = self.spans.add_to(ownership_intervals(self.workers))
            self._stop_all()
        end = time.time()
        problems = self.checks(intervals)
        failed = bool(reason or problems)
        if not reason and problems:
            reason = problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
        elif reason:  # the step's failure first; a violation seen before it too
            overlapping = [p for p in problems if p.startswith("a connector or task on two")]
            if overlapping:
                reason += f"; also {overlapping[0]}"
        logs = self.member_logs()
        windows = self.windows(intervals, end)
        handovers = sum(max(len(spans) - 1, 0) for spans in intervals.values())
        detail = Verdict(problems, len(self.output_lines()), 0, 0, handovers, windows)
        self.write_events(logs)
        if not reason:
            slowest = max((s.seconds or 0.0 for s in self.steps), default=0.0)
            reason = (
                f"{len(intervals)} connectors and tasks, {handovers} hand-overs, none on two workers at "
                f"once, {len(self.lines)} lines through, slowest step {slowest:.1f}s to full ownership"
            )
        return CellResult(
            self.cell,
            "fail" if failed else "pass",
            reason,
            end - t0,
            self.steps,
            logs,
            detail,
            t0=t0,
            t1=end,
            lanes=lanes(),
        )

    def member_logs(self) -> list[MemberLog]:
        """One MemberLog per worker (its log's starts and stops as events), the SDK worker's last."""
        logs = []
        for i, w in enumerate(self.workers, 1):
            log = MemberLog(f"w{i}", self.cell.spec.key, "classic")
            log.events = [{"name": e.kind, "item": e.item, "timestamp": e.ms} for e in w.events()]
            logs.append(log)
        if self.sdk is not None:
            log = MemberLog("sdk", SDK_CLIENT, "connect")
            for began, ended, item in sorted(self.spans.spans):
                log.events += [
                    {"name": "start", "item": item, "timestamp": began},
                    {"name": "stop", "item": item, "timestamp": ended},
                ]
            log.exited_at = self.sdk_left
            logs.append(log)
        return logs

    def windows(
        self, intervals: dict[str, list[tuple[int, int, str]]], end: float
    ) -> dict[int, list[Window]]:
        """The intervals as the report's windows: a lane per connector or task (`lanes`), the
        member named as in `member_logs`."""
        names = {w.worker_id: f"w{i}" for i, w in enumerate(self.workers, 1) if w.url}
        names[SDK_URL] = "sdk"
        out: dict[int, list[Window]] = {}
        for lane, item in enumerate(lanes()):
            for began, ended, worker in sorted(intervals.get(item, [])):
                out.setdefault(lane, []).append(
                    Window(names.get(worker, worker), lane, began / 1000, min(ended / 1000, end))
                )
        return out

    def write_events(self, logs: list[MemberLog]) -> None:
        """Each member's starts and stops (events/NAME.jsonl), for post-mortems; the workers'
        own logs stay in their directories."""
        with contextlib.suppress(OSError):
            d = self.workdir / "events"
            d.mkdir(parents=True, exist_ok=True)
            for log in logs:
                (d / f"{log.name}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log.events))
