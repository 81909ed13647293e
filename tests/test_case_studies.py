"""The KIP-848 case studies, step by step (KIP-848 "Case Studies").

Each table of the KIP is asserted: group epoch, target assignment epoch and partitions, and per
member its epoch, the partitions it owns and the partitions it waits for ("pending-partitions").
The KIP draws one request as several tables; the engine does them in one operation, so the
intermediate tables are taken after the group-epoch record and after the target-epoch record of
that operation (see sim/scenarios.py).

Where shipped Kafka differs from the KIP's drawings (Kafka wins; real clients expect it):
* Basic, C joins: Kafka reconciles a joining member inside its own join request, so C is already
  at epoch 3 (waiting for foo-1) when B's next heartbeat moves B to epoch 3. The KIP draws B's
  heartbeat first, with C still at epoch 0.
* Member Failure: fencing A deletes A's target entry (k7 tombstone) together with A, so the
  epoch-22 target no longer lists A while the group epoch is 23. The KIP keeps A in that table.
* Incremental: the KIP's table after "A acknowledges" already shows C holding foo-2, which C only
  receives on its next heartbeat; we assert that table after C's heartbeat, as the KIP's text says.
"""

from __future__ import annotations

from sim.scenarios import (
    Simulator,
    scenario_basic,
    scenario_incremental,
    scenario_member_failure,
    scenario_partition_added,
    seed_group,
)


def foo(*ps: int) -> tuple[str, ...]:
    return tuple(f"foo-{p}" for p in ps)


def table(
    group_epoch: int,
    target_epoch: int,
    target: dict[str, tuple[int, ...]],
    members: dict[str, tuple[int, tuple[int, ...], tuple[int, ...]]],
) -> tuple[object, ...]:
    return (
        group_epoch,
        target_epoch,
        {m: foo(*p) for m, p in target.items()},
        {m: (e, foo(*owned), foo(*pending)) for m, (e, owned, pending) in members.items()},
    )


class Steps:
    """Collects the tables produced since the last call."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.seen = len(sim.milestones)

    def new(self) -> list[tuple[object, ...]]:
        views = [m.view.kip() for m in self.sim.milestones[self.seen :]]
        self.seen = len(self.sim.milestones)
        return views


def test_basic_case_study_tables() -> None:
    """Epochs are one above the KIP's table: Kafka 4.3 starts a new group at epoch 1."""
    sim = Simulator(topics={"foo": 3})
    s = Steps(sim)
    assert sim.view().kip() == table(0, 0, {}, {})

    sim.join("A")
    assert s.new() == [
        table(2, 0, {}, {"A": (0, (), ())}),  # A joins, epoch bumped to 2
        table(2, 2, {"A": (0, 1, 2)}, {"A": (0, (), ())}),  # target computed
        table(2, 2, {"A": (0, 1, 2)}, {"A": (2, (0, 1, 2), ())}),  # A moves to epoch 2
    ]

    sim.join("B")
    assert s.new() == [
        table(3, 2, {"A": (0, 1, 2)}, {"A": (2, (0, 1, 2), ()), "B": (0, (), ())}),
        table(3, 3, {"A": (0, 1), "B": (2,)}, {"A": (2, (0, 1, 2), ()), "B": (0, (), ())}),
        # B transitions to epoch 3 but cannot get foo-2 until A revokes it
        table(3, 3, {"A": (0, 1), "B": (2,)}, {"A": (2, (0, 1, 2), ()), "B": (3, (), (2,))}),
    ]

    sim.heartbeat("A")  # A is instructed to revoke foo-2
    assert sim.view().assignments["A"].revoking == foo(2)
    sim.heartbeat("A")  # A acknowledges: epoch 3, foo-2 released
    assert sim.view().kip() == table(
        3, 3, {"A": (0, 1), "B": (2,)}, {"A": (3, (0, 1), ()), "B": (3, (), (2,))}
    )
    sim.heartbeat("B")  # B gets foo-2
    assert sim.view().kip() == table(
        3, 3, {"A": (0, 1), "B": (2,)}, {"A": (3, (0, 1), ()), "B": (3, (2,), ())}
    )

    s.new()
    sim.join("C")
    assert s.new() == [
        table(4, 3, {"A": (0, 1), "B": (2,)}, {"A": (3, (0, 1), ()), "B": (3, (2,), ()), "C": (0, (), ())}),
        table(
            4,
            4,
            {"A": (0,), "B": (2,), "C": (1,)},
            {"A": (3, (0, 1), ()), "B": (3, (2,), ()), "C": (0, (), ())},
        ),
        # Kafka reconciles C in its own join: epoch 4, waiting for foo-1 (see module docstring)
        table(
            4,
            4,
            {"A": (0,), "B": (2,), "C": (1,)},
            {"A": (3, (0, 1), ()), "B": (3, (2,), ()), "C": (4, (), (1,))},
        ),
    ]
    sim.heartbeat("B")  # B has nothing to revoke: epoch 4
    assert sim.view().kip() == table(
        4,
        4,
        {"A": (0,), "B": (2,), "C": (1,)},
        {"A": (3, (0, 1), ()), "B": (4, (2,), ()), "C": (4, (), (1,))},
    )
    sim.heartbeat("C")  # C still cannot get foo-1
    assert sim.view().assignments["C"].pending == foo(1)
    sim.heartbeat("A")  # A is instructed to revoke foo-1
    sim.heartbeat("A")  # A acknowledges: epoch 4, foo-1 released
    assert sim.view().kip() == table(
        4,
        4,
        {"A": (0,), "B": (2,), "C": (1,)},
        {"A": (4, (0,), ()), "B": (4, (2,), ()), "C": (4, (), (1,))},
    )
    sim.heartbeat("C")
    # All the members have eventually advanced to the group epoch (3).
    assert sim.view().kip() == table(
        4,
        4,
        {"A": (0,), "B": (2,), "C": (1,)},
        {"A": (4, (0,), ()), "B": (4, (2,), ()), "C": (4, (1,), ())},
    )


