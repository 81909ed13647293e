"""KIP-345 static membership scenarios, and a non-consumer protocol electing a leader and
distributing opaque assignments (the generic-coordinator use case, KIP seed 003)."""

from __future__ import annotations

from engine.classic.api import JoinGroupResponse
from engine.classic.member import Protocol
from engine.classic.state import ClassicGroupState as S
from engine.errors import Errors
from records.classic_group import GroupMetadataValue
from tests.classic_harness import ClassicHarness, subscription


def static_group(h: ClassicHarness, n: int, session: int = 10_000) -> dict[str, str]:
    """n static members (instance i0..), Stable; returns instance id -> member id."""
    handles = {}
    for i in range(n):
        handles[f"i{i}"] = h.join(instance_id=f"i{i}", session=session, version=9)
    h.advance(1)
    resp = {i: h.result(x) for i, x in handles.items()}
    ids = {i: r.member_id for i, r in resp.items()}
    leader = resp["i0"].leader
    h.sync(leader, 1, {m: f"part-of-{i}".encode() for i, m in ids.items()}, instance_id="i0")
    for i, m in ids.items():
        if m != leader:
            h.sync(m, 1, instance_id=i)
    assert h.group.state is S.STABLE
    return ids


def test_static_member_id_is_prefixed_by_its_instance_id() -> None:
    h = ClassicHarness()
    ids = static_group(h, 1)
    assert ids["i0"].startswith("i0-")


def test_static_member_restarting_within_its_session_gets_its_assignment_without_a_rebalance() -> None:
    h = ClassicHarness()
    ids = static_group(h, 3)
    generation = h.group.generation_id
    records_before = len(h.log)
    # i1 restarts: it never sent LeaveGroup (static members don't) and joins with a new id.
    r = h.join(instance_id="i1", version=9)
    resp = h.result(r)
    assert isinstance(resp, JoinGroupResponse) and resp.error_code == 0
    assert resp.generation_id == generation and resp.skip_assignment is False
    new_id = resp.member_id
    assert new_id != ids["i1"] and h.group.state is S.STABLE
    sync = h.result(h.sync(new_id, generation, instance_id="i1"))
    assert sync.assignment == b"part-of-i1"
    # Others see no rebalance; the new member id is persisted.
    for i in ("i0", "i2"):
        assert h.heartbeat(ids[i], generation, instance_id=i) == 0
    [rec] = h.log[records_before:]
    assert isinstance(rec.value, GroupMetadataValue)
    assert new_id in {m.member_id for m in rec.value.members}


def test_old_incarnation_of_a_replaced_static_member_is_fenced() -> None:
    h = ClassicHarness()
    ids = static_group(h, 2)
    h.join(instance_id="i1", version=9)
    assert h.heartbeat(ids["i1"], 1, instance_id="i1") == Errors.FENCED_INSTANCE_ID


def test_replacing_the_static_leader_moves_leadership_and_tells_it_to_skip_assignment() -> None:
    h = ClassicHarness()
    ids = static_group(h, 2)
    assert h.group.leader_id == ids["i0"]
    resp = h.result(h.join(instance_id="i0", version=9))
    assert h.group.leader_id == resp.member_id
    assert resp.skip_assignment is True and len(resp.members) == 2


def test_rolling_bounce_of_five_static_members_causes_no_rebalance() -> None:
    h = ClassicHarness()
    ids = static_group(h, 5, session=30_000)
    for i in list(ids):
        h.advance(1000)  # the process is down a little while (well within its session)
        resp = h.result(h.join(instance_id=i, version=9))
        assert resp.error_code == 0 and resp.generation_id == 1
        ids[i] = resp.member_id
        h.sync(resp.member_id, 1, instance_id=i)
        assert h.group.state is S.STABLE
    assert h.group.generation_id == 1
    assert {h.group.members[m].assignment for m in ids.values()} == {f"part-of-{i}".encode() for i in ids}


def test_static_member_rejoining_with_a_new_protocol_causes_a_rebalance_only_if_the_vote_changes() -> None:
    h = ClassicHarness()
    static_group(h, 2)
    both = (Protocol("cooperative-sticky", subscription("foo")), Protocol("range", subscription("foo")))
    h.join(instance_id="i1", version=9, protocols=both)
    # `range` stays selected (i0 supports nothing else): the replacement needs no rebalance.
    assert h.group.state is S.STABLE
    # Once both prefer cooperative-sticky the selected protocol would change: rebalance.
    h.join(instance_id="i0", version=9, protocols=both)
    assert h.group.state is S.PREPARING_REBALANCE


def test_static_member_with_a_new_subscription_changes_its_metadata_and_rebalances_when_it_rejoins() -> None:
    h = ClassicHarness()
    ids = static_group(h, 2)
    new_sub = (Protocol("range", subscription("foo", "bar")),)
    r = h.join(member_id=ids["i1"], instance_id="i1", protocols=new_sub, version=9)
    assert h.group.state is S.PREPARING_REBALANCE and h.result(r) is None


