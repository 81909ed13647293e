"""The Connect-group simulator with faults (sim/connect_chaos.py, docs/simulation.md "Connect
groups"): the slice CI runs, its determinism, and that its invariants do fail when the
coordinator or a worker is broken on purpose.

Longer: `CONNECT_CHAOS_SEEDS=100 CONNECT_CHAOS_STEPS=1000 pytest tests/test_sim_connect.py`, or
with figures `groupshift simulate --chaos --connect --seed 1000 --steps 1000 --seeds 100
--keep-going`."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import pytest
import structlog.testing

from connect_worker.assignor import ConnectorConfig
from connect_worker.assignor import Work as WorkerWork
from engine.connect.group import NO_TARGET, ConnectGroup, Work, WorkerState
from engine.outcome import Outcome
from engine.shard import Shard
from sim.chaos import Violation
from sim.connect_chaos import NAMES, ConnectSimMachine, main, run_seed
from tests.chaos_slices import replays_exactly, run_slice

SEEDS = int(os.environ.get("CONNECT_CHAOS_SEEDS", "6"))
STEPS = int(os.environ.get("CONNECT_CHAOS_STEPS", "300"))


def test_connect_chaos_slice() -> None:
    """SEEDS seeds of STEPS faulty steps, a quiet tail and the settling: 0 violations, and the
    faults and the Connect paths did happen (a slice that injects nothing proves nothing)."""
    run_slice(
        main,
        SEEDS,
        STEPS,
        (
            "ComputeAssignment",
            "InstallAssignment NONE",
            "InstallAssignment NONE (assignor error)",
            "balanced install checked",
            "PrepareAssignment with held work",
            "work revoked",
            "work lost (fenced)",
            "heartbeat UNKNOWN_MEMBER_ID",
            "hung assigning worker fenced",
            "old install sent again",
            "connector configuration: add",
            "connector configuration: remove",
            "answer lost",
            "append failed",
            "reload after storage failure",
            "crash_server",
        ),
    )


def test_a_seed_replays_exactly() -> None:
    replays_exactly(run_seed, 3, 120)


def _settled() -> tuple[ConnectSimMachine, ConnectGroup]:
    """Five workers, no faults, converged: every connector and task run once."""
    with structlog.testing.capture_logs():
        m = ConnectSimMachine(random.Random(2))
        m.quiet()
        for name in NAMES:
            m.start(name)
        m.settle()
    g = m.group
    assert g is not None and g.state() == "Stable" and len(g.members) == len(NAMES)
    return m, g


def _two_busy(m: ConnectSimMachine) -> tuple[str, str]:
    busy = sorted(n for n, w in m.workers.items() if w.core.owned.tasks)
    assert len(busy) >= 2, busy
    return busy[0], busy[1]


def test_a_task_run_by_two_workers_is_a_violation() -> None:
    """A worker that runs a task another runs (the coordinator saying it is its own to revoke,
    so only the workers' view is wrong) fails invariant 1; so does a worker running what the
    coordinator never gave it."""
    m, g = _settled()
    a, b = _two_busy(m)
    wa, wb = m.workers[a], m.workers[b]
    stolen = next(iter(sorted(wa.core.owned.tasks)))
    wb.core.owned = WorkerWork(wb.core.owned.connectors, wb.core.owned.tasks | {stolen})
    with pytest.raises(AssertionError, match="which the coordinator does not have it run"):
        m.no_work_twice_in_the_workers_view()
    cb = g.members[wb.member_id]
    cb.pending_revocation = cb.pending_revocation | Work(frozenset(), frozenset({stolen}))
    with pytest.raises(AssertionError, match="run by workers"):
        m.no_work_twice_in_the_workers_view()


def test_a_task_assigned_twice_by_the_coordinator_is_a_violation() -> None:
    m, g = _settled()
    a, b = _two_busy(m)
    ca, cb = g.members[m.workers[a].member_id], g.members[m.workers[b].member_id]
    cb.assigned = cb.assigned | ca.assigned
    with pytest.raises(AssertionError, match="assigned to"):
        m.no_work_twice_in_the_coordinator()


def test_unassigned_work_in_a_stable_group_is_a_violation() -> None:
    """Liveness: a configured connector nobody runs once the group is Stable."""
    m, _ = _settled()
    assert m.converged() == ""
    m.configs.append(ConnectorConfig(m.latest + 1, {**m.configs[-1].connectors, "extra": 1}))
    with pytest.raises(AssertionError, match="does not run every configured"):
        m.converged()


def test_a_group_the_log_does_not_rebuild_is_a_violation() -> None:
    m, g = _settled()
    g.group_epoch += 1
    with pytest.raises(AssertionError, match="replay"):
        m.replica_equals_live()


def test_a_coordinator_that_assigns_work_still_in_use_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: the coordinator broken on purpose (a worker is given its target's work at once,
    without waiting for the worker that runs it to revoke it) makes a seed fail on a double
    assignment.

    The fault is put in at the simulator's side of the shard (`ShardSimMachine._request`, sim/ is
    never compiled): after each request the coordinator ran, every worker its reconciliation left
    UNRELEASED (waiting for others to revoke part of its target) is given the whole target, what
    `engine.connect.heartbeat._reconcile` does when it ignores the work others still hold. It used
    to patch `heartbeat._in_use_by_others`, which the compiled build calls natively: the patch
    was never seen there and the seed, rightly, found nothing (docs/benchmarks.md, patching
    compiled code)."""
    request = ConnectSimMachine._request
    broken: list[str] = []

    def assigns_work_still_in_use(machine: ConnectSimMachine, send: Callable[[Shard], Outcome[Any]]) -> Any:
        answer = request(machine, send)
        g = machine.group
        if g is not None:
            for mid, m in g.members.items():
                if m.state == WorkerState.UNRELEASED:
                    m.assigned = m.assigned | g.targets.get(mid, NO_TARGET).work
                    m.state = WorkerState.STABLE
                    broken.append(mid)
        return answer

    monkeypatch.setattr(ConnectSimMachine, "_request", assigns_work_still_in_use)
    with pytest.raises(Violation, match=r"assigned to|run by workers"):
        run_seed(1, 300)
    assert broken, "the fault was never applied: the seed proves nothing"
