"""Classic group rules, one test each (Kafka's classic group protocol; Kafka `GroupMetadataManagerTest`
classic
cases). Responses, states, timers and GroupMetadata records are asserted."""

from __future__ import annotations

import pytest

from engine.classic.api import JoinGroupResponse, SyncGroupResponse
from engine.classic.member import Protocol
from engine.classic.state import ClassicGroupState as S
from engine.classic.state import IllegalTransition, check_transition
from engine.errors import Errors
from records.classic_group import GroupMetadataValue
from tests.classic_harness import ClassicHarness, subscription


def test_illegal_state_transitions_are_refused_with_the_group_and_states_named() -> None:
    check_transition("g", S.EMPTY, S.PREPARING_REBALANCE)
    with pytest.raises(IllegalTransition, match=r"Group g should be in one of .* before moving to Stable"):
        check_transition("g", S.EMPTY, S.STABLE)


def test_empty_group_id_is_invalid_group_id() -> None:
    h = ClassicHarness()
    assert h.join(group_id="").error_code == Errors.INVALID_GROUP_ID


@pytest.mark.parametrize("session", [5, 1_800_001])
def test_session_timeout_outside_the_bounds_is_invalid_session_timeout(session: int) -> None:
    h = ClassicHarness(group_min_session_timeout_ms=10, group_max_session_timeout_ms=1_800_000)
    r = h.join(session=session, member_id="m")
    assert (r.error_code, r.member_id) == (Errors.INVALID_SESSION_TIMEOUT, "m")


def test_v4_dynamic_member_must_first_get_a_member_id_and_is_tracked_as_pending() -> None:
    h = ClassicHarness()
    r = h.join(client_id="app")
    assert r.error_code == Errors.MEMBER_ID_REQUIRED
    assert r.member_id.startswith("app-") and len(r.member_id) == len("app-") + 36
    assert h.group.is_pending_member(r.member_id)
    assert h.shard.timers.deadline(f"heartbeat-g-{r.member_id}") == h.now + 10_000
    # The first join of a new group writes an empty GroupMetadata record so the group exists.
    assert h.last is not None and [type(x.value) for x in h.last.records] == [GroupMetadataValue]


def test_pending_member_that_never_comes_back_is_dropped_after_its_session_timeout() -> None:
    h = ClassicHarness()
    r = h.join()
    h.advance(10_001)
    assert not h.group.is_pending_member(r.member_id)


def test_v3_dynamic_member_joins_directly_without_member_id_required() -> None:
    h = ClassicHarness()
    handle = h.join(version=3)
    h.advance(1)
    resp = h.result(handle)
    assert resp.error_code == 0 and resp.generation_id == 1 and resp.leader == resp.member_id


def test_v0_join_uses_the_session_timeout_as_rebalance_timeout() -> None:
    h = ClassicHarness()
    h.join(version=0, rebalance=-1, session=7000)
    [m] = h.group.members.values()
    assert m.rebalance_timeout_ms == 7000


def test_first_member_is_leader_and_gets_the_member_list() -> None:
    h = ClassicHarness()
    a, ha = h.join_new()
    b, hb = h.join_new()
    h.advance(1)
    ra, rb = h.result(ha), h.result(hb)
    assert ra.leader == a == rb.leader
    assert [m.member_id for m in ra.members] == [a, b]
    assert ra.members[0].metadata == subscription("foo")
    assert rb.members == []
    assert h.group.state is S.COMPLETING_REBALANCE and h.group.generation_id == 1


def test_initial_rebalance_delay_waits_for_more_members_and_extends_while_they_come() -> None:
    h = ClassicHarness(group_initial_rebalance_delay_ms=3000)
    _, ha = h.join_new(rebalance=10_000)
    h.advance(2000)
    _, hb = h.join_new(rebalance=10_000)  # a new member during the delay extends it
    h.advance(1500)
    assert h.result(ha) is None and h.group.state is S.PREPARING_REBALANCE
    h.advance(3000)
    assert h.result(ha).generation_id == 1 and h.result(hb).generation_id == 1


