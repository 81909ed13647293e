"""One shard's runtime on the event loop (Kafka `CoordinatorRuntime`).

Rules:
* The shard is only touched on the loop thread, one operation at a time: the engine never sees
  concurrency, and no operation awaits in the middle.
* Records before responses: an operation's response (and the completions of parked requests it
  produces) is released only once the log is durable up to the log end offset read right after
  the operation, which also covers every earlier operation's records, as Kafka waits for the
  high watermark. When nothing is pending (a steady heartbeat), the response is returned inline.
* Group commit: operations append as they come; one fsync per batch window (run in a worker
  thread) makes all of them durable; then waiting responses are released in order and append
  continuations (e.g. a leader's SyncGroup) run.
* Timers: one loop timer at the shard's next deadline; firing runs `expire(now)`.
* Compaction: when the shard is idle (nothing waits for an fsync) and its `CompactionPolicy`
  triggers, the log is rolled and its sealed segments are compacted by a worker thread while
  the shard keeps serving; the swap (a few renames) runs back on the loop.
* Storage failure: waiting responses fail (the dispatcher closes those connections, clients
  reconnect and rediscover the coordinator, as after Kafka's NOT_COORDINATOR), and the shard is
  reloaded from what the log holds.

Time is wall-clock milliseconds: commit timestamps and state timestamps are persisted and must
mean the same after a restart.

Injection points (docs/simulation.md): the clock (`clock`, default the wall clock), the storage
(`open_storage`, which may open any log honouring `records.durability.CoordinatorLog`) and the event
loop (`start(loop)`: anything with asyncio's `call_soon`, `call_later`, `run_in_executor`,
`create_future`). The deterministic simulator passes a virtual clock, a simulated log whose
appends and fsyncs fail, stall or tear, and a virtual loop; the server passes nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from engine.errors import Errors
from engine.outcome import Event, Outcome, Pending
from engine.shard import Shard
from gateway.coordinator_storage import CompactionPolicy, CoordinatorStorage
from gateway.groups.events import RATE_LIMITED_EVENTS, WARNING_EVENTS, ClassicAssignments, annotate
from gateway.log_rate import RateLimiter
from gateway.registry import CloseConnection
from records.compaction import CompactionJob, abandon_compaction, write_compaction
from records.compaction_worker import clean_in_worker, start_worker
from records.log import SegmentLog

log = structlog.get_logger("coordinator")

Operation = Callable[[Shard, int], Outcome[Any]]

COMPACTION_CHECK_BYTES = 64 * 1024
# A checked size no log can be within COMPACTION_CHECK_BYTES of: the next check evaluates the policy.
_EVALUATE_NOW = -(1 << 62)
_RunningCompaction = tuple[concurrent.futures.Future[None], CompactionJob, CoordinatorStorage]


def _yielder(every: float = 0.002, pause: float = 0.0002) -> Callable[[], None]:
    """Called before each batch the compaction thread reads: every `every` seconds it sleeps
    briefly, which hands the interpreter lock to the event loop at once instead of making the
    loop wait out the interpreter's switch interval behind a busy thread."""
    deadline = time.perf_counter() + every

    def maybe_pause() -> None:
        nonlocal deadline
        now = time.perf_counter()
        if now >= deadline:
            time.sleep(pause)
            deadline = now + pause + every

    return maybe_pause


