"""Online conversion of a classic Kafka Connect group to a connect group and back (issue 32,
point 2; translation/connect_upgrade.py, connect_classic_worker.py, connect_downgrade.py;
docs/connect-groups.md, "Conversion with a real Connect cluster").

Classic workers speak Connect's own protocol bytes (`sessioned`, version 2: the metadata with
their allocation, the incremental assignments Connect's WorkerCoordinator applies: stop what is
revoked, then start what is assigned); the SDK worker speaks ConnectGroupHeartbeat and computes.
After every step no connector or task is run by two workers at once (what each classic worker
runs is rebuilt from the assignments it was sent, as `WorkerCoordinator.onJoinComplete` does),
and the replayed log equals the live state."""

from __future__ import annotations

import random
from typing import Any

import pytest

from engine.classic.group import ClassicGroup
from engine.classic.member import Protocol
from engine.connect.group import ConnectGroup, WorkerState
from engine.context import RequestContext
from engine.errors import Errors
from protocol import connect_wire as cw
from records.codec import decode_record, encode_record
from tests.migration_harness import ClassicSeed, MigrationHarness
from translation.connect_classic_protocol import (
    ConnectWorkerMetadata,
    build_assignment,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)

Item = str  # "c1" a connector, "c1/0" task 0 of c1
CONFIG_OFFSET = 7
SESSION = 10_000


def split(items: set[Item]) -> tuple[list[str], list[tuple[str, int]]]:
    connectors = sorted(i for i in items if "/" not in i)
    tasks = sorted((i.split("/")[0], int(i.split("/")[1])) for i in items if "/" in i)
    return connectors, tasks


def items_of(connectors: Any, tasks: Any) -> set[Item]:
    return set(connectors) | {f"{c}/{t}" for c, t in tasks}


def wire(items: set[Item]) -> cw.WireWork:
    connectors, tasks = split(items)
    return cw.WireWork(tuple(connectors), tuple(cw.WireTask(c, t) for c, t in tasks))


def from_wire(w: cw.WireWork | None) -> set[Item]:
    return set() if w is None else items_of(w.connectors, [(t.connector, t.task) for t in w.tasks])


def metadata(url: str, runs: set[Item], version: int = 2, offset: int = CONFIG_OFFSET) -> bytes:
    """A Connect worker's JoinGroup metadata: ExtendedWorkerState with its allocation."""
    connectors, tasks = split(runs)
    allocation = build_assignment(version, "a", "http://a:8083", offset, connectors, tasks) if runs else None
    return encode_metadata(ConnectWorkerMetadata(version, url, offset, allocation))