def test_inconsistent_protocol_type_or_names_is_refused() -> None:
    h = ClassicHarness()
    h.stable_group(1)
    r = h.join(protocol_type="connect")
    assert r.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    r = h.join(protocols=(Protocol("roundrobin", b""),))
    assert r.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL


def test_empty_group_needs_a_protocol_type_and_a_protocol() -> None:
    h = ClassicHarness()
    assert h.join(protocol_type="").error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocols=()).error_code == Errors.INCONSISTENT_GROUP_PROTOCOL


def test_group_max_size_refuses_the_extra_member() -> None:
    h = ClassicHarness(group_max_size=2)
    h.stable_group(2)
    r = h.join(version=3)
    assert (r.error_code, r.member_id) == (Errors.GROUP_MAX_SIZE_REACHED, "")
    assert h.group.num_members == 2


def test_unknown_member_id_on_an_existing_group_is_unknown_member_id() -> None:
    h = ClassicHarness()
    h.stable_group(1)
    r = h.join(member_id="nobody")
    assert (r.error_code, r.member_id) == (Errors.UNKNOWN_MEMBER_ID, "nobody")


def test_known_member_id_on_a_missing_group_is_unknown_member_id() -> None:
    assert ClassicHarness().join(member_id="m").error_code == Errors.UNKNOWN_MEMBER_ID


def test_follower_rejoining_stable_group_with_same_metadata_gets_current_generation() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2)
    r = h.join(member_id=b)
    assert isinstance(r, JoinGroupResponse)
    assert (r.generation_id, r.leader, r.members) == (1, a, [])
    assert h.group.state is S.STABLE


def test_leader_rejoining_stable_group_forces_a_rebalance() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2)
    handle = h.join(member_id=a)
    assert h.group.state is S.PREPARING_REBALANCE
    assert h.result(handle) is None
    assert h.heartbeat(b, 1) == Errors.REBALANCE_IN_PROGRESS
    hb = h.join(member_id=b)
    assert h.result(handle).generation_id == 2 and h.result(hb).generation_id == 2


def test_follower_with_changed_metadata_forces_a_rebalance() -> None:
    h = ClassicHarness()
    _, b = h.stable_group(2)
    h.join(member_id=b, protocols=(Protocol("range", subscription("foo", "bar")),))
    assert h.group.state is S.PREPARING_REBALANCE


def test_member_rejoining_in_completing_rebalance_with_same_metadata_gets_the_generation_again() -> None:
    h = ClassicHarness()
    a, ha = h.join_new()
    b, hb = h.join_new()
    h.advance(1)
    r = h.join(member_id=a)  # the leader lost its JoinGroup response
    assert isinstance(r, JoinGroupResponse) and r.generation_id == 1 and len(r.members) == 2


def test_dynamic_members_that_do_not_rejoin_are_removed_at_the_end_of_the_join_phase() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2, rebalance=5000)
    ha = h.join(member_id=a, rebalance=5000)
    h.advance(5001)
    assert h.result(ha).generation_id == 2 and set(h.group.members) == {a}


def test_leader_that_does_not_rejoin_is_replaced_by_one_that_did() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2, rebalance=5000)
    h.join(member_id=a, protocols=(Protocol("range", subscription("foo", "bar")),), rebalance=5000)
    hb = h.join(member_id=b, rebalance=5000)
    assert h.result(hb).leader == a  # a rejoined: still leader
    a_sync = h.sync(a, 2, {a: b"x", b: b"y"})
    assert h.result(a_sync).assignment == b"x"
    # now b triggers a rebalance and a never rejoins
    h.join(
        member_id=b,
        protocols=(Protocol("range", subscription("bar")), Protocol("roundrobin", b"")),
        rebalance=5000,
    )
    h.advance(5001)
    assert h.group.leader_id == b and set(h.group.members) == {b}


