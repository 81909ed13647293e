"""Partition assignments: `topic id -> partitions`, with the order a member acquired them.

An assignment is a plain dict that is never mutated once built (every change builds a new one),
so members and target entries can share it freely. Partition order is meaningful only for
stickiness: assignors keep the partitions a member has held longest and revoke the newest ones.
Order is written into records and restored by replay, so live and replayed state agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NoReturn, TypeVar, cast

from engine.metadata import TopicId
from records.consumer_group import TopicPartitions

Assignment = Mapping[TopicId, tuple[int, ...]]
PartitionEpochs = Mapping[TopicId, Mapping[int, int]]
"""`topic id -> partition -> epoch`: the epoch at which a member was given each partition it
holds (Kafka 4.3+ `ConsumerGroupMember` assignment epochs)."""

_V = TypeVar("_V")
_K = TypeVar("_K")


class _Empty(dict[TopicId, _V]):
    """A shared empty mapping: hashable (usable as a dataclass default) and read-only."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return 0

    # One method per mutator, not `__setitem__ = ... = _readonly` in the class body: mypyc (the
    # compiled build, scripts/compiled_tests.sh) cannot compile a multiple assignment there.
    def _readonly(self) -> NoReturn:
        raise TypeError("the empty assignment is read-only")

    def __setitem__(self, key: TopicId, value: _V) -> None:
        self._readonly()

    def __delitem__(self, key: TopicId) -> None:
        self._readonly()

    def update(self, *args: object, **kwargs: object) -> None:
        self._readonly()

    def pop(self, *args: object, **kwargs: object) -> _V:
        self._readonly()

    def popitem(self, *args: object, **kwargs: object) -> tuple[TopicId, _V]:
        self._readonly()

    def clear(self, *args: object, **kwargs: object) -> None:
        self._readonly()

    def setdefault(self, *args: object, **kwargs: object) -> _V:
        self._readonly()


EMPTY: Assignment = _Empty[tuple[int, ...]]()
EMPTY_EPOCHS: PartitionEpochs = _Empty[Mapping[int, int]]()


def to_records(assignment: Assignment, epochs: PartitionEpochs | None = None) -> tuple[TopicPartitions, ...]:
    """Record form; with `epochs` (record type 8), each partition's assignment epoch too."""
    if epochs is None:
        return tuple(TopicPartitions(t, p) for t, p in assignment.items() if p)
    return tuple(TopicPartitions(t, p, tuple(epochs[t][q] for q in p)) for t, p in assignment.items() if p)


def epochs_from_records(tps: Iterable[TopicPartitions], default: int) -> dict[TopicId, dict[int, int]]:
    """Kafka `Utils.assignmentFromTopicPartitions`: the stored epochs, or `default` (the member
    epoch, at least 0) for a topic whose record has none or a list of the wrong length."""
    default = max(default, 0)
    out: dict[TopicId, dict[int, int]] = {}
    for tp in tps:
        epochs = tp.assignment_epochs
        into = out.setdefault(tp.topic_id, {})
        if epochs is not None and len(epochs) == len(tp.partitions):
            into.update(zip(tp.partitions, epochs, strict=True))
        else:
            into.update(dict.fromkeys(tp.partitions, default))
    return out


def carry_epochs(
    epochs: PartitionEpochs, assigned: Assignment, pending: Assignment, member_epoch: int
) -> PartitionEpochs:
    """The epochs for a member now holding `assigned` and `pending`: a partition it held keeps
    its epoch; a partition new to it gets `member_epoch` (at least 0), the epoch it moves to
    when it is given partitions (Kafka `CurrentAssignmentBuilder`). `epochs` itself when it
    already covers exactly those partitions, so an unchanged assignment costs one pass."""
    count = 0
    covered = True
    for part in (assigned, pending):
        for t, ps in part.items():
            have = epochs.get(t)
            count += len(ps)
            if covered and ps and (have is None or any(p not in have for p in ps)):
                covered = False
    if covered and count == sum(len(e) for e in epochs.values()):
        return epochs
    if count == 0:
        return EMPTY_EPOCHS
    # The entries through `object`-typed views, the new ones `shared_epoch`'s: in the compiled
    # build an `int` read from `epochs` and stored into `out` would be a new int object per entry
    # (`_epochs`), for every member whose assignment changes.
    default = shared_epoch_object(max(member_epoch, 0))
    out: dict[TopicId, dict[int, int]] = {}
    for part in (assigned, pending):
        for t, ps in part.items():
            if not ps:
                continue
            held = cast("Mapping[int, object]", epochs.get(t, {}))
            into = cast("dict[int, object]", out.setdefault(t, {}))
            for p in ps:
                into[p] = held.get(p, default)
    return out


def shared(new: Assignment, *candidates: Assignment) -> Assignment:
    """`new`, or an equal assignment already held (the member's previous one, its target), or
    the empty singleton: replaying a member's records must not leave a copy of an assignment the
    group already holds. A group keeps a member's target and its current assignment, equal
    once it is reconciled; sharing the object makes that one dict and its tuples, not two, and
    keeps the memory a group of stable members uses from drifting with the order its records
    were replayed in (issue 27's soak)."""
    if not new:
        return EMPTY
    for candidate in candidates:
        if candidate is new or (candidate and candidate == new):
            return candidate
    return new


