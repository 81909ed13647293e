"""Target `connect_records`: groupshift's Connect-group records (types 10000-10005), decoded and replayed.

The records are groupshift's own (docs/connect-groups.md, "Records"; the Connect draft names no
record layout): a shard loading its log decodes each one (`records.codec.decode_record`, values
by `records/connect_group_codec.py`) and replays it (`engine.replay`) into a connect group. An
input is the `records` target's `[flags][key length: 2 bytes][key][value]`. A record that decodes
to a connect-group key is replayed into a shard that already holds a live connect group `cg`
(workers `a` and `b` running connectors and tasks installed by `a`'s assignor, worker `c` gone
with its work held for `scheduled.rebalance.max.delay.ms`, and `k`, a classic Kafka Connect
worker living in the group (JoinGroup/SyncGroup with Connect's `sessioned` metadata, record
10001's tag 0), all written by the engine's own heartbeats, PrepareAssignment and
InstallAssignment and the translation layer's classic-worker path), then the shard is read as
the server reads it: DescribeGroups, ListGroups, the persisted view, the load duties, a heartbeat
of each SDK worker still in the group and Heartbeat, JoinGroup (with its recorded protocols),
SyncGroup of each classic worker, the timers a minute later (the SDK workers' sessions expire:
the group converts back to a classic Kafka Connect group, `translation/connect_downgrade.py`),
and each classic worker's LeaveGroup (the engine must answer, with any error code, and not
raise).

Clean, what the server does with it:
* `CoordinatorRecordError` (`UnknownRecordTypeError`: the loader skips the record;
  `RecordDecodeError`: the load stops with `CoordinatorLoadError` naming the offset);
* `ReplayRefused`: `replay` raised `ReplayError` or `ValueError`, which `load_shard` turns into
  `CoordinatorLoadError` ("cannot replay record at offset ...").

Seeds: the live group's own records, and a tombstone of each key type under its ids.
"""

from __future__ import annotations

import struct
from functools import cache

from engine.classic.api import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.classic.member import Protocol
from engine.config import CoordinatorConfig
from engine.connect.group import ConnectGroup
from engine.consumer.group import ReplayError
from engine.context import RequestContext
from engine.ids import SeededIds
from engine.metadata import MetadataImage
from engine.shard import Shard
from fuzz.common import Target
from protocol import connect_wire as cw
from records.codec import CoordinatorRecordError, decode_record, encode_record
from records.connect_group import (
    ConnectGroupCurrentMemberAssignmentKey,
    ConnectGroupDelayedWorkKey,
    ConnectGroupMemberMetadataKey,
    ConnectGroupMetadataKey,
    ConnectGroupTargetAssignmentMemberKey,
    ConnectGroupTargetAssignmentMetadataKey,
)
from records.coordinator import CoordinatorRecord
from translation.connect_classic_protocol import ConnectWorkerMetadata, encode_metadata
from translation.migration import Migration

_LEN = struct.Struct(">H")
GROUP = "cg"
_CONNECT_KEYS = (
    ConnectGroupMetadataKey,
    ConnectGroupMemberMetadataKey,
    ConnectGroupTargetAssignmentMetadataKey,
    ConnectGroupTargetAssignmentMemberKey,
    ConnectGroupCurrentMemberAssignmentKey,
    ConnectGroupDelayedWorkKey,
)
_CONFIG = CoordinatorConfig.from_kafka(
    {
        "group.connect.enable": True,
        "group.connect.scheduled.rebalance.max.delay.ms": 10_000,
        "group.connect.session.timeout.ms": 45_000,
    }
)
_PRINCIPAL = "User:ANONYMOUS"


class ReplayRefused(Exception):
    """`replay` refused the record: what `load_shard` reports as `CoordinatorLoadError`."""


def _work(*items: str) -> cw.WireWork:
    """'s1' is a connector, 's1/0' task 0 of s1."""
    connectors = tuple(sorted(i for i in items if "/" not in i))
    tasks = tuple(sorted(cw.WireTask(i.split("/")[0], int(i.split("/")[1])) for i in items if "/" in i))
    return cw.WireWork(connectors, tasks)


