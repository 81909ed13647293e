"""What a handler accumulates while it computes one operation (Kafka `CoordinatorResult`).

Records, timer changes, group changes (a group created or replaced without a record that replays
into it: `put_group`; removals are tombstones, replayed), completions of parked requests, log
events, and `after` actions: small in-memory changes that are not records (e.g. clearing a
metadata-refresh flag). Records, group changes, timer changes and `after` actions are applied
together by `Shard.commit`, and only once the journal has accepted the records; nothing else may
change the shard's state, its groups map or its timers (tests/test_one_way_to_change_state.py
pins it). A handler that raises leaves nothing behind: the shard drops the Operation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from engine.errors import Errors
from engine.outcome import Event, Pending
from engine.timers import CANCEL, SCHEDULE, SCHEDULE_IF_ABSENT, TimerChange, TimerKind, timer_key
from records.coordinator import CoordinatorRecord


class NamedGroup(Protocol):
    """A group as an operation carries it (`engine.state.Group`; the groups import this module,
    so the operation names them by what it uses)."""

    group_id: str


# Called with Errors.NONE once the records are durable, or with the append's (mapped) error.
AppendContinuation = Callable[["Errors", "Operation"], None]


class Operation:
    """`replay` is False for classic-group paths, which change state in place (the GroupMetadata
    record is a snapshot of it) as Kafka's do; it is chosen when the operation is created (by the
    routing table or the expiry table) and never changes. `on_append` is Kafka's append future:
    work that must wait until the records are durable (or failed), e.g. a leader's SyncGroup."""

    __slots__ = (
        "_after",
        "append_error",
        "completions",
        "events",
        "explanations",
        "group_changes",
        "on_append",
        "records",
        "refused_timers",
        "replay",
        "timers",
    )

    def __init__(self, replay: bool = True) -> None:
        self.records: list[CoordinatorRecord] = []
        self.timers: list[TimerChange] = []
        self.events: list[Event] = []
        self.explanations: list[Event] = []
        self.completions: list[tuple[Pending, Any]] = []
        self._after: list[Callable[[], None]] | None = None
        # (group id, the group to install), in the order they were asked.
        self.group_changes: list[tuple[str, NamedGroup]] | None = None
        self.replay = replay
        self.on_append: AppendContinuation | None = None
        # Set by `Shard.commit` when the journal refused the records (the mapped error).
        self.append_error: Errors | None = None
        # Timer changes that hold only if the journal refuses the records of an operation that
        # replays or replaces a group (whose other timer changes are then dropped): those that go
        # with answers to parked classic requests, which are kept (`Shard._append_failed`).
        self.refused_timers: list[TimerChange] = []

    def event(self, name: str, **fields: Any) -> None:
        self.events.append((name, fields))

    def explain(self, name: str, **fields: Any) -> None:
        """An event that explains why the request may be refused: unlike other events it is
        logged even when the handler then raises (an operation that fails leaves no other trace,
        so a `member.joined` computed before the refusal must not be logged)."""
        event = (name, fields)
        self.events.append(event)
        self.explanations.append(event)

    def complete(self, handle: Pending, response: Any) -> None:
        self.completions.append((handle, response))

    # --- timer changes (applied by `Shard.commit` with the records) ----------------------------

    def schedule(
        self, kind: TimerKind, group_id: str, member_id: str, timeout_ms: int, epoch: int = 0, data: int = 0
    ) -> None:
        """Schedule the timer (kind, group, member) at now + timeout, replacing any timer with the
        same key; `epoch` and `data` are what its handler needs (`engine.timers.TimerTask`)."""
        key = timer_key(kind, group_id, member_id)
        self.timers.append((SCHEDULE, key, kind, group_id, member_id, epoch, data, timeout_ms))

    def schedule_if_absent(
        self,
        kind: TimerKind,
        group_id: str,
        member_id: str,
        timeout_ms: int,
        epoch: int = 0,
        data: int = 0,
    ) -> None:
        key = timer_key(kind, group_id, member_id)
        self.timers.append((SCHEDULE_IF_ABSENT, key, kind, group_id, member_id, epoch, data, timeout_ms))

    def schedule_if_refused(self, kind: TimerKind, group_id: str, member_id: str, timeout_ms: int) -> None:
        """Schedule the timer (kind, group, member) at now + timeout only if the journal refuses
        the operation's records (see `refused_timers`)."""
        key = timer_key(kind, group_id, member_id)
        self.refused_timers.append((SCHEDULE, key, kind, group_id, member_id, 0, 0, timeout_ms))

    def cancel(self, kind: TimerKind, group_id: str, member_id: str = "") -> None:
        self.timers.append((CANCEL, timer_key(kind, group_id, member_id), kind, group_id, member_id, 0, 0, 0))

    # --- group changes (applied by `Shard.commit` after the records are accepted) -------------

    def put_group(self, group: NamedGroup) -> None:
        """Install `group` under its id once the records are accepted, replacing what is there: a
        brand-new classic group, the classic group that replaces an empty consumer group, the
        classic group a downgrade builds. The handler keeps working on the object it passed
        (nothing in the same operation looks it up by id), and if the append fails the group
        never appears, as Kafka reverts the snapshot that held it."""
        if self.group_changes is None:
            self.group_changes = []
        self.group_changes.append((group.group_id, group))

    def after(self, action: Callable[[], None]) -> None:
        if self._after is None:
            self._after = []
        self._after.append(action)

    def run_after(self) -> None:
        if self._after:
            for action in self._after:
                action()
