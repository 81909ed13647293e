"""Coordinator timers, keyed like Kafka's (`session-timeout-{g}-{m}`, `rebalance-timeout-{g}-{m}`,
`join-{g}-{m}`, `sync-{g}-{m}`, `heartbeat-{g}-{m}`, `join-{g}`, `sync-{g}`).

Kafka semantics (`CoordinatorTimer`): scheduling a key again replaces its timer; `schedule_if_absent`
keeps an existing one; a fired timer runs as a write operation. Sans-IO: the runtime asks
`next_deadline()` and calls the engine's `expire(now)`, which pops due entries here.

Timers are data, not closures: a handler never touches `Timers`; it adds `TimerChange`s to its
`Operation` (`schedule` / `schedule_if_absent` / `cancel` of a `TimerTask`: kind + group + member
+ epoch), and the shard applies them in `Shard.commit` together with the operation's records,
so a timer exists exactly when the state that needs it does. A fired `TimerTask` is dispatched by
its kind through the engine's expiry table (`engine/expiry.py`). This structure itself stores any
payload under `callback` (the engine stores the `TimerTask`).

Why buckets: every heartbeat reschedules a session timer, so rescheduling must be O(1) and
allocation-free. Entries of one timeout length are kept in one OrderedDict in deadline order
(time never goes backwards, so re-adding at the end keeps it sorted); the earliest deadline of the
whole structure is the minimum over the few bucket heads.

`next_deadline()` is asked after every operation, so it is cached: adding a timer can only lower
the minimum (kept up to date), and moving or removing one can only raise it, which matters only
if that timer held the minimum (then the cache is recomputed on the next ask). A steady
heartbeat pushes a session timer that is not the earliest, and leaves the cache valid.

But in a steady group the earliest timer is the session timer of the member that heartbeated
longest ago, the next one to heartbeat: nearly every heartbeat pushes the minimum and the cache
is recomputed after nearly every operation. The runtime needs less: its event-loop timer must
not fire late, and firing early is harmless (nothing is due; it re-arms). `mark()` hands out the
earliest deadline and starts recording the lowest deadline set since (by a schedule or a push);
`none_set_before(d)` is then True when no timer can be due before `d` without looking: every
timer that existed at the mark was due no earlier than what `mark()` returned, and every one set
since is recorded.
"""

from __future__ import annotations

from collections import OrderedDict
from enum import Enum
from typing import Any

TimerCallback = Any  # the payload of an entry: a TimerTask in the engine, anything in tests

_STALE = -1  # `Timers._min` when it must be recomputed (deadlines are never negative)


class TimerEntry:
    __slots__ = ("callback", "deadline", "key", "seq", "timeout_ms")

    def __init__(self, key: str, deadline: int, timeout_ms: int, seq: int, callback: TimerCallback) -> None:
        self.key = key
        self.deadline = deadline
        self.timeout_ms = timeout_ms
        self.seq = seq
        self.callback = callback

    def __repr__(self) -> str:
        return f"TimerEntry({self.key!r}, deadline={self.deadline})"


