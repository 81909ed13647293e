"""`connect_worker.assignor.IncrementalCooperativeAssignor`: Kafka Connect's incremental
cooperative assignment (KIP-415) of connectors and tasks, property-tested: every connector and
task of the configuration is given to exactly one worker, each worker's connectors and tasks are
within one of every other's, nothing moves when nothing changed, a worker that joins takes only
the excess of the others, held work goes only to its returning worker or to nobody."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from connect_worker.assignor import (
    ConnectGroupState,
    ConnectorConfig,
    HeldWork,
    IncrementalCooperativeAssignor,
    Work,
    WorkerInfo,
    balance,
)

NOTHING = Work()

configs = st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 6), max_size=6).map(
    lambda d: ConnectorConfig(1, d)
)


def worker(
    member_id: str, target: Work = NOTHING, url: str | None = None, metadata: bytes = b""
) -> WorkerInfo:
    return WorkerInfo(member_id, url or f"http://{member_id}", 1, 0, metadata, target)


def run(
    config: ConnectorConfig, workers: list[WorkerInfo], held: tuple[HeldWork, ...] = ()
) -> dict[str, Work]:
    group = ConnectGroupState("g", 5, "incremental", workers[0].member_id, tuple(workers), held)
    return {m: a.work for m, a in IncrementalCooperativeAssignor(config).assign(group).items()}


def assert_exact_and_balanced(config: ConnectorConfig, plan: dict[str, Work]) -> None:
    wanted = config.work()
    connectors = [c for w in plan.values() for c in w.connectors]
    tasks = [t for w in plan.values() for t in w.tasks]
    assert sorted(connectors) == sorted(wanted.connectors)
    assert sorted(tasks) == sorted(wanted.tasks)
    for counts in ([len(w.connectors) for w in plan.values()], [len(w.tasks) for w in plan.values()]):
        assert max(counts) - min(counts) <= 1, plan


@settings(max_examples=150, deadline=None)
@given(configs, st.integers(1, 6), st.randoms(use_true_random=False))
def test_everything_assigned_once_and_balanced_and_stable(
    config: ConnectorConfig, n: int, rnd: random.Random
) -> None:
    wanted = config.work()
    # Start from an arbitrary (unbalanced, partial) current assignment.
    ids = [f"w{i}" for i in range(n)]
    targets: dict[str, Work] = {m: Work() for m in ids}
    for c in sorted(wanted.connectors):
        if rnd.random() < 0.7:
            m = rnd.choice(ids)
            targets[m] = targets[m] | Work(frozenset({c}))
    for t in sorted(wanted.tasks):
        if rnd.random() < 0.7:
            m = rnd.choice(ids)
            targets[m] = targets[m] | Work(tasks=frozenset({t}))
    plan = run(config, [worker(m, targets[m]) for m in ids])
    assert_exact_and_balanced(config, plan)
    # Incremental: a worker keeps what it ran up to its share (nobody loses and gains at once).
    for m in ids:
        lost, gained = targets[m] - plan[m], plan[m] - targets[m]
        assert not (lost.connectors and gained.connectors) and not (lost.tasks and gained.tasks)
    # Nothing changes: nothing moves.
    assert run(config, [worker(m, plan[m]) for m in ids]) == plan


@settings(max_examples=100, deadline=None)
@given(configs, st.integers(1, 5))
def test_a_joining_worker_takes_only_the_excess(config: ConnectorConfig, n: int) -> None:
    ids = [f"w{i}" for i in range(n)]
    before = run(config, [worker(m) for m in ids])
    after = run(config, [worker(m, before[m]) for m in ids] + [worker("new")])
    assert_exact_and_balanced(config, after)
    for m in ids:
        assert after[m].connectors <= before[m].connectors and after[m].tasks <= before[m].tasks


def test_held_work_stays_out_of_every_target_until_released() -> None:
    config = ConnectorConfig(1, {"a": 2, "b": 2})
    w1 = worker("w1", Work(frozenset({"a"}), frozenset({("a", 0), ("b", 0)})))
    held = HeldWork("gone", "http://gone", 2000, Work(frozenset({"b"}), frozenset({("a", 1), ("b", 1)})))
    plan = run(config, [w1, worker("w2")], (held,))
    given_out = plan["w1"] | plan["w2"]
    assert not (given_out & held.work), "held work given to a worker with another URL"
    assert given_out == Work(frozenset({"a"}), frozenset({("a", 0), ("b", 0)}))
    # While work is held nothing is revoked for balance (w1 keeps 1 connector and 2 tasks while
    # w2 has none), but new work goes to the least loaded.
    assert plan["w1"] == w1.target and plan["w2"] == Work()
    grown = ConnectorConfig(2, {"a": 2, "b": 2, "c": 1})
    plan = run(grown, [w1, worker("w2")], (held,))
    assert plan["w2"] == Work(frozenset({"c"}), frozenset({("c", 0)})) and plan["w1"] == w1.target
    # The departed worker is back (same URL, new member id): it gets its work back.
    plan = run(config, [w1, worker("w2"), worker("back", url="http://gone")], (held,))
    assert plan["back"].connectors >= held.work.connectors and plan["back"].tasks >= held.work.tasks
    assert_exact_and_balanced(config, plan)


def test_deleted_connectors_are_revoked_and_the_newest_configuration_wins() -> None:
    old = ConnectorConfig(1, {"a": 1, "b": 1})
    new = ConnectorConfig(2, {"a": 1})
    w1 = worker("w1", Work(frozenset({"a", "b"}), frozenset({("a", 0), ("b", 0)})))
    w2 = worker("w2", metadata=new.encode())
    plan = run(old, [w1, w2])  # the computing worker has read less than w2
    assert plan["w1"] | plan["w2"] == new.work()


def test_metadata_that_is_not_a_configuration_is_ignored() -> None:
    for data in (
        b"",
        b"not json",
        b"[]",
        b'{"offset": "x", "connectors": {}}',
        b'{"offset": 9, "connectors": {"a": -1}}',
    ):
        assert ConnectorConfig.decode(data) is None
    config = ConnectorConfig(1, {"a": 1})
    plan = run(config, [worker("w1", metadata=b'{"offset": 9, "connectors": {"a": -1}}')])
    assert plan["w1"] == config.work()


def test_balance_gives_the_larger_shares_to_those_that_run_most() -> None:
    out = balance(["x", "y", "z"], {"p": frozenset({"x", "y"}), "q": frozenset()})
    assert out == {"p": frozenset({"x", "y"}), "q": frozenset({"z"})}
