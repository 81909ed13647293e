"""Invariant checks over VerifiableConsumer event streams (one stream per client process).

Every client of a matrix cell prints the events of Kafka's `VerifiableConsumer`
(`partitions_assigned`, `partitions_revoked`, `records_consumed`, `offsets_committed`,
`shutdown_complete`, each with a `timestamp` in ms); the runner adds when the process exited.
The checks judge a finished cell from these streams alone, the same way for every client
library, runtime and backend:

* **Ownership windows** (`ownership_windows`): a member owns partition p from the
  `partitions_assigned` event that gave it p until the `partitions_revoked` event that took it
  (KIP-429 lost partitions are reported as revoked, as the Java listener does), its
  `shutdown_requested` (it stops polling then; if it still reports records after that, its last
  `records_consumed`), its `shutdown_complete`, or the moment its process exited (a SIGKILLed
  process reads nothing more), whichever comes first. Closing consumers before KIP-429
  (Java < 2.4) leave the group without a revocation callback, so the server may hand their
  partitions over before `shutdown_complete` is printed; they stopped processing at
  `shutdown_requested`. Likewise a revocation printed while closing ends nothing later than
  that: a close that stalls past `max.poll.interval.ms` (seen once with librdkafka against
  Kafka 4, 45 s) lets the coordinator hand the partitions over before the callback runs.
* **No partition owned by two members at once** (`check_no_overlap`): windows of different
  members on one partition never overlap.
* **Reads inside ownership** (`check_reads_within_windows`): a member only reports records of a
  partition inside one of its own windows.
* **Every acknowledged record consumed** (`check_all_consumed`): each (partition, offset) the
  producer saw acknowledged lies in some `records_consumed` range.
* **Duplicates only after a hand-over** (`check_duplicates`): an offset read again is read in a
  window that began after the previous read (a rebalance came in between; one window never
  reads an offset twice), and at or beyond the highest offset successfully committed for that
  partition before the window began (committed records are never delivered again).
* **Commits monotonic** (`check_commits_monotonic`): per partition, successful commits in time
  order never go backwards.

Each check returns a list of violations (empty when the stream is fine), worded for a person.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class MemberLog:
    """One client process of a cell: its events and when it exited (seconds, wall clock)."""

    name: str
    client: str = ""
    protocol: str = "classic"
    instance_id: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    exited_at: float | None = None

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("name") == name]


@dataclass(frozen=True)
class Window:
    member: str
    partition: int
    start: float
    end: float


@dataclass(frozen=True)
class Read:
    t: float
    member: str
    partition: int
    offset: int


def _t(event: Mapping[str, Any]) -> float:
    return float(event["timestamp"]) / 1000.0


def _partitions(event: Mapping[str, Any]) -> list[int]:
    return [int(p["partition"]) for p in event.get("partitions", [])]


def ownership_windows(members: Iterable[MemberLog], end_of_run: float) -> dict[int, list[Window]]:
    """partition -> every member's ownership windows, sorted by start."""
    out: dict[int, list[Window]] = defaultdict(list)
    for m in members:
        open_: dict[int, float] = {}
        end = end_of_run if m.exited_at is None else min(m.exited_at, end_of_run)
        stopped = end_of_run  # when it stopped processing: its last read after shutdown_requested
        stopping = next((_t(e) for e in m.events if e.get("name") == "shutdown_requested"), None)
        if stopping is not None:
            stopped = max((_t(e) for e in m.named("records_consumed") if _t(e) >= stopping), default=stopping)
            end = min(end, stopped)
        for e in m.events:
            name = e.get("name")
            if name == "partitions_assigned":
                for p in _partitions(e):
                    open_.setdefault(p, _t(e))
            elif name == "partitions_revoked":
                # a revocation printed while closing ends the window no later than `stopped`
                for p in _partitions(e):
                    if p in open_:
                        start = open_.pop(p)
                        out[p].append(Window(m.name, p, start, max(start, min(_t(e), stopped))))
            elif name == "shutdown_complete":
                end = min(end, _t(e))
        for p, start in open_.items():
            out[p].append(Window(m.name, p, start, max(start, end)))
    for ws in out.values():
        ws.sort(key=lambda w: (w.start, w.end))
    return dict(out)


def reads(members: Iterable[MemberLog]) -> list[Read]:
    """Every offset each member reported consumed (records_consumed ranges, expanded)."""
    out = []
    for m in members:
        for e in m.named("records_consumed"):
            t = _t(e)
            for s in e.get("partitions", []):
                for o in range(int(s["minOffset"]), int(s["maxOffset"]) + 1):
                    out.append(Read(t, m.name, int(s["partition"]), o))
    out.sort(key=lambda r: r.t)
    return out


