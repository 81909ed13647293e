"""Differential: the classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) against a
real Apache Kafka 4.x node and groupshift with the same settings: the errors of each API across
versions (KIP-394's MEMBER_ID_REQUIRED on JoinGroup v4+, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
REBALANCE_IN_PROGRESS, INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED
with `group.max.size`), static membership (KIP-345: replacement, FENCED_INSTANCE_ID, LeaveGroup v3+
by instance id with per-member errors) and a full two-member rebalance with a third member joining.

Kafka's JoinGroup waits (is parked) until every known member has rejoined, so a scenario that needs
two requests in flight sends the parked one from a thread on its own connection and records every
answer in a fixed order afterwards, so both transcripts line up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from e2e.differential import Session, compare, run_both
from e2e.differential_classic import (
    METADATA,
    client,
    commit,
    coordinator_loaded,
    heartbeat,
    in_thread,
    join,
    leave,
    member_id,
    note_describe,
    note_join,
    raw_on,
    solo_member,
    sync,
    wait_state,
)

pytestmark = pytest.mark.e2e

# -- scenarios --------------------------------------------------------------------------------------


def scenario_join_member_id_required_by_version(s: Session) -> None:
    """v0-v3 hand out a member id with the first answer; v4+ answer MEMBER_ID_REQUIRED first."""
    coordinator_loaded(s, *(s.group(f"v{v}") for v in range(10)))
    for version in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9):
        c = client(s)
        r = join(s, version, c, group_id=s.group(f"v{version}"))
        s.note(f"JoinGroup v{version}", {"error_code": r.error_code, "member_id_given": bool(r.member_id)})
        c.close()


def scenario_join_unknown_member_id(s: Session) -> None:
    coordinator_loaded(s, s.group(), s.group("g2"))
    s.note("JoinGroup", join(s, member_id="not-a-member"))
    solo_member(s, group_id=s.group("g2"))
    s.note("JoinGroup(other id)", join(s, group_id=s.group("g2"), member_id="someone-else"))


def scenario_join_invalid_session_timeout(s: Session) -> None:
    coordinator_loaded(s)
    s.note("JoinGroup(too short)", join(s, session_timeout=1))
    s.note("JoinGroup(too long)", join(s, session_timeout=1800001))
    s.note("JoinGroup(v0 too short)", join(s, 0, session_timeout=5999))


def scenario_join_inconsistent_protocols(s: Session) -> None:
    coordinator_loaded(s, s.group("e"), s.group("f"))
    solo_member(s)
    other = [{"name": "roundrobin", "metadata": METADATA}]
    c = client(s)
    s.note("JoinGroup(other protocol)", join(s, c=c, protocols=other))
    s.note("JoinGroup(other type)", join(s, c=c, protocol_type="connect"))
    s.note("JoinGroup(empty protocols, new group)", join(s, c=c, group_id=s.group("e"), protocols=[]))
    s.note("JoinGroup(empty type, new group)", join(s, c=c, group_id=s.group("f"), protocol_type=""))
    c.close()


def scenario_sync_errors(s: Session) -> None:
    coordinator_loaded(s, s.group("none"))
    mid, gen = solo_member(s)
    s.note("SyncGroup(wrong generation)", sync(s, gen + 1, mid))
    s.note("SyncGroup(unknown member)", sync(s, gen, "not-a-member"))
    s.note("SyncGroup(other protocol type)", sync(s, gen, mid, protocol_type="connect"))
    s.note("SyncGroup(other protocol name)", sync(s, gen, mid, protocol_name="roundrobin"))
    s.note("SyncGroup(unknown group)", sync(s, 1, mid, group_id=s.group("none")))
    s.note("SyncGroup v0 again", sync(s, gen, mid, version=0))


def scenario_heartbeat_errors(s: Session) -> None:
    coordinator_loaded(s)
    s.note("Heartbeat(unknown group)", heartbeat(s, 1, "not-a-member"))
    mid, gen = solo_member(s)
    for version in (0, 1, 2, 3, 4):
        s.note(f"Heartbeat v{version}", heartbeat(s, gen, mid, version=version))
    s.note("Heartbeat(wrong generation)", heartbeat(s, gen + 3, mid))
    s.note("Heartbeat(old generation)", heartbeat(s, gen - 1, mid))
    s.note("Heartbeat(unknown member)", heartbeat(s, gen, "not-a-member"))
    s.note("Heartbeat(unknown instance)", heartbeat(s, gen, mid, group_instance_id="i-9"))


def scenario_heartbeat_before_sync(s: Session) -> None:
    """Between JoinGroup and SyncGroup (CompletingRebalance) a heartbeat is answered."""
    coordinator_loaded(s)
    mid = member_id(s)
    r = join(s, member_id=mid)
    s.note("JoinGroup", r)
    s.note("Heartbeat(completing rebalance)", heartbeat(s, r.generation_id, mid))
    s.note("SyncGroup", sync(s, r.generation_id, mid))
    s.note("Heartbeat(stable)", heartbeat(s, r.generation_id, mid))


def scenario_leave_errors_by_version(s: Session) -> None:
    coordinator_loaded(s)
    for version in (0, 1, 2, 3, 4, 5):
        s.note(f"LeaveGroup v{version}(unknown group)", leave(s, version, [{"member_id": "nobody"}]))
    mid, gen = solo_member(s)
    for version in (0, 3, 5):
        s.note(f"LeaveGroup v{version}(unknown member)", leave(s, version, [{"member_id": "nobody"}]))
    s.note("LeaveGroup v1", leave(s, 1, [{"member_id": mid}]))
    s.note("Heartbeat(after leave)", heartbeat(s, gen, mid))


def scenario_leave_batch_per_member_errors(s: Session) -> None:
    """LeaveGroup v3+ answers each member; one unknown member does not fail the others."""
    coordinator_loaded(s)
    a = client(s)
    b = client(s)
    mid_a, _ = solo_member(s)
    mid_b = member_id(s, c=a)
    fb = in_thread(lambda: join(s, c=a, member_id=mid_b))
    wait_state(s, "PreparingRebalance")
    s.note("Heartbeat(a, rebalancing)", heartbeat(s, 1, mid_a))
    ra = join(s, member_id=mid_a)
    note_join(s, ra, "JoinGroup(a)")
    note_join(s, fb.result(30), "JoinGroup(b)")
    s.note(
        "LeaveGroup v4",
        leave(s, 4, [{"member_id": mid_a}, {"member_id": "nobody"}, {"member_id": mid_b}], c=b),
    )
    s.note("DescribeGroups", raw_on(b, 15, 5, groups=[s.group()], include_authorized_operations=False))
    a.close()
    b.close()


def scenario_full_rebalance(s: Session) -> None:
    """Two members join and sync (leader assigns), then a third joins: the others hear
    REBALANCE_IN_PROGRESS on heartbeat, rejoin and get the next generation."""
    s.create_topic(s.topic(), 1)
    coordinator_loaded(s)
    b, c = client(s), client(s)
    mid_a = member_id(s)
    mid_b = member_id(s, c=b)
    ra1 = join(s, member_id=mid_a)  # alone: generation 1
    note_join(s, ra1, "JoinGroup(a) gen1")
    fb = in_thread(lambda: join(s, c=b, member_id=mid_b))  # parks: the group rebalances
    wait_state(s, "PreparingRebalance")
    s.note("SyncGroup(a) gen1 during rebalance", sync(s, ra1.generation_id, mid_a))
    s.note("Heartbeat(a) gen1", heartbeat(s, ra1.generation_id, mid_a))
    ra2 = join(s, member_id=mid_a)
    rb2 = fb.result(30)
    note_join(s, ra2, "JoinGroup(a) gen2")
    note_join(s, rb2, "JoinGroup(b) gen2")
    gen = ra2.generation_id
    leader_is_a = ra2.leader == mid_a
    s.note("leader is a", leader_is_a)
    follower = in_thread(lambda: sync(s, gen, mid_b, c=b))
    assignments = [{"member_id": mid_a, "assignment": b"A"}, {"member_id": mid_b, "assignment": b"B"}]
    s.note("SyncGroup(a) gen2", sync(s, gen, mid_a, assignments=assignments))
    s.note("SyncGroup(b) gen2", follower.result(30))
    s.note("Heartbeat(b) stable", heartbeat(s, gen, mid_b, c=b))
    mid_c = member_id(s, c=c)
    fc = in_thread(lambda: join(s, c=c, member_id=mid_c))
    wait_state(s, "PreparingRebalance")
    s.note("Heartbeat(a) after third joins", heartbeat(s, gen, mid_a))
    s.note("Heartbeat(b) after third joins", heartbeat(s, gen, mid_b, c=b))
    s.note("OffsetCommit(a) during rebalance", commit(s, gen, mid_a))
    fa3 = in_thread(lambda: join(s, member_id=mid_a))
    rb3 = join(s, c=b, member_id=mid_b)
    note_join(s, fa3.result(30), "JoinGroup(a) gen3")
    note_join(s, rb3, "JoinGroup(b) gen3")
    note_join(s, fc.result(30), "JoinGroup(c) gen3")
    b.close()
    c.close()


def scenario_static_member_replacement(s: Session) -> None:
    """KIP-345: a static member joining again with an empty member id replaces the old one,
    which is fenced from then on."""
    s.create_topic(s.topic(), 1)
    coordinator_loaded(s)
    r1 = join(s, group_instance_id="i-1")  # static members need no MEMBER_ID_REQUIRED round
    note_join(s, r1, "JoinGroup(static)")
    old = r1.member_id
    s.note(
        "SyncGroup",
        sync(
            s,
            r1.generation_id,
            old,
            group_instance_id="i-1",
            assignments=[{"member_id": old, "assignment": b"x"}],
        ),
    )
    c = client(s)
    r2 = join(s, c=c, group_instance_id="i-1")
    note_join(s, r2, "JoinGroup(replacement)")
    new = r2.member_id
    s.note("Heartbeat(old id)", heartbeat(s, r1.generation_id, old, group_instance_id="i-1"))
    s.note("SyncGroup(old id)", sync(s, r1.generation_id, old, group_instance_id="i-1"))
    s.note("JoinGroup(old id)", join(s, member_id=old, group_instance_id="i-1"))
    s.note("Heartbeat(new id)", heartbeat(s, r2.generation_id, new, c=c, group_instance_id="i-1"))
    s.note("Heartbeat(new id, no instance)", heartbeat(s, r2.generation_id, new, c=c))
    s.note("OffsetCommit(old id)", commit(s, r2.generation_id, old, group_instance_id="i-1"))
    s.note("OffsetCommit(new id)", commit(s, r2.generation_id, new, group_instance_id="i-1"))
    c.close()


def scenario_static_leave_by_instance_id(s: Session) -> None:
    """LeaveGroup v3+ by instance id: a wrong member id is FENCED_INSTANCE_ID, an unknown
    instance UNKNOWN_MEMBER_ID, an empty member id with the right instance leaves."""
    coordinator_loaded(s)
    r1 = join(s, group_instance_id="i-1")
    s.note("JoinGroup(i-1)", r1)
    s.note("SyncGroup", sync(s, r1.generation_id, r1.member_id, group_instance_id="i-1"))
    s.note(
        "LeaveGroup v3",
        leave(
            s,
            3,
            [
                {"member_id": "wrong", "group_instance_id": "i-1"},
                {"member_id": "", "group_instance_id": "i-404"},
            ],
        ),
    )
    s.note("LeaveGroup v5", leave(s, 5, [{"member_id": "", "group_instance_id": "i-1", "reason": "bye"}]))
    s.note("LeaveGroup v5 again", leave(s, 5, [{"member_id": "", "group_instance_id": "i-1"}]))
    s.note("DescribeGroups", s.raw(15, 5, groups=[s.group()], include_authorized_operations=False))


def scenario_static_join_on_old_versions(s: Session) -> None:
    """A dynamic member joining a group whose member is static, and a static join with a
    member id the coordinator does not know."""
    coordinator_loaded(s)
    s.note("JoinGroup(static, unknown member id)", join(s, group_instance_id="i-1", member_id="made-up"))
    r = join(s, 5, group_instance_id="i-2")
    note_join(s, r, "JoinGroup v5(static)")


def scenario_describe_during_rebalance(s: Session) -> None:
    """DescribeGroups while the group prepares and completes a rebalance: no protocol data and
    members without metadata or assignment until the group is stable again."""
    coordinator_loaded(s)
    b = client(s)
    mid_a, _ = solo_member(s)
    mid_b = member_id(s, c=b)
    fb = in_thread(lambda: join(s, c=b, member_id=mid_b))
    wait_state(s, "PreparingRebalance")
    describe = {"groups": [s.group()], "include_authorized_operations": False}
    note_describe(s, "DescribeGroups(preparing)", s.raw(15, 5, **describe))
    ra = join(s, member_id=mid_a)
    fb.result(30)
    note_describe(s, "DescribeGroups(completing)", s.raw(15, 5, **describe))
    s.note("SyncGroup(follower first)", "parked")
    follower = in_thread(lambda: sync(s, ra.generation_id, mid_b, c=b))
    leader_assignments = [{"member_id": mid_a, "assignment": b"A"}, {"member_id": mid_b, "assignment": b"B"}]
    s.note("SyncGroup(leader)", sync(s, ra.generation_id, mid_a, assignments=leader_assignments))
    s.note("SyncGroup(follower)", follower.result(30))
    r = s.raw(15, 5, **describe)
    s.note(
        "DescribeGroups(stable) members",
        sorted((s.norm.member(m.member_id), m.member_assignment) for m in r.groups[0].members),
    )
    s.note("DescribeGroups(stable) state", (r.groups[0].group_state, r.groups[0].protocol_data))
    b.close()


def scenario_empty_group_id(s: Session) -> None:
    """Every classic API refuses the empty group id (INVALID_GROUP_ID)."""
    s.create_topic(s.topic(), 1)
    coordinator_loaded(s)
    s.note("JoinGroup", join(s, group_id=""))
    s.note("JoinGroup v3", join(s, 3, group_id=""))
    s.note("SyncGroup", sync(s, 1, "m", group_id=""))
    s.note("Heartbeat", heartbeat(s, 1, "m", group_id=""))
    s.note("LeaveGroup v0", raw_on(s.client, 13, 0, group_id="", member_id="m"))
    s.note(
        "LeaveGroup v4",
        raw_on(s.client, 13, 4, group_id="", members=[{"member_id": "m", "group_instance_id": None}]),
    )
    s.note("OffsetCommit", commit(s, -1, "", group_id=""))
    s.note("OffsetFetch v7", s.raw(9, 7, group_id="", topics=None, require_stable=False))


def scenario_pending_member(s: Session) -> None:
    """A member id handed out with MEMBER_ID_REQUIRED is pending until the member joins with it:
    heartbeats and syncs from it are unknown, LeaveGroup removes it."""
    mid_a, gen = solo_member(s)
    c = client(s)
    pending = member_id(s, c=c)
    s.note("Heartbeat(pending)", heartbeat(s, gen, pending, c=c))
    s.note("SyncGroup(pending)", sync(s, gen, pending, c=c))
    s.note("LeaveGroup v4(pending)", leave(s, 4, [{"member_id": pending}], c=c))
    s.note("Heartbeat(a) still stable", heartbeat(s, gen, mid_a))
    c.close()


def scenario_stable_rejoin(s: Session) -> None:
    """A follower rejoining a stable group with unchanged metadata gets the current generation
    back; the leader rejoining starts a rebalance (Kafka's classic group rules)."""
    mid_a, _ = solo_member(s)
    r = join(s, member_id=mid_a)
    note_join(s, r, "JoinGroup(leader rejoins)")
    s.note("SyncGroup(after rejoin)", sync(s, r.generation_id, mid_a))
    other = [{"name": "range", "metadata": METADATA + b"x"}]
    r2 = join(s, member_id=mid_a, protocols=other)
    note_join(s, r2, "JoinGroup(changed metadata)")
    s.note("SyncGroup v3(new generation)", sync(s, r2.generation_id, mid_a, version=3))
    s.note("Heartbeat v2", heartbeat(s, r2.generation_id, mid_a, version=2))


def scenario_static_rejoin_with_known_id(s: Session) -> None:
    """A static member joining again with its own member id while stable: no new generation."""
    coordinator_loaded(s)
    r1 = join(s, group_instance_id="i-1")
    s.note("JoinGroup(static)", r1)
    s.note(
        "SyncGroup",
        sync(
            s,
            r1.generation_id,
            r1.member_id,
            group_instance_id="i-1",
            assignments=[{"member_id": r1.member_id, "assignment": b"q"}],
        ),
    )
    r2 = join(s, member_id=r1.member_id, group_instance_id="i-1")
    note_join(s, r2, "JoinGroup(static, same id)")
    s.note("SyncGroup again", sync(s, r2.generation_id, r1.member_id, group_instance_id="i-1"))
    s.note("Heartbeat(wrong instance)", heartbeat(s, r2.generation_id, r1.member_id, group_instance_id="i-2"))
    s.note("JoinGroup(empty instance id)", join(s, group_id=s.group("other"), group_instance_id=""))


def scenario_sync_assignment_for_unknown_member(s: Session) -> None:
    """The leader's SyncGroup may name members the group does not have; the coordinator keeps
    the assignments of its own members."""
    coordinator_loaded(s)
    mid = member_id(s)
    r = join(s, member_id=mid)
    s.note(
        "SyncGroup",
        sync(
            s,
            r.generation_id,
            mid,
            assignments=[{"member_id": "ghost", "assignment": b"g"}, {"member_id": mid, "assignment": b"m"}],
        ),
    )
    s.note("DescribeGroups", s.raw(15, 5, groups=[s.group()], include_authorized_operations=False))


def scenario_member_missing_rebalance_is_removed(s: Session) -> None:
    """A member that does not rejoin within the rebalance timeout is dropped from the next
    generation and hears UNKNOWN_MEMBER_ID afterwards (1.5 s rebalance timeouts; no sleep, the
    parked joins take that long)."""
    coordinator_loaded(s)
    quick = {"rebalance_timeout": 1500}
    b, c = client(s), client(s)
    mid_a = member_id(s, **quick)
    mid_b = member_id(s, c=b, **quick)
    ra = join(s, member_id=mid_a, **quick)
    fb = in_thread(lambda: join(s, c=b, member_id=mid_b, **quick))
    wait_state(s, "PreparingRebalance")
    ra2 = join(s, member_id=mid_a, **quick)
    rb2 = fb.result(30)
    note_join(s, ra2, "JoinGroup(a) gen2")
    note_join(s, rb2, "JoinGroup(b) gen2")
    follower = in_thread(lambda: sync(s, rb2.generation_id, mid_b, c=b))
    s.note(
        "SyncGroup(a)",
        sync(s, ra2.generation_id, mid_a, assignments=[{"member_id": mid_b, "assignment": b"B"}]),
    )
    s.note("SyncGroup(b)", follower.result(30))
    mid_c = member_id(s, c=c, **quick)
    fc = in_thread(lambda: join(s, c=c, member_id=mid_c, **quick))
    wait_state(s, "PreparingRebalance")
    ra3 = join(s, member_id=mid_a, **quick)  # b never rejoins: the join completes at the timeout
    note_join(s, ra3, "JoinGroup(a) gen3")
    note_join(s, fc.result(30), "JoinGroup(c) gen3")
    s.note("Heartbeat(b) removed", heartbeat(s, rb2.generation_id, mid_b, c=b))
    s.note("JoinGroup(b) removed", join(s, c=b, member_id=mid_b, **quick))
    s.note("generation unchanged by the first answer", ra.generation_id)
    b.close()
    c.close()


SCENARIOS = [
    scenario_member_missing_rebalance_is_removed,
    scenario_empty_group_id,
    scenario_pending_member,
    scenario_stable_rejoin,
    scenario_static_rejoin_with_known_id,
    scenario_sync_assignment_for_unknown_member,
    scenario_describe_during_rebalance,
    scenario_join_member_id_required_by_version,
    scenario_join_unknown_member_id,
    scenario_join_invalid_session_timeout,
    scenario_join_inconsistent_protocols,
    scenario_sync_errors,
    scenario_heartbeat_errors,
    scenario_heartbeat_before_sync,
    scenario_leave_errors_by_version,
    scenario_leave_batch_per_member_errors,
    scenario_full_rebalance,
    scenario_static_member_replacement,
    scenario_static_leave_by_instance_id,
    scenario_static_join_on_old_versions,
]
KNOWN: dict[str, dict[str, str]] = {}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f.__name__.removeprefix("scenario_") for f in SCENARIOS])
def test_classic(scenario: Callable[[Session], None], differential_pair: tuple[str, str]) -> None:
    compare(run_both(scenario, *differential_pair), KNOWN.get(scenario.__name__, {}))


