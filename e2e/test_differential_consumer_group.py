"""Differential: the KIP-848 consumer group protocol against a real Apache Kafka 4.x node and
groupshift with the same settings: group and member epochs (a new group starts at epoch 1 in
Kafka 4.3 `ModernGroup`), fencing (`GroupMetadataManager.throwIfMemberEpochIsInvalid`, the
lost-response tolerance), reconciliation across members (revocation before assignment, partitions
pending), the uniform and range server assignors, leaves (-1) and static leaves (-2), static
members (KIP-848 "Static Membership"), regex subscriptions and ConsumerGroupDescribe.

Each scenario drives group `g` through heartbeats and records every answer (assignments as topic
names and sorted partitions); the two transcripts are compared field by field.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from e2e.differential import Session, compare, run_both
from e2e.diffgroups import cgh, describe, new_member_id, owned_of, until, wait_visible_to_groups

pytestmark = pytest.mark.e2e


def _setup(s: Session, *topics: tuple[str, int]) -> None:
    for name, n in topics or (("t", 6),):
        s.create_topic(s.topic(name), n)
    s.wait_coordinator(s.group())
    wait_visible_to_groups(s, [s.topic(name) for name, _ in topics or (("t", 6),)])


# --- epochs ---------------------------------------------------------------------------------------


def first_join_epoch(s: Session) -> None:
    _setup(s)
    m = new_member_id(s)
    cgh(s, "join", m, 0)
    describe(s, "describe")


def steady_heartbeat(s: Session) -> None:
    _setup(s)
    m = new_member_id(s)
    r = cgh(s, "join", m, 0)
    cgh(s, "heartbeat", m, r.member_epoch)
    cgh(
        s,
        "full heartbeat",
        m,
        r.member_epoch,
        topics=[s.topic()],
        owned=owned_of(s, r),
        rebalance_timeout=30000,
    )


def subscription_change_bumps(s: Session) -> None:
    _setup(s, ("t", 3), ("u", 2))
    m = new_member_id(s)
    r = cgh(s, "join", m, 0)
    r = cgh(s, "subscribe to more", m, r.member_epoch, topics=[s.topic(), s.topic("u")])
    r = cgh(s, "same topics, other order", m, r.member_epoch, topics=[s.topic("u"), s.topic()])
    cgh(s, "subscribe to less", m, r.member_epoch, topics=[s.topic("u")], owned=owned_of(s, r))
    describe(s, "describe")


def rack_and_assignor_change_bump(s: Session) -> None:
    _setup(s)
    m = new_member_id(s)
    r = cgh(s, "join", m, 0)
    r = cgh(s, "rack", m, r.member_epoch, rack_id="rack-b")
    cgh(s, "assignor", m, r.member_epoch, server_assignor="range")
    describe(s, "describe")


def empty_subscription_member(s: Session) -> None:
    _setup(s)
    m = new_member_id(s)
    r = cgh(s, "join without topics", m, 0, topics=[])
    describe(s, "describe")
    cgh(s, "then subscribe", m, r.member_epoch, topics=[s.topic()])


# --- fencing --------------------------------------------------------------------------------------


def greater_epoch_fenced(s: Session) -> None:
    _setup(s)
    m = new_member_id(s)
    r = cgh(s, "join", m, 0)
    cgh(s, "epoch+1", m, r.member_epoch + 1)
    cgh(s, "still a member", m, r.member_epoch)


def smaller_epoch_not_subset_fenced(s: Session) -> None:
    _setup(s, ("t", 4))
    a, b = new_member_id(s), new_member_id(s)
    ra = cgh(s, "a join", a, 0)
    rb = cgh(s, "b join", b, 0)
    cgh(s, "b older epoch", b, rb.member_epoch - 1, owned={s.topic(): [0, 1, 2, 3]})
    cgh(s, "a smaller epoch without owned", a, ra.member_epoch - 1)


def unknown_member(s: Session) -> None:
    _setup(s)
    m = new_member_id(s)
    cgh(s, "join", m, 0)
    cgh(s, "unknown member", new_member_id(s), 2)
    cgh(s, "unknown member leaves", new_member_id(s), -1)


def heartbeat_to_missing_group(s: Session) -> None:
    _setup(s)
    cgh(s, "missing group", new_member_id(s), 3)


def lost_response_tolerated(s: Session) -> None:
    """a loses the answer that moved it to the new epoch, retries with its previous epoch and
    what it owns: Kafka accepts it (a smaller epoch, owned a subset of the assignment)."""
    _setup(s, ("t", 4))
    a, b = new_member_id(s), new_member_id(s)
    ra = cgh(s, "a join", a, 0)
    cgh(s, "b join", b, 0)
    r = cgh(s, "a told to revoke", a, ra.member_epoch, owned=owned_of(s, ra))
    r2 = cgh(s, "a revoked", a, r.member_epoch, owned=owned_of(s, r))
    cgh(s, "a retries the lost epoch", a, r2.member_epoch - 1, owned=owned_of(s, r))


def rejoin_with_epoch_zero(s: Session) -> None:
    _setup(s)
    m = new_member_id(s)
    r = cgh(s, "join", m, 0)
    cgh(s, "rejoin at 0", m, 0, owned=owned_of(s, r))
    describe(s, "describe")


# --- reconciliation -------------------------------------------------------------------------------


def _two_members(s: Session, assignor: str | None, topics: list[str]) -> None:
    a, b = new_member_id(s), new_member_id(s)
    ra = cgh(s, "a join", a, 0, topics=topics, server_assignor=assignor)
    rb = cgh(s, "b join", b, 0, topics=topics, server_assignor=assignor)
    rb = cgh(s, "b waits", b, rb.member_epoch)
    ra = cgh(s, "a told to revoke", a, ra.member_epoch, owned=owned_of(s, ra))
    describe(s, "describe mid-revocation")
    ra = cgh(s, "a revoked", a, ra.member_epoch, owned=owned_of(s, ra))
    rb = cgh(s, "b assigned", b, rb.member_epoch, owned=owned_of(s, rb))
    cgh(s, "b acknowledges", b, rb.member_epoch, owned=owned_of(s, rb))
    describe(s, "describe stable")


def two_members_uniform(s: Session) -> None:
    _setup(s, ("t", 6))
    _two_members(s, None, [s.topic()])


def two_members_range(s: Session) -> None:
    _setup(s, ("t", 3), ("u", 3))
    _two_members(s, "range", [s.topic(), s.topic("u")])


def two_members_uniform_named(s: Session) -> None:
    """An odd split: the member that keeps more stays sticky. (Kafka's uniform assignor orders
    topics by their random ids, so several topics give assignments that differ between any two
    runs of Kafka itself; one topic keeps the scenario comparable.)"""
    _setup(s, ("t", 5))
    _two_members(s, "uniform", [s.topic()])


def three_members(s: Session) -> None:
    _setup(s, ("t", 6))
    ids = [new_member_id(s) for _ in range(3)]
    rs = [cgh(s, f"join {i}", m, 0) for i, m in enumerate(ids)]
    for _ in range(3):
        for i, m in enumerate(ids):
            rs[i] = cgh(
                s,
                f"heartbeat {i}",
                m,
                rs[i].member_epoch,
                owned=owned_of(s, rs[i]) if rs[i].assignment else None,
            )
    describe(s, "describe")


def member_leaves_partitions_move(s: Session) -> None:
    _setup(s, ("t", 4))
    a, b = new_member_id(s), new_member_id(s)
    ra = cgh(s, "a join", a, 0)
    rb = cgh(s, "b join", b, 0)
    ra = cgh(s, "a told to revoke", a, ra.member_epoch, owned=owned_of(s, ra))
    ra = cgh(s, "a revoked", a, ra.member_epoch, owned=owned_of(s, ra))
    rb = cgh(s, "b assigned", b, rb.member_epoch, owned={})
    cgh(s, "a leaves", a, -1)
    cgh(s, "b takes all", b, rb.member_epoch, owned=owned_of(s, rb))
    cgh(s, "a again", a, ra.member_epoch)
    describe(s, "describe")


def heterogeneous_subscriptions(s: Session) -> None:
    _setup(s, ("t", 2), ("u", 2))
    a, b = new_member_id(s), new_member_id(s)
    ra = cgh(s, "a join t", a, 0, topics=[s.topic()])
    rb = cgh(s, "b join u", b, 0, topics=[s.topic("u")])
    cgh(s, "a", a, ra.member_epoch, owned=owned_of(s, ra))
    cgh(s, "b", b, rb.member_epoch, owned=owned_of(s, rb))
    describe(s, "describe")


def subscribe_to_missing_topic(s: Session) -> None:
    _setup(s)
    m = new_member_id(s)
    r = cgh(s, "join missing topic", m, 0, topics=[s.topic("absent")])
    cgh(s, "heartbeat", m, r.member_epoch)
    describe(s, "describe")


# --- leaves ---------------------------------------------------------------------------------------


def leave_then_heartbeat(s: Session) -> None:
    _setup(s)
    m = new_member_id(s)
    r = cgh(s, "join", m, 0)
    cgh(s, "leave", m, -1)
    cgh(s, "heartbeat after leave", m, r.member_epoch)
    cgh(s, "leave twice", m, -1)
    describe(s, "describe empty")


def last_member_leaves_then_new_member(s: Session) -> None:
    _setup(s)
    a, b = new_member_id(s), new_member_id(s)
    cgh(s, "a join", a, 0)
    cgh(s, "a leave", a, -1)
    cgh(s, "b join", b, 0)
    describe(s, "describe")


# --- static members -------------------------------------------------------------------------------


def static_leave_and_rejoin(s: Session) -> None:
    _setup(s)
    a, a2 = new_member_id(s), new_member_id(s)
    r = cgh(s, "a join", a, 0, instance_id="i-1")
    cgh(s, "a static leave", a, -2, instance_id="i-1")
    describe(s, "describe after static leave")
    r2 = cgh(s, "a rejoins as a2", a2, 0, instance_id="i-1")
    cgh(s, "a2 heartbeat", a2, r2.member_epoch, instance_id="i-1", owned=owned_of(s, r2))
    cgh(s, "old a heartbeats", a, r.member_epoch, instance_id="i-1")
    describe(s, "describe")


def unreleased_instance_id(s: Session) -> None:
    _setup(s)
    a, b = new_member_id(s), new_member_id(s)
    cgh(s, "a join", a, 0, instance_id="i-1")
    cgh(s, "b takes i-1", b, 0, instance_id="i-1")


def fenced_instance_id(s: Session) -> None:
    _setup(s)
    a, b = new_member_id(s), new_member_id(s)
    cgh(s, "a join", a, 0, instance_id="i-1")
    cgh(s, "a static leave", a, -2, instance_id="i-1")
    cgh(s, "b takes i-1", b, 0, instance_id="i-1")
    cgh(s, "a static leave again", a, -2, instance_id="i-1")
    cgh(s, "a leaves for good", a, -1, instance_id="i-1")


def static_member_leaves_for_good(s: Session) -> None:
    _setup(s)
    a, b = new_member_id(s), new_member_id(s)
    cgh(s, "a join", a, 0, instance_id="i-1")
    cgh(s, "a leaves (-1)", a, -1, instance_id="i-1")
    cgh(s, "b takes i-1", b, 0, instance_id="i-1")
    describe(s, "describe")


def static_member_changes_subscription_on_rejoin(s: Session) -> None:
    _setup(s, ("t", 2), ("u", 2))
    a, a2 = new_member_id(s), new_member_id(s)
    cgh(s, "a join", a, 0, instance_id="i-1")
    cgh(s, "a static leave", a, -2, instance_id="i-1")
    cgh(s, "a2 rejoins with u", a2, 0, instance_id="i-1", topics=[s.topic("u")])
    describe(s, "describe")


def unknown_static_member_leaves(s: Session) -> None:
    _setup(s)
    cgh(s, "a join", new_member_id(s), 0, instance_id="i-1")
    cgh(s, "stranger static leave", new_member_id(s), -2, instance_id="i-2")


# --- regex subscriptions --------------------------------------------------------------------------


def regex_resolved_eventually(s: Session) -> None:
    """Only what both show after Kafka's asynchronous resolution: the settled assignment."""
    _setup(s, ("t", 2), ("u", 2))
    m = new_member_id(s)
    rx = f"(t|u)-{s.names['run']}"
    r = s.raw(
        68, 1, group_id=s.group(), member_id=m, member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=30000, subscribed_topic_names=None, subscribed_topic_regex=rx,
        server_assignor=None, topic_partitions=[],
    )  # fmt: skip
    state = {"epoch": r.member_epoch, "owned": owned_of(s, r)}

    def settled() -> bool:
        owned: dict[str, list[int]] = state["owned"]  # type: ignore[assignment]
        h = s.raw(
            68, 1, group_id=s.group(), member_id=m, member_epoch=state["epoch"], instance_id=None,
            rack_id=None, rebalance_timeout=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=[{"topic_id": s.topic_id(t), "partitions": p} for t, p in owned.items()],
        )  # fmt: skip
        state["epoch"] = h.member_epoch
        if h.assignment is not None:
            state["owned"] = owned_of(s, h)
        return len(state["owned"]) == 2

    until(s, settled)
    s.note("settled assignment", state["owned"])
    describe(s, "describe")


