"""What one engine operation produces (sans-IO, like h11's events).

Kafka's `CoordinatorResult`: the records to append and the response to release once they are
durable. Classic JoinGroup/SyncGroup may wait: their response is a `Pending` handle, completed
later by another operation or a timer; completions ride on whichever outcome resolves them.
Events are structured log lines (name + fields) for the runtime to emit; the engine never logs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from records.coordinator import CoordinatorRecord

R = TypeVar("R")

Event = tuple[str, dict[str, Any]]

_EMPTY: tuple[Any, ...] = ()
_pending_ids = itertools.count(1)


class Pending:
    """A parked request (classic JoinGroup/SyncGroup): answered later via a completion."""

    __slots__ = ("api", "group_id", "id", "member_id")

    def __init__(self, api: str, group_id: str, member_id: str) -> None:
        self.id = next(_pending_ids)
        self.api = api
        self.group_id = group_id
        self.member_id = member_id

    def __repr__(self) -> str:
        return f"Pending#{self.id}({self.api}, {self.group_id}/{self.member_id})"


class Outcome(Generic[R]):
    """`on_append(error)` (when set) must be called by the runtime once `records` are durable
    (Errors.NONE) or failed to append (the mapped error); it returns the follow-up Outcome (e.g.
    the completions of the SyncGroups a leader's assignment releases)."""

    __slots__ = ("completions", "events", "on_append", "records", "response")

    def __init__(
        self,
        response: R | Pending | None,
        records: list[CoordinatorRecord] | tuple[CoordinatorRecord, ...] = _EMPTY,
        completions: list[tuple[Pending, Any]] | tuple[()] = _EMPTY,
        events: list[Event] | tuple[()] = _EMPTY,
        on_append: Callable[[Any], Outcome[Any]] | None = None,
    ) -> None:
        self.response = response
        self.records = records
        self.completions = completions
        self.events = events
        self.on_append = on_append

    @property
    def pending(self) -> bool:
        return isinstance(self.response, Pending)

    def __repr__(self) -> str:
        return (
            f"Outcome(response={self.response!r}, records={len(self.records)}, "
            f"completions={len(self.completions)}, events={len(self.events)})"
        )
