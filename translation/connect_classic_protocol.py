"""Kafka Connect's own group protocol inside a classic group: the JoinGroup metadata a distributed
worker sends (its `WorkerState`) and the SyncGroup assignment the group leader writes for each
worker (Connect `ConnectProtocol`, `IncrementalCooperativeConnectProtocol`, `ExtendedWorkerState`,
`ExtendedAssignment`, `ConnectProtocolCompatibility`; checked against the 4.3.1 runtime jar with
javap and by e2e/java_programs/ConnectProtocolOracle.java). Such a group has protocol type
`connect`; the protocol names are the sub-protocols of `connect.protocol`:

    `default`    (EAGER, ConnectProtocol, header version 0): every worker stops everything at each
                 rebalance and the leader's assignment lists all it is to run;
    `compatible` (COMPATIBLE, IncrementalCooperativeConnectProtocol, version 1, KIP-415);
    `sessioned`  (SESSIONED, the same with version 2, KIP-507: requests between workers signed
                 with a session key the leader writes to the config topic).

A worker offers every sub-protocol its setting allows (sessioned, compatible, default), each with
its own metadata; the coordinator keeps the chosen one's. groupshift reads these to show a
classic Connect cluster's workers with their connectors and tasks and to tell what would block
converting the group to a connect group (issue 32); the encoders give the same bytes back.

Kafka's old `Struct` encoding, non-flexible, big-endian; a string is int16 length then UTF-8 (no
null), an array int32 count (-1: null, where nullable), bytes int32 length (-1: null):

    Metadata     version int16, url string, config-offset int64,
                 v1+: allocation nullable bytes = the worker's current assignment as below, at
                      the metadata's own version (null for a worker that runs nothing yet).
    Assignment   version int16, error int16, leader string, leader-url string,
                 config-offset int64, assignment [connector string, tasks [int32]],
                 v1+: assignment nullable, revoked (the same, nullable), delay int32.

Task `-1` (`ConnectProtocol.CONNECTOR_TASK`) stands for the connector itself. The incremental
protocols' assignments are deltas: `assignment` lists what is newly given, `revoked` what to
stop, `delay` when to rejoin (a scheduled rebalance pending, ms); a worker's allocation in its
metadata is what it runs, leader and offset included as it last received them.

Kafka's readers accept versions above 2 read as version 1's layout (`checkVersionCompatibility`
refuses negative ones only), and so does `decode_*` here (`is_future`). They also tolerate
missing trailing fields (ALLOCATION_V1 and ASSIGNMENT_V1 are built with
`TOLERATE_MISSING_FIELDS_WITH_DEFAULTS`): that is how an incremental worker reads a `default`
v0 assignment. A v0 assignment is decoded as its own layout here; bytes at version 1+ that lack
fields Kafka's writers always write, trailing bytes, a negative string length or non-UTF-8
text raise `ConnectProtocolError` (a `SchemaError`) with the reason and the byte offset: they
could not come back byte-identical.

The order of entries is kept as written. Kafka's writer (`Assignment.asMap`) lists the assigned
connectors in `HashSet` iteration order, then appends each task to its connector's entry in task
order; `revokedAsMap` keeps the revoked connectors' order. `java_hash_set_order` reproduces the
HashSet's order (String.hashCode, the table size `new HashSet<>(collection)` picks, buckets in
index order), so `build_assignment` writes what Kafka's leader would for the same lists.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from translation.bounded_reader import BoundedReader
from translation.embedded_protocol import SchemaError

PROTOCOL_TYPE = "connect"
# ConnectProtocolCompatibility: protocol name -> the metadata / assignment header version.
EAGER, COMPATIBLE, SESSIONED = "default", "compatible", "sessioned"
SUB_PROTOCOL_VERSIONS = {EAGER: 0, COMPATIBLE: 1, SESSIONED: 2}
CONNECT_PROTOCOL_V0, CONNECT_PROTOCOL_V1, CONNECT_PROTOCOL_V2 = 0, 1, 2
LATEST_VERSION = CONNECT_PROTOCOL_V2
CONNECTOR_TASK = -1
NO_ERROR = 0
CONFIG_MISMATCH = 1  # ConnectProtocol.Assignment.CONFIG_MISMATCH: read the config topic, rejoin
MAX_STRING_BYTES = 0x7FFF  # Type.STRING: a length that fits in an int16


class ConnectProtocolError(SchemaError):
    """The bytes are not a Kafka Connect worker metadata / assignment Kafka would write."""


@dataclass(frozen=True, slots=True)
class ConnectorEntry:
    """One `Connector Assignment`: a connector and task numbers, -1 for the connector itself."""

    connector: str
    tasks: tuple[int, ...]


Entries = tuple[ConnectorEntry, ...]


def _connectors(entries: Entries | None) -> tuple[str, ...]:
    return tuple(e.connector for e in entries or () for t in e.tasks if t == CONNECTOR_TASK)


def _tasks(entries: Entries | None) -> tuple[tuple[str, int], ...]:
    return tuple((e.connector, t) for e in entries or () for t in e.tasks if t != CONNECTOR_TASK)


@dataclass(frozen=True, slots=True)
class ConnectAssignment:
    """What the leader wrote for one worker (ConnectProtocol.Assignment, ExtendedAssignment).
    `assigned` / `revoked` are None only where Kafka's reader reads a null array (v1+)."""

    version: int
    error: int
    leader: str
    leader_url: str
    config_offset: int
    assigned: Entries | None
    revoked: Entries | None = None
    delay: int = 0

    @property
    def is_future(self) -> bool:
        return self.version > LATEST_VERSION

    @property
    def connectors(self) -> tuple[str, ...]:
        """The connectors assigned, as Kafka's `extractConnectors` reads them."""
        return _connectors(self.assigned)

    @property
    def tasks(self) -> tuple[tuple[str, int], ...]:
        """The tasks assigned as (connector, task number): Connect's ConnectorTaskId."""
        return _tasks(self.assigned)

    @property
    def revoked_connectors(self) -> tuple[str, ...]:
        return _connectors(self.revoked)

    @property
    def revoked_tasks(self) -> tuple[tuple[str, int], ...]:
        return _tasks(self.revoked)