def regex_first_answer(s: Session) -> None:
    """Kafka answers a new regex before resolving it: the first assignment is empty;
    groupshift resolves it in the heartbeat (docs/deviations.md)."""
    _setup(s, ("t", 2))
    cgh(
        s,
        "join with regex",
        new_member_id(s),
        0,
        subscribed_topic_names=None,
        subscribed_topic_regex=f"t-{s.names['run']}",
    )


def regex_and_names(s: Session) -> None:
    """Names and a regex together: the literal topics come at once in both."""
    _setup(s, ("t", 2), ("u", 2))
    cgh(
        s,
        "join with names and regex",
        new_member_id(s),
        0,
        topics=[s.topic()],
        subscribed_topic_regex=f"u-{s.names['run']}",
    )


# --- ConsumerGroupDescribe ------------------------------------------------------------------------


def describe_versions(s: Session) -> None:
    _setup(s)
    cgh(s, "join", new_member_id(s), 0, instance_id="i-1", rack_id="r1")
    describe(s, "v0", version=0)
    describe(s, "v1", version=1)
    describe(s, "v0 with operations", version=0, authorized_operations=True)
    describe(s, "v1 with operations", version=1, authorized_operations=True)


def describe_missing_and_classic(s: Session) -> None:
    from e2e.diffgroups import join

    _setup(s)
    describe(s, "missing group")
    r = join(s, "classic join", "")
    join(s, "classic join with id", r.member_id)
    describe(s, "classic group")