class Connect(MigrationHarness):
    """A shard with the translation layer: classic Connect workers and SDK workers."""

    def __init__(self, **config: Any) -> None:
        config.setdefault("group.connect.enable", True)
        config.setdefault("group.connect.scheduled.rebalance.max.delay.ms", 5000)
        super().__init__({}, **config)
        self.runs: dict[str, set[Item]] = {}  # classic workers: what each runs
        self.gen: dict[str, int] = {}
        self.offset: dict[str, int] = {}
        self.owned: dict[str, set[Item]] = {}  # SDK workers
        self.epoch: dict[str, int] = {}
        self.leaders: list[str] = []
        self.checking = True

    def url(self, mid: str) -> str:
        return f"http://{mid}:8083"

    def check_exclusive(self) -> None:
        if not self.checking:
            return
        seen: set[Item] = set()
        for who, items in [*self.runs.items(), *self.owned.items()]:
            assert not (items & seen), f"{who} runs {items & seen}, which another worker runs"
            seen |= items
        g = self.shard.groups.get("g")
        if isinstance(g, ConnectGroup):
            held: set[Item] = set()
            for m in g.members.values():
                mine = from_wire(m.assigned.wire()) | from_wire(m.pending_revocation.wire())
                assert not (mine & held)
                held |= mine

    def process(self, out: Any) -> Any:
        r = super().process(out)
        self.check_exclusive()
        return r

    # --- classic workers -------------------------------------------------------------------

    def seed(self, work: dict[str, set[Item]], generation: int = 5, protocol: str = "sessioned") -> None:
        version = {"default": 0, "compatible": 1, "sessioned": 2}[protocol]
        seeds = []
        for mid, items in work.items():
            self.runs[mid] = set(items)
            self.gen[mid] = generation
            self.offset[mid] = CONFIG_OFFSET
            # Connect's leader assigned nothing new in the last round: each runs its allocation.
            a = build_assignment(version, "a", self.url("a"), CONFIG_OFFSET, [], [])
            seeds.append(
                ClassicSeed(
                    mid,
                    subscription=metadata(self.url(mid), items, version)
                    if version
                    else encode_metadata(ConnectWorkerMetadata(0, self.url(mid), CONFIG_OFFSET)),
                    assignment=encode_assignment(a),
                    session_timeout_ms=SESSION,
                    rebalance_timeout_ms=60_000,
                    client_id=f"connect-{mid}",
                )
            )
        self.seed_classic(generation, seeds, protocol=protocol, protocol_type="connect", leader="a")

    def cjoin(self, mid: str, *, offer: tuple[str, ...] = ("sessioned", "compatible")) -> Any:
        runs = self.runs.setdefault(mid, set())
        offset = self.offset.get(mid, CONFIG_OFFSET)
        version = {"sessioned": 2, "compatible": 1}
        protocols = tuple(Protocol(p, metadata(self.url(mid), runs, version[p], offset)) for p in offer)
        r = self.join(mid, protocols=protocols, protocol_type="connect", session=SESSION, rebalance=60_000)
        if r.error_code == 0:
            self.gen[mid] = r.generation_id
            self.leaders.append(r.leader)
        return r

    def csync(self, mid: str, assignments: dict[str, bytes] | None = None) -> Any:
        r = self.sync(
            mid, self.gen[mid], protocol_name="sessioned", protocol_type="connect", assignments=assignments
        )
        if r.error_code == 0:
            a = decode_assignment(r.assignment)
            assert a.version == 2 and a.error == 0
            # WorkerCoordinator.onJoinComplete: stop the revoked, then start the assigned.
            revoked = items_of(a.revoked_connectors, a.revoked_tasks)
            assigned = items_of(a.connectors, a.tasks)
            assert not (revoked & assigned)
            assert revoked <= self.runs[mid], "revoked what it does not run"
            self.runs[mid] -= revoked
            self.check_exclusive()
            others = set().union(*(v for k, v in self.runs.items() if k != mid), *self.owned.values())
            assert not (assigned & others), f"{mid} is given {assigned & others}, which another worker runs"
            self.runs[mid] |= assigned
        return r

    def rejoin(self, mid: str) -> Any:
        j = self.cjoin(mid)
        assert j.error_code == 0, j
        return self.csync(mid)

    def chb(self, mid: str) -> int:
        return self.heartbeat(mid, self.gen[mid])

    # --- SDK workers ---------------------------------------------------------------------------

    def hb(self, mid: str, epoch: int | None = None, **kw: Any) -> cw.ConnectHeartbeatResponse:
        if epoch is None:
            epoch = self.epoch.get(mid, 0)
        if epoch == 0:
            kw.setdefault("rebalance_timeout_ms", 30_000)
            kw.setdefault("url", self.url(mid))
            kw.setdefault("assignors", (cw.WireConnectAssignor("incremental", 0, 0, 0, 0, b"{}"),))
        kw.setdefault("owned", wire(self.owned.get(mid, set())))
        req = cw.ConnectHeartbeatRequest("g", mid, epoch, **kw)
        r = self.process(
            self.shard.connect_group_heartbeat(req, RequestContext("sdk-" + mid, "/h"), self.tick())
        )
        assert isinstance(r, cw.ConnectHeartbeatResponse)
        if r.error_code == 0 and epoch >= 0:
            self.epoch[mid] = r.member_epoch
            if r.assignment is not None:
                self.owned[mid] = from_wire(r.assignment.work)
        return r

    def sdk_leave(self, mid: str) -> cw.ConnectHeartbeatResponse:
        r = self.hb(mid, -1)
        self.owned.pop(mid, None)
        self.epoch.pop(mid, None)
        return r

    def install(self, mid: str, targets: dict[str, set[Item]]) -> cw.ConnectInstallResponse:
        g = self.group()
        prep = self.process(
            self.shard.connect_prepare_assignment(
                cw.ConnectPrepareRequest("g", mid, self.epoch[mid]), self.tick(), "User:ANONYMOUS"
            )
        )
        assert prep.error_code == 0, prep
        members = tuple(cw.InstalledWorker(w, wire(t), 0, b"") for w, t in targets.items())
        req = cw.ConnectInstallRequest("g", mid, self.epoch[mid], g.group_epoch, 0, members)
        r = self.process(self.shard.connect_install_assignment(req, self.tick(), "User:ANONYMOUS"))
        assert isinstance(r, cw.ConnectInstallResponse)
        return r

    def group(self) -> ConnectGroup:
        g = self.shard.groups["g"]
        assert isinstance(g, ConnectGroup)
        return g

    def assert_replay(self) -> None:
        fresh = self.replayed()
        again = type(self.shard)(self.shard.config, self.shard.ids, self.shard.image)
        for r in self.log:
            k, v = encode_record(r)
            again.replay(decode_record(k, v))
        assert fresh.persisted_state() == self.shard.persisted_state()
        assert again.persisted_state() == self.shard.persisted_state()