@dataclass(frozen=True, slots=True)
class ConnectWorkerMetadata:
    """A worker's JoinGroup metadata for one sub-protocol (WorkerState / ExtendedWorkerState)."""

    version: int
    url: str
    config_offset: int
    # v1+: what the worker runs (its last assignment, accumulated); None: nothing yet.
    allocation: ConnectAssignment | None = None

    @property
    def is_future(self) -> bool:
        return self.version > LATEST_VERSION

    @property
    def connectors(self) -> tuple[str, ...]:
        return () if self.allocation is None else self.allocation.connectors

    @property
    def tasks(self) -> tuple[tuple[str, int], ...]:
        return () if self.allocation is None else self.allocation.tasks


def task_name(task: tuple[str, int]) -> str:
    """`connector-N`, as Connect's ConnectorTaskId prints and its REST API names tasks."""
    return f"{task[0]}-{task[1]}"


# -- reading -------------------------------------------------------------------------------------

_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")


class _Reader(BoundedReader):
    __slots__ = ()
    error = ConnectProtocolError

    def string(self, name: str) -> str:
        n = self.int16()
        if n < 0:
            raise self.fail(f"{name}: string length {n} (Type.STRING is never null)")
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{name} is not UTF-8: {e.reason}") from None

    def entries(self, name: str, nullable: bool) -> Entries | None:
        n = self.int32()
        if n < 0:
            if nullable and n == -1:
                return None
            raise self.fail(f"{name}: array count {n}")
        # each entry is at least a 2-byte string length and a 4-byte task count
        if n * 6 > self.remaining:
            raise self.fail(f"{name}: count {n} exceeds the remaining {self.remaining} bytes")
        out = []
        for _ in range(n):
            connector = self.string(f"{name} connector")
            count = self.int32()
            if count < 0 or count * 4 > self.remaining:
                raise self.fail(f"{name}: task count {count} for connector {connector!r}")
            tasks = struct.unpack(f">{count}i", self.take(4 * count))
            out.append(ConnectorEntry(connector, tasks))
        return tuple(out)


