"""Connect groups on the new protocol (the Connect draft; docs/connect-groups.md): the engine's
rules, driven on one shard with `group.connect.enable`.

Every test checks, after each step, that no connector or task is owned by two workers at once
(what revoke-before-assign exists for); the replay test rebuilds the state from every record
written, through the record codec."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.config import CoordinatorConfig
from engine.connect.assignment import assigning_member
from engine.connect.group import ConnectGroup, ConnectWorker, WorkerState
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import SeededIds
from engine.metadata import MetadataImage
from engine.outcome import Outcome
from engine.shard import Shard
from engine.timers import TimerKind, timer_key
from protocol import connect_wire as cw
from records.codec import decode_record, encode_record
from records.coordinator import CoordinatorRecord

DELAY = 10_000
SESSION = 45_000


def work(*items: str) -> cw.WireWork:
    """'c1' is a connector, 'c1/0' task 0 of c1."""
    connectors = tuple(sorted(i for i in items if "/" not in i))
    tasks = tuple(sorted(cw.WireTask(i.split("/")[0], int(i.split("/")[1])) for i in items if "/" in i))
    return cw.WireWork(connectors, tasks)


def names(w: cw.WireWork | None) -> set[str]:
    if w is None:
        return set()
    return set(w.connectors) | {f"{t.connector}/{t.task}" for t in w.tasks}


def assignor(name: str = "incremental", lo: int = 0, hi: int = 1, version: int = 1) -> cw.WireConnectAssignor:
    return cw.WireConnectAssignor(name, lo, hi, 0, version, b"meta-" + name.encode())


class Cluster:
    """One shard, a clock, and what each worker believes it owns (the SDK's part, minimal)."""

    def __init__(self, **config: Any) -> None:
        cfg: dict[str, Any] = {
            "group.connect.enable": True,
            "group.connect.scheduled.rebalance.max.delay.ms": DELAY,
            "group.connect.session.timeout.ms": SESSION,
        }
        cfg.update(config)
        self.shard = Shard(CoordinatorConfig.from_kafka(cfg), SeededIds(3), MetadataImage([]))
        self.now = 1000
        self.log: list[CoordinatorRecord] = []
        self.owned: dict[str, set[str]] = {}
        self.epochs: dict[str, int] = {}

    def _keep(self, out: Outcome[Any]) -> Any:
        self.log.extend(out.records)
        self.check_exclusive()
        return out.response

    def group(self) -> ConnectGroup:
        g = self.shard.groups["g"]
        assert isinstance(g, ConnectGroup)
        return g

    def check_exclusive(self) -> None:
        g = self.shard.groups.get("g")
        if not isinstance(g, ConnectGroup):
            return
        seen: set[str] = set()
        for m in g.members.values():
            mine = names(m.assigned.wire()) | names(m.pending_revocation.wire())
            assert not (mine & seen), f"owned twice: {mine & seen}"
            seen |= mine
        believed: set[str] = set()
        for w, o in self.owned.items():
            assert not (o & believed), f"{w} runs {o & believed} that another worker runs"
            believed |= o

    def hb(self, mid: str, epoch: int | None = None, **kw: Any) -> cw.ConnectHeartbeatResponse:
        if epoch is None:
            epoch = self.epochs.get(mid, 0)
        if epoch == 0:
            kw.setdefault("rebalance_timeout_ms", 30_000)
            kw.setdefault("url", f"http://{mid}:8083")
            kw.setdefault("assignors", (assignor(),))
        kw.setdefault("owned", work(*sorted(self.owned.get(mid, set()))))
        req = cw.ConnectHeartbeatRequest("g", mid, epoch, **kw)
        self.now += 1
        ctx = RequestContext("w-" + mid, "/10.0.0.1")
        resp = self._keep(self.shard.connect_group_heartbeat(req, ctx, self.now))
        assert isinstance(resp, cw.ConnectHeartbeatResponse)
        if resp.error_code == 0 and epoch >= 0:
            self.epochs[mid] = resp.member_epoch
            if resp.assignment is not None:
                # The worker stops what it is no longer given, then starts what it is given.
                self.owned[mid] = names(resp.assignment.work)
        return resp

    def leave(self, mid: str) -> cw.ConnectHeartbeatResponse:
        r = self.hb(mid, epoch=-1)
        self.owned.pop(mid, None)
        self.epochs.pop(mid, None)
        return r

    def prepare(self, mid: str) -> cw.ConnectPrepareResponse:
        self.now += 1
        r = self._keep(
            self.shard.connect_prepare_assignment(
                cw.ConnectPrepareRequest("g", mid, self.epochs.get(mid, 0)), self.now, "User:ANONYMOUS"
            )
        )
        assert isinstance(r, cw.ConnectPrepareResponse)
        return r

    def install(
        self, mid: str, targets: dict[str, cw.WireWork], group_epoch: int | None = None, error: int = 0
    ) -> cw.ConnectInstallResponse:
        if group_epoch is None:
            group_epoch = self.group().group_epoch
        members = tuple(cw.InstalledWorker(w, t, 1, b"for-" + w.encode()) for w, t in targets.items())
        req = cw.ConnectInstallRequest("g", mid, self.epochs.get(mid, 0), group_epoch, error, members)
        self.now += 1
        r = self._keep(self.shard.connect_install_assignment(req, self.now, "User:ANONYMOUS"))
        assert isinstance(r, cw.ConnectInstallResponse)
        return r

    def expire(self, to: int) -> None:
        self.now = to
        for out in self.shard.expire(to):
            self._keep(out)

    def converge(self, *mids: str, rounds: int = 5) -> None:
        for _ in range(rounds):
            for m in mids:
                self.hb(m)


def two_workers_assigned() -> Cluster:
    c = Cluster()
    a = c.hb("a")
    assert a.error_code == 0 and a.compute_assignment == 1, a
    b = c.hb("b")
    assert b.compute_assignment == cw.NO_COMPUTE, "only the chosen worker computes"
    a = c.hb("a")
    assert a.compute_assignment == 2
    p = c.prepare("a")
    assert p.error_code == 0 and p.group_epoch == 2 and p.assignor_name == "incremental"
    assert [m.member_id for m in p.members] == ["a", "b"]
    assert p.members[1].url == "http://b:8083" and p.members[1].metadata == b"meta-incremental"
    assert c.install("a", {"a": work("c1", "c1/0"), "b": work("c1/1", "c1/2")}).error_code == 0
    c.converge("a", "b")
    return c


def test_two_workers_join_one_computes_both_reconcile() -> None:
    c = two_workers_assigned()
    g = c.group()
    assert g.state() == "Stable" and g.assignment_epoch == 2
    assert c.owned == {"a": {"c1", "c1/0"}, "b": {"c1/1", "c1/2"}}
    assert c.epochs == {"a": 2, "b": 2}
    # the assignment carries the assignor's metadata for the worker
    r = c.hb("b", owned=work())
    assert r.assignment is not None
    assert (r.assignment.metadata_version, r.assignment.metadata) == (1, b"for-b")


def test_a_moved_task_is_revoked_before_it_is_assigned() -> None:
    c = two_workers_assigned()
    c.hb("a")  # nothing pending
    c.hb("b", config_offset=7)  # a new connector config: the group epoch moves
    assert c.group().group_epoch == 3
    assert c.hb("a").compute_assignment == 3
    assert c.install("a", {"a": work("c1"), "b": work("c1/0", "c1/1", "c1/2")}).error_code == 0
    # b heartbeats first: c1/0 is still a's, so b moves to epoch 3 without it
    r = c.hb("b")
    assert r.member_epoch == 3 and names(r.assignment.work if r.assignment else None) == {"c1/1", "c1/2"}
    assert c.group().members["b"].state is WorkerState.UNRELEASED
    # a is told to keep only current ∩ target, and stays at its epoch until it acknowledges
    r = c.hb("a")
    assert r.member_epoch == 2 and c.owned["a"] == {"c1"}
    assert c.group().members["a"].state is WorkerState.UNREVOKED
    r = c.hb("a")  # reports c1 only: the revocation is acknowledged
    assert r.member_epoch == 3 and c.group().members["a"].state is WorkerState.STABLE
    r = c.hb("b")
    assert c.owned["b"] == {"c1/0", "c1/1", "c1/2"} and c.group().state() == "Stable"


def test_a_departed_workers_tasks_move_only_after_the_delay() -> None:
    c = two_workers_assigned()
    c.leave("b")
    g = c.group()
    assert set(g.delayed) == {"b"} and names(g.delayed["b"].work.wire()) == {"c1/1", "c1/2"}
    assert c.hb("a").compute_assignment == g.group_epoch
    p = c.prepare("a")
    assert [(d.member_id, d.url, d.remaining_ms) for d in p.delayed] == [("b", "http://b:8083", DELAY - 2)]
    bad = c.install("a", {"a": work("c1", "c1/0", "c1/1", "c1/2")})
    assert bad.error_code == Errors.INVALID_REQUEST
    assert "held for departed worker b" in (bad.error_message or "")
    assert c.install("a", {"a": work("c1", "c1/0")}).error_code == 0
    c.converge("a")
    assert c.owned["a"] == {"c1", "c1/0"}
    # the delay passes: the hold is released and the assignor is asked again
    epoch = c.group().group_epoch
    c.expire(c.now + DELAY)
    assert not c.group().delayed and c.group().group_epoch == epoch + 1
    assert c.hb("a").compute_assignment == epoch + 1
    assert not c.prepare("a").delayed
    assert c.install("a", {"a": work("c1", "c1/0", "c1/1", "c1/2")}).error_code == 0
    c.converge("a")
    assert c.owned["a"] == {"c1", "c1/0", "c1/1", "c1/2"}


def test_a_returning_worker_with_the_same_url_may_get_its_work_back_during_the_delay() -> None:
    c = two_workers_assigned()
    c.leave("b")
    c.hb("b2", url="http://b:8083")
    chosen = c.hb("a")
    assert chosen.compute_assignment == c.group().group_epoch
    r = c.install("a", {"a": work("c1", "c1/0"), "b2": work("c1/1", "c1/2")})
    assert r.error_code == 0, r
    c.converge("a", "b2")
    assert c.owned["b2"] == {"c1/1", "c1/2"}


def test_work_is_held_for_one_departed_worker_at_most() -> None:
    """The connect simulator's seed 1559: c1/1 moved from b's target to c's, c departed before b
    revoked it, then b departed still running it. Both holds had c1/1 (URLs c and b), so no
    install could place it (the one with c's URL broke b's hold) until both delays ended, and
    the SDK's assignor, giving each returning URL its hold, gave it twice. It is c's alone."""
    c = two_workers_assigned()
    c.hb("c")
    assert c.hb("a").compute_assignment == c.group().group_epoch
    assert c.install("a", {"a": work("c1", "c1/0"), "b": work("c1/2"), "c": work("c1/1")}).error_code == 0
    c.hb("c")  # c waits for b to revoke c1/1 (b has not heartbeated since)
    assert c.group().members["b"].assigned.tasks == {("c1", 1), ("c1", 2)}
    c.leave("c")
    c.leave("b")
    g = c.group()
    assert names(g.delayed["c"].work.wire()) == {"c1/1"}
    assert names(g.delayed["b"].work.wire()) == {"c1/2"}
    c.hb("c2", url="http://c:8083")  # c restarted: its work comes back to it
    assert c.hb("a").compute_assignment == c.group().group_epoch
    r = c.install("a", {"a": work("c1", "c1/0"), "c2": work("c1/1")})
    assert r.error_code == 0, r


def test_a_worker_departing_again_keeps_its_earlier_hold() -> None:
    """A worker that rejoins with its member id (as the SDK does after being fenced), gets part
    of its held work back and departs again: the rest stays held, not free for anyone at once."""
    c = two_workers_assigned()
    c.leave("b")
    c.hb("b")  # the same member id, same URL
    assert c.hb("a").compute_assignment == c.group().group_epoch
    assert c.install("a", {"a": work("c1", "c1/0"), "b": work("c1/1")}).error_code == 0
    c.converge("a", "b")
    c.leave("b")
    assert names(c.group().delayed["b"].work.wire()) == {"c1/1", "c1/2"}
    assert c.hb("a").compute_assignment == c.group().group_epoch
    r = c.install("a", {"a": work("c1", "c1/0", "c1/2")})
    assert r.error_code == Errors.INVALID_REQUEST and "held for departed worker b" in (r.error_message or "")


def test_session_timeout_is_a_departure_with_the_delay() -> None:
    c = two_workers_assigned()
    for _ in range(3):
        c.now += 10_000
        c.hb("a")
    c.expire(c.now + SESSION - 29_000)
    g = c.group()
    assert set(g.members) == {"a"} and set(g.delayed) == {"b"}


def test_the_assigning_worker_that_does_not_install_in_time_is_fenced() -> None:
    c = Cluster()
    c.hb("a", rebalance_timeout_ms=5_000)
    c.hb("b")
    assert c.hb("a").compute_assignment == 2
    c.hb("b")
    c.expire(c.now + 5_000)
    g = c.group()
    assert set(g.members) == {"b"} and g.group_epoch == 3
    assert c.hb("b").compute_assignment == 3


def test_an_install_for_an_older_epoch_is_refused_and_an_assignor_error_keeps_the_target() -> None:
    c = two_workers_assigned()
    c.hb("b", config_offset=9)
    c.hb("a")  # asked to compute epoch 3: the assignment timer starts
    key = timer_key(TimerKind.CONNECT_ASSIGNMENT, "g", "a")
    first = c.shard.timers.deadline(key)
    old = c.install("a", {"a": work()}, group_epoch=2)
    assert old.error_code == Errors.REBALANCE_IN_PROGRESS
    restarted = c.shard.timers.deadline(key)
    assert first is not None and restarted is not None and restarted > first
    assert c.install("a", {}, error=1).error_code == 0
    g = c.group()
    assert g.assignment_epoch == g.group_epoch == 3
    assert names(g.targets["b"].work.wire()) == {"c1/1", "c1/2"}
    assert c.hb("a").compute_assignment == cw.NO_COMPUTE


@pytest.mark.parametrize(
    ("targets", "reason"),
    [
        ({"x": work("c9")}, "member x is not in the group"),
        ({"a": work("c1"), "b": work("c1")}, "given to more than one member"),
    ],
)
def test_invalid_installs_write_nothing(targets: dict[str, cw.WireWork], reason: str) -> None:
    c = two_workers_assigned()
    c.hb("b", config_offset=9)
    before = len(c.log)
    r = c.install("a", targets)
    assert r.error_code == Errors.INVALID_REQUEST and reason in (r.error_message or "")
    assert len(c.log) == before


def test_only_the_chosen_worker_may_prepare_and_install() -> None:
    c = two_workers_assigned()
    assert c.prepare("b").error_code == Errors.UNKNOWN_MEMBER_ID
    assert c.install("b", {}).error_code == Errors.UNKNOWN_MEMBER_ID
    c.epochs["a"] = 1
    assert c.prepare("a").error_code == Errors.FENCED_MEMBER_EPOCH


def test_the_worker_chosen_is_the_one_reading_every_version_in_use() -> None:
    def w(mid: str, lo: int, hi: int, v: int) -> ConnectWorker:
        return ConnectWorker(mid, assignors=(assignor(lo=lo, hi=hi, version=v),))

    chosen = assigning_member([w("b", 3, 4, 3), w("c", 2, 4, 4), w("a", 1, 5, 5)])
    assert chosen is not None and chosen[1].member_id == "a"
    c = Cluster()
    c.hb("a", assignors=(assignor(lo=0, hi=1, version=1),))
    r = c.hb("b", assignors=(assignor(lo=2, hi=2, version=2),))
    assert r.error_code == Errors.UNSUPPORTED_ASSIGNOR
    r = c.hb("b", assignors=(assignor("other"),))
    assert r.error_code == Errors.UNSUPPORTED_ASSIGNOR


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"rebalance_timeout_ms": 0}, "RebalanceTimeoutMs"),
        ({"url": None}, "Url"),
        ({"assignors": ()}, "Assignors"),
        ({"assignors": (assignor(lo=2, hi=1),)}, "bad version range"),
        ({"assignors": (assignor(version=4),)}, "outside its range"),
        ({"assignors": (assignor(), assignor())}, "listed twice"),
    ],
)
def test_invalid_joins_are_refused(kw: dict[str, Any], message: str) -> None:
    c = Cluster()
    r = c.hb("a", **kw)
    assert r.error_code == Errors.INVALID_REQUEST and message in (r.error_message or "")
    assert "g" not in c.shard.groups