class _Writer:
    """Drives a shard through the engine's own APIs and keeps the records it writes."""

    def __init__(self) -> None:
        self.shard = Shard(_CONFIG, SeededIds(5), MetadataImage([]), migration=Migration)
        self.now = 1000
        self.records: list[CoordinatorRecord] = []
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, cw.WireWork] = {}

    def hb(self, mid: str, epoch: int | None = None) -> cw.ConnectHeartbeatResponse:
        epoch = self.epochs.get(mid, 0) if epoch is None else epoch
        assignor = cw.WireConnectAssignor("incremental", 0, 1, 0, 1, b"meta")
        req = cw.ConnectHeartbeatRequest(
            GROUP,
            mid,
            epoch,
            rebalance_timeout_ms=30_000 if epoch == 0 else -1,
            url=f"http://{mid}:8083" if epoch == 0 else None,
            config_offset=7,
            assignors=(assignor,) if epoch == 0 else None,
            owned=self.owned.get(mid, _work()),
        )
        self.now += 1
        out = self.shard.connect_group_heartbeat(req, RequestContext("w-" + mid, "/10.0.0.1"), self.now)
        self.records.extend(out.records)
        r = out.response
        assert isinstance(r, cw.ConnectHeartbeatResponse) and r.error_code == 0, r
        if epoch >= 0:
            self.epochs[mid] = r.member_epoch
            if r.assignment is not None:
                self.owned[mid] = r.assignment.work
        return r

    def classic(self, mid: str) -> None:
        """A classic worker's JoinGroup (sessioned, nothing run yet) then SyncGroup."""
        metadata = encode_metadata(ConnectWorkerMetadata(2, f"http://{mid}:8083", 7))
        join = JoinGroupRequest(GROUP, 10_000, 30_000, mid, "connect", (Protocol("sessioned", metadata),))
        self.now += 1
        j = self.shard.join_group(join, RequestContext("k-" + mid, "/10.0.0.2", 3), self.now)
        self.records.extend(j.records)
        assert isinstance(j.response, JoinGroupResponse) and j.response.error_code == 0, j.response
        sync = SyncGroupRequest(GROUP, j.response.generation_id, mid, None, "connect", "sessioned")
        self.now += 1
        s = self.shard.sync_group(sync, RequestContext("k-" + mid, "/10.0.0.2", 3), self.now)
        self.records.extend(s.records)
        assert isinstance(s.response, SyncGroupResponse) and s.response.error_code == 0, s.response

    def compute(self, mid: str, targets: dict[str, cw.WireWork]) -> None:
        self.now += 1
        p = self.shard.connect_prepare_assignment(
            cw.ConnectPrepareRequest(GROUP, mid, self.epochs[mid]), self.now, _PRINCIPAL
        )
        self.records.extend(p.records)
        assert isinstance(p.response, cw.ConnectPrepareResponse) and p.response.error_code == 0, p.response
        members = tuple(cw.InstalledWorker(w, t, 1, b"for-" + w.encode()) for w, t in targets.items())
        g = self.shard.groups[GROUP]
        assert isinstance(g, ConnectGroup)
        req = cw.ConnectInstallRequest(GROUP, mid, self.epochs[mid], g.group_epoch, 0, members)
        self.now += 1
        i = self.shard.connect_install_assignment(req, self.now, _PRINCIPAL)
        self.records.extend(i.records)
        assert isinstance(i.response, cw.ConnectInstallResponse) and i.response.error_code == 0, i.response


@cache
def base_records() -> tuple[CoordinatorRecord, ...]:
    """a, b and c join; a installs s1's connector and tasks over the three; c leaves (its work is
    held for the delay); a and b converge, b left revoking nothing at the end; then classic
    worker k joins, a installs s2 on it, and k runs it."""
    w = _Writer()
    for mid in ("a", "b", "c"):
        w.hb(mid)
    w.hb("a")
    w.compute("a", {"a": _work("s1", "s1/0"), "b": _work("s1/1", "s2"), "c": _work("s1/2", "s2/0")})
    for _ in range(3):
        for mid in ("a", "b", "c"):
            w.hb(mid)
    w.hb("c", epoch=-1)
    w.owned.pop("c")
    w.epochs.pop("c")
    for _ in range(2):
        for mid in ("a", "b"):
            w.hb(mid)
    w.classic("k")
    w.hb("a")
    w.compute("a", {"a": _work("s1", "s1/0"), "b": _work("s1/1"), "k": _work("s2")})
    for _ in range(2):
        for mid in ("a", "b"):
            w.hb(mid)
    w.classic("k")
    g = w.shard.groups[GROUP]
    assert isinstance(g, ConnectGroup) and set(g.members) == {"a", "b", "k"}, g
    assert g.members["k"].assigned.connectors == {"s2"}, g.members["k"]
    return tuple(w.records)