WORK = {
    "a": {"c1", "c1/0", "c1/1"},
    "b": {"c2", "c1/2", "c2/0"},
    "c": {"c3", "c2/1", "c3/0"},
}


def converted() -> Connect:
    h = Connect()
    h.seed(WORK)
    r = h.hb("s")
    assert r.error_code == 0, r
    assert r.compute_assignment == 6, "the joining SDK worker computes for generation + 1"
    return h


def test_the_first_sdk_worker_converts_the_classic_group_keeping_every_workers_work() -> None:
    h = converted()
    g = h.group()
    assert g.group_epoch == 6 and g.assignment_epoch == 5
    assert [m.member_id for m in g.classic_workers()] == ["a", "b", "c"]
    for mid, items in WORK.items():
        m = g.members[mid]
        assert m.classic is not None and m.url == h.url(mid) and m.config_offset == CONFIG_OFFSET
        assert from_wire(m.assigned.wire()) == items and from_wire(g.targets[mid].work.wire()) == items
        assert m.member_epoch == 5 and m.state is WorkerState.STABLE
    assert not g.members["s"].assigned
    events = [f for n, f in h.last.events if n == "group.converted"] if h.last else []
    assert events and events[0]["to_type"] == "connect"
    # Classic workers are told to rejoin: the group epoch moved.
    assert h.chb("a") == Errors.REBALANCE_IN_PROGRESS
    h.assert_replay()


def test_classic_workers_get_connects_incremental_assignment_revoke_before_assign() -> None:
    h = converted()
    target = {"a": {"c1", "c1/0"}, "b": {"c2", "c1/2"}, "c": {"c3", "c2/1"}, "s": {"c1/1", "c2/0", "c3/0"}}
    assert h.install("s", target).error_code == 0
    # The leader (the classic group's) is named leader and given every worker's metadata.
    j = h.cjoin("a")
    assert j.error_code == 0 and j.leader == "a" and j.protocol_name == "sessioned"
    assert j.generation_id == 5, "a still revokes: it stays at its epoch"
    listed = {m.member_id: decode_metadata(m.metadata) for m in j.members}
    assert set(listed) == {"a", "b", "c", "s"}
    assert listed["s"].url == h.url("s") and listed["s"].version == 2
    assert set(listed["b"].connectors) == {"c2"}
    # What the leader sends is ignored: the answer comes from the target.
    bogus = encode_assignment(build_assignment(2, "a", "x", 0, ["c2"], []))
    s = h.csync("a", assignments={"a": bogus, "b": bogus})
    a = decode_assignment(s.assignment)
    assert (a.leader, a.leader_url, a.config_offset) == ("a", h.url("a"), CONFIG_OFFSET)
    assert a.revoked_tasks == (("c1", 1),) and not a.connectors and not a.tasks
    # s waits for c1/1 until a's next JoinGroup no longer lists it.
    h.hb("s")
    assert "c1/1" not in h.owned["s"]
    h.rejoin("a")
    assert h.gen["a"] == 6
    for mid in ("b", "c"):
        assert h.chb(mid) == Errors.REBALANCE_IN_PROGRESS
        h.rejoin(mid)
        h.rejoin(mid)
    h.hb("s")
    assert h.owned["s"] == {"c1/1", "c2/0", "c3/0"}
    for mid in ("a", "b", "c"):
        assert h.runs[mid] == target[mid]
        assert h.chb(mid) == 0, f"{mid} is stable"
    assert h.group().state() == "Stable"
    assert set(h.leaders) == {"a"}
    h.assert_replay()


