"""The Connect worker SDK (`connect_worker.ConnectWorker`) against `groupshift serve` over real
TCP (docs/connect-groups.md, "Worker SDK").

One server with `group.connect.enable=true`, a 2 s worker session and a 3 s
`scheduled.rebalance.max.delay.ms`; three SDK workers (each on a thread and event loop of its own,
`ConnectWorkerThread`, as separate processes cost seconds of imports each on a loaded CI machine)
with connectors a:4, b:4, c:1 (3 connectors, 9 tasks). Every callback updates what its worker
runs under one lock and checks, at that point, that no connector or task is run by two workers.
Then: the three balance (1 connector and 3 tasks each); one crashes (its loop stops, its
connection drops, no leave is sent) and its work stays unassigned for at least the delay, then
moves to the other two; a fourth worker joins and only the excess of the two moves to it (no
swaps between the two that stay). While the three are balanced, `groupshift groups list` shows
the group with TYPE `Connect` (also under `--type connect`, not under `--type consumer`) and
`groups describe --members` shows each worker's URL, connectors and tasks as the SDK runs them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from connect_worker import (
    ConnectGroupState,
    ConnectorConfig,
    ConnectWorker,
    ConnectWorkerThread,
    IncrementalCooperativeAssignor,
    TaskId,
    WorkerAssignment,
)
from connect_worker.core import Computed
from e2e.conftest import Gateways
from e2e.groups_cli import groups_json, ok, table
from e2e.harness import GatewayProcess

pytestmark = pytest.mark.e2e

SESSION_MS = 2000
DELAY_MS = 3000
ON = (
    "group.connect.enable=true",
    f"group.connect.session.timeout.ms={SESSION_MS}",
    "group.connect.heartbeat.interval.ms=300",
    f"group.connect.scheduled.rebalance.max.delay.ms={DELAY_MS}",
)
GROUP = "sdk-workers"
CONFIG = ConnectorConfig(1, {"a": 4, "b": 4, "c": 1})
ALL = {"a", "b", "c"} | {f"a-{i}" for i in range(4)} | {f"b-{i}" for i in range(4)} | {"c-0"}


@pytest.fixture(scope="module")
def server(module_gateways: Gateways) -> GatewayProcess:
    return module_gateways.start("connect-sdk", sets=ON)


def items(connectors: frozenset[str], tasks: frozenset[TaskId]) -> set[str]:
    return set(connectors) | {f"{c}-{t}" for c, t in tasks}


class Fleet:
    """SDK workers on threads, what each runs, and every callback, checked as it happens."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.threads: dict[str, ConnectWorkerThread] = {}
        self.lock = threading.Lock()
        self.owned: dict[str, set[str]] = {}
        self.assigned_at: list[tuple[float, str, set[str]]] = []
        self.held_seen = False
        self.computed: list[Computed] = []
        self.violations: list[str] = []

    def start(self, name: str) -> None:
        fleet = self

        class Watching(IncrementalCooperativeAssignor):
            def assign(self, group: ConnectGroupState) -> dict[str, WorkerAssignment]:
                fleet.held_seen = fleet.held_seen or bool(group.held)
                return super().assign(group)

        def assigned(cs: frozenset[str], ts: frozenset[TaskId]) -> None:
            with self.lock:
                new = items(cs, ts)
                for other, run in self.owned.items():
                    if other != name and run & new:
                        self.violations.append(f"{sorted(run & new)} given to {name} while {other} runs them")
                self.owned.setdefault(name, set()).update(new)
                self.assigned_at.append((time.time(), name, new))

        def revoked(cs: frozenset[str], ts: frozenset[TaskId]) -> None:
            with self.lock:
                self.owned.setdefault(name, set()).difference_update(items(cs, ts))

        worker = ConnectWorker(
            self.bootstrap,
            GROUP,
            f"http://{name}:8083",
            [Watching(CONFIG)],
            config_offset=CONFIG.offset,
            on_assigned=assigned,
            on_revoked=revoked,
            on_computed=self.computed.append,
            rebalance_timeout_ms=5000,
        )
        self.threads[name] = ConnectWorkerThread(worker, name=name)
        self.threads[name].start()

    def crash(self, name: str) -> None:
        """Stop the worker's loop without a leave (its connection drops): a crashed worker."""
        thread = self.threads.pop(name)
        task = thread.membership._task
        assert task is not None

        def cancel() -> None:
            task.cancel()

        thread.call(cancel)
        assert thread._thread is not None
        thread._thread.join(5)
        with self.lock:
            self.owned.pop(name, None)

    def wait(self, what: str, cond: Callable[[], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if cond():
                    return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; owned: {self.owned}")

    def stop(self) -> None:
        for thread in self.threads.values():
            thread.close()


def split(items: set[str]) -> tuple[int, int]:
    """(connectors, tasks) among `items`."""
    tasks = sum(1 for i in items if "-" in i)
    return len(items) - tasks, tasks


def balanced(fleet: Fleet, names: list[str]) -> bool:
    owned = [fleet.owned.get(n, set()) for n in names]
    if set().union(*owned) != ALL or sum(len(o) for o in owned) != len(ALL):
        return False
    counts = [split(o) for o in owned]
    return all(max(c[k] for c in counts) - min(c[k] for c in counts) <= 1 for k in (0, 1))


def check_groups_tool(fleet: Fleet, bootstrap: str) -> None:
    """`groups list` and `groups describe` read the connect group as the workers hold it."""
    rows = {r["GROUP"]: r["TYPE"] for r in table(ok(bootstrap, "list", "--type"))}
    assert rows.get(GROUP) == "Connect", rows
    assert [g["group"] for g in groups_json(bootstrap, "list", "--type", "connect")] == [GROUP]
    assert GROUP not in {g["group"] for g in groups_json(bootstrap, "list", "--type", "consumer")}
    d = groups_json(bootstrap, "describe", GROUP, "--members")
    assert d["type"] == "connect" and d["protocol_type"] == "connect", d
    with fleet.lock:
        expected = {f"http://{n}:8083": fleet.owned[n] for n in ("w1", "w2", "w3")}
    shown = {m["url"]: set(m["connectors"]) | set(m["tasks"]) for m in d["members"]}
    assert shown == expected, (shown, expected)
    state = table(ok(bootstrap, "describe", GROUP, "--state"))
    assert [(r["STATE"], r["TYPE"], r["#MEMBERS"]) for r in state] == [("Stable", "Connect", "3")], state


def test_sdk_workers_balance_hold_a_killed_workers_work_and_move_incrementally(
    server: GatewayProcess,
) -> None:
    fleet = Fleet(server.bootstrap)
    try:
        for name in ("w1", "w2", "w3"):
            fleet.start(name)
        fleet.wait("three workers balanced", lambda: balanced(fleet, ["w1", "w2", "w3"]))
        assert [split(fleet.owned[n]) for n in ("w1", "w2", "w3")] == [(1, 3)] * 3
        assert any(c.installed and c.error == 0 for c in fleet.computed)
        check_groups_tool(fleet, server.bootstrap)

        lost = set(fleet.owned["w3"])
        before = {n: set(fleet.owned[n]) for n in ("w1", "w2")}
        killed_at = time.time()
        fleet.crash("w3")
        fleet.wait("the crashed worker's work reassigned", lambda: balanced(fleet, ["w1", "w2"]), timeout=25)
        taken = [t for t, _, new in fleet.assigned_at if t >= killed_at and lost & new]
        assert min(taken) - killed_at >= DELAY_MS / 1000, "held work moved before the delay"
        for n in ("w1", "w2"):
            assert before[n] <= fleet.owned[n], f"{n} lost work it kept running"
        assert fleet.held_seen, "no computation saw the held work"

        before = {n: set(fleet.owned[n]) for n in ("w1", "w2")}
        fleet.start("w4")
        fleet.wait("the added worker balanced in", lambda: balanced(fleet, ["w1", "w2", "w4"]))
        for n in ("w1", "w2"):
            assert fleet.owned[n] <= before[n], f"{n} was given work when a worker joined: not incremental"
        moved = (before["w1"] - fleet.owned["w1"]) | (before["w2"] - fleet.owned["w2"])
        assert moved == fleet.owned["w4"]
        assert split(fleet.owned["w4"]) == (1, 3), "more moved than balance needs"
    finally:
        fleet.stop()
    assert fleet.violations == []
    assert all(not run for run in fleet.owned.values()), "a closed worker still runs something"