def test_unknown_and_fenced_workers() -> None:
    c = two_workers_assigned()
    assert c.hb("zz", epoch=2).error_code == Errors.UNKNOWN_MEMBER_ID
    assert c.hb("a", epoch=7).error_code == Errors.FENCED_MEMBER_EPOCH
    # a fenced worker rejoins with epoch 0 after dropping everything: it gets its target back, and
    # the assignor is asked again (the group epoch moved)
    c.owned["a"] = set()
    r = c.hb("a", epoch=0)
    assert r.error_code == 0 and r.member_epoch == 2 and c.owned["a"] == {"c1", "c1/0"}
    assert r.compute_assignment == 3


def test_other_group_types_refuse_connect_heartbeats_and_the_reverse() -> None:
    c = two_workers_assigned()
    from engine.consumer.api import ConsumerGroupHeartbeatRequest

    r = c.shard.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            "g", "m", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t"], topic_partitions=[]
        ),
        RequestContext("c", "/h", 1),
        c.now + 1,
    )
    assert r.response.error_code == Errors.GROUP_ID_NOT_FOUND


def test_list_and_describe_show_the_connect_group() -> None:
    c = two_workers_assigned()
    listed = c.shard.list_groups(types=["connect"])
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed] == [
        ("g", "connect", "connect", "Stable")
    ]
    assert c.shard.list_groups(types=["consumer"]) == []
    (d,) = c.shard.describe_groups(["g"])
    assert d.group_state == "Stable" and d.protocol_type == "connect" and d.protocol_data == "incremental"
    assert [(m.member_id, m.client_id) for m in d.members] == [("a", "w-a"), ("b", "w-b")]
    assert cw.read_work(cw.BoundedReader(d.members[1].member_assignment)) == work("c1/1", "c1/2")


