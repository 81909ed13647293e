"""What a handler accumulates while it computes one operation.

Records, completions of parked requests, log events, and `after` actions: small in-memory
changes that are not records (e.g. clearing a metadata-refresh flag) and must happen only if the
operation succeeds. A handler that raises leaves nothing behind: the shard drops the Operation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.errors import Errors
from engine.outcome import Event, Pending
from records.coordinator import CoordinatorRecord

# Called with Errors.NONE once the records are durable, or with the append's (mapped) error.
AppendContinuation = Callable[["Errors", "Operation"], None]


class Operation:
    """`replay` is False for classic-group paths, which change state in place (the GroupMetadata
    record is a snapshot of it) as Kafka's do. `on_append` is Kafka's append future: work that
    must wait until the records are durable (or failed), e.g. a leader's SyncGroup."""

    __slots__ = ("_after", "completions", "events", "explanations", "on_append", "records", "replay")

    def __init__(self, replay: bool = True) -> None:
        self.records: list[CoordinatorRecord] = []
        self.events: list[Event] = []
        self.explanations: list[Event] = []
        self.completions: list[tuple[Pending, Any]] = []
        self._after: list[Callable[[], None]] | None = None
        self.replay = replay
        self.on_append: AppendContinuation | None = None

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

    def after(self, action: Callable[[], None]) -> None:
        if self._after is None:
            self._after = []
        self._after.append(action)

    def run_after(self) -> None:
        if self._after:
            for action in self._after:
                action()
