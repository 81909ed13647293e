"""Classic group states and their legal transitions (Kafka `ClassicGroupState`).

Rules of this file: the table below is the whole state machine; `transition` is the only way a
group changes state, and an illegal move raises an error naming the group, the state and the
target (an engine bug, never a client error).

    Empty ──join──> PreparingRebalance ──all joined──> CompletingRebalance ──leader sync──> Stable
      ^                 ^   |                                   |                          |
      └─ last left ─────┘   └──────── rebalance ────────────────┴──────── rebalance ──────┘
    Dead: unloaded or deleted (reachable from every state)
"""

from __future__ import annotations

from enum import Enum


class ClassicGroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = ClassicGroupState

# target state -> the states it may be entered from
VALID_PREVIOUS_STATES: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset(ClassicGroupState),
}


class IllegalTransition(Exception):
    pass


def check_transition(group_id: str, current: ClassicGroupState, target: ClassicGroupState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        allowed = sorted(s.value for s in VALID_PREVIOUS_STATES[target])
        raise IllegalTransition(
            f"Group {group_id} should be in one of {allowed} states before moving to "
            f"{target.value} state. Instead it is in {current.value} state."
        )