def _version(r: _Reader) -> int:
    version = r.int16()
    if version < CONNECT_PROTOCOL_V0:  # checkVersionCompatibility
        raise r.fail(f"Unsupported subscription version: {version}")
    return version


def _assignment_body(r: _Reader, version: int) -> ConnectAssignment:
    error = r.int16()
    leader = r.string("leader")
    leader_url = r.string("leader-url")
    offset = r.int64()
    if version == CONNECT_PROTOCOL_V0:
        return ConnectAssignment(version, error, leader, leader_url, offset, r.entries("assignment", False))
    assigned = r.entries("assignment", True)
    if not r.remaining:
        raise r.fail("no revoked field: Kafka's writer always writes revoked and delay from version 1")
    revoked = r.entries("revoked", True)
    delay = r.int32()
    return ConnectAssignment(version, error, leader, leader_url, offset, assigned, revoked, delay)


def decode_assignment(data: bytes) -> ConnectAssignment:
    """A SyncGroup assignment of a `connect` group (any sub-protocol: the header says which)."""
    r = _Reader(bytes(data), "Kafka Connect assignment")
    out = _assignment_body(r, _version(r))
    r.done()
    return out


def decode_metadata(data: bytes) -> ConnectWorkerMetadata:
    """A worker's JoinGroup metadata of a `connect` group's sub-protocol."""
    r = _Reader(bytes(data), "Kafka Connect worker metadata")
    version = _version(r)
    url = r.string("url")
    offset = r.int64()
    if version == CONNECT_PROTOCOL_V0:
        r.done()
        return ConnectWorkerMetadata(version, url, offset)
    if not r.remaining:
        raise r.fail("no allocation field: Kafka's writer always writes it from version 1")
    n = r.int32()
    allocation = None
    if n != -1:
        if n < 0:
            raise r.fail(f"allocation: bytes length {n}")
        raw = r.take(n)
        inner = _Reader(raw, "Kafka Connect worker metadata allocation")
        allocation = _assignment_body(inner, _version(inner))
        inner.done()
        if allocation.version == CONNECT_PROTOCOL_V0:
            raise r.fail("a version 0 allocation (Kafka writes the allocation at version 1 or 2)")
    r.done()
    return ConnectWorkerMetadata(version, url, offset, allocation)


# -- writing -------------------------------------------------------------------------------------


class _Writer:
    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def int16(self, v: int) -> None:
        self.out += _h.pack(v)

    def int32(self, v: int) -> None:
        self.out += _i.pack(v)

    def int64(self, v: int) -> None:
        self.out += _q.pack(v)

    def string(self, s: str) -> None:
        raw = s.encode("utf-8")
        if len(raw) > MAX_STRING_BYTES:
            raise ConnectProtocolError(f"string of {len(raw)} bytes is longer than Type.STRING allows")
        self.int16(len(raw))
        self.out += raw

    def entries(self, entries: Entries | None) -> None:
        if entries is None:
            self.int32(-1)
            return
        self.int32(len(entries))
        for e in entries:
            self.string(e.connector)
            self.int32(len(e.tasks))
            for t in e.tasks:
                self.int32(t)


def _write_assignment(w: _Writer, a: ConnectAssignment) -> None:
    w.int16(a.version)
    w.int16(a.error)
    w.string(a.leader)
    w.string(a.leader_url)
    w.int64(a.config_offset)
    if a.version == CONNECT_PROTOCOL_V0:
        if a.assigned is None or a.revoked is not None or a.delay:
            raise ConnectProtocolError(
                "a version 0 assignment has a non-null assignment and no revoked or delay"
            )
        w.entries(a.assigned)
        return
    w.entries(a.assigned)
    w.entries(a.revoked)
    w.int32(a.delay)