SCENARIOS: list[Callable[[Session], None]] = [
    first_join_epoch,
    steady_heartbeat,
    subscription_change_bumps,
    rack_and_assignor_change_bump,
    empty_subscription_member,
    greater_epoch_fenced,
    smaller_epoch_not_subset_fenced,
    unknown_member,
    heartbeat_to_missing_group,
    lost_response_tolerated,
    rejoin_with_epoch_zero,
    two_members_uniform,
    # two_members_range: the range assignor's split depends on the order of the random member
    # ids (seen differing once); to be settled with member ids in a fixed order.
    two_members_uniform_named,
    three_members,
    member_leaves_partitions_move,
    heterogeneous_subscriptions,
    subscribe_to_missing_topic,
    leave_then_heartbeat,
    last_member_leaves_then_new_member,
    static_leave_and_rejoin,
    unreleased_instance_id,
    fenced_instance_id,
    static_member_leaves_for_good,
    static_member_changes_subscription_on_rejoin,
    unknown_static_member_leaves,
    regex_resolved_eventually,
    regex_and_names,
    describe_versions,
    describe_missing_and_classic,
]

# scenario name -> {path regex: reason}; each a row of docs/deviations.md.
KNOWN: dict[str, dict[str, str]] = {
    "regex_and_names": {
        r"join with names and regex#0\.assignment\.<topic:u-": "Kafka resolves a new regex after "
        "answering: its first assignment carries only the literal topics (docs/deviations.md)",
    },
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f.__name__ for f in SCENARIOS])
def test_consumer_group_scenario(
    scenario: Callable[[Session], None], differential_pair: tuple[str, str]
) -> None:
    compare(run_both(scenario, *differential_pair), KNOWN.get(scenario.__name__))


def test_regex_first_answer(differential_pair: tuple[str, str]) -> None:
    outcome = run_both(regex_first_answer, *differential_pair)
    assert not outcome.errors, outcome.errors
    (k,), (g,) = outcome.kafka, outcome.groupshift
    assert k.response["error_code"] == g.response["error_code"] == "none"
    assert k.response["assignment"] == {}
    assert list(g.response["assignment"].values()) == [[0, 1]]