EPOCH_INTERN_MAX = 4096
"""How many epoch values `shared_epoch` keeps: its table is at most this many entries (about
400 KB), whatever the number of groups and members."""

_epochs: dict[object, object] = {}
"""The shared epoch objects, by value. Typed `object`, keys and values, so that the compiled build
(setup.py: mypyc) keeps them as the Python int objects they are: mypyc turns an `int` it reads
into a native integer and boxes a new int object each time it stores one, in a dict or a return
value, which would make every entry a copy (docs/benchmarks.md, the compiled build)."""


def _shared_object(epoch: object) -> object:
    """The table's object for `epoch`'s value, `epoch` itself the first time: `shared_epoch`'s
    lookup on Python objects, so that no native integer is boxed anew on the way."""
    known = _epochs.get(epoch)
    if known is not None:
        return known
    if len(_epochs) >= EPOCH_INTERN_MAX:
        del _epochs[next(iter(_epochs))]
    _epochs[epoch] = epoch
    return epoch


def shared_epoch_object(epoch: int) -> object:
    """`shared_epoch`'s object for `epoch`, typed `object` for code that stores it into a
    partition-epoch dict: the compiled build keeps an `object` as the Python object it is, where
    an `int` result would be boxed afresh on the way into the dict."""
    if -5 <= epoch <= 256:
        return epoch
    return _shared_object(epoch)


def shared_epoch(epoch: int) -> int:
    """`epoch` as the one int object the process keeps for its value (as `sys.intern` does for
    strings). Past Python's small-int cache (-5..256) every epoch decoded from a record or
    computed by a handler (`group_epoch + 1`) is an int object of its own, and each group's
    members held their own objects for the same values: as group epochs passed 256 a soak of
    10,000 members in 100 groups gained thousands of 32-byte objects, one per (group, epoch)
    pair members still held (issue 27). The table keeps at most `EPOCH_INTERN_MAX` values and
    forgets the one it learned first when full: epochs only grow, so the oldest value is the one
    least likely to be set again. A forgotten value still held by members is only shared less
    (the next member given it gets a new object); nothing else depends on identity.

    In the compiled build an `int` attribute of a compiled class holds no int object at all (a
    native integer in the instance), so there the sharing that matters is `shared_epochs`'s, of
    the epochs held in dicts."""
    return cast(int, shared_epoch_object(epoch))


def shared_epochs(epochs: dict[_K, dict[int, int]]) -> dict[_K, dict[int, int]]:
    """`epochs` (a new, unshared mapping) with each partition's epoch made `shared_epoch`'s, in
    place. The entries are read and written through an `object`-typed view of each dict: the
    compiled build would otherwise store a new int object for every entry it writes, the
    per-entry copies this exists to remove (tests/test_epoch_sharing.py runs against both
    builds)."""
    for parts in epochs.values():
        held = cast("dict[int, object]", parts)
        for p, e in parts.items():
            if e > 256:
                held[p] = _shared_object(held[p])
    return epochs


def from_records(tps: Iterable[TopicPartitions]) -> dict[TopicId, tuple[int, ...]]:
    out: dict[TopicId, tuple[int, ...]] = {}
    for tp in tps:
        if tp.partitions:
            prev = out.get(tp.topic_id)
            out[tp.topic_id] = (
                tuple(tp.partitions)
                if prev is None
                else prev + tuple(p for p in tp.partitions if p not in prev)
            )
    return out


def size(assignment: Assignment) -> int:
    return sum(len(p) for p in assignment.values())


def same(a: Assignment, b: Assignment) -> bool:
    """Equal as sets of partitions (order ignored)."""
    if a is b:
        return True
    ka = [t for t, p in a.items() if p]
    kb = [t for t, p in b.items() if p]
    if len(ka) != len(kb):
        return False
    for t in ka:
        pb = b.get(t)
        pa = a[t]
        if pb is None or len(pa) != len(pb) or set(pa) != set(pb):
            return False
    return True


def is_subset(owned: Sequence[TopicPartitions] | None, assigned: Assignment) -> bool:
    """Kafka `isSubset`: every owned partition is in `assigned` (null owned -> False)."""
    if owned is None:
        return False
    for tp in owned:
        parts = assigned.get(tp.topic_id)
        if parts is None:
            if tp.partitions:
                return False
            continue
        s = set(parts)
        for p in tp.partitions:
            if p not in s:
                return False
    return True


def owned_to_assignment(owned: Sequence[TopicPartitions]) -> dict[TopicId, tuple[int, ...]]:
    return from_records(owned)


def union(a: Assignment, b: Assignment) -> dict[TopicId, tuple[int, ...]]:
    out = dict(a)
    for t, parts in b.items():
        if not parts:
            continue
        prev = out.get(t)
        if prev is None:
            out[t] = parts
        else:
            seen = set(prev)
            out[t] = prev + tuple(p for p in parts if p not in seen)
    return out


def format_assignment(assignment: Assignment, names: Mapping[TopicId, str]) -> str:
    """`[foo-0, foo-1]`: the KIP case studies' notation."""
    items = [f"{names.get(t, str(t))}-{p}" for t, parts in assignment.items() for p in parts]
    return "[" + ", ".join(items) + "]"
