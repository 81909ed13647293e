"""Standby replicas of streams groups (KIP-1071, Kafka 4.4's `StickyTaskAssignor` and streams
`CurrentAssignmentBuilder`): the placement rules of engine/streams/assignor.py, their settings,
reconciliation of standby tasks through StreamsGroupHeartbeat, and replay equal to the live
state with standbys in the records."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import CoordinatorConfig, GroupConfig
from engine.streams.assignor import assign
from engine.streams.group import MemberState, StreamsMember, TaskHolders
from engine.streams.heartbeat import TaskRoles, reconcile
from tests.test_streams_groups import Streams, owned_tasks


def copies(out: Any, members: dict[str, str]) -> Counter[tuple[str, str, int]]:
    """(process, subtopology, partition) -> how many copies the process holds."""
    c: Counter[tuple[str, str, int]] = Counter()
    for role in (out.active, out.standby):
        for mid, tasks in role.items():
            for s, parts in tasks.items():
                for p in parts:
                    c[(members[mid], s, p)] += 1
    return c


groups = st.fixed_dictionaries(
    {
        "tasks": st.dictionaries(st.sampled_from("0123"), st.integers(1, 6), min_size=1),
        "stateful": st.sets(st.sampled_from("0123")),
        "members": st.dictionaries(
            st.sampled_from("abcdefg"), st.sampled_from(["p1", "p2", "p3", "p4"]), min_size=1
        ),
        "replicas": st.integers(0, 3),
    }
)


@settings(max_examples=300, deadline=None)
@given(groups, st.randoms(use_true_random=False))
def test_standby_placement_rules(g: dict[str, Any], rnd: Any) -> None:
    tasks, stateful, members, replicas = g["tasks"], g["stateful"], g["members"], g["replicas"]
    # A previous assignment to be sticky to: the same group's, with one member gone, and some
    # members reporting changelog offsets of random tasks.
    first = assign(tasks, stateful, members, {}, {}, replicas)
    leaving = rnd.choice(sorted(members))
    rest = {m: p for m, p in members.items() if m != leaving} or members
    offsets = {
        m: {s: {p: rnd.randrange(1000) for p in range(n) if rnd.random() < 0.3} for s, n in tasks.items()}
        for m in rest
    }
    for out, who in (
        (first, members),
        (assign(tasks, stateful, rest, first.active, first.standby, replicas, offsets), rest),
    ):
        active = Counter((s, p) for t in out.active.values() for s, ps in t.items() for p in ps)
        assert active == Counter((s, p) for s, n in tasks.items() for p in range(n))  # each once
        held = copies(out, who)
        assert max(held.values()) == 1  # never two copies on one process (so never on the active's member)
        processes = len(set(who.values()))
        for s, n in tasks.items():
            for p in range(n):
                standbys = sum(1 for t in out.standby.values() if p in t.get(s, ()))
                want = min(replicas, processes - 1) if s in stateful else 0
                assert standbys == want, (s, p, standbys, want)


@settings(max_examples=200, deadline=None)
@given(groups)
def test_active_tasks_stay_balanced_and_a_stable_assignment_does_not_move(g: dict[str, Any]) -> None:
    """Active tasks do not move when the assignor runs again on its own answer. Standbys may:
    Kafka 4.4.0's own class moves some (the pinned case below), so only their rules are kept."""
    tasks, stateful, replicas = g["tasks"], g["stateful"], g["replicas"]
    members = {m: f"p-{m}" for m in g["members"]}  # one member per process
    out = assign(tasks, stateful, members, {}, {}, replicas)
    counts = [sum(len(p) for p in out.active[m].values()) for m in members]
    assert max(counts) - min(counts) <= 1
    again = assign(tasks, stateful, members, out.active, out.standby, replicas)
    assert again.active == out.active
    per_task = Counter((s, p) for (_, s, p), n in copies(out, members).items() for _ in range(n))
    per_task_again = Counter((s, p) for (_, s, p), n in copies(again, members).items() for _ in range(n))
    assert per_task_again == per_task and max(copies(again, members).values(), default=1) == 1


def test_a_rerun_moves_a_standby_as_kafkas_class_does() -> None:
    """Found by the property above once ties followed Kafka's queues: on its own answer, Kafka
    4.4.0's StickyTaskAssignor (run from its jar on these inputs) moves standby 0_0 from a to d
    and keeps every active task; groupshift gives the same."""
    tasks, stateful = {"0": 2, "1": 6, "2": 2, "3": 6}, {"0", "1"}
    members = {m: f"p-{m}" for m in "abcde"}
    out = assign(tasks, stateful, members, {}, {}, 3)
    again = assign(tasks, stateful, members, out.active, out.standby, 3)
    assert again.active == out.active
    assert out.standby["a"]["0"] == {0, 1} and out.standby["d"]["0"] == {1}
    assert again.standby["a"]["0"] == {1} and again.standby["d"]["0"] == {0, 1}