def check_no_overlap(windows: Mapping[int, list[Window]]) -> list[str]:
    """Every pair of overlapping windows of different members (shared with e2e/migration.py)."""
    bad = []
    for p, ws in sorted(windows.items()):
        for i, a in enumerate(ws):
            for b in ws[i + 1 :]:
                if b.start >= a.end:
                    break
                if a.member != b.member:
                    bad.append(
                        f"partition {p} held by {a.member} [{a.start:.3f}, {a.end:.3f}] and "
                        f"{b.member} [{b.start:.3f}, {b.end:.3f}] at the same time"
                    )
    return bad


def _member_windows(windows: Mapping[int, list[Window]]) -> dict[tuple[str, int], list[Window]]:
    out: dict[tuple[str, int], list[Window]] = defaultdict(list)
    for ws in windows.values():
        for w in ws:
            out[(w.member, w.partition)].append(w)
    return out


def check_reads_within_windows(windows: Mapping[int, list[Window]], rs: Iterable[Read]) -> list[str]:
    own = _member_windows(windows)
    bad = []
    for r in rs:
        if not any(w.start <= r.t <= w.end for w in own.get((r.member, r.partition), [])):
            bad.append(
                f"{r.member} consumed partition {r.partition} offset {r.offset} at {r.t:.3f}, "
                "outside its ownership of that partition"
            )
            if len(bad) >= 5:
                break
    return bad


def check_all_consumed(acked: Iterable[tuple[int, int]], rs: Iterable[Read]) -> list[str]:
    seen = {(r.partition, r.offset) for r in rs}
    missing = sorted(set(acked) - seen)
    if not missing:
        return []
    return [f"{len(missing)} acknowledged records never consumed, e.g. (partition, offset) {missing[:5]}"]


def successful_commits(members: Iterable[MemberLog]) -> list[tuple[float, str, int, int]]:
    """(time, member, partition, offset) of every commit the coordinator acknowledged."""
    out = []
    for m in members:
        for e in m.named("offsets_committed"):
            if e.get("success", True):
                for o in e.get("offsets", []):
                    out.append((_t(e), m.name, int(o["partition"]), int(o["offset"])))
    out.sort(key=lambda c: c[0])
    return out


def check_duplicates(
    windows: Mapping[int, list[Window]], rs: Iterable[Read], members: Iterable[MemberLog]
) -> tuple[int, list[str]]:
    """(number of duplicate reads, violations)."""
    own = _member_windows(windows)
    commits: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for t, _, p, o in successful_commits(members):
        commits[p].append((t, o))
    by_offset: dict[tuple[int, int], list[Read]] = defaultdict(list)
    for r in sorted(rs, key=lambda r: r.t):
        by_offset[(r.partition, r.offset)].append(r)
    duplicates, bad = 0, []
    for (p, o), readings in sorted(by_offset.items()):
        for before, again in itertools.pairwise(readings):
            duplicates += 1
            w = next((w for w in own.get((again.member, p), []) if w.start <= again.t <= w.end), None)
            if w is None:
                continue  # reported by check_reads_within_windows
            if w.start < before.t:
                bad.append(
                    f"partition {p} offset {o} consumed twice within one ownership window of "
                    f"{again.member} (first by {before.member} at {before.t:.3f}, again at {again.t:.3f})"
                )
            committed = max((c for t, c in commits[p] if t < w.start), default=0)
            if o < committed:
                bad.append(
                    f"partition {p} offset {o} delivered again to {again.member} although offset "
                    f"{committed} was committed before its ownership began"
                )
            if len(bad) >= 5:
                return duplicates, bad
    return duplicates, bad


def check_commits_monotonic(members: Iterable[MemberLog]) -> list[str]:
    return commits_going_back(successful_commits(members))


def commits_going_back(commits: Iterable[tuple[float, str, int, int]]) -> list[str]:
    """(time, member, partition, offset) acknowledged commits in time order -> every commit
    that moved a partition back (shared with e2e/migration.py's checkers)."""
    last: dict[int, tuple[int, str]] = {}
    bad = []
    for _, member, p, o in commits:
        prev = last.get(p)
        if prev is not None and o < prev[0]:
            bad.append(f"partition {p}: {member} committed {o} after {prev[1]} had committed {prev[0]}")
        last[p] = (o, member)
    return bad[:5]


@dataclass
class Verdict:
    violations: list[str]
    records: int
    reads: int
    duplicates: int
    handovers: int
    windows: dict[int, list[Window]]


def judge(members: list[MemberLog], acked: Iterable[tuple[int, int]], end_of_run: float) -> Verdict:
    """Run every check over a finished cell."""
    acked = list(acked)
    windows = ownership_windows(members, end_of_run)
    rs = reads(members)
    violations = check_no_overlap(windows)
    violations += check_reads_within_windows(windows, rs)
    violations += check_all_consumed(acked, rs)
    duplicates, dup_bad = check_duplicates(windows, rs, members)
    violations += dup_bad
    violations += check_commits_monotonic(members)
    handovers = sum(max(len(ws) - 1, 0) for ws in windows.values())
    return Verdict(violations, len(acked), len(rs), duplicates, handovers, windows)
