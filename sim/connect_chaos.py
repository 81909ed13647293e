"""The deterministic simulator for Connect groups on the new protocol (the Connect draft:
ConnectGroupHeartbeat, ConnectGroupPrepareAssignment / ConnectGroupInstallAssignment, "Member
Reconciliation", "Triggering Rebalances"; groupshift's extension, docs/connect-groups.md), with
faults (docs/simulation.md, "Connect groups").

The server is the real one below the sockets, as in the other chaos modes (sim/shard_sim.py):
the engine `Shard` through the entry points the gateway's Connect handlers call
(`connect_group_heartbeat`, `connect_prepare_assignment`, `connect_install_assignment`), the
shard runtime (records before responses, the loop timer that expires sessions, revocations,
assignments and `scheduled.rebalance.max.delay.ms` holds, the reload after a storage failure)
and `CoordinatorStorage` (journal, load from the log), over sim/chaos.py's virtual clock, loop
and disk. One group, five worker names (`w1`..`w5`, each with its REST URL; a restarted worker
is a new member id with the same URL), session 3 s, heartbeat interval 1 s, rebalance timeout
2 s, and `group.connect.scheduled.rebalance.max.delay.ms` drawn per seed (0, 1.5 s or 5 s) and
again, now and then, at a server restart.

The workers are the worker SDK itself: each is a `connect_worker.core.ConnectWorkerCore` (the
sans-IO worker the SDK's asyncio driver runs) driven request by request, offering the SDK's
`IncrementalCooperativeAssignor` (subclassed only to fail on demand), so the assigning worker
runs Kafka Connect's incremental cooperative assignment as a real SDK worker does. The
connector configuration is a config topic: new versions add, remove and resize connectors over
time, and each worker reads it at its own pace (its config offset and assignor metadata change;
the assignor uses the newest configuration any worker has read).

Faults, drawn at random each step: lost answers (the worker times the request out, looks the
coordinator up again and sends a full heartbeat) and retried ones, answers delayed past the
timeout by a stalled fsync, worker crashes (no word: the session expires and the work is held
for the URL), clean leaves (epoch -1), the assigning worker hanging (its Prepare and Install
never answered, until its rebalance timeout fences it) and its assignor failing (the install
reports an error: the target is kept), an old install sent again, appends refused (EIO), fsync
failures (the shard reloads from the log), server crashes (kill, or power loss tearing the
unsynced tail) with the reload of the log, clock jumps (8 s, 30 s, 2 min), and an emptied group
deleted.

Invariants, checked after every step (`ConnectSimMachine.check`):
1. **no connector or task run by two workers at once, in the workers' own view** (what each
   SDK worker runs after the answers it got; it revokes before it assigns), and each worker runs
   only what the coordinator has it run (assigned or pending revocation). A worker the
   coordinator has removed (session, revocation or assignment timeout) no longer counts: its
   ownership ended at the fencing, and its next heartbeat (UNKNOWN_MEMBER_ID) makes it drop
   everything;
2. **in the coordinator**: no connector or task assigned or pending revocation in two workers,
   no two targets sharing one, and no work held for a departed worker in the target of a worker
   with another URL;
3. **every installed assignment is valid**: a computation installed at the group epoch is the
   group's target exactly, gives out nothing that is not configured (the newest configuration
   any worker had read), leaves out only work held for a URL no worker has, and, when nothing is
   held, is balanced (each worker within one of the others, for connectors and for tasks); an
   install reporting the assignor's error keeps every target and moves the assignment epoch; a
   refused install changes nothing, REBALANCE_IN_PROGRESS only for another epoch, and the SDK's
   plan is never refused as invalid; a worker asked to compute is the one the rules choose (every
   worker lists the one assignor at version 0: the group's first worker); the SDK's assignor
   never raises on its own and no worker fails fatally except when an admin deleted its group;
4. **replay equals live**: a replica fed every journaled record holds the live group; every 25
   steps and at the end, a shard loaded from the simulated disk does too (a server crash or a
   failed fsync reloads the live shard from that disk, so the replica then restarts from it);
5. **no lost timer**: every worker has its session timer, every worker revoking its revocation
   timer, and every held work its `scheduled.rebalance.max.delay.ms` timer (or it is never
   released);
and once faults stop (stopped workers restarted at random, every worker reading the newest
configuration), the group **converges** within 100 rounds: Stable, nothing held, every worker
running exactly what the coordinator says, and every configured connector and task run by
exactly one worker (unless the last computation reported an assignor error: the coordinator
asks nobody again until the group changes, so only "at most once" holds then).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Protocol, TextIO

from connect_worker.assignor import (
    ConnectAssignorError,
    ConnectGroupState,
    ConnectorConfig,
    IncrementalCooperativeAssignor,
    WorkerAssignment,
)
from connect_worker.assignor import Work as WorkerWork
from connect_worker.core import (
    CONNECT_HEARTBEAT,
    CONNECT_PREPARE,
    FIND_COORDINATOR,
    Assigned,
    Computed,
    ConnectWorkerCore,
    Fatal,
    Request,
    Revoked,
    Settings,
)
from engine.config import CoordinatorConfig
from engine.connect.group import NO_TARGET, NO_WORK, ConnectGroup, Work, WorkerState
from engine.context import RequestContext
from engine.errors import Errors
from engine.timers import TimerKind, timer_key
from protocol import connect_wire as cw
from sim import chaos
from sim.chaos import SeedResult
from sim.shard_sim import ShardSimMachine

GROUP = "connect-cluster"
NAMES = ("w1", "w2", "w3", "w4", "w5")
SESSION_MS = 3000
HEARTBEAT_MS = 1000
REBALANCE_MS = 2000
BACKOFF_MS = 100
DELAYS = (0, 1500, 5000)  # group.connect.scheduled.rebalance.max.delay.ms
CONNECTORS = ("files", "mirror", "jdbc", "s3", "http", "logs")
MAX_TASKS = 5
PRINCIPAL = "User:ANONYMOUS"
# FindCoordinator's answer (v0-v3 shape): this shard's node; every lookup finds it.
COORDINATOR = SimpleNamespace(coordinators=None, error_code=0, node_id=0, host="127.0.0.1", port=9092)


def config(delay_ms: int) -> CoordinatorConfig:
    return CoordinatorConfig.from_kafka(
        {
            "group.connect.enable": True,
            "group.connect.session.timeout.ms": SESSION_MS,
            "group.connect.heartbeat.interval.ms": HEARTBEAT_MS,
            "group.connect.scheduled.rebalance.max.delay.ms": delay_ms,
        }
    )


def url_of(name: str) -> str:
    return f"http://{name}:8083"


class _Silent:
    """The workers' event log: the simulator counts what happens instead."""

    def info(self, event: str, **fields: Any) -> None:
        pass

    def warning(self, event: str, **fields: Any) -> None:
        pass

    def error(self, event: str, **fields: Any) -> None:
        pass