def test_standbys_only_for_subtopologies_with_state_and_sticky_to_their_owner() -> None:
    members = {"a": "p1", "b": "p2", "c": "p3"}
    out = assign({"0": 3, "1": 3}, {"1"}, members, {}, {}, 1)
    assert all("0" not in t for t in out.standby.values())
    assert sum(len(t.get("1", ())) for t in out.standby.values()) == 3
    # Kafka 4.4.0's StickyTaskAssignor gives exactly these (its priority queue's tie order).
    assert out.standby == {"a": {"1": frozenset({1})}, "b": {"1": frozenset({0})}, "c": {"1": frozenset({2})}}
    # A new member on a new process takes 1_2 from a; a keeps it as a standby (its state is
    # there), keeps its standby 1_1, and the new member gets the standby that must move.
    grown = assign({"0": 3, "1": 3}, {"1"}, {**members, "d": "p4"}, out.active, out.standby, 1)
    assert grown.active["d"] == {"1": frozenset({2})}
    assert grown.standby == {"a": {"1": frozenset({1, 2})}, "b": {}, "c": {}, "d": {"1": frozenset({0})}}
    # The member that loses an active task keeps it as a standby (its state is there).
    lost = assign({"1": 2}, {"1"}, {"a": "p1", "b": "p2"}, {"a": {"1": frozenset({0, 1})}}, {}, 1)
    assert lost.active == {"a": {"1": frozenset({0})}, "b": {"1": frozenset({1})}}
    assert lost.standby == {"a": {"1": frozenset({1})}, "b": {"1": frozenset({0})}}


def test_equal_loads_go_in_the_order_of_kafkas_priority_queues() -> None:
    """Issue 31: Kafka 4.4.0's StickyTaskAssignor breaks equal process loads by the heap order of
    its `PriorityQueue` of processes (filled from a `HashMap` of process ids) and equal member
    counts by each process's `membersByLoad` queue, not by id. Every expected value here is what
    Kafka 4.4.0's class answers for the same input (run from its jar)."""
    a, b, c, d = (f"00000000-0000-0000-0000-0000000a{x}" for x in ("11ce", "11cf", "11d0", "11d1"))
    members = {m: f"process-{m[-4:]}" for m in (a, b, c, d)}
    # The fourth of four joins in a row (e2e `four-joins-in-a-row`): the first member keeps 0_0
    # and the three tasks it gives up go to three empty processes; ids would give c 1_0, d 1_1.
    holds = {a: {"0": frozenset({0, 1}), "1": frozenset({0, 1})}}
    out = assign({"0": 2, "1": 2}, {"1"}, members, holds, {}, 0)
    assert out.active == {
        a: {"0": frozenset({0})},
        b: {"0": frozenset({1})},
        c: {"1": frozenset({1})},
        d: {"1": frozenset({0})},
    }
    # Three members of one process: not the smallest member id first.
    one = assign({"0": 4}, (), {"m1": "p", "m2": "p", "m3": "p"}, {}, {}, 0)
    assert one.active == {
        "m1": {"0": frozenset({0})},
        "m2": {"0": frozenset({2})},
        "m3": {"0": frozenset({1, 3})},
    }
    # Standbys too.
    spread = assign({"0": 3, "1": 3}, {"1"}, {"m1": "p", "m2": "p", "m3": "q", "m4": "r"}, {}, {}, 1)
    assert spread.active == {
        "m1": {"0": frozenset({0}), "1": frozenset({2})},
        "m2": {"1": frozenset({0})},
        "m3": {"0": frozenset({2}), "1": frozenset({1})},
        "m4": {"0": frozenset({1})},
    }
    assert spread.standby == {"m1": {}, "m2": {"1": frozenset({1})}, "m3": {}, "m4": {"1": frozenset({0, 2})}}


def test_java_hash_map_order_of_computeIfAbsent() -> None:
    """Kafka's `processIdToState` is a `new HashMap<>(member count)` filled by `computeIfAbsent`,
    which puts a new key first in its bucket and never resizes after the last insertion
    (measured on Java 17: process-af54 and process-8c95 share bucket 1 of 4)."""
    from engine.streams.topology import java_hash_order

    names = ["process-af54", "process-8c95", "process-30c2"]
    in_bucket_order = ["process-8c95", "process-af54", "process-30c2"]
    assert java_hash_order(names, 4, compute_if_absent=True) == in_bucket_order
    assert java_hash_order(names, 4) == ["process-af54", "process-8c95", "process-30c2"]
    assert java_hash_order(names) == ["process-8c95", "process-af54", "process-30c2"]  # 16 buckets: 1, 5, 11