def test_protocol_vote_picks_the_most_preferred_common_protocol() -> None:
    h = ClassicHarness()
    both = (Protocol("roundrobin", subscription("foo")), Protocol("range", subscription("foo")))
    rr_last = (Protocol("range", subscription("foo")), Protocol("roundrobin", subscription("foo")))
    _, h1 = h.join_new(protocols=both)
    _, h2 = h.join_new(protocols=both)
    _, h3 = h.join_new(protocols=rr_last)
    h.advance(1)
    assert h.result(h1).protocol_name == "roundrobin"  # 2 votes against 1


def test_sync_from_the_leader_stores_assignments_and_makes_the_group_stable() -> None:
    h = ClassicHarness()
    a, ha = h.join_new()
    b, hb = h.join_new()
    h.advance(1)
    sb = h.sync(b, 1)
    assert h.result(sb) is None  # parked until the leader syncs
    sa = h.sync(a, 1, {a: b"A", b: b"B"})
    assert h.last is not None
    assert h.result(sa).assignment == b"A" and h.result(sb).assignment == b"B"
    assert h.group.state is S.STABLE
    record = h.log[-1].value
    assert isinstance(record, GroupMetadataValue)
    assert (record.generation, record.protocol, record.leader) == (1, "range", a)
    assert {m.member_id: m.assignment for m in record.members} == {a: b"A", b: b"B"}


def test_leader_sync_missing_a_member_gives_it_an_empty_assignment() -> None:
    h = ClassicHarness()
    a, _ = h.join_new()
    b, _ = h.join_new()
    h.advance(1)
    sb = h.sync(b, 1)
    h.sync(a, 1, {a: b"A"})
    assert h.result(sb).assignment == b""


def test_failed_assignment_write_answers_everyone_with_the_error_and_rebalances() -> None:
    h = ClassicHarness()
    a, _ = h.join_new()
    b, _ = h.join_new()
    h.advance(1)
    sb = h.sync(b, 1)
    h.fail_next_append = Errors.KAFKA_STORAGE_ERROR
    sa = h.sync(a, 1, {a: b"A", b: b"B"})
    assert h.result(sa).error_code == Errors.NOT_COORDINATOR  # the mapped append error
    assert h.result(sb).error_code == Errors.NOT_COORDINATOR
    assert h.group.state is S.PREPARING_REBALANCE


def test_sync_errors_unknown_member_generation_protocol_and_rebalance() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2)
    assert h.result(h.sync("nobody", 1)).error_code == Errors.UNKNOWN_MEMBER_ID
    assert h.result(h.sync(a, 7)).error_code == Errors.ILLEGAL_GENERATION
    assert h.result(h.sync(a, 1, protocol_name="roundrobin")).error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert (
        h.result(h.sync(a, 1, protocol_type=None)).error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    )  # v5 needs both
    assert h.result(h.sync(a, 1, protocol_type=None, version=4)).error_code == 0
    h.join(member_id=a)  # rebalance
    assert h.result(h.sync(b, 1)).error_code == Errors.REBALANCE_IN_PROGRESS


def test_sync_to_missing_or_empty_group_is_unknown_member_id() -> None:
    h = ClassicHarness()
    assert h.result(h.sync("m", 0)).error_code == Errors.UNKNOWN_MEMBER_ID


def test_sync_in_stable_returns_the_stored_assignment() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2)
    r = h.result(h.sync(b, 1))
    assert isinstance(r, SyncGroupResponse) and r.assignment == f"assignment-{b}".encode()


def test_members_that_do_not_sync_in_time_are_removed_and_the_group_rebalances() -> None:
    h = ClassicHarness()
    a, ha = h.join_new(rebalance=5000)
    b, hb = h.join_new(rebalance=5000)
    h.advance(1)
    h.sync(a, 1, {a: b"A", b: b"B"})  # b never syncs
    h.advance(5001)
    assert b not in h.group.members
    assert h.group.state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)


