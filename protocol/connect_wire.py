"""The wire of Connect groups on the new protocol (the Connect draft summarised in docs/connect-groups.md).

The draft puts Kafka Connect workers on KIP-848's protocol: a `connect` group type, a
ConnectGroupHeartbeat through which workers report what they own and receive what to run, and
ConnectGroupPrepareAssignment / ConnectGroupInstallAssignment through which the worker the
coordinator picks computes the group's assignment with its Connect assignor. Kafka never built
it, so these are groupshift extension APIs with keys next to the client-side assignors' (32000,
32001): `CONNECT_HEARTBEAT_KEY` 32002, `CONNECT_PREPARE_KEY` 32003, `CONNECT_INSTALL_KEY` 32004,
each v0 and flexible (request header v2, response header v1). docs/connect-groups.md is the
reference of every field.

Where the draft is open or garbled, groupshift decides: COMPUTE_ASSIGNMENT is a response field
(the epoch to compute for, -1 for none) rather than an error code Kafka never defined, so the
heartbeat that asks also carries the member's epoch and assignment; a task is named by its
connector and its task number, as Connect's `ConnectorTaskId`.

This module only knows bytes; it reads and writes them with the reader and writer every
extension API shares (`protocol.extension_wire`: the primitives, the assignor entry, the
PrepareAssignment and InstallAssignment heads), every length bounded by the frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol import client_assignment_wire as caw
from protocol import extension_wire as ew
from protocol.extension_wire import BoundedReader
from protocol.extension_wire import MalformedExtension as MalformedExtension
from protocol.extension_wire import read_assignor as read_assignor
from protocol.extension_wire import write_assignor as write_assignor

CONNECT_HEARTBEAT_KEY = 32002
"""ConnectGroupHeartbeat (Kafka's keys are below 100; 32000+ are groupshift's)."""
CONNECT_PREPARE_KEY = 32003
"""ConnectGroupPrepareAssignment."""
CONNECT_INSTALL_KEY = 32004
"""ConnectGroupInstallAssignment."""
CONNECT_EXTENSION_NAMES = {
    CONNECT_HEARTBEAT_KEY: "ConnectGroupHeartbeat",
    CONNECT_PREPARE_KEY: "ConnectGroupPrepareAssignment",
    CONNECT_INSTALL_KEY: "ConnectGroupInstallAssignment",
}
EXTENSION_NAMES = {**caw.EXTENSION_NAMES, **CONNECT_EXTENSION_NAMES}
"""Every groupshift extension API by key (client-side assignors and Connect groups)."""
NO_COMPUTE = -1
"""`ComputeAssignment` when the member is not asked to compute."""


@dataclass(frozen=True, slots=True, order=True)
class WireTask:
    """Connect's `ConnectorTaskId`: a connector's name and the task's number."""

    connector: str
    task: int


@dataclass(frozen=True, slots=True)
class WireWork:
    """Connectors and tasks (what a worker owns, or is assigned)."""

    connectors: tuple[str, ...] = ()
    tasks: tuple[WireTask, ...] = ()


WireConnectAssignor = ew.WireAssignor
"""One entry of the heartbeat's assignor list (the draft's `Assignor`, KIP-848's struct)."""


@dataclass(frozen=True, slots=True)
class ConnectHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int  # 0 joins, -1 leaves
    rebalance_timeout_ms: int = -1  # -1: unchanged
    url: str | None = None  # the worker's REST URL; null: unchanged
    config_offset: int = -1  # the config topic offset the worker has read; -1: unchanged
    assignors: tuple[WireConnectAssignor, ...] | None = None  # null: unchanged
    owned: WireWork | None = None  # null: unchanged


@dataclass(frozen=True, slots=True)
class WireConnectAssignment:
    work: WireWork
    metadata_version: int = 0
    metadata: bytes = b""


@dataclass(frozen=True, slots=True)
class ConnectHeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    compute_assignment: int = NO_COMPUTE
    assignment: WireConnectAssignment | None = None
    throttle_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class ConnectPrepareRequest:
    group_id: str
    member_id: str
    member_epoch: int


@dataclass(frozen=True, slots=True)
class PreparedWorker:
    member_id: str
    member_epoch: int
    url: str
    config_offset: int
    reason: int
    metadata_version: int
    metadata: bytes
    target: WireWork