def test_a_standby_owner_gets_the_active_task_before_anyone_else() -> None:
    out = assign({"1": 2}, {"1"}, {"a": "p1", "b": "p2", "c": "p3"}, {}, {"c": {"1": frozenset({0, 1})}}, 0)
    assert out.active["c"] == {"1": frozenset({0})}  # pass 2, under the active quota of 1


def test_settings_bound_the_standby_count() -> None:
    assert (
        CoordinatorConfig.from_kafka({"group.streams.max.standby.replicas": "5"}).streams_max_standby_replicas
        == 5
    )
    broker = CoordinatorConfig()
    GroupConfig.model_validate({"streams.num.standby.replicas": 2}).validate_against(broker)
    with pytest.raises(ValueError, match="less than or equal to 2"):
        GroupConfig.model_validate({"streams.num.standby.replicas": 3}).validate_against(broker)
    with pytest.raises(ValueError, match="Value must be at least 0"):
        GroupConfig.model_validate({"streams.num.standby.replicas": -1}).validate_against(broker)


# --- reconciliation -------------------------------------------------------------------------


def _member(**kw: Any) -> StreamsMember:
    return StreamsMember("m", process_id="p1", member_epoch=3, previous_member_epoch=2, **kw)


T0 = {"1": frozenset({0})}


def test_a_standby_promoted_to_active_waits_for_the_owner_to_release_it() -> None:
    m = _member(standby=T0)
    target = TaskRoles(T0, {}, {})
    held = reconcile(m, target, 4, TaskHolders(active=T0), TaskRoles({}, T0, {}))
    # The active is still held elsewhere: the member keeps its standby, no revocation asked.
    assert held.state is MemberState.UNRELEASED_TASKS and held.standby == T0 and not held.active
    assert not held.standby_pending_revocation
    free = reconcile(held, target, 4, TaskHolders(), TaskRoles({}, T0, {}))
    assert free.active == T0 and not free.standby and free.state is MemberState.STABLE


def test_an_active_task_demoted_to_standby_is_a_standby_at_once_and_revoked_as_active() -> None:
    m = _member(active=T0)
    out = reconcile(m, TaskRoles({}, T0, {}), 4, TaskHolders(), TaskRoles(T0, {}, {}))
    assert out.state is MemberState.UNREVOKED_TASKS and out.member_epoch == 3
    assert out.standby == T0 and out.active_pending_revocation == T0 and not out.active


def test_no_standby_on_a_process_where_another_member_still_runs_the_task() -> None:
    m = _member()
    target = TaskRoles({}, T0, {})
    out = reconcile(m, target, 4, TaskHolders(active=T0, active_here=T0), TaskRoles({}, {}, {}))
    assert out.state is MemberState.UNRELEASED_TASKS and not out.standby and out.member_epoch == 4
    # On another process the active owner does not block a standby.
    elsewhere = reconcile(m, target, 4, TaskHolders(active=T0), TaskRoles({}, {}, {}))
    assert elsewhere.standby == T0 and elsewhere.state is MemberState.STABLE


def test_a_revoked_standby_is_released_before_the_member_moves_on() -> None:
    m = _member(standby=T0)
    out = reconcile(m, TaskRoles({}, {}, {}), 4, TaskHolders(), TaskRoles({}, T0, {}))
    assert out.state is MemberState.UNREVOKED_TASKS and out.standby_pending_revocation == T0
    assert reconcile(out, TaskRoles({}, {}, {}), 4, TaskHolders(), TaskRoles({}, T0, {})) is out
    done = reconcile(out, TaskRoles({}, {}, {}), 4, TaskHolders(), TaskRoles({}, {}, {}))
    assert done.state is MemberState.STABLE and done.member_epoch == 4 and not done.pending_revocation()


# --- through the heartbeat ----------------------------------------------------------------------


class StandbyStreams(Streams):
    """Members that report what they were given (active and standby tasks)."""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.standby: dict[str, Any] = {}
        self.records = []

    def beat(self, member: str) -> Any:
        r = self.hb(
            member_id=member,
            member_epoch=self.epochs[member],
            active_tasks=self.owned[member],
            standby_tasks=self.standby.get(member, ()),
            warmup_tasks=(),
        )
        self._remember(member, r)
        if r.standby_tasks is not None:
            self.standby[member] = r.standby_tasks
        return r