def test_work_moves_from_the_sdk_worker_to_a_classic_one_only_once_released() -> None:
    h = converted()
    h.install("s", {"a": WORK["a"], "b": WORK["b"], "c": WORK["c"] - {"c3/0"}, "s": {"c3/0"}})
    h.rejoin("c")
    h.rejoin("c")
    h.hb("s")
    assert h.owned["s"] == {"c3/0"}
    # The SDK worker read a newer configuration: the group epoch moves, the assignor runs again.
    assert h.hb("s", config_offset=8).compute_assignment == 7
    h.install("s", {"a": WORK["a"] | {"c3/0"}, "b": WORK["b"], "c": WORK["c"] - {"c3/0"}, "s": set()})
    h.rejoin("a")
    assert "c3/0" not in h.runs["a"], "not before the SDK worker released it"
    assert h.chb("a") == 0, "nothing free to wait for yet"
    h.hb("s")  # told to drop it
    h.hb("s")  # reports it dropped
    assert not h.owned["s"]
    assert h.chb("a") == Errors.REBALANCE_IN_PROGRESS, "the work it waits for is free now"
    h.rejoin("a")
    assert "c3/0" in h.runs["a"]
    h.assert_replay()


def test_the_last_sdk_worker_leaving_converts_back_to_a_classic_connect_group() -> None:
    h = converted()
    h.install("s", {"a": WORK["a"], "b": WORK["b"] - {"c2/0"}, "c": WORK["c"], "s": {"c2/0"}})
    for mid in ("a", "b", "c"):
        h.rejoin(mid)
    h.rejoin("b")
    h.hb("s")
    assert h.owned["s"] == {"c2/0"}
    epoch = h.group().group_epoch
    h.sdk_leave("s")
    g = h.shard.groups["g"]
    assert isinstance(g, ClassicGroup)
    assert g.protocol_type == "connect" and g.protocol_name == "sessioned" and g.leader_id == "a"
    assert g.generation_id == epoch and g.state.name == "PREPARING_REBALANCE"
    for mid in ("a", "b", "c"):
        a = decode_assignment(g.members[mid].assignment)
        assert items_of(a.connectors, a.tasks) == h.runs[mid] and a.leader == "a"
        assert g.members[mid].supported_protocols[0].name == "sessioned"
    assert h.chb("a") == Errors.REBALANCE_IN_PROGRESS
    h.assert_replay()


def test_a_restarted_classic_worker_joins_the_connect_group_and_gets_work() -> None:
    h = converted()
    h.install("s", {**WORK, "s": set()})
    r = h.join("", protocols=(Protocol("sessioned", metadata(h.url("d"), set())),), protocol_type="connect")
    assert r.error_code == Errors.MEMBER_ID_REQUIRED
    d = r.member_id
    h.runs[d] = set()
    j = h.cjoin(d)
    assert j.error_code == 0 and j.leader == "a" and not j.members
    assert h.group().group_epoch == 7, "a new worker moves the group epoch"
    h.csync(d)
    assert h.runs[d] == set()
    h.hb("s")
    h.install("s", {"a": WORK["a"] - {"c1/1"}, "b": WORK["b"], "c": WORK["c"], "s": set(), d: {"c1/1"}})
    h.rejoin("a")  # revokes c1/1
    assert h.chb(d) == Errors.REBALANCE_IN_PROGRESS  # d lags the assignment epoch
    h.rejoin(d)
    assert h.runs[d] == set(), "not before a dropped it"
    h.rejoin("a")  # Connect rejoins after a revocation: its allocation no longer lists c1/1
    assert h.chb(d) == Errors.REBALANCE_IN_PROGRESS, "what d waits for is free now"
    h.rejoin(d)
    assert h.runs[d] == {"c1/1"}
    h.assert_replay()


def test_a_classic_worker_whose_session_expires_departs_with_its_work_held() -> None:
    h = converted()
    h.advance(SESSION - 1000)
    h.hb("s")
    h.advance(1500)
    g = h.group()
    assert set(g.members) == {"s"}
    assert set(g.delayed) == {"a", "b", "c"}
    h.runs.clear()
    h.assert_replay()