class Timers:
    __slots__ = ("_buckets", "_entries", "_floor", "_min", "_now", "_seq")

    def __init__(self) -> None:
        self._entries: dict[str, TimerEntry] = {}
        self._buckets: dict[int, OrderedDict[str, TimerEntry]] = {}
        self._seq = 0
        self._now = 0
        self._min: int | None = None  # earliest deadline (None: no timers), or _STALE
        # the lowest deadline set since `mark()` (None: none), 0 before the first mark
        self._floor: int | None = 0

    def _added(self, deadline: int) -> None:
        f = self._floor
        if f is None or deadline < f:
            self._floor = deadline
        m = self._min
        if m != _STALE and (m is None or deadline < m):
            self._min = deadline

    def _leaving(self, deadline: int) -> None:
        """A timer at `deadline` is removed or moved later: the minimum may rise."""
        if self._min == deadline:
            self._min = _STALE

    def _clock(self, now_ms: int) -> int:
        # Deadlines inside a bucket must be non-decreasing: never let time run backwards.
        if now_ms > self._now:
            self._now = now_ms
        return self._now

    def schedule(self, key: str, timeout_ms: int, now_ms: int, callback: TimerCallback) -> None:
        """Schedule `callback` at now + timeout, replacing any timer with the same key."""
        now = self._clock(now_ms)
        self._seq += 1
        old = self._entries.get(key)
        if old is not None:
            if old.timeout_ms == timeout_ms:
                self._leaving(old.deadline)
                old.deadline = now + timeout_ms
                old.seq = self._seq
                old.callback = callback
                self._buckets[timeout_ms].move_to_end(key)
                self._added(old.deadline)
                return
            self._remove(old)
        entry = TimerEntry(key, now + timeout_ms, timeout_ms, self._seq, callback)
        self._entries[key] = entry
        bucket = self._buckets.get(timeout_ms)
        if bucket is None:
            bucket = self._buckets[timeout_ms] = OrderedDict()
        bucket[key] = entry
        self._added(entry.deadline)

    def schedule_if_absent(self, key: str, timeout_ms: int, now_ms: int, callback: TimerCallback) -> None:
        if key not in self._entries:
            self.schedule(key, timeout_ms, now_ms, callback)

    def reschedule(self, key: str, timeout_ms: int, now_ms: int) -> bool:
        """Push an existing timer's deadline to now + timeout keeping its callback (hot path).

        Returns False when no timer with this key exists (the caller then schedules one)."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        self.push(entry, timeout_ms, now_ms)
        return True

    def push(self, entry: TimerEntry, timeout_ms: int, now_ms: int) -> None:
        """`reschedule` of an entry already looked up."""
        key = entry.key
        if entry.timeout_ms != timeout_ms:
            self.schedule(key, timeout_ms, now_ms, entry.callback)
            return
        now = self._clock(now_ms)
        self._seq += 1
        if entry.deadline == self._min:
            self._min = _STALE
        entry.deadline = deadline = now + timeout_ms
        f = self._floor
        if f is None or deadline < f:
            self._floor = deadline
        entry.seq = self._seq
        self._buckets[timeout_ms].move_to_end(key)

    def cancel(self, key: str) -> None:
        entry = self._entries.get(key)
        if entry is not None:
            self._remove(entry)

    def _remove(self, entry: TimerEntry) -> None:
        self._leaving(entry.deadline)
        del self._entries[entry.key]
        bucket = self._buckets[entry.timeout_ms]
        del bucket[entry.key]
        if not bucket:
            del self._buckets[entry.timeout_ms]

    def is_scheduled(self, key: str) -> bool:
        return key in self._entries

    def deadline(self, key: str) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.deadline

    def keys(self) -> list[str]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def _earliest(self) -> TimerEntry | None:
        best: TimerEntry | None = None
        for bucket in self._buckets.values():
            head = next(iter(bucket.values()))
            if best is None or (head.deadline, head.seq) < (best.deadline, best.seq):
                best = head
        return best

    def next_deadline(self) -> int | None:
        m = self._min
        if m == _STALE:
            e = self._earliest()
            m = self._min = None if e is None else e.deadline
        return m

    def mark(self) -> int | None:
        """`next_deadline()`, and from now on record the lowest deadline set (see module doc)."""
        self._floor = None
        return self.next_deadline()

    def none_set_before(self, deadline: int) -> bool:
        """No timer is due before `deadline` if `deadline` is at or before what the last `mark()`
        returned (False whenever that cannot be known without recomputing)."""
        f = self._floor
        return f is None or f >= deadline

    def pop_due(self, now_ms: int) -> TimerEntry | None:
        """Remove and return the earliest timer due at `now_ms`, or None.

        The engine pops one entry at a time and runs its callback before popping the next, so a
        callback that cancels or reschedules other timers is honoured."""
        self._clock(now_ms)
        e = self._earliest()
        if e is None or e.deadline > now_ms:
            return None
        self._remove(e)
        return e


def session_timeout_key(group_id: str, member_id: str) -> str:
    return f"session-timeout-{group_id}-{member_id}"


def rebalance_timeout_key(group_id: str, member_id: str) -> str:
    return f"rebalance-timeout-{group_id}-{member_id}"


def classic_join_key(group_id: str, member_id: str) -> str:
    return f"join-{group_id}-{member_id}"


def classic_sync_key(group_id: str, member_id: str) -> str:
    return f"sync-{group_id}-{member_id}"


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def group_join_key(group_id: str) -> str:
    return f"join-{group_id}"


def group_sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


# --- timers as data -----------------------------------------------------------------------------


class TimerKind(Enum):
    """What a timer is for; the value is its key prefix (Kafka's timer key names)."""

    CONSUMER_SESSION = "session-timeout"  # a consumer-group member's session (both protocols)
    CONSUMER_REBALANCE = "rebalance-timeout"  # a consumer-protocol member revoking partitions
    CLASSIC_MEMBER_JOIN = "join"  # a classic member of a consumer group told to rejoin
    CLASSIC_MEMBER_SYNC = "sync"  # a classic member of a consumer group between join and sync
    CLASSIC_HEARTBEAT = "heartbeat"  # a classic group member's session
    CLASSIC_JOIN_PHASE = "join-phase"  # a classic group's join barrier (key `join-{g}`)
    CLASSIC_INITIAL_REBALANCE = "initial-rebalance"  # a new classic group's delay (key `join-{g}`)
    CLASSIC_SYNC_PHASE = "sync-phase"  # a classic group's sync barrier (key `sync-{g}`)
    OFFSET_EXPIRATION = "expire-group-metadata"  # the periodic offset retention check
    STREAMS_SESSION = "streams-session-timeout"  # a streams-group member's session
    STREAMS_REBALANCE = "streams-rebalance-timeout"  # a streams-group member revoking tasks
    STREAMS_INITIAL_REBALANCE = "initial-rebalance-timeout"  # a new streams group's first assignment
    CLIENT_ASSIGNMENT = "client-assignment-timeout"  # the member asked to compute the target
    CONNECT_SESSION = "connect-session-timeout"  # a Connect worker's session
    CONNECT_REBALANCE = "connect-rebalance-timeout"  # a Connect worker revoking connectors/tasks
    CONNECT_ASSIGNMENT = "connect-assignment-timeout"  # the Connect worker asked to compute
    CONNECT_DELAY = "connect-scheduled-delay"  # a departed worker's held work (member = departed)


class TimerTask:
    """What fires: `epoch` is the member epoch (rebalance timeout), the generation (sync phase)
    or the delay (initial rebalance); `data` is the rebalance timeout (rebalance timeout) or the
    remaining wait (initial rebalance). Immutable once built."""

    __slots__ = ("data", "epoch", "group_id", "key", "kind", "member_id")

    def __init__(
        self, kind: TimerKind, group_id: str, member_id: str = "", epoch: int = 0, data: int = 0
    ) -> None:
        self.kind = kind
        self.group_id = group_id
        self.member_id = member_id
        self.epoch = epoch
        self.data = data
        self.key = timer_key(kind, group_id, member_id)

    def __repr__(self) -> str:
        return f"TimerTask({self.kind.name}, {self.group_id!r}, {self.member_id!r}, epoch={self.epoch})"


SCHEDULE = 0
SCHEDULE_IF_ABSENT = 1
CANCEL = 2

# (action, key, kind, group_id, member_id, epoch, data, timeout_ms): a plain tuple, since the hot
# path adds one per heartbeat; the TimerTask is built only when a timer is created or changes.
TimerChange = tuple[int, str, TimerKind, str, str, int, int, int]


def timer_key(kind: TimerKind, group_id: str, member_id: str = "") -> str:
    if kind is TimerKind.CONSUMER_SESSION:
        return f"session-timeout-{group_id}-{member_id}"
    if kind is TimerKind.OFFSET_EXPIRATION:
        return "expire-group-metadata"
    if kind in (TimerKind.CLASSIC_JOIN_PHASE, TimerKind.CLASSIC_INITIAL_REBALANCE):
        return f"join-{group_id}"
    if kind is TimerKind.CLASSIC_SYNC_PHASE:
        return f"sync-{group_id}"
    return f"{kind.value}-{group_id}-{member_id}"


def apply_timer_changes(timers: Timers, changes: list[TimerChange], now_ms: int) -> None:
    """Apply an operation's timer changes in order (called by `Shard.commit` only)."""
    entries = timers._entries
    for action, key, kind, group_id, member_id, epoch, data, timeout in changes:
        if action == SCHEDULE:
            entry = entries.get(key)
            if entry is not None:
                task = entry.callback
                if task.kind is kind and task.epoch == epoch and task.data == data:
                    timers.push(entry, timeout, now_ms)  # the same task, later (every heartbeat)
                    continue
            timers.schedule(key, timeout, now_ms, TimerTask(kind, group_id, member_id, epoch, data))
        elif action == CANCEL:
            timers.cancel(key)
        elif key not in entries:
            timers.schedule(key, timeout, now_ms, TimerTask(kind, group_id, member_id, epoch, data))
