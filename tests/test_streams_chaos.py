"""The streams-group simulator with faults (sim/streams_chaos.py, docs/simulation.md): the slice CI
runs, its determinism, and that its invariants do fail on a broken group.

Longer: `STREAMS_CHAOS_SEEDS=1000 STREAMS_CHAOS_STEPS=1000 pytest tests/test_streams_chaos.py`,
or (one process, with figures) `groupshift simulate --chaos --streams --seed 1000 --steps 1000
--seeds 1000 --keep-going`."""

from __future__ import annotations

import os
import random

import pytest
import structlog.testing

from sim.streams_chaos import NAMES, StreamsSimMachine, main, run_seed
from tests.chaos_slices import replays_exactly, run_slice

SEEDS = int(os.environ.get("STREAMS_CHAOS_SEEDS", "20"))
STEPS = int(os.environ.get("STREAMS_CHAOS_STEPS", "200"))


def test_streams_chaos_slice() -> None:
    """SEEDS seeds of STEPS faulty steps, a quiet tail and the settling: 0 violations, and the
    faults and the streams paths did happen (a slice that injects nothing proves nothing)."""
    run_slice(
        main,
        SEEDS,
        STEPS,
        (
            "append failed",
            "reload after storage failure",
            "crash_server",
            "fenced (UNKNOWN_MEMBER_ID)",
            "fenced (FENCED_MEMBER_EPOCH)",
            "instance refused (topology update)",
            "stale topology status",
            "internal topic created",
            "slow to take an assignment",
            "group deleted",
            "static leave",
            "static member replaced",
            # classic Kafka Streams instances and the online migration, both ways
            "classic instance started",
            "group converted to streams",
            "group converted to classic",
            "classic instance revoked tasks",
            "classic heartbeat REBALANCE_IN_PROGRESS",
            "classic leave",
        ),
    )


def test_a_seed_replays_exactly() -> None:
    replays_exactly(run_seed, 7, 150)


def _started_and_settled() -> StreamsSimMachine:
    """Seed 3's machine, quiet, every thread started, settled."""
    with structlog.testing.capture_logs():
        m = StreamsSimMachine(random.Random(3))
        m.quiet()
        for name in NAMES:
            m.start(name)
        m.settle()
    return m


def _settled_machine() -> StreamsSimMachine:
    m = _started_and_settled()
    g = m.group
    assert g is not None and g.state() == "Stable" and len(g.members) == len(NAMES)
    return m


def test_a_task_active_on_two_members_is_a_violation() -> None:
    m = _settled_machine()
    g = m.group
    assert g is not None
    a, b = sorted(g.members.values(), key=lambda x: x.member_id)[:2]
    b.active = {**b.active, **{s: ps | a.active.get(s, frozenset()) for s, ps in a.active.items()}}
    with pytest.raises(AssertionError, match="active on"):
        m.no_task_twice_in_the_coordinator()


def test_a_process_with_two_copies_of_a_task_is_a_violation() -> None:
    m = _settled_machine()
    g = m.group
    assert g is not None
    by_process: dict[str, list[str]] = {}
    for mid, x in sorted(g.members.items()):
        by_process.setdefault(x.process_id, []).append(mid)
    first, second = next(v for v in by_process.values() if len(v) == 2)
    sid, ps = next(iter(sorted(g.members[first].active.items())))
    g.members[second].standby = {**g.members[second].standby, sid: ps}
    with pytest.raises(AssertionError, match="holds task"):
        m.no_task_twice_in_the_coordinator()


def test_a_member_view_that_runs_anothers_task_is_a_violation() -> None:
    m = _settled_machine()
    x, y = (m.members[n] for n in NAMES[:2])
    y.active = {**y.active, **x.active}
    with pytest.raises(AssertionError, match="both run task"):
        m.no_task_twice_in_the_members_view()


def test_a_live_change_without_its_record_breaks_replay() -> None:
    m = _settled_machine()
    g = m.group
    assert g is not None
    g.group_epoch += 1  # a change no record carries
    with pytest.raises(AssertionError, match="replay"):
        m.replica_equals_live()


def test_the_cli_runs_it_and_wants_chaos(capsys: pytest.CaptureFixture[str]) -> None:
    from groupshift.cli import main as cli_main

    assert cli_main(["simulate", "--chaos", "--streams", "--seed", "5", "--steps", "30"]) == 0
    assert "streams chaos: 1 seeds from 5, 30 steps each" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli_main(["simulate", "--streams"])
    assert e.value.code == 2
    assert "--streams needs --chaos" in capsys.readouterr().err


def settled_classic_machine(monkeypatch: pytest.MonkeyPatch) -> StreamsSimMachine:
    """A quiet machine whose members are all classic Kafka Streams threads, started and settled."""
    import sim.streams_chaos as streams_chaos

    monkeypatch.setattr(streams_chaos, "CLASSIC_SHARE", 1.0)
    return _started_and_settled()


