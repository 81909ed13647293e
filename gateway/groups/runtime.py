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
import contextlib
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from engine.errors import Errors
from engine.outcome import Outcome, Pending
from gateway.coordinator_storage import CoordinatorStorage
from translation.coordinator import Coordinator

log = structlog.get_logger("coordinator")

Operation = Callable[[Coordinator, int], Outcome[Any]]


def now_ms() -> int:
    return int(time.time() * 1000)


class StorageFailed(Exception):
    """The shard's log failed; the request should be retried on a fresh connection."""


class ShardRuntime:
    def __init__(
        self,
        index: int,
        open_storage: Callable[[int], CoordinatorStorage],
        on_op_time: Callable[[float], None] | None = None,
        on_flush_time: Callable[[float], None] | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        clock: Callable[[], int] = now_ms,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.index = index
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = loop
        self._open_storage = open_storage
        self.storage = open_storage(clock())
        self.coordinator = Coordinator(self.storage.shard)
        self._waiting: deque[tuple[int, asyncio.Future[Any] | None, Any, Outcome[Any] | None]] = deque()
        self._parked: dict[Pending, asyncio.Future[Any]] = {}
        self._flush_scheduled = False
        self._syncing = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._on_op_time = on_op_time
        self._on_flush_time = on_flush_time
        self._on_event = on_event
        for out in self.storage.load_outcomes:
            self._after(out, None)

    @property
    def shard(self) -> Any:
        return self.storage.shard

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._reschedule_timer()

    # --- running operations ----------------------------------------------------------------------

    def run(self, op: Operation) -> Any:
        """Run one operation now; its response, or a future of it when it must wait."""
        start = time.perf_counter()
        out = op(self.coordinator, self._clock())
        if self._on_op_time is not None:
            self._on_op_time(time.perf_counter() - start)
        result = self._after(out, out.response)
        self._reschedule_timer()
        return result

    def _after(self, out: Outcome[Any], response: Any) -> Any:
        """Route what an outcome produced: events, completions, continuation, response."""
        if out.events:
            for name, fields in out.events:
                self._emit(name, fields)
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

    def _emit(self, name: str, fields: dict[str, Any]) -> None:
        if self._on_event is not None:
            self._on_event(name, fields)
        if name == "request.rejected":
            log.info(name, shard=self.index, **fields)
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

    def _fail(self, error: BaseException) -> None:
        log.error(
            "coordinator.storage_failed",
            shard=self.index,
            error=str(error),
            waiting=len(self._waiting),
            parked=len(self._parked),
        )
        failure = StorageFailed(f"shard {self.index}: {error}")
        for _end, fut, _value, _cont in self._waiting:
            if fut is not None and not fut.done():
                fut.set_exception(failure)
        for fut in self._parked.values():
            if not fut.done():
                fut.set_exception(failure)
        self._waiting.clear()
        self._parked.clear()
        with contextlib.suppress(Exception):
            self.storage.close()
        try:
            self.storage = self._open_storage(self._clock())
            self.coordinator = Coordinator(self.storage.shard)
            for out in self.storage.load_outcomes:
                self._after(out, None)
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
        deadline = self.coordinator.next_deadline()
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
        for out in self.coordinator.expire(now):
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
        if self._timer is not None:
            self._timer.cancel()
        self.flush_now()
        self.storage.close()
