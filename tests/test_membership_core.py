"""The membership client's sans-IO state machine (membership/core.py, docs/membership.md): the
join round trip, each row of the error table, the lease, static members and the request bodies
at every version the client may negotiate."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from kio.index import load_request_schema

from membership.connection import SUPPORTED
from membership.core import (
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
    Assigned,
    Assignment,
    Fatal,
    GroupJoined,
    Member,
    MembershipCore,
    Request,
    Revoked,
    Settings,
    State,
)
from membership.event_log import StdlibEventLog
from membership.leader_election import Leadership, elect_self
from protocol.entity_builder import build

SESSION = 10.0
INTERVAL = 1.0


def _assign(joined: GroupJoined) -> Mapping[str, bytes]:
    return {m.member_id: f"{joined.generation}:{m.member_id}".encode() for m in joined.members}


def _core(instance: str | None = None, assignor: Any = _assign) -> MembershipCore:
    return MembershipCore(
        Settings(
            "g",
            "sr",
            session_timeout_ms=int(SESSION * 1000),
            heartbeat_interval_ms=int(INTERVAL * 1000),
            rebalance_timeout_ms=20_000,
            group_instance_id=instance,
        ),
        lambda: [("v1", b"meta")],
        assignor,
    )


def _find(code: int = 0) -> Any:
    return SimpleNamespace(coordinators=[SimpleNamespace(error_code=code, node_id=3, host="h", port=9)])


def _join(code: int = 0, member: str = "m1", leader: str = "m1", gen: int = 1, **kw: Any) -> Any:
    members = [SimpleNamespace(member_id=m, group_instance_id=None, metadata=b"meta") for m in ("m1", "m2")]
    values = dict(
        error_code=code,
        member_id=member,
        leader=leader,
        generation_id=gen,
        protocol_name="v1",
        protocol_type="sr",
        members=members if leader == member else [],
        skip_assignment=False,
    )
    values.update(kw)
    return SimpleNamespace(**values)


def _ok(**kw: Any) -> Any:
    return SimpleNamespace(error_code=0, **kw)


def _err(code: int) -> Any:
    return SimpleNamespace(error_code=code, assignment=b"", protocol_type=None)


def _step(core: MembershipCore, now: float, api: int, response: Any) -> Request:
    req = core.next_request(now)
    assert req is not None and req.api_key == api, req
    core.on_response(req, response, now)
    return req


def _stable(core: MembershipCore, now: float = 0.0) -> None:
    _step(core, now, FIND_COORDINATOR, _find())
    _step(core, now, JOIN_GROUP, _join())
    sync = _step(core, now, SYNC_GROUP, _ok(assignment=b"1:m1", protocol_type="sr"))
    assert sync.body["assignments"] == [
        {"member_id": "m1", "assignment": b"1:m1"},
        {"member_id": "m2", "assignment": b"1:m2"},
    ]
    assert core.state is State.STABLE


def test_join_with_member_id_required_then_lead() -> None:
    core = _core()
    _step(core, 0.0, FIND_COORDINATOR, _find())
    assert core.coordinator == (3, "h", 9)
    first = _step(core, 0.0, JOIN_GROUP, _join(79, member="m1"))
    assert first.body["member_id"] == ""
    second = _step(core, 0.0, JOIN_GROUP, _join())
    assert second.body["member_id"] == "m1"
    _step(core, 0.1, SYNC_GROUP, _ok(assignment=b"1:m1", protocol_type="sr"))
    (event,) = core.events()
    assert isinstance(event, Assigned) and event.assignment.is_leader and event.assignment.data == b"1:m1"
    assert core.lease_deadline == pytest.approx(0.1 + SESSION - INTERVAL)
    assert core.next_request(0.5) is None  # the next heartbeat is one interval after the sync
    hb = _step(core, 1.2, HEARTBEAT, _ok())
    assert hb.body["generation_id"] == 1 and hb.body["member_id"] == "m1"
    assert core.lease_deadline == pytest.approx(1.2 + SESSION - INTERVAL)


def test_a_follower_sends_no_assignments() -> None:
    core = _core()
    _step(core, 0.0, FIND_COORDINATOR, _find())
    _step(core, 0.0, JOIN_GROUP, _join(member="m2", leader="m1"))
    sync = _step(core, 0.0, SYNC_GROUP, _ok(assignment=b"x", protocol_type="sr"))
    assert sync.body["assignments"] == []
    (event,) = core.events()
    assert isinstance(event, Assigned) and not event.assignment.is_leader


def test_a_leader_told_to_skip_the_assignment_sends_none() -> None:
    core = _core(instance="i1")
    _step(core, 0.0, FIND_COORDINATOR, _find())
    _step(core, 0.0, JOIN_GROUP, _join(skip_assignment=True))
    sync = _step(core, 0.0, SYNC_GROUP, _ok(assignment=b"kept", protocol_type="sr"))
    assert sync.body["assignments"] == [] and sync.body["group_instance_id"] == "i1"


def test_rebalance_in_progress_revokes_and_rejoins_with_the_same_id() -> None:
    core = _core()
    _stable(core)
    core.events()
    _step(core, 1.5, HEARTBEAT, _err(27))
    (event,) = core.events()
    assert isinstance(event, Revoked) and not event.lost
    join = core.next_request(1.5)
    assert join is not None and join.api_key == JOIN_GROUP and join.body["member_id"] == "m1"


@pytest.mark.parametrize(("code", "member_id"), [(25, ""), (22, "m1")])
def test_unknown_member_or_illegal_generation_resets(code: int, member_id: str) -> None:
    """UNKNOWN_MEMBER_ID forgets the member id; ILLEGAL_GENERATION keeps it (still valid)."""
    core = _core()
    _stable(core)
    core.events()
    _step(core, 1.5, HEARTBEAT, _err(code))
    (event,) = core.events()
    assert isinstance(event, Revoked) and event.lost
    join = core.next_request(10.0)
    assert join is not None and join.api_key == JOIN_GROUP and join.body["member_id"] == member_id


@pytest.mark.parametrize("code", [15, 16])
def test_coordinator_moved_keeps_the_membership(code: int) -> None:
    core = _core()
    _stable(core)
    core.events()
    _step(core, 1.5, HEARTBEAT, _err(code))
    assert core.events() == [] and core.assignment is not None
    _step(core, 2.0, FIND_COORDINATOR, _find())
    hb = core.next_request(2.6)
    assert hb is not None and hb.api_key == HEARTBEAT and hb.body["member_id"] == "m1"


def test_a_failed_heartbeat_finds_the_coordinator_again() -> None:
    core = _core()
    _stable(core)
    hb = core.next_request(1.5)
    assert hb is not None
    core.on_failure(hb, 1.6, "closed")
    assert core.coordinator is None and core.assignment is not None
    assert core.next_request(1.65) is None  # backoff
    find = core.next_request(1.8)
    assert find is not None and find.api_key == FIND_COORDINATOR


def test_no_successful_heartbeat_for_a_session_drops_the_coordinator() -> None:
    core = _core()
    _stable(core)
    req = core.next_request(SESSION + 1)
    assert req is not None and req.api_key == FIND_COORDINATOR


def test_sync_unknown_member_resets_and_rebalance_keeps_the_id() -> None:
    core = _core()
    _step(core, 0.0, FIND_COORDINATOR, _find())
    _step(core, 0.0, JOIN_GROUP, _join())
    _step(core, 0.0, SYNC_GROUP, _err(27))
    join = core.next_request(0.0)
    assert join is not None and join.body["member_id"] == "m1"
    core.on_response(join, _join(gen=2), 0.0)
    _step(core, 0.0, SYNC_GROUP, _err(25))
    join = core.next_request(1.0)
    assert join is not None and join.body["member_id"] == ""


def test_sync_answering_another_protocol_is_refused() -> None:
    core = _core()
    _step(core, 0.0, FIND_COORDINATOR, _find())
    _step(core, 0.0, JOIN_GROUP, _join())
    _step(core, 0.0, SYNC_GROUP, _ok(assignment=b"", protocol_type="sr", protocol_name="v2"))
    (event,) = core.events()
    assert isinstance(event, Fatal) and event.error.code == 23


def test_load_in_progress_retries_the_same_coordinator_after_a_backoff() -> None:
    core = _core()
    _step(core, 0.0, FIND_COORDINATOR, _find())
    _step(core, 0.0, JOIN_GROUP, _join(14))
    assert core.next_request(0.05) is None
    join = core.next_request(0.2)
    assert join is not None and join.api_key == JOIN_GROUP and core.coordinator is not None


@pytest.mark.parametrize("code", [23, 30, 82, 26, 81, 24])
def test_fatal_join_errors_stop_the_member(code: int) -> None:
    core = _core()
    _step(core, 0.0, FIND_COORDINATOR, _find())
    _step(core, 0.0, JOIN_GROUP, _join(code))
    (event,) = core.events()
    assert isinstance(event, Fatal) and event.error.code == code
    assert core.state is State.FAILED and core.next_request(100.0) is None
    assert core.close() is None  # nothing to leave


def test_fenced_static_member_loses_its_assignment() -> None:
    core = _core(instance="i1")
    _stable(core)
    core.events()
    _step(core, 1.5, HEARTBEAT, _err(82))
    revoked, fatal = core.events()
    assert isinstance(revoked, Revoked) and revoked.lost and isinstance(fatal, Fatal)


def test_an_assignor_that_raises_is_fatal() -> None:
    def broken(joined: GroupJoined) -> Mapping[str, bytes]:
        raise RuntimeError("boom")

    core = _core(assignor=broken)
    _step(core, 0.0, FIND_COORDINATOR, _find())
    _step(core, 0.0, JOIN_GROUP, _join())
    (event,) = core.events()
    assert isinstance(event, Fatal) and "boom" in str(event.error)


def test_a_protocol_not_offered_is_refused() -> None:
    core = _core()
    _step(core, 0.0, FIND_COORDINATOR, _find())
    _step(core, 0.0, JOIN_GROUP, _join(protocol_name="other"))
    (event,) = core.events()
    assert isinstance(event, Fatal) and event.error.code == 23


def test_close_leaves_unless_static() -> None:
    dynamic = _core()
    _stable(dynamic)
    dynamic.events()
    leave = dynamic.close()
    assert leave is not None and leave.api_key == LEAVE_GROUP and leave.body["member_id"] == "m1"
    (event,) = dynamic.events()
    assert isinstance(event, Revoked) and not event.lost
    static = _core(instance="i1")
    _stable(static)
    assert static.close() is None
    assert static.state is State.CLOSED and static.next_request(5.0) is None


def test_restart_after_a_fatal_error_joins_as_new() -> None:
    core = _core()
    _step(core, 0.0, FIND_COORDINATOR, _find())
    _step(core, 0.0, JOIN_GROUP, _join(30))
    core.restart("retry")
    req = core.next_request(1.0)
    assert req is not None and req.api_key == FIND_COORDINATOR


@pytest.mark.parametrize("instance", [None, "i1"])
def test_every_request_builds_at_every_negotiable_version(instance: str | None) -> None:
    core = _core(instance=instance)
    bodies: dict[int, dict[str, Any]] = {}
    req = core.next_request(0.0)
    assert req is not None
    bodies[req.api_key] = req.body
    core.on_response(req, _find(), 0.0)
    for api, response in ((JOIN_GROUP, _join()), (SYNC_GROUP, _ok(assignment=b"", protocol_type="sr"))):
        req = _step(core, 0.0, api, response)
        bodies[api] = req.body
    hb = core.next_request(2.0)
    assert hb is not None
    bodies[HEARTBEAT] = hb.body
    leave = _core()
    _stable(leave)
    left = leave.close()
    assert left is not None
    bodies[LEAVE_GROUP] = left.body
    for api, body in bodies.items():
        lo, hi = SUPPORTED[api]
        for version in range(lo, hi + 1):
            build(load_request_schema(api, version), body)


def test_leader_election_assignment_names_the_leaders_identity() -> None:
    members = (Member("m1", None, b"node-a"), Member("m2", "i2", b"node-b"))
    plan = elect_self(GroupJoined(4, "leader-v1", "m1", "m1", members))
    assert set(plan) == {"m1", "m2"} and plan["m1"] == plan["m2"]
    # A follower reads the leader from its generation and the identity from the assignment.
    follower = Leadership.of(Assignment(4, "m2", "m1", "leader-v1", plan["m2"]))
    assert follower.leader_identity == b"node-a" and not follower.is_leader
    leader = Leadership.of(Assignment(4, "m1", "m1", "leader-v1", plan["m1"]))
    assert leader.is_leader and leader.generation == 4
    # A restarted static leader (new member id) given the stored assignment still leads.
    restarted = Leadership.of(Assignment(5, "m9", "m9", "leader-v1", plan["m1"]))
    assert restarted.is_leader and restarted.leader_identity == b"node-a"


def test_the_stdlib_event_log_writes_named_events(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="membership")
    StdlibEventLog().info("membership.coordinator_lost", group="g", reason="x")
    assert "membership.coordinator_lost group='g' reason='x'" in caplog.text
