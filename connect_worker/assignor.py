"""The Connect assignor interface of the worker SDK, and Kafka Connect's incremental cooperative
assignment of connectors and tasks (the Connect draft's client-side Connect assignor, Kafka's
`IncrementalCooperativeAssignor`, KIP-415).

What Kafka Connect's assignor does, and what it does here:
- connectors and tasks are balanced separately across the workers, each worker ending with
  ⌊n/w⌋ or ⌈n/w⌉ of each (within one);
- what a worker runs and may keep, it keeps; only the excess of over-loaded workers is revoked,
  and only what is unassigned or revoked moves (KIP-415: "incremental");
- connectors and tasks no longer in the configuration are revoked;
- the work of a departed worker is not reassigned at once but held for
  `scheduled.rebalance.max.delay.ms`, given back if the worker returns (same URL) and spread only
  when the delay is over; while work is held nothing is revoked for balance (new work still goes
  to the least loaded workers), so a worker that comes back does not find the group reshuffled.

One difference: Kafka's assignor revokes for balance only when a worker with nothing joins, so a
group can stay uneven (after connectors are deleted, say); this one balances whenever no work is
held (docs/deviations.md).

The division of that last rule with the coordinator (docs/connect-groups.md, "Worker SDK"): the
coordinator holds a departed worker's work, times the delay (it outlives any worker, the one
computing included) and refuses an install that gives held work to another URL; the assignor
reads the held work in PrepareAssignment's `Delayed`, gives it to a worker back with the
departed URL and otherwise leaves it out of every target. When the delay is over the coordinator
drops the hold and asks for an assignment: the work is then unassigned and spread like any.
Kafka's assignor needs two rebalances per move (revoke, then assign) because classic
members cannot be told "not yet"; the coordinator's revoke-before-assign reconciliation does
that within one target, so one computation suffices.

Where the configuration comes from: Kafka Connect's leader reads the config topic up to the
highest offset any worker has read. Here every worker's assignor metadata carries the
configuration it has read (connector names and task counts, with its config offset, as JSON),
and the assignor uses the one of highest offset.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from membership.client_assignment import ClientAssignorError

ItemT = TypeVar("ItemT", str, tuple[str, int])

TaskId = tuple[str, int]
"""Connect's `ConnectorTaskId`: the connector's name and the task's number."""

ASSIGNOR_FAILED = 1
"""The install's error code when an assignor raises something other than `ConnectAssignorError`."""


class ConnectAssignorError(ClientAssignorError):
    """The assignor cannot compute: the group keeps its current target (`code` ≠ 0 is sent)."""

    def __init__(self, message: str, code: int = ASSIGNOR_FAILED) -> None:
        super().__init__(message)
        self.code = code if code else ASSIGNOR_FAILED


@dataclass(frozen=True)
class Work:
    """Connectors and tasks (what a worker runs, or is to run)."""

    connectors: frozenset[str] = frozenset()
    tasks: frozenset[TaskId] = frozenset()

    def __or__(self, other: Work) -> Work:
        return Work(self.connectors | other.connectors, self.tasks | other.tasks)

    def __sub__(self, other: Work) -> Work:
        return Work(self.connectors - other.connectors, self.tasks - other.tasks)

    def __and__(self, other: Work) -> Work:
        return Work(self.connectors & other.connectors, self.tasks & other.tasks)

    def __bool__(self) -> bool:
        return bool(self.connectors or self.tasks)

    def as_json(self) -> dict[str, list[str]]:
        """The JSON shape the CLI and tests log: sorted names, tasks as `connector-N`."""
        return {
            "connectors": sorted(self.connectors),
            "tasks": [f"{c}-{t}" for c, t in sorted(self.tasks)],
        }


@dataclass(frozen=True)
class WorkerInfo:
    """One worker as PrepareAssignment shows it (`target`: its current target)."""

    member_id: str
    url: str
    config_offset: int
    metadata_version: int
    metadata: bytes
    target: Work
    reason: int = 0


@dataclass(frozen=True)
class HeldWork:
    """A departed worker's work the coordinator holds for `remaining_ms` more (Delayed)."""

    member_id: str
    url: str
    remaining_ms: int
    work: Work


@dataclass(frozen=True)
class ConnectGroupState:
    """What the assignor computes from: the group as PrepareAssignment gives it."""

    group_id: str
    group_epoch: int
    assignor_name: str
    computing_member: str
    workers: tuple[WorkerInfo, ...]
    held: tuple[HeldWork, ...] = ()


@dataclass(frozen=True)
class WorkerAssignment:
    work: Work
    metadata_version: int = 0
    metadata: bytes = b""


class ConnectAssignor(ABC):
    """A client-side Connect assignor: a name, the metadata versions it reads, its metadata."""

    name: str = ""
    minimum_version: int = 0
    maximum_version: int = 0
    metadata_version: int = 0

    def check(self) -> None:
        if not self.name:
            raise ValueError("an assignor needs a name")
        if not 0 <= self.minimum_version <= self.maximum_version:
            raise ValueError(f"assignor {self.name}: bad version range")
        if not self.minimum_version <= self.metadata_version <= self.maximum_version:
            raise ValueError(f"assignor {self.name}: metadata version outside its range")

    def metadata(self) -> bytes:
        """What this worker tells the computing worker's assignor (sent in the heartbeat)."""
        return b""

    @abstractmethod
    def assign(self, group: ConnectGroupState) -> Mapping[str, WorkerAssignment]:
        """Every worker's new target, by member id (a worker left out gets nothing)."""