class FlakyAssignor(IncrementalCooperativeAssignor):
    """The SDK's incremental cooperative assignor as a worker runs it, which the simulator can
    make fail once (`fail_with`: the install then reports that error); anything else it raises
    is kept in `raised` (a violation: the SDK would report it as an assignor error and keep the
    group on its old target)."""

    def __init__(self, config: Callable[[], ConnectorConfig]) -> None:
        super().__init__(config)
        self.fail_with = 0
        self.raised: str | None = None

    def assign(self, group: ConnectGroupState) -> dict[str, WorkerAssignment]:
        if self.fail_with:
            code, self.fail_with = self.fail_with, 0
            raise ConnectAssignorError("injected by the simulator", code)
        try:
            return super().assign(group)
        except Exception as e:
            self.raised = repr(e)
            raise


@dataclass(eq=False)
class SimWorker:
    """One worker process: the SDK's core, its assignor, and how far it read the config topic."""

    name: str
    member_id: str
    read: int  # the config-topic offset this worker has read
    core: ConnectWorkerCore = field(init=False)
    assignor: FlakyAssignor = field(init=False)
    hanging: bool = False  # its Prepare / Install are never answered (until it is fenced)
    disconnected: bool = False  # the shard reloaded: its next request fails on the old connection
    prepared: tuple[int, Work] | None = None  # (group epoch, configured work) of its last Prepare
    last_install: cw.ConnectInstallRequest | None = None