# -- group.max.size ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def max_size_pair(differential_pair_factory: Any) -> tuple[str, str]:
    return differential_pair_factory("differential-max-size", **{"group.max.size": "2"})  # type: ignore[no-any-return]


def scenario_group_max_size(s: Session) -> None:
    """A third member of a group limited to two: GROUP_MAX_SIZE_REACHED (KIP-389)."""
    coordinator_loaded(s)
    b, c = client(s), client(s)
    mid_a = member_id(s)
    ra = join(s, member_id=mid_a)
    note_join(s, ra, "JoinGroup(a)")
    s.note("SyncGroup(a)", sync(s, ra.generation_id, mid_a))
    mid_b = member_id(s, c=b)
    fb = in_thread(lambda: join(s, c=b, member_id=mid_b))
    wait_state(s, "PreparingRebalance")
    s.note("Heartbeat(a)", heartbeat(s, ra.generation_id, mid_a))
    ra2 = join(s, member_id=mid_a)
    note_join(s, ra2, "JoinGroup(a) gen2")
    note_join(s, fb.result(30), "JoinGroup(b) gen2")
    r = join(s, c=c)
    s.note("JoinGroup(c, no id)", {"error_code": r.error_code, "member_id_given": bool(r.member_id)})
    if r.member_id:
        s.note("JoinGroup(c, with id)", {"error_code": join(s, c=c, member_id=r.member_id).error_code})
    s.note("JoinGroup v3(c)", {"error_code": join(s, 3, c).error_code})
    s.note("JoinGroup(static d)", {"error_code": join(s, c=c, group_instance_id="d").error_code})
    b.close()
    c.close()


def test_group_max_size(max_size_pair: tuple[str, str]) -> None:
    compare(run_both(scenario_group_max_size, *max_size_pair))