@dataclass(frozen=True)
class ConnectorConfig:
    """The configuration a worker has read: connector name -> task count, at `offset`."""

    offset: int = 0
    connectors: Mapping[str, int] = field(default_factory=dict)

    def work(self) -> Work:
        return Work(
            frozenset(self.connectors),
            frozenset((c, t) for c, n in self.connectors.items() for t in range(n)),
        )

    def encode(self) -> bytes:
        return json.dumps(
            {"offset": self.offset, "connectors": dict(sorted(self.connectors.items()))}
        ).encode()

    @staticmethod
    def decode(data: bytes) -> ConnectorConfig | None:
        """None for metadata that is not a configuration (another SDK's, or garbage)."""
        try:
            raw = json.loads(data)
            offset = raw["offset"]
            connectors = raw["connectors"]
            if not isinstance(offset, int) or not isinstance(connectors, dict):
                return None
            if not all(isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in connectors.items()):
                return None
            return ConnectorConfig(offset, dict(connectors))
        except (ValueError, KeyError, TypeError):
            return None


def balance(
    items: Iterable[ItemT],
    owned: Mapping[str, frozenset[ItemT]],
    pinned: Mapping[str, frozenset[ItemT]] | None = None,
    *,
    revoke: bool = True,
) -> dict[str, frozenset[ItemT]]:
    """Spread `items` over the workers of `owned`, each ending with ⌊n/w⌋ or ⌈n/w⌉, moving as
    little as possible: a worker keeps what it owns up to its quota; the ⌈n/w⌉ quotas go to the
    workers that own most (so they give up least); `pinned` items stay where they are whatever
    the quota (held work given back to its returning worker). `revoke=False` (Kafka's rule while
    a departed worker's work is held: no revocation for balance, as the worker may come back):
    every worker keeps all it owns and only unowned items are placed, on the least loaded."""
    everything = frozenset(items)
    workers = sorted(owned)
    if not workers:
        return {}
    pinned = pinned or {}
    fixed = {w: pinned.get(w, frozenset()) & everything for w in workers}
    taken: set[ItemT] = set()
    for f in fixed.values():
        taken.update(f)
    kept: dict[str, list[ItemT]] = {}
    for w in workers:
        mine = sorted((owned[w] & everything) - taken, key=repr)
        kept[w] = [i for i in mine if i not in taken]
        taken.update(kept[w])
    n, count = len(everything), len(workers)
    base, extra = divmod(n, count)
    by_load = sorted(workers, key=lambda w: (-(len(kept[w]) + len(fixed[w])), w))
    quota = {w: base + (1 if i < extra else 0) for i, w in enumerate(by_load)}
    pool = sorted(everything - taken, key=repr)
    if not revoke:
        quota = {w: 0 for w in workers}  # place each item on the least loaded worker
    result: dict[str, list[ItemT]] = {}
    for w in workers:
        room = max(quota[w] - len(fixed[w]), 0) if revoke else len(kept[w])
        result[w] = sorted(fixed[w], key=repr) + kept[w][:room]
        pool.extend(kept[w][room:])  # the excess is revoked and placed elsewhere
    pool.sort(key=repr)
    # The pool goes to the workers furthest below their quota first.
    for item in pool:
        w = min(workers, key=lambda x: (len(result[x]) - quota[x], len(result[x]), x))
        result[w].append(item)
    return {w: frozenset(result[w]) for w in workers}


class IncrementalCooperativeAssignor(ConnectAssignor):
    """Kafka Connect's incremental cooperative assignment (see the module's comment)."""

    name = "incremental"
    minimum_version = 0
    maximum_version = 0
    metadata_version = 0

    def __init__(self, config: Callable[[], ConnectorConfig] | ConnectorConfig | None = None) -> None:
        fixed = config if isinstance(config, ConnectorConfig) else ConnectorConfig()
        self._config: Callable[[], ConnectorConfig] = (
            config if config is not None and not isinstance(config, ConnectorConfig) else (lambda: fixed)
        )

    def metadata(self) -> bytes:
        return self._config().encode()

    def configuration(self, workers: Sequence[WorkerInfo]) -> ConnectorConfig:
        """The newest configuration any worker has read (Connect's leader catches up to it)."""
        best = self._config()
        for w in workers:
            c = ConnectorConfig.decode(w.metadata)
            if c is not None and c.offset > best.offset:
                best = c
        return best

    def assign(self, group: ConnectGroupState) -> dict[str, WorkerAssignment]:
        if not group.workers:
            return {}
        wanted = self.configuration(group.workers).work()
        by_url: dict[str, list[str]] = {}
        for w in group.workers:
            by_url.setdefault(w.url, []).append(w.member_id)
        returned: dict[str, Work] = {}  # held work given back to a worker with the departed URL
        still_held = Work()
        for h in group.held:
            back = by_url.get(h.url)
            if back:
                who = sorted(back)[0]
                returned[who] = returned.get(who, Work()) | (h.work & wanted)
            else:
                still_held = still_held | h.work
        placeable = wanted - still_held
        # Kafka's assignor revokes nothing for balance while a delayed rebalance is pending.
        revoke = not still_held
        owned = {w.member_id: w.target for w in group.workers}
        connectors = balance(
            placeable.connectors,
            {m: t.connectors for m, t in owned.items()},
            {m: r.connectors for m, r in returned.items()},
            revoke=revoke,
        )
        tasks = balance(
            placeable.tasks,
            {m: t.tasks for m, t in owned.items()},
            {m: r.tasks for m, r in returned.items()},
            revoke=revoke,
        )
        return {m: WorkerAssignment(Work(connectors[m], tasks[m])) for m in owned}
