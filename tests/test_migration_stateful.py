"""Stateful property test of online migration (KIP-848 "Supporting Online Consumer Group Upgrade"):
one group driven through the shard by classic eager, classic cooperative and
consumer-protocol clients at once.

The world (the group, its coordinator, the clients and how they react, the invariants) is
sim/migration_world.py, whose module docstring lists the rules and the invariants; the client
kinds are described in sim/migration_clients.py. Here Hypothesis draws the rules: each rule
below calls the world's method of the same name, each invariant the world's check.

The regressions this machine found are pinned in tests/test_migration_regressions.py. Run it
longer with `STATEFUL_EXAMPLES=5000 STATEFUL_STEPS=100` (one process: the
default 300 examples of 60 steps take about 10 s).
"""

from __future__ import annotations

from typing import Any

from hypothesis import currently_in_test_context
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sim.migration_clients import KINDS, NAMES, POLICIES, STATIC, SUBSCRIPTIONS, TOPICS
from sim.migration_world import MigrationWorld
from tests.stateful_settings import stateful_settings


def client_strategy() -> Any:
    return st.tuples(st.sampled_from(KINDS), st.sampled_from(SUBSCRIPTIONS), st.integers(0, 3), st.booleans())


class MigrationMachine(MigrationWorld, RuleBasedStateMachine):
    """The world's rules and invariants, drawn by Hypothesis (MRO: the world first, so its
    cooperative `__init__` runs `RuleBasedStateMachine.__init__` too)."""

    def event(self, value: str) -> None:
        if currently_in_test_context():
            hypothesis_event(value)

    @precondition(lambda self: len(self.clients) < len(NAMES))
    @rule(i=st.integers(0, len(NAMES) - 1), spec=client_strategy())
    def start_client(self, i: int, spec: tuple[str, tuple[str, ...], int, bool]) -> None:
        super().start_client(i, spec)

    @precondition(lambda self: self.clients)
    @rule(i=st.integers(0, len(NAMES) - 1))
    def act(self, i: int) -> None:
        super().act(i)

    @precondition(lambda self: self.clients)
    @rule(i=st.integers(0, len(NAMES) - 1), topics=st.sampled_from(SUBSCRIPTIONS))
    def change_subscription(self, i: int, topics: tuple[str, ...]) -> None:
        super().change_subscription(i, topics)

    @precondition(lambda self: self.clients)
    @rule(i=st.integers(0, len(NAMES) - 1))
    def lose_answer(self, i: int) -> None:
        super().lose_answer(i)

    @precondition(lambda self: self.clients)
    @rule(i=st.integers(0, len(NAMES) - 1))
    def rejoin(self, i: int) -> None:
        super().rejoin(i)

    @precondition(lambda self: self.clients)
    @rule(i=st.integers(0, len(NAMES) - 1))
    def sync(self, i: int) -> None:
        super().sync(i)

    @precondition(lambda self: self.clients)
    @rule(i=st.integers(0, len(NAMES) - 1), ack=st.booleans())
    def heartbeat(self, i: int, ack: bool) -> None:
        super().heartbeat(i, ack)

    @precondition(lambda self: self.clients)
    @rule(i=st.integers(0, len(NAMES) - 1), static_leave=st.sampled_from([-2, -1]))
    def leave(self, i: int, static_leave: int) -> None:
        super().leave(i, static_leave)

    @precondition(lambda self: self.clients)
    @rule(i=st.integers(0, len(NAMES) - 1))
    def crash(self, i: int) -> None:
        super().crash(i)

    @rule(name=st.sampled_from(sorted(STATIC)), spec=client_strategy())
    def replace_static(self, name: str, spec: tuple[str, tuple[str, ...], int, bool]) -> None:
        super().replace_static(name, spec)

    @rule(ms=st.sampled_from([10, 60, 500, 1500, 2100, 3500]))
    def advance(self, ms: int) -> None:
        super().advance(ms)

    @rule(topic=st.sampled_from(TOPICS), more=st.integers(1, 2))
    def grow_topic(self, topic: str, more: int) -> None:
        super().grow_topic(topic, more)

    @rule(policy=st.sampled_from(POLICIES))
    def restart(self, policy: str) -> None:
        super().restart(policy)

    @invariant()
    def no_partition_owned_twice_by_members(self) -> None:
        super().no_partition_owned_twice_by_members()

    @invariant()
    def no_partition_owned_twice_by_the_coordinator(self) -> None:
        super().no_partition_owned_twice_by_the_coordinator()

    @invariant()
    def replica_equals_live(self) -> None:
        super().replica_equals_live()

    def teardown(self) -> None:
        self.check_at_end()


TestMigrationStateMachine = MigrationMachine.TestCase
TestMigrationStateMachine.settings = stateful_settings(300, 60, filtered=True)