def test_a_restart_rebuilds_classic_workers_with_their_session_timers() -> None:
    h = converted()
    fresh = h.replayed()
    fresh.on_loaded(h.now)
    assert fresh.persisted_state() == h.shard.persisted_state()
    # Each classic worker's session is its own (10 s), not group.connect.session.timeout.ms.
    h.shard = fresh
    h.coordinator = fresh
    h.hb("s")
    h.advance(SESSION + 1)
    assert set(h.group().members) == {"s"}


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ("eager", "eager protocol"),
        ("overlap", "run by 2 workers"),
        ("policy", "online upgrade is disabled"),
    ],
)
def test_refused_conversions_say_why(setup: str, reason: str) -> None:
    h = Connect(**({"group.consumer.migration.policy": "disabled"} if setup == "policy" else {}))
    if setup == "eager":
        h.seed(WORK, protocol="default")
    elif setup == "overlap":
        h.checking = False  # the seeded group itself runs c1/0 twice
        h.seed({**WORK, "c": WORK["c"] | {"c1/0"}})
    else:
        h.seed(WORK)
    r = h.hb("s")
    assert r.error_code == Errors.GROUP_ID_NOT_FOUND
    assert r.error_message is not None and reason in r.error_message, r.error_message
    assert isinstance(h.shard.groups["g"], ClassicGroup)


def test_a_classic_group_of_another_protocol_type_is_not_a_connect_group() -> None:
    h = Connect()
    h.seed_classic(3, [ClassicSeed("m", b"", b"")], protocol="range")
    r = h.hb("s")
    assert r.error_code == Errors.GROUP_ID_NOT_FOUND and r.error_message == "Group g is not a connect group."


def test_without_the_translation_layer_nothing_converts() -> None:
    from engine.config import CoordinatorConfig
    from engine.ids import SeededIds
    from engine.metadata import MetadataImage
    from engine.shard import Shard

    h = Connect()
    h.seed(WORK)
    plain = Shard(
        CoordinatorConfig.from_kafka({"group.connect.enable": True}), SeededIds(1), MetadataImage([])
    )
    plain.apply(h.log)
    req = cw.ConnectHeartbeatRequest(
        "g", "s", 0, 30_000, "http://s", 0, (cw.WireConnectAssignor("incremental", 0, 0, 0, 0, b""),), None
    )
    out = plain.connect_group_heartbeat(req, RequestContext("c", "/h"), h.now + 1)
    assert out.response.error_code == Errors.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("seed", range(12))
def test_random_walks_never_run_anything_twice_and_replay_to_the_live_state(seed: int) -> None:
    rnd = random.Random(seed)
    h = converted()
    everything = sorted(set().union(*WORK.values()))
    sdk = ["s"]
    installs = rejoins = 0
    for _ in range(80):
        g = h.shard.groups["g"]
        if not isinstance(g, ConnectGroup):
            break
        step = rnd.random()
        classic = [m.member_id for m in g.classic_workers()]
        if step < 0.25 and g.group_epoch > g.assignment_epoch:
            chosen = sdk[0] if sdk else None
            if chosen and chosen in g.members and h.epoch.get(chosen):
                workers = list(g.members)
                targets: dict[str, set[Item]] = {w: set() for w in workers}
                held = from_wire(g.held_work().wire())
                for i, item in enumerate(x for x in everything if x not in held):
                    targets[workers[(i + rnd.randrange(2)) % len(workers)]].add(item)
                assert h.install(chosen, targets).error_code == 0
                installs += 1
        elif step < 0.6 and classic:
            mid = rnd.choice(classic)
            if h.chb(mid) == Errors.REBALANCE_IN_PROGRESS or rnd.random() < 0.3:
                h.rejoin(mid)
                rejoins += 1
        elif step < 0.9:
            for s in sdk:
                h.hb(s)
        elif step < 0.95 and len(sdk) == 1:
            h.hb("t")
            sdk.append("t")
        elif len(sdk) > 1:
            h.sdk_leave(sdk.pop())
    h.assert_replay()
    assert installs and rejoins, "the walk computed and moved classic workers"
    for s in reversed(sdk):
        h.sdk_leave(s)
    g = h.shard.groups["g"]
    assert isinstance(g, ClassicGroup) and g.protocol_type == "connect", "the last SDK worker converts back"
    h.assert_replay()