def test_static_members_that_do_not_rejoin_are_kept_across_a_join_phase() -> None:
    h = ClassicHarness()
    ids = static_group(h, 2, session=30_000)
    h.join(member_id=ids["i0"], instance_id="i0", rebalance=3000, session=30_000, version=9)  # leader rejoins
    h.advance(10_001)  # the join phase (max rebalance timeout) ends without i1
    assert set(h.group.members) == set(ids.values())
    assert h.group.state is S.COMPLETING_REBALANCE and h.group.generation_id == 2


def test_admin_removal_of_a_static_member_by_instance_id() -> None:
    h = ClassicHarness()
    ids = static_group(h, 2)
    r = h.leave(("", "i1"))
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [("", "i1", 0)]
    assert ids["i1"] not in h.group.members
    r = h.leave(("", "unknown"))
    assert r.members[0].error_code == Errors.UNKNOWN_MEMBER_ID


def test_failed_write_of_a_static_replacement_reverts_it() -> None:
    h = ClassicHarness()
    ids = static_group(h, 2)
    h.fail_next_append = Errors.KAFKA_STORAGE_ERROR
    r = h.result(h.join(instance_id="i1", version=9))
    assert r.error_code == Errors.NOT_COORDINATOR and r.member_id == ""
    assert h.group.static_members["i1"] == ids["i1"]
    assert h.heartbeat(ids["i1"], 1, instance_id="i1") == 0


def test_a_static_replacement_whose_write_stalls_keeps_a_session_timer() -> None:
    """Seed 1598 of the client-assignor chaos run: the new member's heartbeat timer fires while
    its join waits for the append (parked: no effect); the join's answer must schedule it again,
    or a member that then dies is never removed (Kafka's updateStaticMemberThenRebalanceOrCompleteJoin
    does not; docs/deviations.md)."""
    h = ClassicHarness()
    ids = static_group(h, 2, session=10_000)
    h.hold_appends = True
    joined = h.join(instance_id="i1", session=10_000, version=9)
    for _ in range(3):  # past the new member's session; i0 stays alive
        h.advance(4_000)
        assert h.heartbeat(ids["i0"], 1, instance_id="i0") == 0
    h.release_appends()
    new_id = h.result(joined).member_id
    assert new_id and new_id != ids["i1"] and h.group.static_members["i1"] == new_id
    assert f"heartbeat-g-{new_id}" in h.shard.timers.keys()  # noqa: SIM118 (Timers is no dict)
    # The new incarnation dies before its first heartbeat: its session ends, it is removed.
    for _ in range(3):
        h.advance(4_000)
        h.heartbeat(ids["i0"], h.group.generation_id, instance_id="i0")
    assert new_id not in h.group.members and "i1" not in h.group.static_members


# --- a leader-election protocol: opaque metadata and assignments -------------------------------


def test_non_consumer_protocol_elects_a_leader_and_distributes_opaque_assignments() -> None:
    h = ClassicHarness()
    proto = (Protocol("election-v1", b"\x00\xffnode-info"),)
    nodes = {}
    for n in ("node-a", "node-b", "node-c"):
        mid, handle = h.join_new(
            protocol_type="leader-election", protocols=proto, client_id=n, session=3000, rebalance=3000
        )
        nodes[n] = (mid, handle)
    h.advance(1)
    resp = {n: h.result(hd) for n, (_, hd) in nodes.items()}
    leader = resp["node-a"].leader
    assert all(r.leader == leader and r.protocol_type == "leader-election" for r in resp.values())
    assert [m.metadata for m in resp["node-a"].members] == [b"\x00\xffnode-info"] * 3
    plan = {mid: f"role={'primary' if mid == leader else 'standby'}".encode() for mid, _ in nodes.values()}
    syncs = {
        n: h.sync(
            mid,
            1,
            plan if mid == leader else None,
            protocol_type="leader-election",
            protocol_name="election-v1",
        )
        for n, (mid, _) in nodes.items()
    }
    got = {n: h.result(s).assignment for n, s in syncs.items()}
    assert got["node-a"] == b"role=primary" and got["node-b"] == got["node-c"] == b"role=standby"
    # The leader dies: the others notice through REBALANCE_IN_PROGRESS and elect a new leader.
    others = [nodes["node-b"][0], nodes["node-c"][0]]
    h.advance(2000)
    for m in others:
        h.heartbeat(m, 1)
    h.advance(1500)
    assert leader not in h.group.members
    assert all(h.heartbeat(m, 1) == Errors.REBALANCE_IN_PROGRESS for m in others)
    rejoin = {
        m: h.join(member_id=m, protocol_type="leader-election", protocols=proto, session=3000, rebalance=3000)
        for m in others
    }
    new = {m: h.result(r) for m, r in rejoin.items()}
    new_leader = new[others[0]].leader
    assert new_leader in others and all(r.generation_id == 2 for r in new.values())
    assert h.group.subscribed_topics is None  # opaque protocol: no topics known