class _HasWork(Protocol):
    @property
    def connectors(self) -> frozenset[str]: ...

    @property
    def tasks(self) -> frozenset[tuple[str, int]]: ...


def _items(work: _HasWork) -> list[str]:
    """Connectors and tasks as names (`connector files`, `task files-0`), sorted."""
    return sorted([f"connector {c}" for c in work.connectors] + [f"task {c}-{t}" for c, t in work.tasks])


def _engine_work(work: WorkerWork) -> Work:
    return Work(work.connectors, work.tasks)


def _union(works: Iterable[Work]) -> Work:
    out = NO_WORK
    for w in works:
        out = out | w
    return out


class ConnectSimMachine(ShardSimMachine):
    """SDK Connect workers served by a `ShardRuntime` on simulated parts (see the module)."""

    NAME = "connect chaos"  # the summary line of `groupshift simulate --chaos --connect`
    CLI_FLAG = " --connect"  # the reproduce line
    GROUP_ID = GROUP
    NAMES = NAMES

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.delay_ms = rng.choice(DELAYS)
        # The config topic: configs[offset] is the configuration as of that offset.
        self.configs = [ConnectorConfig(0, {}), ConnectorConfig(1, {"files": 3, "mirror": 2})]
        self.workers: dict[str, SimWorker] = {}
        self.incarnations = 0
        self.kept_epoch: int | None = None  # the assignment epoch an assignor error kept
        self.ctx = RequestContext("connect-worker", "/127.0.0.1", 0)
        self.runtime = self._new_runtime()

    def coordinator_config(self) -> CoordinatorConfig:
        return config(self.delay_ms)

    @property
    def group(self) -> ConnectGroup | None:
        g = self.shard.groups.get(GROUP)
        return g if isinstance(g, ConnectGroup) else None

    @property
    def latest(self) -> int:
        return len(self.configs) - 1

    # --- workers -------------------------------------------------------------------------------

    def start(self, name: str) -> None:
        """A worker process starts (new member id, the name's URL), usually having read the
        whole config topic, now and then one version behind."""
        if name in self.workers:
            return
        self.incarnations += 1
        read = self.latest if self.rng.random() < 0.8 else max(1, self.latest - 1)
        w = SimWorker(name, f"{name}-{self.incarnations}", read)
        w.assignor = FlakyAssignor(lambda: self.configs[w.read])
        w.core = ConnectWorkerCore(
            Settings(GROUP, url_of(name), rebalance_timeout_ms=REBALANCE_MS, retry_backoff_ms=BACKOFF_MS),
            (w.assignor,),
            config_offset=read,
            member_id=w.member_id,
            log=_Silent(),
        )
        self.workers[name] = w
        self._note("worker started")
        self.act(name)

    def act(self, name: str, *, lost: bool = False) -> None:
        """The worker's driver for an instant: every request its core has to send now (a few at
        most), each answer handed back; `lost`: the first answer never arrives (timed out)."""
        w = self.workers.get(name)
        for _ in range(4):
            if w is None or self.workers.get(name) is not w:
                return
            now = self.now / 1000
            req = w.core.next_request(now)
            if req is None:
                return
            answer = self._send(w, req)
            if answer is None or lost:
                if lost:
                    self._note("answer lost")
                w.core.on_failure(req, now, "no answer")
                self._take_events(w)
                return
            w.core.on_response(req, answer, now)
            self._take_events(w)

    def _send(self, w: SimWorker, req: Request) -> Any:
        """One request to the coordinator, as the gateway's handlers run it; None: no answer."""
        key, body = req.api_key, req.body
        if key == FIND_COORDINATOR:
            return COORDINATOR
        if w.disconnected:
            # the shard reloaded (server restart, failed fsync) since this worker's last request:
            # its connection is closed and the request fails (the SDK looks the coordinator up
            # again, then sends a full heartbeat)
            w.disconnected = False
            self._note("request on a connection the reload closed")
            return None
        if key == CONNECT_HEARTBEAT:
            r = self._request(lambda shard: shard.connect_group_heartbeat(body, self.ctx, self.now))
            if r is not None:
                self._heard(w, r)
            return r
        if w.hanging:
            self._note("hung assigning worker: request unanswered")
            return None
        if key == CONNECT_PREPARE:
            r = self._request(lambda shard: shard.connect_prepare_assignment(body, self.now, PRINCIPAL))
            if r is not None:
                self._prepared(w, r)
            return r
        w.last_install = body
        return self._install(w, body)

    def _take_events(self, w: SimWorker) -> None:
        for ev in w.core.events():
            if isinstance(ev, Revoked):
                self._note("work lost (fenced)" if ev.lost else "work revoked")
            elif isinstance(ev, Assigned):
                self._note("work assigned")
            elif isinstance(ev, Computed):
                self._note("computed (assignor error)" if ev.error else "computed")
            elif isinstance(ev, Fatal):
                assert ev.error.code == Errors.GROUP_ID_NOT_FOUND, f"worker {w.name} failed: {ev.error}"
                self._note("worker stopped (group deleted under it)")
                self.workers.pop(w.name, None)
        assert w.assignor.raised is None, f"the SDK's assignor raised {w.assignor.raised}"

    def _heard(self, w: SimWorker, r: cw.ConnectHeartbeatResponse) -> None:
        code = Errors(r.error_code)
        if code is not Errors.NONE:
            self._note(f"heartbeat {code.name}")
            if code in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_MEMBER_EPOCH) and w.hanging:
                self._note("hung assigning worker fenced")
                w.hanging = False
            return
        if r.compute_assignment == cw.NO_COMPUTE:
            return
        self._note("ComputeAssignment")
        g = self.group
        if g is None or g.group_epoch != r.compute_assignment or w.member_id not in g.members:
            return  # a timer moved the group on after the answer was written
        first = next(iter(g.members))
        assert first == w.member_id, (
            f"{w.member_id} asked to compute epoch {r.compute_assignment}; the rules choose {first}"
        )

    def _prepared(self, w: SimWorker, r: cw.ConnectPrepareResponse) -> None:
        """What the assignor is to place: the newest configuration any worker has read (the
        computing worker's own included), noted to check the install against."""
        self._note(f"PrepareAssignment {Errors(r.error_code).name}")
        if r.error_code:
            return
        offsets = [w.read]
        for m in r.members:
            c = ConnectorConfig.decode(m.metadata)
            if c is not None:
                offsets.append(c.offset)
        w.prepared = (r.group_epoch, _engine_work(self.configs[max(offsets)].work()))
        if r.delayed:
            self._note("PrepareAssignment with held work")

    def _install(self, w: SimWorker, req: cw.ConnectInstallRequest) -> Any:
        g = self.group
        before = None if g is None else (g.group_epoch, dict(g.targets))
        r = self._request(lambda shard: shard.connect_install_assignment(req, self.now, PRINCIPAL))
        if r is None:
            return None
        code = Errors(r.error_code)
        self._note(f"InstallAssignment {code.name}{' (assignor error)' if req.error else ''}")
        g = self.group
        if before is None or g is None or g.group_epoch != before[0]:
            return r  # the group changed under the request (a timer fired): nothing to compare
        if code is Errors.NONE and req.error:
            assert g.targets == before[1], (
                f"an install reporting assignor error {req.error} changed the target"
            )
            assert g.assignment_epoch == req.group_epoch, (g.assignment_epoch, req.group_epoch)
            self.kept_epoch = req.group_epoch
        elif code is Errors.NONE:
            self._check_installed(w, req, g)
            self.kept_epoch = None
        else:
            assert g.targets == before[1], f"a refused install ({code.name}) changed the target"
            assert code is not Errors.REBALANCE_IN_PROGRESS or req.group_epoch != g.group_epoch, (
                "an install at the group epoch refused as stale"
            )
            assert code is not Errors.INVALID_REQUEST or req.error, (
                f"the SDK assignor's plan for epoch {req.group_epoch} was refused: {r.error_message}"
            )
        return r

    def _check_installed(self, w: SimWorker, req: cw.ConnectInstallRequest, g: ConnectGroup) -> None:
        """Invariant 3 for an install accepted at the group epoch."""
        want = {m.member_id: Work.of(m.work) for m in req.members}
        for mid in g.members:
            got = g.targets.get(mid, NO_TARGET).work
            assert got == want.get(mid, NO_WORK), f"installed {want.get(mid)} for {mid}, its target is {got}"
        if w.prepared is None or w.prepared[0] != req.group_epoch:
            return  # an install sent again: what it was computed from is not known here
        wanted = w.prepared[1]
        placed = _union(want.values())
        assert placed.issubset(wanted), f"unconfigured work installed: {_items(placed - wanted)}"
        urls = {m.url for m in g.members.values()}
        held_away = _union(d.work for d in g.delayed.values() if d.url not in urls)
        missing = wanted - held_away - placed
        assert not missing, f"configured work left out of the target: {_items(missing)}"
        if g.delayed:
            return  # no revocation for balance while work is held (Kafka's rule)
        for what in ("connectors", "tasks"):
            counts = [len(getattr(want.get(mid, NO_WORK), what)) for mid in g.members]
            assert max(counts) - min(counts) <= 1, f"unbalanced {what}: {counts}"
        self._note("balanced install checked")

    def leave(self, name: str) -> None:
        """A clean shutdown: everything revoked, then the leave heartbeat (epoch -1)."""
        w = self.workers.pop(name, None)
        if w is None:
            return
        req = w.core.close()
        if req is not None:
            self._note("leave")
            self._send(w, req)

    def crash(self, name: str) -> None:
        """The worker process dies without a word: its session expires."""
        if self.workers.pop(name, None) is not None:
            self._note("worker crashed")

    def lose(self, name: str) -> None:
        self.act(name, lost=True)

    def retry(self, name: str) -> None:
        """The worker retries a request whose answer it did not get (after its backoff: the
        coordinator looked up again, then a full heartbeat)."""
        self.act(name, lost=True)
        self.advance(BACKOFF_MS)
        self.act(name)

    def computing_worker(self, name: str) -> SimWorker | None:
        """The worker the group asks to compute (its first worker), else `name`'s."""
        g = self.group
        first = next(iter(g.members), None) if g is not None else None
        for w in self.workers.values():
            if w.member_id == first:
                return w
        return self.workers.get(name)

    def configure(self) -> None:
        """A new version of the connector configuration: a connector added, removed or resized."""
        cur = dict(self.configs[-1].connectors)
        absent = [c for c in CONNECTORS if c not in cur]
        ops = [op for op, can in (("add", absent), ("remove", cur), ("resize", cur)) if can]
        op = self.rng.choice(ops)
        if op == "add":
            cur[self.rng.choice(absent)] = self.rng.randint(0, MAX_TASKS)
        elif op == "remove":
            del cur[self.rng.choice(sorted(cur))]
        else:
            cur[self.rng.choice(sorted(cur))] = self.rng.randint(0, MAX_TASKS)
        self.configs.append(ConnectorConfig(len(self.configs), cur))
        self._note(f"connector configuration: {op}")

    def read_config(self, name: str, upto: int | None = None) -> None:
        """The worker reads the config topic further: its next heartbeat carries its new config
        offset and assignor metadata (the group epoch moves, and the assignor runs)."""
        w = self.workers.get(name)
        if w is None or w.read == self.latest:
            return
        w.read = self.rng.randint(w.read + 1, self.latest) if upto is None else upto
        w.core.set_config_offset(w.read)

    def stale_install(self, name: str) -> None:
        """A worker's last install sent again (a retried request), at its current epoch."""
        w = self.workers.get(name)
        if w is None or w.last_install is None or w.core.epoch <= 0:
            return
        self._note("old install sent again")
        self._install(w, dataclasses.replace(w.last_install, member_epoch=w.core.epoch))

    def delete_group(self) -> None:
        g = self.group
        if g is None or g.members:
            return
        ctx = RequestContext("admin", "/admin", 2)
        r = self._request(lambda shard: shard.delete_groups([GROUP], ctx, self.now))
        if isinstance(r, list) and r and r[0].error_code == 0:
            self._note("group deleted")
            self.kept_epoch = None

    def admin_reads(self) -> None:
        self.shard.describe_groups([GROUP])
        self.shard.list_groups(types=("connect",))

    def crash_server(self, power_loss: bool) -> None:
        if self.rng.random() < 0.3:
            self.delay_ms = self.rng.choice(DELAYS)  # restarted with another setting
        super().crash_server(power_loss)
        self._reloaded()

    def _reloaded(self) -> None:
        for w in self.workers.values():
            w.disconnected = True

    # --- invariants ----------------------------------------------------------------------------

    def check_clients(self) -> None:
        self.no_work_twice_in_the_coordinator()
        self.no_work_twice_in_the_workers_view()
        self.every_timer_is_there()

    def no_work_twice_in_the_coordinator(self) -> None:
        g = self.group
        if g is None:
            return
        running: dict[str, str] = {}
        targeted: dict[str, str] = {}
        for mid, m in g.members.items():
            for item in _items(m.assigned | m.pending_revocation):
                assert item not in running, f"{item} assigned to {running[item]} and {mid}"
                running[item] = mid
            for item in _items(g.targets.get(mid, NO_TARGET).work):
                assert item not in targeted, f"{item} in the targets of {targeted[item]} and {mid}"
                targeted[item] = mid
        for departed, d in g.delayed.items():
            for mid, m in g.members.items():
                if m.url != d.url:
                    given = g.targets.get(mid, NO_TARGET).work & d.work
                    assert not given, f"{_items(given)} held for {departed} ({d.url}) is in {mid}'s target"

    def no_work_twice_in_the_workers_view(self) -> None:
        g = self.group
        live = {} if g is None else g.members
        running: dict[str, str] = {}
        for name, w in sorted(self.workers.items()):
            cm = live.get(w.core.member_id)
            if cm is None:
                continue  # removed by the coordinator: its ownership ended there (see the module)
            runs = _engine_work(w.core.owned)
            extra = runs - (cm.assigned | cm.pending_revocation)
            assert not extra, f"{name} runs {_items(extra)}, which the coordinator does not have it run"
            for item in _items(runs):
                assert item not in running, f"{item} run by workers {running[item]} and {name}"
                running[item] = name

    def every_timer_is_there(self) -> None:
        g = self.group
        if g is None:
            return
        keys = set(self.shard.timers.keys())
        missing = []
        for mid, m in g.members.items():
            if timer_key(TimerKind.CONNECT_SESSION, GROUP, mid) not in keys:
                missing.append(f"session of {mid}")
            if (
                m.state is WorkerState.UNREVOKED
                and timer_key(TimerKind.CONNECT_REBALANCE, GROUP, mid) not in keys
            ):
                missing.append(f"revocation of {mid}")
        for departed in g.delayed:
            if timer_key(TimerKind.CONNECT_DELAY, GROUP, departed) not in keys:
                missing.append(f"hold of {departed}")
        assert not missing, f"timers missing (never fire): {missing}"

    # --- steps ---------------------------------------------------------------------------------

    def actions(self, faults: bool) -> list[tuple[str, float]]:
        actions: list[tuple[str, float]] = [
            ("act", 40),
            ("start", 5 if len(self.workers) < len(NAMES) else 0),
            ("leave", 1.5),
            ("advance", 12),
            ("configure", 1.5),
            ("read_config", 3),
            ("admin", 1),
            ("delete_group", 0.5),
        ]
        if faults:
            actions += [
                ("lose", 4),
                ("duplicate", 2),
                ("crash_client", 2),
                ("hang_assignor", 0.7),
                ("assignor_error", 1),
                ("stale_install", 1),
            ]
        return actions

    def act_on(self, action: str, name: str) -> bool:
        rng = self.rng
        if action == "act":
            self.act(name)
        elif action == "start":
            self.start(rng.choice([n for n in NAMES if n not in self.workers]))
        elif action == "configure":
            self.configure()
        elif action == "read_config":
            self.read_config(name)
        elif action == "hang_assignor":
            w = self.computing_worker(name)
            if w is not None:
                w.hanging = True
        elif action == "assignor_error":
            w = self.computing_worker(name)
            if w is not None:
                w.assignor.fail_with = rng.randint(1, 127)
        elif action == "stale_install":
            self.stale_install(name)
        else:
            return False
        return True

    def quiet(self) -> None:
        """Faults stop: stalled fsyncs complete, nothing fails, no worker hangs or fails to assign."""
        for w in self.workers.values():
            w.hanging, w.assignor.fail_with = False, 0
        super().quiet()

    def settle(self, rounds: int = 100) -> None:
        """Faults stopped: stopped workers are restarted at random (as an operator does), every
        worker reads the whole config topic, and each round every worker acts while time moves
        200 ms, until the group converges."""
        for name in NAMES:
            if name not in self.workers and self.rng.random() < 0.5:
                self.start(name)
        if not self.workers:
            self.start(NAMES[0])
        for name in sorted(self.workers):
            self.read_config(name, self.latest)
        why = ""
        for _ in range(rounds):
            for name in sorted(self.workers):
                self.act(name)
            self.advance(200)
            self.check(full_replay=False)
            why = self.converged()
            if not why:
                return
        raise AssertionError(f"the workers did not converge once faults stopped: {why}")

    def converged(self) -> str:
        """Why the group has not converged yet ('' once it has)."""
        if not self.workers:
            return ""
        g = self.group
        if g is None:
            return "no group"
        ids = sorted(w.member_id for w in self.workers.values())
        if sorted(g.members) != ids:
            return f"members {sorted(g.members)} vs workers {ids}"
        if g.state() != "Stable":
            return f"group {g.state()}"
        if g.delayed:
            return f"work held for {sorted(g.delayed)}"
        for w in self.workers.values():
            cm = g.members[w.member_id]
            if w.core.epoch != cm.member_epoch or _engine_work(w.core.owned) != cm.assigned:
                says = f"{_items(cm.assigned)} at {cm.member_epoch}"
                return f"{w.name} runs {_items(w.core.owned)} at {w.core.epoch}, the coordinator says {says}"
        if self.kept_epoch is not None and g.assignment_epoch == self.kept_epoch == g.group_epoch:
            self._note("settled on a target an assignor error kept")
            return ""
        runs = sorted(item for w in self.workers.values() for item in _items(w.core.owned))
        wanted = _items(self.configs[self.latest].work())
        assert runs == wanted, (
            f"a Stable group does not run every configured connector and task once: {runs} vs {wanted}"
        )
        return ""


# --- running seeds -----------------------------------------------------------------------------


def run_seed(seed: int, steps: int) -> SeedResult:
    return chaos.run_seed(seed, steps, ConnectSimMachine)


def main(seed: int, steps: int, seeds: int, out: TextIO, keep_going: bool = False) -> int:
    """`groupshift simulate --chaos --connect`: seeds `seed .. seed+seeds-1`, `steps` steps each."""
    return chaos.main(seed, steps, seeds, out, keep_going=keep_going, machine=ConnectSimMachine)