def test_two_processes_each_keep_a_standby_of_what_the_other_runs_and_replay_agrees() -> None:
    h = StandbyStreams(group_streams_num_standby_replicas=1)
    h.join("m1")
    h.join("m2")
    h.converge("m1", "m2")
    assert h.group.state() == "Stable"
    for me, other in (("m1", "m2"), ("m2", "m1")):
        # The word count's subtopology 1 has the changelog: its tasks get standbys.
        assert owned_tasks(h.standby[me]) == {t for t in owned_tasks(h.owned[other]) if t[0] == "1"}
    h.join("m3")
    h.converge("m1", "m2", "m3", rounds=8)
    assert h.group.state() == "Stable"
    actives = [owned_tasks(h.owned[m]) for m in ("m1", "m2", "m3")]
    standbys = [owned_tasks(h.standby[m]) for m in ("m1", "m2", "m3")]
    assert sum(len(s) for s in standbys) == 4
    for a, s in zip(actives, standbys, strict=True):
        assert not a & s
    h.hb(member_id="m2", member_epoch=-1)
    h.converge("m1", "m3", rounds=8)
    live = h.shard.persisted_state()["groups"]
    assert live == h.replayed().persisted_state()["groups"]
    assert any(t.standby_tasks for t in _targets(h))


def _targets(h: Streams) -> list[Any]:
    from records.streams_group import StreamsGroupTargetAssignmentMemberValue

    return [r.value for r in h.records if isinstance(r.value, StreamsGroupTargetAssignmentMemberValue)]


def test_a_group_config_change_recomputes_the_target() -> None:
    h = StandbyStreams()
    h.join("m1")
    h.join("m2")
    h.converge("m1", "m2")
    assert not h.standby.get("m1") and h.group.group_epoch == 3
    h.shard.set_group_config("app", GroupConfig.model_validate({"streams.num.standby.replicas": 1}))
    h.converge("m1", "m2")
    assert h.group.group_epoch == 4 and owned_tasks(h.standby["m1"]) and owned_tasks(h.standby["m2"])
    assert h.shard.persisted_state()["groups"] == h.replayed().persisted_state()["groups"]


def test_a_member_on_its_previous_epoch_reporting_a_foreign_standby_is_fenced() -> None:
    h = StandbyStreams(group_streams_num_standby_replicas=1)
    h.join("m1")
    h.join("m2")
    h.converge("m1", "m2")
    m1 = h.group.members["m1"]
    other = h.standby["m2"]  # a standby m1 does not hold
    assert m1.previous_member_epoch >= 0 and owned_tasks(other)
    r = h.hb(
        member_id="m1",
        member_epoch=m1.previous_member_epoch,
        active_tasks=h.owned["m1"],
        standby_tasks=other,
        warmup_tasks=(),
    )
    assert r.error_code == 110  # FENCED_MEMBER_EPOCH
    ok = h.hb(
        member_id="m1",
        member_epoch=m1.previous_member_epoch,
        active_tasks=h.owned["m1"],
        standby_tasks=h.standby["m1"],
        warmup_tasks=(),
    )
    assert ok.error_code == 0


def test_warmup_lists_in_records_replay_and_reconcile_like_standbys() -> None:
    from engine.streams.group import StreamsGroup
    from records.streams_group import StreamsGroupCurrentMemberAssignmentValue, TaskIds

    g = StreamsGroup("app")
    g.replay_target_member("m", {"0": frozenset({1})}, {}, {"1": frozenset({0})})
    assert g.warmup_targets == {"m": {"1": frozenset({0})}}
    value = StreamsGroupCurrentMemberAssignmentValue(
        5, 4, 1, (TaskIds("0", (1,)),), (), (TaskIds("1", (0,)),), (), (), (TaskIds("1", (2,)),)
    )
    g.replay_current_assignment("m", value)
    m = g.members["m"]
    assert m.warmup == {"1": frozenset({0})} and m.warmup_pending_revocation == {"1": frozenset({2})}
    # Written back, the active task carries the epoch it counts as given at: the member epoch,
    # for a record without `AssignmentEpochs` (Kafka 4.4 `parseActiveTasksWithEpochs`).
    assert m.assignment_value() == dataclasses.replace(value, active_tasks=(TaskIds("0", (1,), (5,)),))
    # a warm-up the target turns into a standby changes role at once, no revocation
    out = reconcile(
        replace_member(m, state=MemberState.STABLE, warmup_pending_revocation={}),
        TaskRoles({"0": frozenset({1})}, {"1": frozenset({0})}, {}),
        6,
        TaskHolders(),
        TaskRoles({"0": frozenset({1})}, {}, {"1": frozenset({0})}),
    )
    assert out.standby == {"1": frozenset({0})} and not out.warmup and out.state is MemberState.STABLE
    g.replay_target_member("m", None)
    assert not g.targets and not g.standby_targets and not g.warmup_targets