def encode_assignment(a: ConnectAssignment) -> bytes:
    """The bytes Connect's leader writes for `a` at `a.version`."""
    w = _Writer()
    _write_assignment(w, a)
    return bytes(w.out)


def encode_metadata(m: ConnectWorkerMetadata) -> bytes:
    """The bytes a Connect worker sends as its metadata at `m.version`."""
    w = _Writer()
    w.int16(m.version)
    w.string(m.url)
    w.int64(m.config_offset)
    if m.version == CONNECT_PROTOCOL_V0:
        if m.allocation is not None:
            raise ConnectProtocolError("version 0 metadata has no allocation")
        return bytes(w.out)
    if m.allocation is None:
        w.int32(-1)
    else:
        inner = _Writer()
        _write_assignment(inner, m.allocation)
        w.int32(len(inner.out))
        w.out += inner.out
    return bytes(w.out)


# -- Kafka's order ---------------------------------------------------------------------------------


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as an unsigned 32-bit value."""
    h = 0
    raw = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(raw), 2):
        h = (31 * h + (raw[i] << 8 | raw[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_set_order(items: Sequence[str]) -> list[str]:
    """The iteration order of `new HashSet<>(items)` (Java 8+ HashMap): buckets in index order,
    each in insertion order. The table starts at the power of two at or above
    max(size / 0.75 + 1, 16) and doubles when a bucket reaches 9 entries while smaller than 64
    (treeifyBin). Not modelled: tree bins (9+ colliding names in a table of 64+, so 48+ names),
    whose order is kept as inserted here."""
    initial = max(int(len(items) / 0.75) + 1, 16)
    cap = 1
    while cap < initial:
        cap <<= 1
    buckets: dict[int, list[tuple[int, str]]] = {}
    seen: set[str] = set()
    for s in items:
        if s in seen:
            continue
        seen.add(s)
        h = java_string_hash(s)
        h ^= h >> 16
        buckets.setdefault(h & (cap - 1), []).append((h, s))
        while cap < 64 and len(buckets[h & (cap - 1)]) > 8:
            cap <<= 1
            old = [buckets[i] for i in sorted(buckets)]
            buckets = {}
            for chain in old:
                for hh, ss in chain:
                    buckets.setdefault(hh & (cap - 1), []).append((hh, ss))
    return [s for i in sorted(buckets) for _, s in buckets[i]]


def _as_map(connectors: Iterable[str], tasks: Iterable[tuple[str, int]], hashed: bool) -> Entries:
    order: dict[str, list[int]] = {}
    names = list(connectors)
    for c in java_hash_set_order(names) if hashed else list(dict.fromkeys(names)):
        order.setdefault(c, []).append(CONNECTOR_TASK)
    for c, t in tasks:
        order.setdefault(c, []).append(t)
    return tuple(ConnectorEntry(c, tuple(ts)) for c, ts in order.items())


def build_assignment(
    version: int,
    leader: str,
    leader_url: str,
    config_offset: int,
    connectors: Iterable[str],
    tasks: Iterable[tuple[str, int]],
    revoked_connectors: Iterable[str] = (),
    revoked_tasks: Iterable[tuple[str, int]] = (),
    delay: int = 0,
    error: int = NO_ERROR,
) -> ConnectAssignment:
    """The assignment Connect's leader writes for these lists (`Assignment.asMap`: connectors
    in HashSet order, then tasks in order; `revokedAsMap`: distinct revoked connectors in order,
    then revoked tasks)."""
    assigned = _as_map(connectors, tasks, hashed=True)
    if version == CONNECT_PROTOCOL_V0:
        return ConnectAssignment(version, error, leader, leader_url, config_offset, assigned)
    revoked = _as_map(revoked_connectors, revoked_tasks, hashed=False)
    return ConnectAssignment(version, error, leader, leader_url, config_offset, assigned, revoked, delay)
