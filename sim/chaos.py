"""A deterministic simulator of the whole group coordinator, with faults (docs/simulation.md).

The real server path below the sockets runs: the request objects and the engine `Shard` with the
translation layer's migration hooks, the shard runtime (gateway/groups/runtime.py: group commit,
records-before-responses, parked requests, the loop timer, reload after a storage failure) and
`CoordinatorStorage` (journal, load from the log, load duties). Three things are simulated,
through the runtime's injection points:

* the **clock**: virtual milliseconds (`SimMachine.now`), moved by the simulator only;
* the **event loop** (`VirtualLoop`): `call_soon`, `call_later` and `run_in_executor` queued
  and run in a fixed order, so a run is a pure function of its seed;
* the **disk** (`SimDisk` / `SimLog`): an in-memory log with `SegmentLog`'s guarantees
  (records.durability), whose appends fail, whose fsyncs fail or stall for some steps, and whose
  unsynced tail is torn (cut at a random batch: what recovery leaves of a torn write) by a
  power loss or after a failed fsync.

The clients are those of the migration world (sim/migration_world.py; sim/migration_clients.py
describes how each kind reacts): classic eager and cooperative members, consumer-protocol
members, static members and their replacements. This module subclasses the world and
replaces its plumbing (a synchronous shard) with the runtime, and adds offset commits, admin
calls (Describe/List/ConsumerGroupDescribe/OffsetFetch, OffsetDelete, DeleteGroups) and faults:
lost, duplicated (a retried request) and delayed (stalled fsync) responses, client crashes,
append and fsync failures, server crashes (process kill: the page cache survives; power loss:
the unsynced tail is torn) and restarts with another migration policy, clock jumps.

Invariants, after every step (`SimMachine.check`):
1. no partition owned by two members from the clients' view, nor in the coordinator
   (the state machine's invariants);
2. every acknowledged offset commit is still there (or overwritten by a later commit): after
   every crash and reload too;
3. replay equals live: a replica fed every journaled record holds the live group; every
   `REPLAY_EVERY` steps and at the end, a shard loaded from the simulated disk does too;
4. no timer leak: every timer belongs to a live member or group, and every member has the timer
   that expires it (session timeout for consumer-group members, heartbeat for classic members);
and, once faults stop (`quiet` settling at the end of a seed), every subscribed partition is
owned (the state machine's liveness invariant).

A failure raises `Violation` whose message names the seed; `run_seed(seed, steps)` replays it
exactly (every random choice comes from one `random.Random(seed)`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import heapq
import random
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

import structlog
import structlog.testing

from engine.classic.api import JoinGroupResponse, SyncGroupResponse
from engine.classic.group import ClassicGroup
from engine.classic.state import ClassicGroupState
from engine.consumer.api import ConsumerGroupHeartbeatResponse
from engine.consumer.group import ConsumerGroup
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import SeededIds
from engine.offsets.api import (
    CommitPartition,
    CommitTopic,
    FetchTopic,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetFetchGroupRequest,
)
from engine.outcome import Outcome, Pending
from engine.shard import Shard
from gateway.coordinator_storage import CoordinatorStorage, load_shard
from gateway.groups.runtime import ShardRuntime
from records.batch import BatchHeader, build_batch, iter_raw_records, read_batch_header
from records.classic_group import GroupMetadataKey
from records.codec import decode_record
from records.coordinator import CoordinatorRecord
from records.errors import LogFailedError
from sim.migration_clients import (
    GROUP,
    KINDS,
    NAMES,
    POLICIES,
    STATIC,
    SUBSCRIPTIONS,
    TOPICS,
    Client,
)
from sim.migration_world import MigrationWorld

REPLAY_EVERY = 25  # steps between full reloads from the simulated disk (invariant 3)
QUIET_STEPS = 20  # fault-free client steps before the final settling
# Answers a Java client treats as "find the coordinator again and retry".
COORDINATOR_ERRORS = {
    Errors.NOT_COORDINATOR,
    Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.KAFKA_STORAGE_ERROR,
    Errors.REQUEST_TIMED_OUT,
    Errors.UNKNOWN_SERVER_ERROR,
}


class Violation(AssertionError):
    """An invariant failed; the message names the seed and step that reproduce it."""


# --- the event loop ----------------------------------------------------------------------------


class _Handle:
    __slots__ = ("args", "callback", "cancelled")

    def __init__(self, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualLoop:
    """The part of asyncio's loop the runtime uses, on the virtual clock, run by `drain()`.

    `run_in_executor` jobs (the fsyncs) are held until the disk lets them run: `job_delay()`
    says after how many more steps (0: in this drain)."""

    def __init__(self, clock: Callable[[], int], job_delay: Callable[[], int]) -> None:
        self._clock = clock
        self._job_delay = job_delay
        self._ready: deque[_Handle] = deque()
        self._timers: list[tuple[int, int, _Handle]] = []
        self._jobs: list[tuple[int, Callable[[], Any], asyncio.Future[Any]]] = []
        self._seq = 0
        self.errors: list[str] = []

    # asyncio's surface
    def get_debug(self) -> bool:
        return False

    def time(self) -> float:
        return self._clock() / 1000.0

    def call_soon(self, callback: Callable[..., Any], *args: Any, context: Any = None) -> _Handle:
        h = _Handle(callback, args)
        self._ready.append(h)
        return h

    def call_later(
        self, delay: float, callback: Callable[..., Any], *args: Any, context: Any = None
    ) -> _Handle:
        h = _Handle(callback, args)
        self._seq += 1
        when = self._clock() + max(0, int(delay * 1000 + 0.999))
        heapq.heappush(self._timers, (when, self._seq, h))
        return h

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)  # type: ignore[arg-type]

    def run_in_executor(self, executor: Any, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        fut = self.create_future()
        self._jobs.append((self._job_delay(), lambda: fn(*args), fut))
        return fut

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        self.errors.append(str(context.get("message")))

    # the simulator's side
    def next_timer(self) -> int | None:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def drain(self) -> None:
        """Run everything runnable now: ready callbacks, due jobs, due timers."""
        while True:
            if self._ready:
                h = self._ready.popleft()
                if not h.cancelled:
                    h.callback(*h.args)
                continue
            due = [j for j in self._jobs if j[0] <= 0]
            if due:
                self._jobs = [j for j in self._jobs if j[0] > 0]
                for _d, fn, fut in due:
                    try:
                        fut.set_result(fn())
                    except Exception as e:  # the job's own error (PendingSync.run never raises)
                        fut.set_exception(e)
                continue
            t = self.next_timer()
            if t is not None and t <= self._clock():
                _w, _s, h = heapq.heappop(self._timers)
                h.callback(*h.args)
                continue
            return

    def step(self, quiet: bool) -> None:
        """One simulator step passed: stalled jobs come closer (all run when faults stop)."""
        self._jobs = [(0 if quiet else d - 1, fn, fut) for d, fn, fut in self._jobs]


# --- the disk ----------------------------------------------------------------------------------


@dataclass
class SimDisk:
    """What survives a crash: the batches written (the page cache) and how far they are durable."""

    rng: random.Random
    batches: list[tuple[int, bytes]] = field(default_factory=list)  # (next offset, raw batch)
    durable: int = 0
    fail_appends: int = 0  # the next N appends fail (EIO)
    fail_fsync: bool = False  # the next fsync fails
    stall_steps: int = 0  # the next fsync completes after N steps
    quiet: bool = False

    @property
    def end(self) -> int:
        return self.batches[-1][0] if self.batches else 0

    def tear(self) -> int:
        """A power loss (or a failed fsync: the page cache is in an unknown state): a random
        prefix of the unsynced batches survives. Returns how many batches were lost."""
        keep = sum(1 for nxt, _ in self.batches if nxt <= self.durable)
        unsynced = len(self.batches) - keep
        if unsynced:
            keep += self.rng.randint(0, unsynced)
        lost = len(self.batches) - keep
        del self.batches[keep:]
        self.durable = self.end
        return lost

    def job_delay(self) -> int:
        d, self.stall_steps = self.stall_steps, 0
        return 0 if self.quiet else d


class SimSync:
    def __init__(self, log: SimLog, target: int) -> None:
        self.log = log
        self.target = target
        self.done = False
        self.error: OSError | None = None

    def run(self) -> None:
        disk = self.log.disk
        if disk.fail_fsync and not disk.quiet:
            disk.fail_fsync = False
            self.error = OSError(5, "injected fsync failure (EIO)")
        self.done = True


class SimLog:
    """`records.durability.CoordinatorLog` over a `SimDisk`; rules 1-3 of records/durability.py."""

    directory = "sim:__consumer_offsets-0"
    fsync_policy = "batch"

    def __init__(self, disk: SimDisk) -> None:
        self.disk = disk
        self.failed: BaseException | None = None
        self.closed = False

    def _usable(self) -> None:
        if self.closed:
            raise LogFailedError("simulated log is closed")
        if self.failed is not None:
            raise LogFailedError(f"simulated log failed earlier ({self.failed})")

    @property
    def end_offset(self) -> int:
        return self.disk.end

    @property
    def durable_offset(self) -> int:
        return self.disk.durable

    def append_records(
        self, records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int
    ) -> tuple[int, int]:
        self._usable()
        if self.disk.fail_appends and not self.disk.quiet:
            self.disk.fail_appends -= 1
            raise OSError(5, "injected append failure (EIO)")
        base = self.disk.end
        self.disk.batches.append(
            (base + len(records), build_batch(records, base_offset=base, timestamp_ms=timestamp_ms))
        )
        return base, base + len(records) - 1

    def begin_sync(self) -> SimSync:
        self._usable()
        return SimSync(self, self.disk.end)

    def finish_sync(self, pending: SimSync) -> int:
        if pending.error is not None:
            self.failed = pending.error
            raise LogFailedError(f"fsync failed: {pending.error}") from pending.error
        self._usable()
        self.disk.durable = max(self.disk.durable, min(pending.target, self.disk.end))
        return self.disk.durable

    def sync(self) -> int:
        p = self.begin_sync()
        p.run()
        return self.finish_sync(p)

    def batches(self, from_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        self._usable()
        for _nxt, raw in self.disk.batches:
            yield read_batch_header(raw), raw

    def close(self) -> None:
        self.closed = True


def disk_records(disk: SimDisk) -> list[CoordinatorRecord]:
    out = []
    for _nxt, raw in disk.batches:
        header = read_batch_header(raw)
        for _d, _t, key, value, _h in iter_raw_records(raw, 0, header):
            assert key is not None
            out.append(decode_record(key, value))
    return out


# --- the server every machine runs ------------------------------------------------------------


class SimServer:
    """The server side every chaos machine shares (this module's `SimMachine`, and
    sim/shard_sim.py's machines for streams and Connect groups): the real shard runtime on the
    virtual loop, clock and disk, a replica shard that follows the journal (replay equals live),
    the clock moved timer by timer, and the power loss that tears the unsynced tail. A machine
    gives `now`, `disk`, `stats`, its `_open_storage` (which ends with `_follow_journal`) and
    `_on_event`."""

    now: int
    disk: SimDisk
    stats: dict[str, int]
    loop: VirtualLoop
    runtime: ShardRuntime
    log: list[CoordinatorRecord]
    replica: Shard
    classic_unsynced: bool

    def _open_storage(self, now: int) -> CoordinatorStorage:
        raise NotImplementedError

    def _on_event(self, name: str, fields: dict[str, Any]) -> None:
        pass

    def _new_runtime(self) -> ShardRuntime:
        self.loop = VirtualLoop(lambda: self.now, self.disk.job_delay)
        runtime = ShardRuntime(
            0,
            self._open_storage,
            on_event=self._on_event,
            clock=lambda: self.now,
            loop=self.loop,  # type: ignore[arg-type]
        )
        runtime.start(self.loop)  # type: ignore[arg-type]
        self.loop.drain()
        return runtime

    def _follow_journal(self, storage: CoordinatorStorage, replica: Shard) -> CoordinatorStorage:
        """The replica starts from what the disk holds and follows the journal from here (a
        GroupMetadata record also ends `classic_unsynced`: the log holds the classic group again)."""
        self.log = disk_records(self.disk)
        self.replica = replica
        self.replica.apply(self.log)
        journal = storage.shard.journal
        assert journal is not None

        self.classic_unsynced = False

        def journaled(records: Sequence[CoordinatorRecord]) -> None:
            journal(records)
            if any(isinstance(r.key, GroupMetadataKey) for r in records):
                self.classic_unsynced = False
            self.log.extend(records)
            self.replica.apply(records)

        storage.shard.journal = journaled
        return storage

    def _note(self, name: str) -> None:
        self.stats[name] = self.stats.get(name, 0) + 1

    def _drain(self) -> None:
        storage = self.runtime.storage
        self.loop.drain()
        if self.runtime.storage is not storage:
            self._note("reload after storage failure")
            self._reloaded()

    def _reloaded(self) -> None:
        """The runtime reloaded its shard from the log after a storage failure (the gateway then
        closes the shard's connections): a machine tells its clients."""

    def _advance_clock(self, ms: int) -> None:
        target = self.now + ms
        while True:
            t = self.loop.next_timer()
            if t is None or t > target:
                break
            self.now = max(self.now, t)
            self._drain()
        self.now = target
        self._drain()

    def _power_loss(self) -> None:
        """The unsynced tail is torn (what survives is counted in the summary)."""
        self.stats["batches torn by power loss"] = self.stats.get("batches torn by power loss", 0) + (
            self.disk.tear()
        )


# --- the machine -------------------------------------------------------------------------------


class SimMachine(SimServer, MigrationWorld):
    """The migration world's clients, served by a `ShardRuntime` on simulated parts.

    A subclass adds clients and faults of its own through `extra_actions` / `extra_action` (see
    sim/client_assignment_chaos.py); with none, the random draws are those of the base machine."""

    CLI_FLAG = ""  # how `groupshift simulate --chaos` selects this machine (the reproduce line)
    NAME = "chaos"  # how the summary line names the simulation

    def settle(self) -> None:
        """The end of a seed: run fault-free until every group is settled (SeedMachine)."""
        self._settle()

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.disk = SimDisk(rng)
        self.reloads = 0
        self._acting: Client | None = None
        self._last_lost = False
        self._reloads_seen = 0
        self.classic_unsynced = False
        self._duplicate = False
        self.policy = "bidirectional"
        self.now = 10_000
        self.acked: dict[tuple[str, int], int] = {}  # acknowledged commit per partition
        self.next_commit = 1
        self.stats: dict[str, int] = {}
        super().__init__()
        self.now = 10_000
        self.runtime = self._new_runtime()

    # --- the server ----------------------------------------------------------------------------

    def _open_storage(self, now: int) -> CoordinatorStorage:
        self.reloads += 1
        storage = CoordinatorStorage.load(
            SimLog(self.disk),  # type: ignore[arg-type]
            config=self.config_for(self.policy),
            ids=SeededIds(1000 + self.reloads),
            image=self.image,
            now_ms=now,
        )
        self.replica_storage = storage
        return self._follow_journal(storage, Shard(self.config_for(self.policy), SeededIds(0), self.image))

    @property
    def shard(self) -> Shard:
        runtime = self.__dict__.get("runtime")
        shard: Shard = runtime.shard if runtime is not None else self.__dict__["_boot_shard"]
        return shard

    @shard.setter
    def shard(self, value: Shard) -> None:
        self.__dict__["_boot_shard"] = value  # only MigrationWorld.__init__ sets it

    @property
    def coordinator(self) -> Any:
        runtime = self.__dict__.get("runtime")
        return runtime.shard if runtime is not None else None

    @coordinator.setter
    def coordinator(self, value: Any) -> None:
        pass

    def _on_event(self, name: str, fields: dict[str, Any]) -> None:
        if name == "append.failed":
            self._note("append failed")
            if isinstance(self.group, ClassicGroup):
                # A classic group changes in place and learns of the failure afterwards (as in
                # Kafka): until its next GroupMetadata record, the log may hold an older state.
                self.classic_unsynced = True

    def _reloaded(self) -> None:
        """The runtime reloaded its shard (a failed fsync): in-flight requests failed."""
        self._before_restart()
        self._after_restart()

    # --- requests ------------------------------------------------------------------------------

    def _request(self, send: Callable[[], Outcome[Any]]) -> Any:
        self.requests += 1
        before = self._server_view()
        records_from = len(self.log)
        c = self._acting
        if self._duplicate:  # the client retries a request whose answer it did not get
            self._duplicate = False
            self._note("duplicated request")
            first = self.runtime.run(lambda _c, _now: send())
            if isinstance(first, asyncio.Future):
                first.add_done_callback(_consume)
            self._drain()
        sent: list[Outcome[Any]] = []

        def op(_coordinator: Any, _now: int) -> Outcome[Any]:
            out = send()
            sent.append(out)
            return out

        result = self.runtime.run(op)
        # What the operation changed is judged against the state before it, and what the loop
        # does next (continuations, timers now due) against the state after it: a timer's
        # conversion must keep the assignments as they are when it fires.
        self._after(before, records_from)
        before, records_from = self._server_view(), len(self.log)
        self._drain()
        response: Any = sent[0].response
        lost = False
        if isinstance(result, asyncio.Future):
            if result.done():
                if result.exception() is not None:
                    lost = True  # the connection was closed (storage failure)
                else:
                    response = result.result()
            elif isinstance(response, Pending) or _is_group_phase(response):
                # parked (or its durability wait stalls): delivered when the future completes
                token = Pending("sim", GROUP, "")
                result.add_done_callback(functools.partial(self._deliver, token, c))
                response = token
            else:
                lost = True  # the client times the request out
                result.add_done_callback(_consume)
                self._note("response delayed past the timeout")
        if not lost and getattr(response, "error_code", 0) in COORDINATOR_ERRORS:
            lost = True
            self._note(f"answered {Errors(response.error_code).name}")
        if lost and c is not None:
            c.deaf = True
        if lost and isinstance(response, ConsumerGroupHeartbeatResponse):
            # what the client "sees" of a lost heartbeat answer is nothing; the state machine's
            # leave checks the code it would have seen
            response = dataclasses.replace(response, error_code=0)
        self._last_lost = lost
        self._after(before, records_from)
        return response

    def _after(self, before: dict[str, Any], records_from: int) -> None:
        if self._reloads_seen != self.reloads:
            self._reloads_seen = self.reloads  # a reload in between: `_reloaded` did the clients' side
            return
        super()._after(before, records_from)

    def _deliver(self, token: Pending, c: Client | None, f: asyncio.Future[Any]) -> None:
        if f.exception() is not None:
            if c is not None and self.clients.get(c.name) is c:
                c.join_handle = c.sync_handle = None
                c.phase = "unjoined"  # the in-flight JoinGroup/SyncGroup failed
            self.handles.pop(token, None)
            return
        before = self._server_view()
        self._complete(token, f.result())
        self._after(before, len(self.log))

    def _on_join(self, c: Client, r: Any) -> None:
        if Errors(r.error_code) in COORDINATOR_ERRORS:
            c.phase = "unjoined"
            return
        super()._on_join(c, r)

    def _on_sync(self, c: Client, r: Any) -> None:
        if Errors(r.error_code) in COORDINATOR_ERRORS:
            c.phase = "unjoined"
            return
        super()._on_sync(c, r)

    def _join(self, c: Client) -> None:
        self._acting = c
        super()._join(c)

    def _sync(self, c: Client) -> None:
        self._acting = c
        super()._sync(c)

    def _classic_heartbeat(self, c: Client) -> None:
        self._acting = c
        super()._classic_heartbeat(c)

    def _cgh(self, c: Client, req: Any) -> ConsumerGroupHeartbeatResponse:
        self._acting = c
        return super()._cgh(c, req)

    # --- time, metadata, restarts --------------------------------------------------------------

    def advance(self, ms: int) -> None:
        before = self._server_view()
        records_from = len(self.log)
        self._advance_clock(ms)
        self._after(before, records_from)

    def grow_topic(self, topic: str, more: int) -> None:
        if not self._grow(topic, more):
            return
        image = self.image
        before = self._server_view()
        records_from = len(self.log)
        result = self.runtime.run(lambda c, now: c.update_metadata(image, now))
        if isinstance(result, asyncio.Future):
            result.add_done_callback(_consume)
        self._drain()
        self._after(before, records_from)

    def crash_server(self, power_loss: bool, policy: str) -> None:
        """The process dies (SIGKILL: the page cache survives; power loss: the unsynced tail is
        torn) and restarts, maybe with another migration policy; nothing of the old loop runs."""
        self._before_restart()
        if power_loss:
            self._power_loss()
        self.policy = policy
        self.restarts += 1
        self.runtime = self._new_runtime()
        self._after_restart()

    # --- offsets and admin ---------------------------------------------------------------------

    def commit(self, c: Client) -> None:
        """A member commits an offset for every partition it owns (generation / member epoch)."""
        owned = sorted(c.counted())
        if not owned or (c.classic and c.phase != "stable") or (not c.classic and c.epoch <= 0):
            return
        offsets = {tp: self._next_offset() for tp in owned}
        topics: dict[str, list[CommitPartition]] = {}
        for (t, p), off in offsets.items():
            topics.setdefault(t, []).append(CommitPartition(p, off))
        req = OffsetCommitRequest(
            GROUP,
            c.generation if c.classic else c.epoch,
            c.member_id,
            c.instance_id,
            topics=[CommitTopic(t, ps) for t, ps in topics.items()],
        )
        self._commit(c, req, offsets)

    def admin_commit(self) -> None:
        """An admin commit (generation -1, no member): accepted only by an empty group."""
        t = self.rng.choice(TOPICS)
        p = self.rng.randrange(self.image.topic(t).num_partitions)  # type: ignore[union-attr]
        off = self._next_offset()
        req = OffsetCommitRequest(GROUP, -1, "", None, topics=[CommitTopic(t, [CommitPartition(p, off)])])
        self._commit(None, req, {(t, p): off})

    def _next_offset(self) -> int:
        self.next_commit += 1
        return self.next_commit

    def _commit(
        self, c: Client | None, req: OffsetCommitRequest, offsets: dict[tuple[str, int], int]
    ) -> None:
        # OffsetCommit v9 (KIP-848): a consumer-protocol member's commit needs it; classic ones
        # (and admin commits) use v8 like the Java classic consumer.
        ctx = RequestContext("committer", "/committer", 8 if c is None or c.classic else 9)
        self._acting = c
        r = self._request(lambda: self.coordinator.offset_commit(req, ctx, self._tick()))
        if c is not None and c.deaf:
            return
        if c is None and self._last_lost:
            return
        assert isinstance(r, OffsetCommitResponse), r
        for tr in r.topics:
            for pr in tr.partitions:
                if pr.error_code == 0 and r.error_code == 0:
                    self.acked[(tr.name, pr.partition_index)] = offsets[(tr.name, pr.partition_index)]
                    self._note("commit acknowledged")

    def admin(self, what: int) -> None:
        """Admin calls: the reads must not fail; OffsetDelete and DeleteGroups may remove
        acknowledged commits (once sent, the commit is no longer expected, acknowledged or not)."""
        coord = self.coordinator
        if what == 0:
            coord.describe_groups([GROUP])
            coord.list_groups()
            coord.describe_consumer_groups([GROUP])
            coord.offset_fetch([OffsetFetchGroupRequest(GROUP, None)])
            return
        ctx = RequestContext("admin", "/admin", 2)
        if what == 1:
            t = self.rng.choice(TOPICS)
            req = OffsetDeleteRequest(GROUP, [FetchTopic(t, [0, 1])])
            for p in (0, 1):
                self.acked.pop((t, p), None)
            self._acting = None
            self._request(lambda: coord.offset_delete(req, ctx, self._tick()))
        else:
            self._acting = None
            gone = dict(self.acked)
            self.acked.clear()
            r = self._request(lambda: coord.delete_groups([GROUP], ctx, self._tick()))
            if isinstance(r, list) and r and r[0].error_code == Errors.NON_EMPTY_GROUP:
                self.acked = gone  # refused: nothing was deleted

    # --- invariants ----------------------------------------------------------------------------

    def replica_equals_live(self) -> None:
        if self.classic_unsynced and isinstance(self.group, ClassicGroup):
            return  # see `_on_event`
        super().replica_equals_live()

    def check(self, full_replay: bool) -> None:
        self.no_partition_owned_twice_by_members()
        self.no_partition_owned_twice_by_the_coordinator()
        self.replica_equals_live()
        self.check_commits()
        self.check_timers()
        if full_replay:
            self._check_replay_from_scratch()
        assert not self.loop.errors, f"event loop errors: {self.loop.errors}"

    def check_commits(self) -> None:
        if not self.acked:
            return
        fetched = self.coordinator.offset_fetch([OffsetFetchGroupRequest(GROUP, None)])[0]
        have = {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions}
        for tp, off in sorted(self.acked.items()):
            assert have.get(tp, -1) >= off, (
                f"acknowledged commit {tp[0]}-{tp[1]}@{off} lost: the coordinator has {have.get(tp)}"
            )

    def check_timers(self) -> None:
        prefixes = tuple(
            f"{k}-{GROUP}-" for k in ("session-timeout", "rebalance-timeout", "join", "sync", "heartbeat")
        )
        keys = {
            k
            for k in self.shard.timers.keys()  # noqa: SIM118 (Timers is no dict)
            if k in (f"join-{GROUP}", f"sync-{GROUP}") or k.startswith(prefixes)
        }
        g = self.group
        expected: set[str] = set()
        allowed: set[str] = set()
        if isinstance(g, ConsumerGroup):
            for mid in g.members:
                expected.add(f"session-timeout-{GROUP}-{mid}")
                allowed |= {f"{k}-{GROUP}-{mid}" for k in ("rebalance-timeout", "join", "sync")}
        elif isinstance(g, ClassicGroup):
            allowed |= {f"join-{GROUP}", f"sync-{GROUP}"}
            # While the join phase's timer runs, it is every member's expiry: its end removes
            # the dynamic members that did not rejoin and reschedules the heartbeat of every
            # member it keeps (Kafka's completeClassicGroupJoin). A member's own heartbeat timer
            # may be gone then: it fired without effect while the member was parked in a join,
            # and a conversion whose append failed answered that join REBALANCE_IN_PROGRESS
            # (Kafka's convertToConsumerGroup does, and a failed write does not take it back).
            join_phase = g.state is ClassicGroupState.PREPARING_REBALANCE and f"join-{GROUP}" in keys
            for mid, m in g.members.items():
                if m.has_satisfied_heartbeat() or join_phase:
                    # parked in a join or sync: its heartbeat timer may have fired without
                    # effect; the answer reschedules it (Kafka's hasSatisfiedHeartbeat)
                    allowed.add(f"heartbeat-{GROUP}-{mid}")
                else:
                    expected.add(f"heartbeat-{GROUP}-{mid}")
            for mid in g.pending_join_members:
                allowed.add(f"heartbeat-{GROUP}-{mid}")
        missing = expected - keys
        assert not missing, f"members without their expiry timer (never expired): {sorted(missing)}"
        # A timer of a member that is gone fires without effect (Kafka leaves a replaced static
        # member's heartbeat timer on purpose); counted, not a violation.
        stale = keys - expected - allowed
        if stale:
            self._note("stale timers seen (fire without effect)")

    def _check_replay_from_scratch(self) -> None:
        """Invariant 3 against the disk: a shard loaded from what the log holds."""
        fresh = Shard(self.config_for(self.policy), SeededIds(0), self.image)
        load_shard(SimLog(self.disk), fresh, "sim")  # type: ignore[arg-type]
        g, f = self.shard.groups.get(GROUP), fresh.groups.get(GROUP)
        if isinstance(g, ConsumerGroup):
            assert isinstance(f, ConsumerGroup), f"the log replays to {f!r}, live {g!r}"
            assert f.persisted_state() == g.persisted_state(), "the log replays to another consumer group"
        self.log = disk_records(self.disk)  # the state machine's own check reads self.log
        if not (self.classic_unsynced and isinstance(g, ClassicGroup)):
            super()._check_replay_from_scratch()

    # --- one step ------------------------------------------------------------------------------

    def step(self, faults: bool) -> str:
        """One random action (client, time, admin, and when `faults`, a fault); returns its name."""
        rng = self.rng
        self._acting = None
        names = sorted(self.clients)
        actions: list[tuple[str, float]] = [
            ("act", 30),
            ("heartbeat", 8),
            ("rejoin", 4),
            ("sync", 4),
            ("start", 6 if len(self.clients) < len(NAMES) else 0),
            ("subscribe", 2),
            ("leave", 2),
            ("replace_static", 1.5),
            ("advance", 12),
            ("grow", 0.7),
            ("commit", 6),
            ("admin_commit", 1),
            ("admin", 3),
        ]
        if faults:
            actions += [
                ("lose", 4),
                ("duplicate", 2),
                ("crash_client", 2),
                ("clock_jump", 0.7),
                ("fail_append", 2),
                ("fail_fsync", 1),
                ("stall_fsync", 3),
                ("crash_server", 1.2),
            ]
        actions += self.extra_actions(faults)
        if not names:
            actions = [(a, w) for a, w in actions if a not in CLIENT_ACTIONS]
        name = rng.choices([a for a, _ in actions], [w for _, w in actions])[0]
        i = rng.randrange(len(NAMES))
        if name == "act":
            self.act(i)
        elif name == "heartbeat":
            self.heartbeat(i, rng.random() < 0.8)
        elif name == "rejoin":
            self.rejoin(i)
        elif name == "sync":
            self.sync(i)
        elif name == "start":
            spec = (rng.choice(KINDS), rng.choice(SUBSCRIPTIONS), rng.randint(0, 3), rng.random() < 0.5)
            self.start_client(i, spec)
        elif name == "subscribe":
            self.change_subscription(i, rng.choice(SUBSCRIPTIONS))
        elif name == "leave":
            self.leave(i, rng.choice([-2, -1]))
        elif name == "replace_static":
            spec = (rng.choice(KINDS), rng.choice(SUBSCRIPTIONS), rng.randint(0, 3), rng.random() < 0.5)
            self.replace_static(rng.choice(sorted(STATIC)), spec)
        elif name == "advance":
            self.advance(rng.choice([10, 60, 500, 1500, 2100, 3500]))
        elif name == "grow":
            self.grow_topic(rng.choice(TOPICS), rng.randint(1, 2))
        elif name == "commit":
            self.commit(self._pick(i))
        elif name == "admin_commit":
            self.admin_commit()
        elif name == "admin":
            self.admin(rng.choice([0, 0, 0, 1, 2]))
        elif name == "lose":
            self.lose_answer(i)
        elif name == "duplicate":
            if self._pick(i).classic:
                self._duplicate = True  # a classic request resent as it was (a retry)
                self.act(i)
                self._duplicate = False
            else:
                # A consumer-protocol client never resends a heartbeat as it was: after a lost
                # answer its retry is a full heartbeat (what the server must accept twice).
                self.lose_answer(i)
                self.act(i)
        elif name == "crash_client":
            self.crash(i)
        elif name == "clock_jump":
            self.advance(rng.choice([8_000, 30_000, 120_000]))
        elif name == "fail_append":
            self.disk.fail_appends = rng.randint(1, 3)
        elif name == "fail_fsync":
            self.disk.fail_fsync = True
        elif name == "stall_fsync":
            self.disk.stall_steps = rng.randint(1, 6)
        elif name == "crash_server":
            self.crash_server(rng.random() < 0.5, rng.choice(POLICIES))
        else:
            self.extra_action(name, i)
        for c in self.clients.values():
            c.deaf = False
        self.loop.step(quiet=not faults)
        self._drain()
        self._note(name)
        return name

    def extra_actions(self, faults: bool) -> list[tuple[str, float]]:
        """A subclass's own actions and their weights (client actions: in CLIENT_ACTIONS)."""
        return []

    def extra_action(self, name: str, i: int) -> None:
        """Run one of `extra_actions` on client index `i`."""
        raise AssertionError(f"unknown action {name}")

    def quiet(self) -> None:
        """Faults stop: stalled fsyncs complete, nothing fails any more; then the clients settle
        (the state machine's liveness check: every subscribed partition owned once)."""
        self.disk.quiet = True
        self.disk.fail_appends, self.disk.fail_fsync, self.disk.stall_steps = 0, False, 0
        self.loop.step(quiet=True)
        self._drain()


CLIENT_ACTIONS = {
    "act",
    "heartbeat",
    "rejoin",
    "sync",
    "subscribe",
    "leave",
    "commit",
    "lose",
    "duplicate",
    "crash_client",
}


def _consume(f: asyncio.Future[Any]) -> None:
    if not f.cancelled():
        f.exception()


def _is_group_phase(response: Any) -> bool:
    return isinstance(response, JoinGroupResponse | SyncGroupResponse)


# --- running seeds -----------------------------------------------------------------------------


@dataclass
class SeedResult:
    seed: int
    steps: int
    stats: dict[str, int]
    digest: str  # of what the simulated disk holds at the end: equal runs, equal digests


class SeedMachine(Protocol):
    """What `run_seed` and `main` drive: the whole-coordinator machine here, and the others built
    on this file's loop, disk and runtime (sim.client_assignment_chaos, sim.streams_chaos)."""

    NAME: str  # how the summary line names the simulation
    CLI_FLAG: str  # how `groupshift simulate --chaos` selects the machine (the reproduce line)
    disk: SimDisk
    stats: dict[str, int]

    def step(self, faults: bool) -> str: ...
    def check(self, full_replay: bool) -> None: ...
    def quiet(self) -> None: ...
    def settle(self) -> None: ...


Machine = Callable[[random.Random], SeedMachine]


def run_seed(seed: int, steps: int, machine: Machine = SimMachine) -> SeedResult:
    with structlog.testing.capture_logs():  # the coordinator's logs: silent, and not kept
        return _run_seed(seed, steps, machine)


def _run_seed(seed: int, steps: int, machine: Machine) -> SeedResult:
    """Run one seed: `steps` steps with faults, a quiet tail, then the settling; raises
    `Violation` (naming the seed) on the first invariant that fails."""
    rng = random.Random(seed)
    trail: deque[str] = deque(maxlen=12)
    step = 0
    try:
        m = machine(rng)
        for step in range(1, steps + 1):
            trail.append(m.step(faults=True))
            m.check(full_replay=step % REPLAY_EVERY == 0)
        m.quiet()
        for _ in range(QUIET_STEPS):
            step += 1
            trail.append(m.step(faults=False))
            m.check(full_replay=False)
        m.check(full_replay=True)
        m.settle()
        m.check(full_replay=True)
    except Exception as e:
        detail = "".join(traceback.format_exception(e)[-6:])
        raise Violation(
            f"seed {seed} failed at step {step} (last actions: {', '.join(trail)}): "
            f"{type(e).__name__}: {e}\nreproduce: groupshift simulate --chaos"
            f"{getattr(machine, 'CLI_FLAG', '')} --seed {seed} --steps {steps}\n{detail}"
        ) from e
    digest = hashlib.sha256(b"".join(raw for _n, raw in m.disk.batches)).hexdigest()
    return SeedResult(seed, step, m.stats, digest)


def main(
    seed: int, steps: int, seeds: int, out: TextIO, keep_going: bool = False, machine: Machine = SimMachine
) -> int:
    """`groupshift simulate --chaos`: seeds `seed .. seed+seeds-1`, `steps` steps each."""
    total_steps = failures = 0
    stats: dict[str, int] = {}
    started = time.process_time()
    for s in range(seed, seed + seeds):
        try:
            r = run_seed(s, steps, machine)
        except Violation as v:
            failures += 1
            print(f"VIOLATION {v}", file=out, flush=True)
            if not keep_going:
                break
            continue
        total_steps += r.steps
        for k, v2 in r.stats.items():
            stats[k] = stats.get(k, 0) + v2
        done = s - seed + 1
        if done % 50 == 0 and done < seeds:
            print(
                f"progress: {done} seeds, {total_steps} steps, {failures} violations, "
                f"{time.process_time() - started:.0f} s CPU",
                file=out,
                flush=True,
            )
    print(
        f"{getattr(machine, 'NAME', 'chaos')}: {seeds} seeds from {seed}, {steps} steps each: "
        f"{total_steps} steps run, {failures} violations ({time.process_time() - started:.0f} s CPU)",
        file=out,
    )
    for k in sorted(stats):
        print(f"  {k}: {stats[k]}", file=out)
    out.flush()
    return 1 if failures else 0