def test_classic_threads_ride_both_conversions_and_their_view_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Four classic Kafka Streams threads and two streams ones: a streams group serving the
    classic threads; the streams members' sessions expire and it converts back to a classic group
    that converges under its leader's assignor; a classic thread running another's task fails the
    members'-view invariant."""
    from engine.classic.group import ClassicGroup
    from sim.streams_classic_clients import ClassicStreamsMember

    m = settled_classic_machine(monkeypatch)
    with structlog.testing.capture_logs():
        g = m.group
        assert g is not None and g.state() == "Stable"
        assert sum(x.classic is not None for x in g.members.values()) == 4
        for name in ("s5", "s6"):
            m.crash(name)
        for _ in range(30):  # the streams sessions expire; the classic threads heartbeat on
            for name in sorted(m.members):
                m.heartbeat(name)
                m.classic_step(name)
            m.advance(200)
            m.check(full_replay=False)
        assert isinstance(m.shard.groups.get("app"), ClassicGroup)
        m.settle()
        m.check(full_replay=True)
    assert m.stats["group converted to streams"] >= 1 and m.stats["group converted to classic"] == 1
    x, y = [c for c in m.members.values() if isinstance(c, ClassicStreamsMember) and c.active][:2]
    y.active = {**y.active, **x.active}
    with pytest.raises(AssertionError, match="both run task"):
        m.no_task_twice_in_the_members_view()


def test_a_classic_thread_that_missed_its_sync_answer_no_longer_counts_the_standbys_it_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed 5710: the coordinator releases the standbys a classic thread's SyncGroup answer drops
    when it sends the answer; if the thread never sees it, it runs them until it syncs again, and
    a sibling of its process may be given one meanwhile. Those no longer count for it; the ones
    the coordinator still has for it (standby or pending revocation) still do."""
    from sim.streams_classic_clients import ClassicStreamsMember

    m = settled_classic_machine(monkeypatch)
    g = m.group
    x, y = m.members["s1"], m.members["s2"]  # two threads of one process
    assert g is not None and isinstance(x, ClassicStreamsMember) and isinstance(y, ClassicStreamsMember)
    sid, ps = next(iter(sorted(y.active.items())))
    x.standby = {**x.standby, sid: x.standby.get(sid, frozenset()) | ps}
    with pytest.raises(AssertionError, match="holds task"):
        m.no_task_twice_in_the_members_view()
    x.unseen_sync = True  # the answer that dropped it was lost: released, no longer its own
    m.no_task_twice_in_the_members_view()
    sx = g.members[x.member_id]
    sx.standby_pending_revocation = {sid: ps}  # still pending revocation: still its own
    with pytest.raises(AssertionError, match="holds task"):
        m.no_task_twice_in_the_members_view()


def test_the_classic_leader_gives_a_task_to_the_thread_that_runs_its_standby() -> None:
    """Seed 6951: in a classic group the simulated leader gave task 1_0 active to a thread whose
    sibling (same process) reported running its standby; the sibling runs that standby until its
    own SyncGroup, so the process held two copies. Like Kafka Streams' `assignTasksToThreads`
    (the tasks a thread reports state for go to it first), an unclaimed task goes to the thread
    that reports its state, even past the least loaded one."""
    import uuid

    from engine.classic.api import JoinGroupResponseMember
    from sim.streams_chaos import REPARTITION, SOURCE
    from sim.streams_classic_clients import ClassicStreamsMember, decode_roles, leader_assignment

    process = uuid.UUID(int=2)
    x = ClassicStreamsMember("x", 1, process, member_id="x")
    x.active, x.standby = {"0": frozenset({0, 1})}, {"1": frozenset({0})}
    y = ClassicStreamsMember("y", 2, process, member_id="y")  # x's sibling, idle: least loaded
    z = ClassicStreamsMember("z", 3, uuid.UUID(int=3), member_id="z")
    z.active = {"0": frozenset({2})}
    members = [JoinGroupResponseMember(t.member_id, None, t.metadata(SOURCE, REPARTITION)) for t in (x, y, z)]
    tasks = {(s, p) for s in "01" for p in range(4)}
    given = {
        mid: decode_roles(a)[0] for mid, a in leader_assignment(members, tasks, SOURCE, REPARTITION).items()
    }
    assert 0 in given["x"].get("1", frozenset()), f"1_0 went elsewhere: {given}"
    assert 0 not in given["y"].get("1", frozenset()), "the sibling runs 1_0 while x runs its standby"
    assert sorted((s, p) for roles in given.values() for s, ps in roles.items() for p in ps) == sorted(tasks)


def test_a_member_revoking_again_at_its_next_epoch_is_still_fenced_in_time() -> None:
    """Seed 10964: a member told to revoke at epoch 9 revoked, and at epoch 10 was told to revoke
    again; its rebalance timer was armed only when it entered UNREVOKED_TASKS, for epoch 9, so it
    fired as a no-op and the member, whose answer had been lost, held its tasks for good (the
    group never converged). Kafka arms the timer again whenever the revoking member changes."""
    result = run_seed(10964, 1000)
    assert result.steps >= 1000