def test_replay_rebuilds_the_live_state() -> None:
    c = two_workers_assigned()
    c.hb("b", config_offset=3)
    c.hb("a")
    c.install("a", {"a": work("c1"), "b": work("c1/0", "c1/1", "c1/2")})
    c.hb("b")
    c.hb("a")  # a revoking: UNREVOKED is replayed too
    c.hb("c")
    c.leave("b")
    fresh = Shard(c.shard.config, SeededIds(3), MetadataImage([]))
    for r in c.log:
        k, v = encode_record(r)
        fresh.replay(decode_record(k, v))
    assert fresh.persisted_state() == c.shard.persisted_state()
    assert c.shard.persisted_state()["groups"]["g"][0] == "connect"
    # the empty group is deleted with its tombstones, which replay to nothing
    c.leave("a")
    c.leave("c")
    c.expire(c.now + DELAY)
    out = c.shard.delete_groups(["g"], RequestContext(), c.now + 1)
    c.log.extend(out.records)
    assert "g" not in c.shard.groups
    fresh = Shard(c.shard.config, SeededIds(3), MetadataImage([]))
    for r in c.log:
        fresh.replay(r)
    assert "g" not in fresh.groups


def test_the_extension_is_off_by_default() -> None:
    assert CoordinatorConfig.from_kafka({}).connect_enable is False