def replace_member(m: StreamsMember, **changes: Any) -> StreamsMember:
    from dataclasses import replace

    return replace(m, **changes)


# --- task offsets ---------------------------------------------------------------------------


def test_reported_offsets_rank_standby_candidates() -> None:
    members = {"a": "pa", "b": "pb", "c": "pc"}
    first = assign({"1": 3}, {"1"}, members, {}, {}, 1)
    assert first.standby == {  # as Kafka 4.4.0's StickyTaskAssignor places them
        "a": {"1": frozenset({2})},
        "b": {"1": frozenset({1})},
        "c": {"1": frozenset({0})},
    }
    # A new member e (say, an instance restarted under a new member id) reports the changelog
    # offsets of 1_2, whose state is on its disk: it becomes a candidate for that standby, and
    # being the least loaded it takes it; without the report the standbys go elsewhere.
    grown = {**members, "e": "pe"}
    told = assign({"1": 3}, {"1"}, grown, first.active, first.standby, 1, {"e": {"1": {2: 100}}})
    blind = assign({"1": 3}, {"1"}, grown, first.active, first.standby, 1)
    assert told.standby["e"] == {"1": frozenset({2})} and told.standby["a"] == {}
    assert blind.standby["e"] == {"1": frozenset({0})} and blind.standby["a"] == {"1": frozenset({2})}
    assert told.active == blind.active == first.active | {"e": {}}
    # Among current standby holders, the most caught up ranks first.
    active = {"a": {"1": frozenset({0})}}
    standby = {"b": {"1": frozenset({0})}, "c": {"1": frozenset({0})}}
    two = {"a": "pa", "b": "pb", "c": "pc"}
    for ahead in ("b", "c"):
        out = assign({"1": 1}, {"1"}, two, active, standby, 1, {ahead: {"1": {0: 900}}})
        assert {m for m, t in out.standby.items() if t} == {ahead}, out


def test_task_offsets_kept_on_the_live_group_and_described() -> None:
    from engine.streams.api import TaskOffset

    h = StandbyStreams(group_streams_num_standby_replicas=1)
    h.join("m1")
    h.join("m2", task_offsets=(TaskOffset("1", 2, 40),), task_end_offsets=(TaskOffset("1", 2, 50),))
    assert h.group.task_offsets["m2"].offsets == {"1": {2: 40}}
    h.converge("m1", "m2")  # null lists keep the last report
    assert h.group.task_offsets["m2"].end_offsets == {"1": {2: 50}}
    (described,) = h.shard.describe_streams_groups(["app"])
    by_member = {d.member.member_id: d for d in described.members}
    assert by_member["m2"].task_offsets == (("1", 2, 40),) and by_member["m1"].task_offsets == ()
    h.hb(member_id="m2", member_epoch=-1)
    assert "m2" not in h.group.task_offsets


def test_a_member_back_on_its_previous_epoch_is_told_the_standbys_the_lost_answer_gave() -> None:
    """Chaos seed 5837: the answer moving a member to a new epoch with a new standby was lost; its
    retry at the previous epoch (accepted: no task beyond its own) must carry the tasks, or the
    member moves to the new epoch without the standby and, its assignment not changing, is never
    told again (Kafka 4.4 sends tasks only on a join or a change)."""
    h = StandbyStreams()
    h.join("m1")
    h.join("m2")
    h.converge("m1", "m2")
    assert not h.standby.get("m1")
    h.shard.set_group_config("app", GroupConfig.model_validate({"streams.num.standby.replicas": 1}))
    h.converge("m2")
    before = h.epochs["m1"]
    lost = h.hb(
        member_id="m1", member_epoch=before, active_tasks=h.owned["m1"], standby_tasks=(), warmup_tasks=()
    )  # the member does not see this answer
    assert lost.error_code == 0 and lost.member_epoch > before and owned_tasks(lost.standby_tasks or ())
    retry = h.hb(
        member_id="m1", member_epoch=before, active_tasks=h.owned["m1"], standby_tasks=(), warmup_tasks=()
    )
    assert retry.error_code == 0 and retry.member_epoch == lost.member_epoch
    assert retry.standby_tasks is not None and owned_tasks(retry.standby_tasks) == owned_tasks(
        lost.standby_tasks
    )
    assert retry.active_tasks is not None and owned_tasks(retry.active_tasks) == owned_tasks(h.owned["m1"])
