"""Matrix cells in containers give the verdicts the same clients give in processes.

Two cells, each run twice against an embedded groupshift (a `groupshift serve` process): once
with every client a local process, once with every client a container of the docker runtime
(harness.matrix.docker_runtime: an engine found or started here, images built locally, host
networking, the repository mounted read-only). Cells:

- Kafka's own Java `VerifiableConsumer` (newest 4.x tools), classic protocol, cooperative-sticky;
- the franz-go verifiable consumer, KIP-848 consumer protocol, uniform server assignor.

The story of a cell: one member consumes the backlog, a second joins and the partitions split, more
records arrive, the first leaves cleanly and the second takes everything over. The verdict checks
what the matrix's checkers check: no partition owned by two members at once, every produced
record consumed, commits monotonic per member and partition, the group's final commits at the log
end. When no Docker engine can be had the container half skips and prints why (the process half
of each cell still runs, so the cell's process verdict is always checked here).

The process runtime here is a minimal stand-in for harness.matrix.process_runtime (the runner's),
running the same command lines: `java_clients(version).command(...)` and the Go binary.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.groups import FAST_GROUP_SETTINGS, create_topic, produce
from harness.matrix.docker_engine import EngineUnavailable, ensure_engine, ping
from harness.matrix.go_clients import GO_LIBRARIES, GoUnavailable, go_command
from harness.matrix.runtime import ClientHandle, ClientSpec, Runtime

PARTITIONS = 6
FIRST, SECOND = 150, 150
TIMEOUT = 90.0
REPO = Path(__file__).resolve().parent.parent
CLEAN_EXITS = (0, 143)  # a JVM ends a SIGTERM (shutdown hooks run, clean close) with 128+15


@dataclass(frozen=True)
class Cell:
    client: ClientSpec
    protocol: str
    assignor: str

    @property
    def id(self) -> str:
        return f"{self.client.library}-{self.protocol}-{self.assignor}"

    def argv(self, bootstrap: str, topic: str, group: str, n: int) -> list[str]:
        common = ["--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group]
        common += ["--group-protocol", self.protocol, "--session-timeout", "6000"]
        if self.client.library == "java":
            strategy = {"cooperative-sticky": "CooperativeStickyAssignor", "range": "RangeAssignor"}
            extra = (
                ["--assignment-strategy", f"org.apache.kafka.clients.consumer.{strategy[self.assignor]}"]
                if self.protocol == "classic"
                else ["--group-remote-assignor", self.assignor]
            )
            return ["VerifiableConsumer", *common, *extra]
        return [*common, "--assignor", self.assignor, "--client-id", f"member-{n}"]


CELLS = [
    Cell(ClientSpec("java", "4"), "classic", "cooperative-sticky"),
    Cell(ClientSpec("franz-go", "pinned"), "consumer", "uniform"),
]


# -- a process runtime (the stand-in) -----------------------------------------------------------


class LocalProcess:
    def __init__(self, command: Sequence[str], env: Mapping[str, str], stderr: Path) -> None:
        self._stderr = open(stderr, "wb")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            list(command),
            cwd=REPO,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
        )

    def lines(self) -> Iterator[str]:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            yield raw.decode(errors="replace").rstrip("\n")

    def terminate(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"pid {self.proc.pid} still running") from None
        self._stderr.close()
        return code


class LocalRuntime:
    name = "process"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._java: dict[str, Any] = {}
        self._handles: list[LocalProcess] = []

    def prepare(self, client: ClientSpec) -> None:
        self.command(client, ["VerifiableConsumer"] if client.library == "java" else [])

    def command(self, client: ClientSpec, argv: Sequence[str]) -> list[str]:
        if client.library == "java":
            from harness.kafka_dist.java_clients import java_clients

            if client.version not in self._java:
                self._java[client.version] = java_clients(client.version, self.workdir / "java")
            return list(self._java[client.version].command(argv[0], *argv[1:]))
        if client.library in GO_LIBRARIES:
            return go_command(client, argv)
        raise ValueError(client.library)

    def spawn(self, client: ClientSpec, argv: Sequence[str], env: Mapping[str, str]) -> LocalProcess:
        handle = LocalProcess(self.command(client, argv), env, self.workdir / f"{len(self._handles)}.stderr")
        self._handles.append(handle)
        return handle

    def close(self) -> None:
        for h in self._handles:
            h.kill()
            with contextlib.suppress(TimeoutError):
                h.wait(10)


# -- running a cell ------------------------------------------------------------------------------


@dataclass
class Member:
    handle: ClientHandle
    events: list[dict[str, Any]] = field(default_factory=list)
    noise: list[str] = field(default_factory=list)

    def start_reading(self) -> None:
        import json

        def read() -> None:
            for line in self.handle.lines():
                try:
                    event = json.loads(line)
                except ValueError:
                    self.noise.append(line)
                    continue
                if isinstance(event, dict):
                    self.events.append(event)

        threading.Thread(target=read, daemon=True).start()

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for e in list(self.events):
            if e.get("name") == "partitions_assigned":
                owned |= {p["partition"] for p in e["partitions"]}
            elif e.get("name") == "partitions_revoked":
                owned -= {p["partition"] for p in e["partitions"]}
        return owned

    def consumed(self) -> int:
        return sum(e["count"] for e in list(self.events) if e.get("name") == "records_consumed")


def wait_for(condition: Any, what: str, members: list[Member]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            seen = [[e.get("name") for e in m.events][-8:] for m in members]
            raise AssertionError(f"timed out waiting for {what}; last events: {seen}")
        time.sleep(0.1)


def run_cell(runtime: Runtime, cell: Cell, gw: Any, tag: str) -> tuple[str, list[list[dict[str, Any]]]]:
    """Run the cell's story on `runtime`; returns (verdict, each member's events)."""
    topic, group = f"cell-{cell.id}-{tag}", f"cell-group-{cell.id}-{tag}"
    create_topic(gw, topic, PARTITIONS)
    produce(gw, topic, range(FIRST))
    runtime.prepare(cell.client)
    members: list[Member] = []

    def start(n: int) -> Member:
        m = Member(runtime.spawn(cell.client, cell.argv(gw.bootstrap, topic, group, n), {}))
        m.start_reading()
        members.append(m)
        return m

    everything = set(range(PARTITIONS))
    try:
        first = start(1)
        wait_for(lambda: first.consumed() >= FIRST, "the backlog consumed by the first member", members)
        second = start(2)
        wait_for(
            lambda: first.owned() and second.owned(), "the partitions split between two members", members
        )
        produce(gw, topic, range(FIRST, FIRST + SECOND))
        wait_for(
            lambda: first.consumed() + second.consumed() >= FIRST + SECOND, "every record consumed", members
        )
        first.handle.terminate()
        assert first.handle.wait(60) in CLEAN_EXITS
        wait_for(lambda: second.owned() == everything, "the second member owning everything", members)
        second.handle.terminate()
        assert second.handle.wait(60) in CLEAN_EXITS
    finally:
        for m in members:
            m.handle.kill()
    time.sleep(0.5)  # the readers take the last lines
    streams = [m.events for m in members]
    return verdict(streams, FIRST + SECOND), streams


def verdict(streams: list[list[dict[str, Any]]], produced: int) -> str:
    """ "pass", or the first invariant a cell's event streams break (the matrix checkers' rules)."""
    per_partition = produced // PARTITIONS  # e2e.groups.record() spreads records round-robin
    intervals: dict[int, list[tuple[int, float, float]]] = {}
    offsets: dict[int, set[int]] = {}
    final: dict[int, int] = {}
    for i, events in enumerate(streams):
        names = [e.get("name") for e in events]
        if not names or names[0] != "startup_complete" or names[-1] != "shutdown_complete":
            return f"member {i}: stream not from startup_complete to shutdown_complete: {names}"
        since: dict[int, float] = {}
        last_commit: dict[int, int] = {}
        for e in events:
            name, ts = e["name"], float(e["timestamp"])
            if name == "partitions_assigned":
                for p in e["partitions"]:
                    since[p["partition"]] = ts
            elif name == "partitions_revoked":
                for p in e["partitions"]:
                    start = since.pop(p["partition"], None)
                    if start is not None:
                        intervals.setdefault(p["partition"], []).append((i, start, ts))
            elif name == "records_consumed":
                for p in e["partitions"]:
                    offsets.setdefault(p["partition"], set()).update(
                        range(p["minOffset"], p["maxOffset"] + 1)
                    )
            elif name == "offsets_committed" and e["success"]:
                for o in e["offsets"]:
                    if o["offset"] < last_commit.get(o["partition"], -1):
                        return f"member {i}: commit of partition {o['partition']} went back to {o['offset']}"
                    last_commit[o["partition"]] = o["offset"]
                    final[o["partition"]] = max(final.get(o["partition"], 0), o["offset"])
        end = float(events[-1]["timestamp"])
        for p, start in since.items():  # still owned at shutdown
            intervals.setdefault(p, []).append((i, start, end))
    for p, spans in intervals.items():
        spans.sort(key=lambda s: s[1])
        for (a, _, a_end), (b, b_start, _) in itertools.pairwise(spans):
            if a != b and b_start < a_end:
                return f"partition {p} owned by members {a} and {b} at once"
    for p in range(PARTITIONS):
        missing = set(range(per_partition)) - offsets.get(p, set())
        if missing:
            return f"partition {p}: {len(missing)} produced records never consumed (first {min(missing)})"
        if final.get(p) != per_partition:
            return f"partition {p}: last commit {final.get(p)}, log end {per_partition}"
    return "pass"


# -- fixtures and tests ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def docker_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        engine = ensure_engine()
    except EngineUnavailable as e:
        print(f"no Docker engine for the container cells: {e}")
        pytest.skip(f"no Docker engine can be found or started here: {e}")
    from harness.matrix.docker_runtime import DockerRuntime

    runtime = DockerRuntime(workdir=tmp_path_factory.mktemp("docker-runtime"), engine=engine)
    print(f"docker engine: {engine.how}")
    try:
        yield runtime
    finally:
        print(f"images built (s): {runtime.build_timings}")
        runtime.close()
        engine.close()


@pytest.mark.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
def test_cell_same_verdict_in_processes_and_containers(
    gateways: Gateways, docker_runtime: Any, tmp_path: Path, cell: Cell, request: pytest.FixtureRequest
) -> None:
    gw = gateways.start("cells", sets=FAST_GROUP_SETTINGS)
    process_runtime = LocalRuntime(tmp_path)
    try:
        in_processes, _ = run_cell(process_runtime, cell, gw, "process")
    except GoUnavailable as e:
        pytest.skip(f"the Go client cannot be built here: {e}")
    finally:
        process_runtime.close()
    t0 = time.monotonic()
    in_containers, streams = run_cell(docker_runtime, cell, gw, "docker")
    print(f"{cell.id}: process verdict {in_processes!r}, container verdict {in_containers!r} "
          f"({time.monotonic() - t0:.1f}s in containers, image builds included)")  # fmt: skip
    assert in_processes == "pass"
    assert in_containers == in_processes
    assert all(len(s) >= 4 for s in streams)


def test_verdict_catches_double_ownership_and_loss() -> None:
    """The cell verdict is not vacuous: broken streams are named as such."""
    t = 1_700_000_000_000

    def stream(assigned: list[int], start: int, end: int, consumed: int) -> list[dict[str, Any]]:
        tps = [{"topic": "t", "partition": p} for p in assigned]
        per = [
            {"topic": "t", "partition": p, "count": consumed, "minOffset": 0, "maxOffset": consumed - 1}
            for p in assigned
        ]
        commits = [{"topic": "t", "partition": p, "offset": consumed} for p in assigned]
        return [
            {"timestamp": start, "name": "startup_complete"},
            {"timestamp": start + 1, "name": "partitions_assigned", "partitions": tps},
            {"timestamp": start + 2, "name": "records_consumed", "count": consumed * 3, "partitions": per},
            {"timestamp": start + 3, "name": "offsets_committed", "offsets": commits, "success": True},
            {"timestamp": end, "name": "partitions_revoked", "partitions": tps},
            {"timestamp": end + 1, "name": "shutdown_complete"},
        ]  # fmt: skip

    good = [stream([0, 1, 2], t, t + 100, 10), stream([3, 4, 5], t, t + 100, 10)]
    assert verdict(good, 60) == "pass"
    overlap = [stream([0, 1, 2], t, t + 100, 10), stream([2, 3, 4, 5], t + 50, t + 200, 10)]
    assert verdict(overlap, 60) == "partition 2 owned by members 0 and 1 at once"
    lost = [stream([0, 1, 2], t, t + 100, 10), stream([3, 4, 5], t, t + 100, 9)]
    assert verdict(lost, 60).startswith("partition 3: 1 produced records never consumed")


def test_unreachable_docker_host_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A DOCKER_HOST that does not answer is an error naming it, never a silent fallback."""
    host = f"unix://{tmp_path}/absent.sock"
    monkeypatch.setenv("DOCKER_HOST", host)
    assert ping(host) is not None
    with pytest.raises(EngineUnavailable, match=r"absent\.sock"):
        ensure_engine()