def frame(key: bytes, value: bytes | None) -> bytes:
    return bytes([1 if value is None else 0]) + _LEN.pack(len(key)) + key + (value or b"")


def seeds() -> list[bytes]:
    out = [frame(*encode_record(r)) for r in base_records()]
    tombstones = (
        ConnectGroupMemberMetadataKey(GROUP, "b"),
        ConnectGroupTargetAssignmentMemberKey(GROUP, "b"),
        ConnectGroupCurrentMemberAssignmentKey(GROUP, "b"),
        ConnectGroupDelayedWorkKey(GROUP, "c"),
        ConnectGroupTargetAssignmentMetadataKey(GROUP),
    )
    out.extend(frame(*encode_record(CoordinatorRecord(k, None))) for k in tombstones)
    return out


def one_input(data: bytes) -> None:
    if len(data) < 3:
        data = data.ljust(3, b"\x00")
    (n,) = _LEN.unpack_from(data, 1)
    key = data[3 : 3 + n]
    value = None if data[0] & 1 else data[3 + n :]
    record = decode_record(key, value)
    if not isinstance(record.key, _CONNECT_KEYS):
        return
    shard = Shard(_CONFIG, SeededIds(0), MetadataImage([]), migration=Migration)
    shard.apply(base_records())
    try:
        shard.replay(record)
    except (ReplayError, ValueError) as e:
        raise ReplayRefused(str(e)) from None
    read_as_the_server_does(shard, record.key.group_id)


def read_as_the_server_does(shard: Shard, group_id: str) -> None:
    """DescribeGroups, ListGroups, the persisted view, the load duties, one heartbeat per SDK
    worker, Heartbeat, JoinGroup and SyncGroup per classic worker, the timers a minute later
    (the conversion back), LeaveGroup per classic worker."""
    ids = sorted({group_id, GROUP})
    for d in shard.describe_groups(ids):
        assert d.group_id in ids
    shard.list_groups()
    shard.persisted_state()
    now = 5000
    shard.on_loaded(now)
    g = shard.groups.get(group_id)
    if not isinstance(g, ConnectGroup):
        return
    classic: list[str] = []
    for mid, m in sorted(g.members.items()):
        now += 10
        if m.classic is not None:
            ctx = RequestContext("fuzz", "/127.0.0.1", 5)
            hb = shard.heartbeat(HeartbeatRequest(group_id, m.member_epoch, mid), ctx, now)
            assert isinstance(hb.response, HeartbeatResponse), hb.response
            protocols = tuple(Protocol(p.name, p.metadata) for p in m.classic.protocols)
            # a session outliving the SDK workers': their expiry below converts the group back
            join = JoinGroupRequest(group_id, 120_000, 30_000, mid, "connect", protocols)
            j = shard.join_group(join, ctx, now + 1).response
            # answered at once inside a connect group (a classic group would park it)
            assert isinstance(j, JoinGroupResponse), j
            generation = j.generation_id if j.error_code == 0 else m.member_epoch
            sync = SyncGroupRequest(group_id, generation, mid, None, "connect", j.protocol_name)
            assert isinstance(shard.sync_group(sync, ctx, now + 2).response, SyncGroupResponse)
            classic.append(mid)
            continue
        out = shard.connect_group_heartbeat(
            cw.ConnectHeartbeatRequest(
                group_id, mid, m.member_epoch, owned=(m.assigned | m.pending_revocation).wire()
            ),
            RequestContext("fuzz", "/127.0.0.1", 0),
            now,
        )
        assert isinstance(out.response, cw.ConnectHeartbeatResponse), out.response
    shard.expire(now + 60_000)
    shard.describe_groups([group_id])
    shard.persisted_state()
    for mid in classic:  # the classic group's LeaveGroup, or the connect group's
        leave = LeaveGroupRequest(group_id, [MemberIdentity(mid, None)])
        ctx = RequestContext("fuzz", "/127.0.0.1", 5)
        assert isinstance(shard.leave_group(leave, ctx, now + 60_001).response, LeaveGroupResponse)


TARGET = Target(
    name="connect_records",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(CoordinatorRecordError, ReplayRefused),
    instrument=(
        "records.codec",
        "records.key_codec",
        "records.connect_group_codec",
        "protocol.extension_wire",
        "engine.replay",
        "engine.connect",
        "translation.connect_classic_worker",
        "translation.connect_downgrade",
    ),
)