@functools.cache
def _compaction_executor() -> concurrent.futures.ThreadPoolExecutor:
    """One thread compacts for every shard, one log at a time: compaction is background work
    and must not take more than one core from the loop. The thread lives as long as the
    server and hands the two passes to the worker process (`records.compaction_worker`, whose
    parent-death signal is tied to this thread), then validates the file the worker wrote."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="compaction")


def now_ms() -> int:
    return int(time.time() * 1000)


class StorageFailed(CloseConnection):
    """The shard's log failed; the request should be retried on a fresh connection (the
    dispatcher closes it, and the client rediscovers the coordinator)."""

    def __init__(self, message: str) -> None:
        super().__init__("coordinator.storage_failed", error=message)


class ShardRuntime:
    def __init__(
        self,
        index: int,
        open_storage: Callable[[int], CoordinatorStorage],
        on_op_time: Callable[[float], None] | None = None,
        on_flush_time: Callable[[float], None] | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        compaction: CompactionPolicy | None = None,
        clock: Callable[[], int] = now_ms,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.index = index
        self._warnings = RateLimiter()  # repeated failure warnings (append.failed)
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = loop
        self._compaction_policy = compaction
        self._compaction: _RunningCompaction | None = None
        self._compaction_checked_size = 0
        self._closing = False
        self.compactions = 0
        self._open_storage = open_storage
        self.storage = open_storage(clock())
        self._waiting: deque[tuple[int, asyncio.Future[Any] | None, Any, Outcome[Any] | None]] = deque()
        self._parked: dict[Pending, asyncio.Future[Any]] = {}
        self._flush_scheduled = False
        self._syncing = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._on_op_time = on_op_time
        self._on_flush_time = on_flush_time
        self._on_event = on_event
        self._classic_assignments = ClassicAssignments()
        for out in self.storage.load_outcomes:
            self._after(out, None)
        self.loaded = True  # False while a failed shard is being reloaded (`/health/ready`)
        # Called with the new shard after a reload or reopen (the service re-applies the
        # per-group dynamic configs, which live outside the log).
        self.on_reopen: Callable[[Shard], None] | None = None

    @property
    def shard(self) -> Shard:
        return self.storage.shard

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._reschedule_timer()
        if self._compaction_policy is not None and isinstance(self.storage.log, SegmentLog):
            # The worker starts now, from the compaction thread: the first compaction does not
            # wait for an interpreter to start.
            _compaction_executor().submit(start_worker)

    # --- running operations ----------------------------------------------------------------------

    def run(self, op: Operation) -> Any:
        """Run one operation now; its response, or a future of it when it must wait."""
        start = time.perf_counter()
        out = op(self.shard, self._clock())
        if self._on_op_time is not None:
            self._on_op_time(time.perf_counter() - start)
        result = self._after(out, out.response)
        self._reschedule_timer()
        return result

    def _after(self, out: Outcome[Any], response: Any) -> Any:
        """Route what an outcome produced: events, completions, continuation, response."""
        if out.events:
            self._emit(out.events)
        end = self.storage.end_offset
        durable = self.storage.durable_offset >= end and not self._waiting
        for handle, value in out.completions:
            fut = self._parked.pop(handle, None)
            if fut is None:
                continue
            if durable:
                if not fut.done():
                    fut.set_result(value)
            else:
                self._waiting.append((end, fut, value, None))
        if out.on_append is not None:
            if durable:
                self._after(out.on_append(Errors.NONE), None)
            else:
                self._waiting.append((end, None, None, out))
        if not durable:
            self._schedule_flush()
        if isinstance(response, Pending):
            fut = self._new_future()
            self._parked[response] = fut
            return fut
        if response is None or durable:
            return response
        fut = self._new_future()
        self._waiting.append((end, fut, response, None))
        return fut

    def _new_future(self) -> asyncio.Future[Any]:
        loop = self._loop or asyncio.get_running_loop()
        return loop.create_future()

    def _emit(self, events: list[Event] | tuple[Event, ...]) -> None:
        """Log one outcome's events (completed by `gateway.groups.events`) and count them."""
        annotate(self.shard, events)
        derived = self._classic_assignments.derive(self.shard, events)
        for name, fields in (*events, *derived) if derived else events:
            if self._on_event is not None:
                self._on_event(name, fields)
            if name in RATE_LIMITED_EVENTS:
                suppressed = self._warnings.allow(name)
                if suppressed is not None:
                    log.warning(name, shard=self.index, suppressed=suppressed, **fields)
            elif name in WARNING_EVENTS:
                log.warning(name, shard=self.index, **fields)
            else:
                log.info(name, shard=self.index, **fields)

    # --- group commit ------------------------------------------------------------------------------

    def _schedule_flush(self) -> None:
        if self._flush_scheduled or self._syncing:
            return
        self._flush_scheduled = True
        loop = self._loop or asyncio.get_running_loop()
        loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._syncing:
            return
        storage = self.storage
        if storage.log.fsync_policy == "none" or storage.end_offset <= storage.durable_offset:
            try:
                storage.sync()  # no fsync under policy "none": only advances the durable offset
            except Exception as e:
                self._fail(e)
                return
            self._release()
            return
        try:
            pending = storage.log.begin_sync()
        except Exception as e:
            self._fail(e)
            return
        self._syncing = True
        loop = self._loop or asyncio.get_running_loop()
        started = time.perf_counter()

        def done(f: asyncio.Future[None]) -> None:
            self._syncing = False
            if storage is not self.storage:
                # The shard was reopened meanwhile (scale-out: dropped or gained): this commit's
                # responses were already failed; its outcome concerns a log no longer served.
                if not f.cancelled():
                    f.exception()  # retrieved: its failure was logged by the log itself
                if self.storage.end_offset > self.storage.durable_offset:
                    self._schedule_flush()
                return
            try:
                f.result()
                storage.log.finish_sync(pending)
            except Exception as e:
                self._fail(e)
                return
            if self._on_flush_time is not None:
                self._on_flush_time(time.perf_counter() - started)
            self._release()
            if storage.end_offset > storage.durable_offset:
                self._schedule_flush()

        loop.run_in_executor(None, pending.run).add_done_callback(done)

    def _release(self) -> None:
        durable = self.storage.durable_offset
        while self._waiting and self._waiting[0][0] <= durable:
            _end, fut, value, cont = self._waiting.popleft()
            if cont is not None and cont.on_append is not None:
                self._after(cont.on_append(Errors.NONE), None)
            elif fut is not None and not fut.done():
                fut.set_result(value)
        self._reschedule_timer()
        if not self._waiting and not self._syncing:
            self._maybe_compact()

    # --- compaction ------------------------------------------------------------------------------

    def _maybe_compact(self) -> None:
        """Start a compaction if the policy triggers (checked once per 64 KiB appended, or per
        quarter of the policy's minimum when that is smaller, and once after each compaction)."""
        policy = self._compaction_policy
        if policy is None or self._compaction is not None or self._loop is None or self._closing:
            return
        storage = self.storage
        if not isinstance(storage.log, SegmentLog):
            return  # a simulated log is not compacted
        size = storage.log.size_bytes
        if abs(size - self._compaction_checked_size) < min(COMPACTION_CHECK_BYTES, policy.min_bytes // 4):
            return
        self._compaction_checked_size = size
        try:
            job = storage.begin_compaction(self._clock(), policy)
        except Exception as e:
            log.error("coordinator.compaction_failed", shard=self.index, error=str(e))
            return
        if job is None:
            return
        started = time.perf_counter()
        cf = _compaction_executor().submit(write_compaction, job, None, _yielder(), clean_in_worker)
        self._compaction = (cf, job, storage)
        asyncio.wrap_future(cf, loop=self._loop).add_done_callback(
            lambda _f: self._compaction_written(started)
        )

    def _compaction_written(self, started: float) -> None:
        if self._compaction is None:
            return
        cf, job, storage = self._compaction
        self._compaction = None
        written = time.perf_counter() - started
        error = cf.exception()
        if (
            error is not None
            or storage is not self.storage
            or not isinstance(storage.log, SegmentLog)
            or storage.log.closed
        ):
            abandon_compaction(job)
            if error is not None:
                log.error("coordinator.compaction_failed", shard=self.index, error=str(error))
            return
        swap_started = time.perf_counter()
        try:
            result = storage.finish_compaction(job)
        except Exception as e:
            self._fail(e)
            return
        self.compactions += 1
        log.info(
            "coordinator.compacted",
            shard=self.index,
            write_seconds=round(written, 4),
            swap_seconds=round(time.perf_counter() - swap_started, 4),
            **result._asdict(),
        )
        # What was appended while this compaction ran may already satisfy the policy: evaluate it
        # now rather than after the next quarter-minimum of appends, which a quiet group may
        # never write (a burst would otherwise stay uncompacted until traffic resumes).
        self._compaction_checked_size = _EVALUATE_NOW
        if not self._waiting and not self._syncing:
            self._maybe_compact()

    def _wait_for_compaction(self) -> None:
        """Before the log is closed (shutdown, reload): let the writer finish, drop its work."""
        if self._compaction is None:
            return
        cf, job, _storage = self._compaction
        self._compaction = None
        with contextlib.suppress(Exception):
            cf.result()
        abandon_compaction(job)

    def reopen(self, event: str) -> None:
        """Reopen the shard from its storage factory (scale-out: a shard gained or dropped);
        responses still waiting fail as after a storage failure, and their clients find the
        coordinator again."""
        log.info(event, shard=self.index, waiting=len(self._waiting), parked=len(self._parked))
        self._fail(None)

    def _fail(self, error: BaseException | None) -> None:
        if error is not None:
            log.error(
                "coordinator.storage_failed",
                shard=self.index,
                error=str(error),
                waiting=len(self._waiting),
                parked=len(self._parked),
            )
        failure = StorageFailed(f"shard {self.index}: {error if error is not None else 'moved'}")
        for _end, fut, _value, _cont in self._waiting:
            if fut is not None and not fut.done():
                fut.set_exception(failure)
        for fut in self._parked.values():
            if not fut.done():
                fut.set_exception(failure)
        self._waiting.clear()
        self._parked.clear()
        self._wait_for_compaction()
        self.loaded = False
        with contextlib.suppress(Exception):
            self.storage.close()
        try:
            self.storage = self._open_storage(self._clock())
            if self.on_reopen is not None:
                self.on_reopen(self.shard)
            for out in self.storage.load_outcomes:
                self._after(out, None)
            self.loaded = True
            if error is not None:
                log.info("coordinator.shard_reloaded", shard=self.index)
        except Exception as e:
            log.error("coordinator.shard_reload_failed", shard=self.index, error=str(e))
            raise
        self._reschedule_timer()

    # --- timers --------------------------------------------------------------------------------

    def _reschedule_timer(self) -> None:
        loop = self._loop
        if loop is None:
            return
        shard = self.shard
        armed = self._timer_deadline
        if self._timer is not None and armed is not None and shard.no_timer_due_before(armed):
            # Nothing set since it was armed is due earlier: it may fire early (a steady heartbeat
            # pushed the earliest session timer), then `_on_timer` finds nothing due and re-arms.
            return
        deadline = shard.mark_next_deadline()
        if deadline == self._timer_deadline and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = deadline
        if deadline is None:
            return
        delay = max(0.0, (deadline - self._clock()) / 1000.0)
        self._timer = loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        now = self._clock()
        for out in self.shard.expire(now):
            self._after(out, None)
        self._reschedule_timer()

    # --- shutdown ------------------------------------------------------------------------------

    def flush_now(self) -> None:
        """Make everything durable synchronously and release what waits (shutdown)."""
        if self._syncing:
            return
        try:
            self.storage.sync()
        except Exception as e:
            self._fail(e)
            return
        self._release()

    def close(self) -> None:
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
        self.flush_now()
        self._wait_for_compaction()
        self.storage.close()
