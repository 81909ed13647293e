"""`connect_worker.core.ConnectWorkerCore`, the sans-IO Connect worker, driven by hand-made
answers: the join carries the worker's URL, config offset and assignor metadata; later heartbeats
only what changed; reconciliation revokes before it assigns and reports at once; fencing drops
everything (lost) and rejoins at epoch 0; ComputeAssignment runs PrepareAssignment, the assignor,
InstallAssignment; an assignor that raises installs an error; close revokes and leaves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from connect_worker.assignor import (
    ConnectAssignor,
    ConnectGroupState,
    ConnectorConfig,
    IncrementalCooperativeAssignor,
    Work,
    WorkerAssignment,
)
from connect_worker.core import (
    CONNECT_HEARTBEAT,
    CONNECT_INSTALL,
    CONNECT_PREPARE,
    FIND_COORDINATOR,
    Assigned,
    Computed,
    ConnectWorkerCore,
    Fatal,
    Joined,
    Revoked,
    Settings,
    State,
)
from protocol import connect_wire as cw

CONFIG = ConnectorConfig(3, {"a": 2})


class FindAnswer:
    """What `membership.core.read_find_coordinator` reads of a FindCoordinator v4 answer."""

    def __init__(self) -> None:
        coordinator = type("C", (), {"error_code": 0, "node_id": 1, "host": "h", "port": 9, "key": "g"})()
        self.coordinators = [coordinator]
        self.error_code = 0


def core(assignors: tuple[ConnectAssignor, ...] | None = None) -> ConnectWorkerCore:
    c = ConnectWorkerCore(
        Settings("g", "http://w1:8083"),
        assignors or (IncrementalCooperativeAssignor(CONFIG),),
        config_offset=CONFIG.offset,
        member_id="m1",
    )
    c.coordinator = (1, "h", 9)
    return c


def work(*names: str) -> cw.WireWork:
    return cw.WireWork(
        tuple(sorted(n for n in names if "-" not in n)),
        tuple(sorted(cw.WireTask(n.split("-")[0], int(n.split("-")[1])) for n in names if "-" in n)),
    )


def answer(
    epoch: int, *names: str, compute: int = cw.NO_COMPUTE, code: int = 0
) -> cw.ConnectHeartbeatResponse:
    assignment = cw.WireConnectAssignment(work(*names)) if names or epoch > 0 else None
    return cw.ConnectHeartbeatResponse(code, None, "m1", epoch, 1000, compute, assignment)


def heartbeat(c: ConnectWorkerCore, now: float, response: Any) -> cw.ConnectHeartbeatRequest:
    req = c.next_request(now)
    assert req is not None and req.api_key == CONNECT_HEARTBEAT
    c.on_response(req, response, now)
    assert isinstance(req.body, cw.ConnectHeartbeatRequest)
    return req.body


def test_the_first_request_finds_the_coordinator() -> None:
    c = core()
    c.coordinator = None
    req = c.next_request(0.0)
    assert req is not None and req.api_key == FIND_COORDINATOR and not req.to_coordinator
    c.on_response(req, FindAnswer(), 0.0)
    assert c.coordinator == (1, "h", 9)


def test_join_then_incremental_heartbeats() -> None:
    c = core()
    join = heartbeat(c, 0.0, answer(1))
    assert (join.member_epoch, join.url, join.config_offset, join.rebalance_timeout_ms) == (
        0,
        "http://w1:8083",
        3,
        60_000,
    )
    assert join.owned == cw.WireWork() and join.assignors is not None
    assert ConnectorConfig.decode(join.assignors[0].metadata) == CONFIG
    assert c.events() == [Joined("m1", 1)]
    assert c.next_request(0.5) is None  # not due before the interval
    assert c.wakeup(0.5) == pytest.approx(1.0)
    nxt = heartbeat(c, 1.0, answer(1))
    assert (nxt.url, nxt.config_offset, nxt.assignors, nxt.owned, nxt.rebalance_timeout_ms) == (
        None,
        -1,
        None,
        None,
        -1,
    )
    # A config change goes out at once, with the new offset.
    c.set_config_offset(4)
    body = heartbeat(c, 1.1, answer(1))
    assert body.config_offset == 4 and body.url is None


def test_revoke_before_assign_and_report_at_once() -> None:
    c = core()
    heartbeat(c, 0.0, answer(1, "a", "a-0"))
    assert c.events() == [
        Joined("m1", 1),
        Assigned(Work(frozenset({"a"}), frozenset({("a", 0)})), c.owned, 1),
    ]
    report = heartbeat(c, 0.0, answer(1, "a", "a-0"))  # sent at once: owned changed
    assert report.owned == work("a", "a-0")
    # Coordinator: keep a-0 only (revoke a); the worker revokes, reports, then gets a-1.
    heartbeat(c, 2.0, answer(1, "a-0"))
    assert c.events() == [Revoked(Work(frozenset({"a"})), lost=False)]
    report = heartbeat(c, 2.0, answer(2, "a-0", "a-1"))
    assert report.owned == work("a-0")
    events = c.events()
    assert events == [
        Assigned(Work(tasks=frozenset({("a", 1)})), Work(tasks=frozenset({("a", 0), ("a", 1)})), 2)
    ]
    # Both at once (a coordinator need not do it): the revocation comes first.
    heartbeat(c, 2.0, answer(3, "b"))
    kinds = [type(e) for e in c.events()]
    assert kinds == [Revoked, Assigned]


@pytest.mark.parametrize("code", [110, 25])
def test_fenced_drops_everything_as_lost_and_rejoins_empty(code: int) -> None:
    c = core()
    heartbeat(c, 0.0, answer(4, "a", "a-0"))
    c.events()
    heartbeat(c, 0.0, answer(0, code=code))
    assert c.events() == [Revoked(Work(frozenset({"a"}), frozenset({("a", 0)})), lost=True)]
    assert (c.epoch, c.state, c.owned) == (0, State.JOINING, Work())
    rejoin = heartbeat(c, 0.0, answer(0))
    assert rejoin.member_epoch == 0 and rejoin.owned == cw.WireWork() and rejoin.url is not None


def test_unexpected_error_is_fatal() -> None:
    c = core()
    heartbeat(c, 0.0, answer(0, code=112))  # UNSUPPORTED_ASSIGNOR
    (event,) = c.events()
    assert isinstance(event, Fatal) and event.error.code == 112 and c.stopped


def prepared(group_epoch: int = 7, held: tuple[cw.DelayedWork, ...] = ()) -> cw.ConnectPrepareResponse:
    m1 = cw.PreparedWorker("m1", 1, "http://w1:8083", 3, 0, 0, CONFIG.encode(), cw.WireWork())
    m2 = cw.PreparedWorker("m2", 1, "http://w2:8083", 3, 0, 0, CONFIG.encode(), cw.WireWork())
    return cw.ConnectPrepareResponse(0, None, group_epoch, "incremental", (m1, m2), held)


def compute(c: ConnectWorkerCore, response: cw.ConnectPrepareResponse) -> cw.ConnectInstallRequest:
    heartbeat(c, 0.0, answer(1, compute=response.group_epoch))
    prep = c.next_request(0.0)
    assert prep is not None and prep.api_key == CONNECT_PREPARE
    assert prep.body == cw.ConnectPrepareRequest("g", "m1", 1)
    c.on_response(prep, response, 0.0)
    install = c.next_request(0.0)
    assert install is not None and install.api_key == CONNECT_INSTALL
    c.on_response(install, cw.ConnectInstallResponse(), 0.0)
    assert isinstance(install.body, cw.ConnectInstallRequest)
    return install.body


def test_compute_prepares_runs_the_assignor_and_installs() -> None:
    c = core()
    body = compute(c, prepared())
    assert (body.group_epoch, body.error) == (7, 0)
    given = [set(m.work.connectors) | {f"{t.connector}-{t.task}" for t in m.work.tasks} for m in body.members]
    assert sorted(x for g in given for x in g) == ["a", "a-0", "a-1"]
    assert Computed(7, 0, True) in c.events()
    # Asked again for the same epoch (the response repeats until the target lands): not redone.
    heartbeat(c, 0.0, answer(1, compute=7))
    assert c.next_request(0.0) is None


class Failing(ConnectAssignor):
    name = "incremental"

    def assign(self, group: ConnectGroupState) -> Mapping[str, WorkerAssignment]:
        raise RuntimeError("broken plug-in")


def test_an_assignor_that_raises_installs_an_error() -> None:
    c = core((Failing(),))
    body = compute(c, prepared())
    assert body.error != 0 and body.members == ()
    assert Computed(7, body.error, True) in c.events()


def test_an_install_the_coordinator_refuses_becomes_an_error_install() -> None:
    c = core()
    heartbeat(c, 0.0, answer(1, compute=7))
    prep = c.next_request(0.0)
    assert prep is not None
    c.on_response(prep, prepared(), 0.0)
    install = c.next_request(0.0)
    assert install is not None
    c.on_response(install, cw.ConnectInstallResponse(42, "Invalid assignment: x"), 0.0)
    retry = c.next_request(0.0)
    assert retry is not None and retry.api_key == CONNECT_INSTALL and retry.body.error != 0


def test_held_work_reaches_the_assignor_and_stays_out() -> None:
    held = cw.DelayedWork("gone", "http://gone", 1500, work("a-1"))
    body = compute(core(), prepared(held=(held,)))
    assigned = {(t.connector, t.task) for m in body.members for t in m.work.tasks}
    assert ("a", 1) not in assigned and ("a", 0) in assigned


def test_close_revokes_and_leaves() -> None:
    c = core()
    heartbeat(c, 0.0, answer(2, "a"))
    c.events()
    leave = c.close()
    assert leave is not None and leave.body.member_epoch == -1
    assert c.events() == [Revoked(Work(frozenset({"a"})), lost=False)]
    assert c.closed and c.next_request(10.0) is None and c.close() is None


def test_a_lost_connection_keeps_the_work_and_rediscovers() -> None:
    c = core()
    heartbeat(c, 0.0, answer(2, "a"))
    req = c.next_request(5.0)
    assert req is not None
    c.on_failure(req, 5.0, "reset")
    assert c.coordinator is None and c.owned == Work(frozenset({"a"}))


def test_the_example_reads_its_connectors() -> None:
    from connect_worker.__main__ import parse_connectors

    assert parse_connectors("a:3, b ,c:0") == {"a": 3, "b": 1, "c": 0}
    for bad in ("a:x", ":3", "a:-1"):
        with pytest.raises(ValueError):
            parse_connectors(bad)