def test_the_next_longest_standing_classic_worker_becomes_the_connect_leader() -> None:
    h = converted()
    h.install("s", {**WORK, "s": set()})
    for mid in ("a", "b", "c"):
        h.rejoin(mid)
    r = h.leave(("a", None))
    assert [m.error_code for m in r.members] == [0]
    h.runs.pop("a")
    assert h.chb("b") == Errors.REBALANCE_IN_PROGRESS, "the group epoch moved: the leader changed"
    j = h.cjoin("b")
    assert j.leader == "b" and {m.member_id for m in j.members} == {"b", "c", "s"}
    s = h.csync("b")
    assert decode_assignment(s.assignment).leader == "b"
    c = h.cjoin("c")
    assert c.leader == "b" and not c.members
    assert decode_assignment(h.csync("c").assignment).leader_url == h.url("b")
    h.assert_replay()


def test_a_worker_offering_only_compatible_turns_the_group_compatible() -> None:
    h = converted()
    h.install("s", {**WORK, "s": set()})
    compatible = (Protocol("compatible", metadata(h.url("d"), set(), 1)),)
    # b and c were loaded with their selected protocol only (Kafka's GroupMetadata record keeps
    # no other), as a classic group holds them: a worker without `sessioned` cannot join yet.
    only = h.join("d", protocols=compatible, protocol_type="connect")
    assert only.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    for mid in ("a", "b", "c"):  # rejoined, they offer both
        h.rejoin(mid)
    r = h.join("d", protocols=compatible, protocol_type="connect")
    assert r.error_code == 0 and r.protocol_name == "compatible"
    h.gen["d"] = r.generation_id
    # b joined under `sessioned`: its SyncGroup for it is told to rejoin.
    assert h.cjoin("b").protocol_name == "compatible"
    assert h.sync("b", h.gen["b"], protocol_name="sessioned", protocol_type="connect").error_code == (
        Errors.REBALANCE_IN_PROGRESS
    )
    s = h.sync("b", h.gen["b"], protocol_name="compatible", protocol_type="connect")
    assert s.error_code == 0 and decode_assignment(s.assignment).version == 1
    eager = h.join(
        "e", protocols=(Protocol("default", metadata(h.url("e"), set(), 0)),), protocol_type="connect"
    )
    assert eager.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL


def test_compaction_reorders_records_but_keeps_the_connect_leader() -> None:
    h = converted()
    h.install("s", {**WORK, "s": set()})
    for mid in ("c", "b", "a"):  # the leader's member record is rewritten last
        h.rejoin(mid)
    latest: dict[Any, Any] = {}
    for r in h.log:
        latest.pop(encode_record(r)[0], None)
        latest[encode_record(r)[0]] = r
    from engine.ids import SeededIds
    from engine.shard import Shard

    fresh = Shard(h.shard.config, SeededIds(0), h.shard.image)
    fresh.apply([r for r in latest.values() if r.value is not None])
    g = fresh.groups["g"]
    assert isinstance(g, ConnectGroup)
    assert next(m.member_id for m in g.classic_workers()) == "a"
    assert fresh.persisted_state() == h.shard.persisted_state()


def test_a_classic_worker_joining_a_connect_group_without_workers_replaces_it() -> None:
    """All SDK workers gone (their work held): a Kafka Connect cluster starting on the group gets
    a classic group of its own, as an empty consumer or streams group is replaced; nobody would
    compute for it in the connect group."""
    h = Connect()
    h.hb("s")
    h.install("s", {"s": {"c1", "c1/0"}})
    h.hb("s")
    h.sdk_leave("s")
    g = h.group()
    assert not g.members and g.delayed, "the departed worker's work is held"
    offer = (Protocol("sessioned", metadata(h.url("k"), set())),)
    r = h.join("", protocols=offer, protocol_type="connect")
    assert r.error_code == Errors.MEMBER_ID_REQUIRED
    assert isinstance(h.shard.groups["g"], ClassicGroup), "replaced at the first JoinGroup"
    pending = h.join(r.member_id, protocols=offer, protocol_type="connect")
    h.advance(1)  # the join phase ends: k alone, its leader
    j = h.result(pending)
    assert j.error_code == 0 and j.leader == r.member_id and j.protocol_name == "sessioned"
    own = encode_assignment(build_assignment(2, r.member_id, h.url("k"), CONFIG_OFFSET, ["c1"], [("c1", 0)]))
    s = h.result(
        h.sync(
            r.member_id,
            j.generation_id,
            protocol_name="sessioned",
            protocol_type="connect",
            assignments={r.member_id: own},
        )
    )
    assert s.error_code == 0 and s.assignment == own
    classic = h.shard.groups["g"]
    assert isinstance(classic, ClassicGroup) and classic.protocol_type == "connect"
    h.assert_replay()