def test_heartbeat_by_state() -> None:
    h = ClassicHarness()
    a, ha = h.join_new()
    b, hb = h.join_new()
    h.advance(1)
    assert h.heartbeat(a, 1) == 0  # CompletingRebalance: fine
    h.sync(a, 1, {a: b"", b: b""})
    assert h.heartbeat(b, 1) == 0  # Stable
    assert h.heartbeat(b, 0) == Errors.ILLEGAL_GENERATION
    assert h.heartbeat("x", 1) == Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, 1, group_id="missing") == Errors.UNKNOWN_MEMBER_ID
    h.join(member_id=a)
    assert h.heartbeat(b, 1) == Errors.REBALANCE_IN_PROGRESS


def test_heartbeat_expiry_removes_a_silent_member_and_rebalances() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2, session=3000)
    h.advance(2000)
    h.heartbeat(a, 1)
    h.advance(1500)
    assert set(h.group.members) == {a} and h.group.state is S.PREPARING_REBALANCE


def test_member_with_a_parked_join_satisfies_its_heartbeat() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2, session=3000, rebalance=60_000)
    h.join(member_id=a)  # a parks; the rebalance waits for b
    h.advance(2500)
    h.heartbeat(b, 1)
    h.advance(1000)  # a's session deadline passes while its join is parked
    assert a in h.group.members


def test_new_member_has_the_300s_join_timeout_as_its_heartbeat() -> None:
    h = ClassicHarness()
    mid, _ = h.join_new(session=3000)
    assert h.shard.timers.deadline(f"heartbeat-g-{mid}") == h.now + 300_000


def test_leave_group_batch_with_mixed_results_rebalances_once() -> None:
    h = ClassicHarness()
    a, b, c = h.stable_group(3)
    r = h.leave((b, None), ("nobody", None), (c, None))
    assert [(m.member_id, m.error_code) for m in r.members] == [
        (b, 0),
        ("nobody", Errors.UNKNOWN_MEMBER_ID),
        (c, 0),
    ]
    assert set(h.group.members) == {a}
    assert h.group.state is S.PREPARING_REBALANCE


def test_leave_group_of_missing_group_answers_unknown_member_id_per_member() -> None:
    h = ClassicHarness()
    r = h.leave(("a", None), ("b", "i"))
    assert [m.error_code for m in r.members] == [Errors.UNKNOWN_MEMBER_ID] * 2


def test_leave_completes_the_parked_join_of_the_leaving_member() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2)
    ha = h.join(member_id=a)
    h.leave((a, None))
    assert h.result(ha).error_code == Errors.UNKNOWN_MEMBER_ID


def test_last_member_leaving_empties_the_group_with_a_new_generation_record() -> None:
    h = ClassicHarness()
    (a,) = h.stable_group(1)
    h.leave((a, None))
    assert h.group.state is S.EMPTY and h.group.generation_id == 2
    rec = h.log[-1].value
    assert isinstance(rec, GroupMetadataValue) and rec.members == () and rec.generation == 2


def test_describe_groups_shows_members_with_metadata_only_when_stable() -> None:
    h = ClassicHarness()
    a, b = h.stable_group(2)
    [d] = h.shard.describe_groups(["g"])
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.member_assignment) for m in d.members] == [
        (a, f"assignment-{a}".encode()),
        (b, f"assignment-{b}".encode()),
    ]
    h.join(member_id=a)
    [d] = h.shard.describe_groups(["g"])
    assert (
        d.group_state == "PreparingRebalance"
        and d.protocol_data == ""
        and d.members[0].member_metadata == b""
    )
    [missing] = h.shard.describe_groups(["nope"])
    assert missing.group_state == "Dead"


def test_list_groups_filters_by_state_and_type_case_insensitively() -> None:
    h = ClassicHarness()
    h.stable_group(1)
    h.join(group_id="other", version=3)
    assert {g.group_id for g in h.shard.list_groups()} == {"g", "other"}
    assert [g.group_id for g in h.shard.list_groups(states=["STABLE"])] == ["g"]
    assert [g.group_type for g in h.shard.list_groups(types=["Classic"])] == ["classic", "classic"]
    assert h.shard.list_groups(types=["consumer"]) == []