def test_classic_apis_and_offset_commits_on_a_connect_group_are_refused() -> None:
    from engine.classic.api import JoinGroupRequest
    from engine.classic.member import Protocol

    c = two_workers_assigned()
    join = JoinGroupRequest("g", 10000, 10000, "", "connect", (Protocol("sessioned", b""),))
    r = c.shard.join_group(join, RequestContext("c", "/h", 9), c.now + 1)
    assert r.response.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert (
        c.shard.delete_groups(["g"], RequestContext(), c.now + 2).response[0].error_code
        == Errors.NON_EMPTY_GROUP
    )


def test_a_restart_rebuilds_the_group_and_its_timers() -> None:
    c = two_workers_assigned()
    c.leave("b")
    fresh = Shard(c.shard.config, SeededIds(3), MetadataImage([]))
    for r in c.log:
        fresh.replay(r)
    fresh.on_loaded(c.now)
    c.shard = fresh
    # the held work is released after the remaining delay; the worker's session still runs
    c.expire(c.now + DELAY)
    g = c.group()
    assert not g.delayed and set(g.members) == {"a"}
    assert c.hb("a").compute_assignment == g.group_epoch
    c.expire(c.now + SESSION)
    assert not c.group().members


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.integers(10, 60))
def test_random_runs_never_run_a_task_twice_and_replay_to_the_live_state(seed: int, length: int) -> None:
    """Workers join, heartbeat, leave, time passes, the chosen worker installs random targets:
    after every step no connector or task is owned twice (`Cluster.check_exclusive`), and the
    records replay to the live state."""
    rnd = random.Random(seed)
    c = Cluster()
    everything = [f"c{i}" for i in range(3)] + [f"c{i}/{t}" for i in range(3) for t in range(3)]
    for _ in range(length):
        op, mid = rnd.choice("jjhhhhlxii"), f"w{rnd.randrange(4)}"
        if op == "j" and mid not in c.epochs:
            c.hb(mid, epoch=0)
        elif op == "h" and mid in c.epochs:
            c.hb(mid)
        elif op == "l" and mid in c.epochs:
            c.leave(mid)
        elif op == "x":
            c.expire(c.now + rnd.randrange(3) * DELAY // 2)
            for gone in [m for m in c.epochs if m not in c.group().members]:
                c.owned.pop(gone, None)
                c.epochs.pop(gone, None)
        elif op == "i" and "g" in c.shard.groups and c.group().members:
            chosen = assigning_member(c.group().members.values())
            assert chosen is not None
            who = chosen[1].member_id
            held = names(c.group().held_work().wire())
            workers = sorted(c.group().members)
            targets: dict[str, list[str]] = {m: [] for m in workers}
            for item in everything:
                if item not in held:
                    targets[rnd.choice(workers)].append(item)
            if who in c.epochs:
                assert c.install(who, {m: work(*t) for m, t in targets.items()}).error_code == 0
    fresh = Shard(c.shard.config, SeededIds(3), MetadataImage([]))
    for r in c.log:
        k, v = encode_record(r)
        fresh.replay(decode_record(k, v))
    assert fresh.persisted_state() == c.shard.persisted_state()
