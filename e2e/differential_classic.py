"""Wire helpers for the classic group protocol in differential scenarios (e2e/differential.py):
JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit requests with the fields every version
needs, extra connections for members whose requests are parked, and readiness waits. Kafka's
JoinGroup waits until every known member has rejoined, so a scenario sends a parked request from a
thread (`in_thread`) on its own connection (`client`) and records answers in a fixed order.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from e2e.differential import Session, plain
from protocol.client import WireClient, make_request

# ConsumerProtocol subscription bytes (version 1, one topic "t", no user data); opaque to both
# coordinators, which only compare protocol names.
METADATA = b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff\x00\x00\x00\x00"
RANGE = [{"name": "range", "metadata": METADATA}]


def client(s: Session) -> WireClient:
    """Another connection to the same backend (a second member's socket)."""
    return WireClient(s.port, timeout=30.0)


def raw_on(c: WireClient, api_key: int, version: int, **fields: Any) -> Any:
    return c.request(make_request(api_key, version, **fields))


def join_fields(s: Session, version: int, **over: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "group_id": s.group(),
        "session_timeout": 10000,
        "rebalance_timeout": 10000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": RANGE,
    }
    if version >= 5:
        fields["group_instance_id"] = None
    if version >= 8:
        fields["reason"] = None
    if version < 1:
        del fields["rebalance_timeout"]
    fields.update(over)
    return fields


def join(s: Session, version: int = 9, c: WireClient | None = None, **over: Any) -> Any:
    return raw_on(c or s.client, 11, version, **join_fields(s, version, **over))


def note_join(s: Session, r: Any, label: str = "JoinGroup") -> None:
    """A JoinGroup answer with the leader's member list in a stable order."""
    members = sorted(r.members, key=lambda m: s.norm.member(m.member_id))
    s.note(label, {**{f.name: getattr(r, f.name) for f in dataclasses.fields(r)}, "members": members})


def note_describe(s: Session, label: str, r: Any) -> None:
    """A DescribeGroups answer with each group's members in a stable order (Kafka lists them in
    hash-map order)."""
    out = plain(r)
    for g in out["groups"]:
        g["members"] = sorted(g["members"], key=lambda m: s.norm.member(m["member_id"]))
    s.note(label, out)


def member_id(s: Session, version: int = 9, c: WireClient | None = None, **over: Any) -> str:
    """A member id for a new dynamic member (JoinGroup v4+ answers MEMBER_ID_REQUIRED first)."""
    r = join(s, version, c, **over)
    s.note("JoinGroup(member id)", r)
    return str(r.member_id)


def sync(s: Session, gen: int, mid: str, c: WireClient | None = None, version: int = 5, **over: Any) -> Any:
    fields: dict[str, Any] = {
        "group_id": s.group(),
        "generation_id": gen,
        "member_id": mid,
        "assignments": [],
    }
    if version >= 3:
        fields["group_instance_id"] = None
    if version >= 5:
        fields["protocol_type"] = "consumer"
        fields["protocol_name"] = "range"
    fields.update(over)
    return raw_on(c or s.client, 14, version, **fields)


def heartbeat(
    s: Session, gen: int, mid: str, c: WireClient | None = None, version: int = 4, **over: Any
) -> Any:
    fields: dict[str, Any] = {"group_id": s.group(), "generation_id": gen, "member_id": mid}
    if version >= 3:
        fields["group_instance_id"] = None
    fields.update(over)
    return raw_on(c or s.client, 12, version, **fields)


def leave(s: Session, version: int, members: list[dict[str, Any]], c: WireClient | None = None) -> Any:
    if version >= 3:
        fields: dict[str, Any] = {
            "group_id": s.group(),
            "members": [{"group_instance_id": None, "reason": None, **m} for m in members],
        }
        if version < 5:
            for m in fields["members"]:
                del m["reason"]
    else:
        fields = {"group_id": s.group(), "member_id": members[0]["member_id"]}
    return raw_on(c or s.client, 13, version, **fields)


def commit(s: Session, gen: int, mid: str, **over: Any) -> Any:
    """OffsetCommit v9 of partition 0 of the scenario's topic (created by the scenario)."""
    fields: dict[str, Any] = {
        "group_id": s.group(),
        "generation_id_or_member_epoch": gen,
        "member_id": mid,
        "group_instance_id": None,
        "topics": [
            {
                "name": s.topic(),
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 5,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    }
    fields.update(over)
    return s.raw(8, 9, **fields)


def solo_member(s: Session, **over: Any) -> tuple[str, int]:
    """A group with one stable member (joined and synced): (member id, generation)."""
    coordinator_loaded(s, over.get("group_id", s.group()))
    mid = member_id(s, **over)
    r = join(s, member_id=mid, **over)
    s.note("JoinGroup", r)
    s.note("SyncGroup", sync(s, r.generation_id, mid, assignments=[{"member_id": mid, "assignment": b"a"}]))
    return mid, int(r.generation_id)


def wait_state(s: Session, state: str, timeout: float = 20.0) -> None:
    """Poll DescribeGroups (unrecorded) until the group is in `state`: a parked JoinGroup sent
    from a thread has then reached the coordinator."""
    deadline = time.monotonic() + timeout
    while True:
        (g,) = s.raw(15, 5, groups=[s.group()], include_authorized_operations=False).groups
        if g.group_state == state:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{s.backend}: group {s.group()} is {g.group_state}, not {state}")
        time.sleep(0.02)


def in_thread(fn: Callable[[], Any]) -> Future[Any]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(fn)
    pool.shutdown(wait=False)
    return future


def coordinator_loaded(s: Session, *groups: str, timeout: float = 30.0) -> None:
    """A fresh Kafka node answers FindCoordinator before it has loaded every offsets partition;
    DescribeGroups says NOT_COORDINATOR/COORDINATOR_LOAD_IN_PROGRESS until the group's is."""
    for group in groups or (s.group(),):
        s.wait_coordinator(group)
        deadline = time.monotonic() + timeout
        while True:
            (g,) = s.raw(15, 5, groups=[group], include_authorized_operations=False).groups
            if g.error_code.name == "none":
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{s.backend}: coordinator of {group} not loaded: {g.error_code}")
            time.sleep(0.1)