@dataclass(frozen=True, slots=True)
class DelayedWork:
    """A departed worker's work, held for it until `remaining_ms` have passed."""

    member_id: str
    url: str
    remaining_ms: int
    work: WireWork


@dataclass(frozen=True, slots=True)
class ConnectPrepareResponse:
    error_code: int = 0
    error_message: str | None = None
    group_epoch: int = -1
    assignor_name: str = ""
    members: tuple[PreparedWorker, ...] = ()
    delayed: tuple[DelayedWork, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class InstalledWorker:
    member_id: str
    work: WireWork
    metadata_version: int = 0
    metadata: bytes = b""


@dataclass(frozen=True, slots=True)
class ConnectInstallRequest:
    group_id: str
    member_id: str
    member_epoch: int
    group_epoch: int
    error: int
    members: tuple[InstalledWorker, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ConnectInstallResponse:
    error_code: int = 0
    error_message: str | None = None
    throttle_time_ms: int = 0


# --- reading ---------------------------------------------------------------------------------


def _strings(r: BoundedReader) -> tuple[str, ...]:
    n = r.array_count()
    if n < 0:
        raise MalformedExtension("null string array")
    return tuple(r.string() for _ in range(n))


def _work(r: BoundedReader) -> WireWork:
    """`Work => [Connectors string] [Tasks => Connector string, Task int32, TAG_BUFFER] TAG_BUFFER`"""
    connectors = _strings(r)
    n = r.array_count()
    if n < 0:
        raise MalformedExtension("null task array")
    tasks = []
    for _ in range(n):
        tasks.append(WireTask(r.string(), r.int32()))
        r.skip_tags()
    r.skip_tags()
    return WireWork(connectors, tuple(tasks))


read_work = _work


def _nullable_work(r: BoundedReader) -> WireWork | None:
    """A nullable struct: int8 -1 for null, 1 then the struct."""
    return _work(r) if r.present() else None


def read_heartbeat_request(frame: bytes, body_offset: int) -> ConnectHeartbeatRequest:
    r = BoundedReader(frame, body_offset)
    group_id, member_id, epoch, timeout = r.string(), r.string(), r.int32(), r.int32()
    url = r.nullable_string()
    config_offset = r.int64()
    assignors: tuple[WireConnectAssignor, ...] | None = None
    n = r.array_count()
    if n >= 0:
        assignors = tuple(read_assignor(r) for _ in range(n))
    owned = _nullable_work(r)
    r.end_of_body()
    return ConnectHeartbeatRequest(group_id, member_id, epoch, timeout, url, config_offset, assignors, owned)


def read_prepare_request(frame: bytes, body_offset: int) -> ConnectPrepareRequest:
    r = BoundedReader(frame, body_offset)
    req = ConnectPrepareRequest(*ew.read_member_request(r))
    r.end_of_body()
    return req


def read_install_request(frame: bytes, body_offset: int) -> ConnectInstallRequest:
    r = BoundedReader(frame, body_offset)
    group_id, member_id, member_epoch, group_epoch, error, n = ew.read_install_head(r)
    members = []
    for _ in range(n):
        members.append(InstalledWorker(r.string(), _work(r), r.int16(), r.bytes_()))
        r.skip_tags()
    r.end_of_body()
    return ConnectInstallRequest(group_id, member_id, member_epoch, group_epoch, error, tuple(members))


# --- writing ---------------------------------------------------------------------------------


def write_work(w: WireWork) -> bytes:
    out = [ew.count(len(w.connectors)), *(ew.string(c) for c in w.connectors), ew.count(len(w.tasks))]
    for t in w.tasks:
        out += [ew.string(t.connector), ew.INT32.pack(t.task), b"\x00"]
    out.append(b"\x00")
    return b"".join(out)


def _nullable(w: WireWork | None) -> bytes:
    return b"\xff" if w is None else b"\x01" + write_work(w)


def write_heartbeat_request(req: ConnectHeartbeatRequest) -> bytes:
    out = [
        ew.string(req.group_id),
        ew.string(req.member_id),
        ew.INT32.pack(req.member_epoch),
        ew.INT32.pack(req.rebalance_timeout_ms),
        ew.string(req.url),
        ew.INT64.pack(req.config_offset),
        ew.count(None if req.assignors is None else len(req.assignors)),
    ]
    out.extend(write_assignor(a) for a in req.assignors or ())
    out += [_nullable(req.owned), b"\x00"]
    return b"".join(out)


def write_heartbeat_response(resp: ConnectHeartbeatResponse) -> bytes:
    out = [
        ew.INT32.pack(resp.throttle_time_ms),
        ew.INT16.pack(resp.error_code),
        ew.string(resp.error_message),
        ew.string(resp.member_id),
        ew.INT32.pack(resp.member_epoch),
        ew.INT32.pack(resp.heartbeat_interval_ms),
        ew.INT32.pack(resp.compute_assignment),
    ]
    a = resp.assignment
    if a is None:
        out.append(b"\xff")
    else:
        out += [
            b"\x01",
            write_work(a.work),
            ew.INT16.pack(a.metadata_version),
            ew.bytes_(a.metadata),
            b"\x00",
        ]
    out.append(b"\x00")
    return b"".join(out)


def read_heartbeat_response(body: bytes, offset: int = 0) -> ConnectHeartbeatResponse:
    r = BoundedReader(body, offset)
    throttle, code, message, member_id = r.int32(), r.int16(), r.nullable_string(), r.nullable_string()
    epoch, interval, compute = r.int32(), r.int32(), r.int32()
    assignment = None
    if r.present():
        work = _work(r)
        assignment = WireConnectAssignment(work, r.int16(), r.bytes_())
        r.skip_tags()
    r.skip_tags()
    return ConnectHeartbeatResponse(code, message, member_id, epoch, interval, compute, assignment, throttle)


def write_prepare_request(req: ConnectPrepareRequest) -> bytes:
    return ew.write_member_request(req.group_id, req.member_id, req.member_epoch)


def write_prepare_response(resp: ConnectPrepareResponse) -> bytes:
    out = ew.write_prepare_response_head(
        resp.throttle_time_ms, resp.error_code, resp.error_message, resp.group_epoch, resp.assignor_name
    )
    out.append(ew.count(len(resp.members)))
    for m in resp.members:
        out += [
            ew.string(m.member_id),
            ew.INT32.pack(m.member_epoch),
            ew.string(m.url),
            ew.INT64.pack(m.config_offset),
            ew.INT8.pack(m.reason),
            ew.INT16.pack(m.metadata_version),
            ew.bytes_(m.metadata),
            write_work(m.target),
            b"\x00",
        ]
    out.append(ew.count(len(resp.delayed)))
    for d in resp.delayed:
        out += [
            ew.string(d.member_id),
            ew.string(d.url),
            ew.INT32.pack(d.remaining_ms),
            write_work(d.work),
            b"\x00",
        ]
    out.append(b"\x00")
    return b"".join(out)


def read_prepare_response(body: bytes, offset: int = 0) -> ConnectPrepareResponse:
    r = BoundedReader(body, offset)
    throttle, code, message, epoch, assignor = ew.read_prepare_response_head(r)
    members = []
    for _ in range(max(r.array_count(), 0)):
        mid, mepoch, url, config_offset = r.string(), r.int32(), r.string(), r.int64()
        reason, mversion, meta = r.int8(), r.int16(), r.bytes_()
        members.append(PreparedWorker(mid, mepoch, url, config_offset, reason, mversion, meta, _work(r)))
        r.skip_tags()
    delayed = []
    for _ in range(max(r.array_count(), 0)):
        delayed.append(DelayedWork(r.string(), r.string(), r.int32(), _work(r)))
        r.skip_tags()
    r.skip_tags()
    return ConnectPrepareResponse(code, message, epoch, assignor, tuple(members), tuple(delayed), throttle)


def write_install_request(req: ConnectInstallRequest) -> bytes:
    out = ew.write_install_head(
        req.group_id, req.member_id, req.member_epoch, req.group_epoch, req.error, len(req.members)
    )
    for m in req.members:
        out += [
            ew.string(m.member_id),
            write_work(m.work),
            ew.INT16.pack(m.metadata_version),
            ew.bytes_(m.metadata),
        ]
        out.append(b"\x00")
    out.append(b"\x00")
    return b"".join(out)


def write_install_response(resp: ConnectInstallResponse) -> bytes:
    return ew.write_install_response(resp.throttle_time_ms, resp.error_code, resp.error_message)


def read_install_response(body: bytes, offset: int = 0) -> ConnectInstallResponse:
    throttle, code, message = ew.read_install_response(BoundedReader(body, offset))
    return ConnectInstallResponse(code, message, throttle)