def test_incremental_revocation_and_assignment_case_study_tables() -> None:
    sim = Simulator(topics={"foo": 6})
    seed_group(sim, 21, {"A": [0, 1, 2], "B": [3, 4, 5]})
    s = Steps(sim)
    assert sim.view().kip() == table(
        21,
        21,
        {"A": (0, 1, 2), "B": (3, 4, 5)},
        {"A": (21, (0, 1, 2), ()), "B": (21, (3, 4, 5), ())},
    )
    sim.join("C")
    steps = s.new()
    target = {"A": (0, 1), "B": (3, 4), "C": (2, 5)}
    # C joins: the coordinator bumps the epoch, creates the member and computes the target.
    assert steps[1] == table(
        22, 22, target, {"A": (21, (0, 1, 2), ()), "B": (21, (3, 4, 5), ()), "C": (0, (), ())}
    )
    # C moves to epoch 22 but gets nothing yet: foo-2 and foo-5 are not revoked.
    assert steps[-1] == table(
        22,
        22,
        target,
        {"A": (21, (0, 1, 2), ()), "B": (21, (3, 4, 5), ()), "C": (22, (), (2, 5))},
    )
    sim.heartbeat("A")  # instructed to revoke foo-2
    sim.heartbeat("B")  # instructed to revoke foo-5
    sim.heartbeat("C")  # no changes for it
    assert sim.view().assignments["A"].revoking == foo(2)
    assert sim.view().assignments["B"].revoking == foo(5)
    assert sim.view().assignments["C"].epoch == 22
    sim.heartbeat("A")  # acknowledges: epoch 22, foo-2 released
    sim.heartbeat("C")  # gets foo-2, still waits for foo-5
    assert sim.view().kip() == table(
        22,
        22,
        target,
        {"A": (22, (0, 1), ()), "B": (21, (3, 4, 5), ()), "C": (22, (2,), (5,))},
    )
    sim.heartbeat("B")  # acknowledges: epoch 22, foo-5 released
    sim.heartbeat("C")  # gets foo-5
    assert sim.view().kip() == table(
        22,
        22,
        target,
        {"A": (22, (0, 1), ()), "B": (22, (3, 4), ()), "C": (22, (2, 5), ())},
    )


def test_member_failure_case_study_tables() -> None:
    sim = Simulator(topics={"foo": 6})
    seed_group(sim, 22, {"A": [0, 1], "B": [3, 4], "C": [2, 5]})
    assert sim.view().kip() == table(
        22,
        22,
        {"A": (0, 1), "B": (3, 4), "C": (2, 5)},
        {"A": (22, (0, 1), ()), "B": (22, (3, 4), ()), "C": (22, (2, 5), ())},
    )
    session = sim.shard.consumer_session_timeout_ms(sim.group_id)
    sim.advance(session - 1000)
    sim.heartbeat("B")
    sim.heartbeat("C")
    s = Steps(sim)
    sim.advance(1000)  # A fails to heartbeat: removed after its session timeout, epoch bumped
    assert s.new() == [
        # Kafka deletes A's target entry with A (see module docstring)
        table(23, 22, {"B": (3, 4), "C": (2, 5)}, {"B": (22, (3, 4), ()), "C": (22, (2, 5), ())}),
    ]
    sim.heartbeat("B")
    new_target = {"B": (3, 4, 0), "C": (2, 5, 1)}
    assert s.new()[0] == table(  # the coordinator computes the new target assignment
        23, 23, new_target, {"B": (22, (3, 4), ()), "C": (22, (2, 5), ())}
    )
    sim.heartbeat("C")
    # B and C heartbeat and transition to epoch 23.
    assert sim.view().kip() == table(23, 23, new_target, {"B": (23, (3, 4, 0), ()), "C": (23, (2, 5, 1), ())})


def test_partition_added_case_study_tables() -> None:
    sim = Simulator(topics={"foo": 1})
    seed_group(sim, 22, {"A": [0], "B": []})
    assert sim.view().kip() == table(22, 22, {"A": (0,), "B": ()}, {"A": (22, (0,), ()), "B": (22, (), ())})
    sim.set_topic("foo", 2)  # foo-1 is created
    s = Steps(sim)
    sim.heartbeat("A")  # the coordinator detects it on the group's next heartbeat
    assert s.new() == [
        table(23, 22, {"A": (0,), "B": ()}, {"A": (22, (0,), ()), "B": (22, (), ())}),
        table(23, 23, {"A": (0,), "B": (1,)}, {"A": (22, (0,), ()), "B": (22, (), ())}),
        table(23, 23, {"A": (0,), "B": (1,)}, {"A": (23, (0,), ()), "B": (22, (), ())}),
    ]
    sim.heartbeat("B")
    assert sim.view().kip() == table(
        23, 23, {"A": (0,), "B": (1,)}, {"A": (23, (0,), ()), "B": (23, (1,), ())}
    )


def test_simulate_scenarios_end_stable_with_targets_reached() -> None:
    for scenario in (scenario_basic, scenario_incremental, scenario_member_failure, scenario_partition_added):
        sim = Simulator()
        scenario(sim)
        v = sim.view()
        assert v.epoch == v.target_epoch
        for member, a in v.assignments.items():
            assert a.epoch == v.epoch, (scenario.__name__, member)
            assert a.partitions == v.target[member], (scenario.__name__, member)
            assert a.pending == ()
