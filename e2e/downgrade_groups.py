"""Groups of every kind a downgrade meets, made over the wire on a running server (Kafka 4.x or
groupshift: the same requests): raw JoinGroup/SyncGroup and ConsumerGroupHeartbeat members, so
the log holds exactly what the server writes for them.

* `classic-static`: a classic group, one static member (instance id), Stable, offsets;
* `classic-dyn`: a classic group, one dynamic member, Stable, offsets;
* `cg-native`: a consumer group (KIP-848), one member, offsets committed with its epoch;
* `cg-static`: a consumer group whose member has an instance id;
* `cg-regex`: a consumer group subscribed by regular expression (`ev-.*`);
* `cg-mixed`: a classic group converted to a consumer group online when a consumer-protocol
  member joined (Kafka's upgrade conversion): one classic and one consumer-protocol member;
* `offsets-only`: offsets committed by an admin client, no members.

Members are never stopped: the server is stopped with them in its log.
"""

from __future__ import annotations

import base64
import struct
import time
import uuid
from typing import Any

from protocol.client import WireClient, make_request
from tools.groups.wire import AdminWire, KafkaError

TOPICS = {"orders": 4, "ev-a": 2, "ev-b": 2}
CLASSIC = ("classic-static", "classic-dyn")
CONSUMER = ("cg-native", "cg-static", "cg-regex", "cg-mixed")
ALL_GROUPS = (*CLASSIC, *CONSUMER, "offsets-only")
Offsets = dict[tuple[str, int], int]


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0."""
    return struct.pack(">hi", 0, len(topics)) + b"".join(_str(t) for t in topics) + struct.pack(">i", -1)


def assignment(parts: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hi", 0, len(parts))
    for t, ps in parts.items():
        out += _str(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


class Server:
    """Raw requests to the coordinator of each group (a single-node server)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.port = int(bootstrap.rsplit(":", 1)[1])
        self.clients: list[WireClient] = []

    def client(self) -> WireClient:
        c = WireClient(self.port, timeout=30.0)
        self.clients.append(c)
        return c

    def close(self) -> None:
        for c in self.clients:
            c.close()

    @staticmethod
    def call(c: WireClient, api_key: int, version: int, **fields: Any) -> Any:
        return c.request(make_request(api_key, version, **fields))


def _retry(fn: Any, ok: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        r = fn()
        if ok(r):
            return r
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {r}")
        time.sleep(0.2)


def classic_member(
    s: Server, group: str, offsets: Offsets, instance_id: str | None = None
) -> tuple[WireClient, str, int]:
    """Join, sync (as leader, all partitions of `orders` to itself) and commit `offsets`."""
    c = s.client()
    protocols = [{"name": "range", "metadata": subscription(["orders"])}]

    def join(member_id: str) -> Any:
        return s.call(
            c, 11, 9, group_id=group, session_timeout=120000, rebalance_timeout=30000, member_id=member_id,
            group_instance_id=instance_id, protocol_type="consumer", protocols=protocols, reason=None,
        )  # fmt: skip

    r = _retry(lambda: join(""), lambda r: r.error_code in (0, 79), f"JoinGroup {group}")
    if r.error_code == 79:  # MEMBER_ID_REQUIRED
        mid = r.member_id
        r = _retry(lambda: join(mid), lambda r: r.error_code == 0, f"JoinGroup {group}")
    mid, gen = r.member_id, r.generation_id
    assignments = [
        {"member_id": m.member_id, "assignment": assignment({"orders": [0, 1, 2, 3]})} for m in r.members
    ]
    sr = s.call(
        c, 14, 5, group_id=group, generation_id=gen, member_id=mid, group_instance_id=instance_id,
        protocol_type="consumer", protocol_name="range", assignments=assignments,
    )  # fmt: skip
    assert sr.error_code == 0, sr
    commit(s, c, group, offsets, gen, mid, instance_id)
    return c, mid, gen


def commit(
    s: Server, c: WireClient, group: str, offsets: Offsets, gen: int, mid: str, instance_id: str | None = None
) -> None:
    if not offsets:
        return
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (t, p), o in sorted(offsets.items()):
        by_topic.setdefault(t, []).append(
            {
                "partition_index": p,
                "committed_offset": o,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        )
    r = s.call(
        c, 8, 9, group_id=group, generation_id_or_member_epoch=gen, member_id=mid,
        group_instance_id=instance_id, retention_time_ms=-1,
        topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    )  # fmt: skip
    codes = {p.error_code for t in r.topics for p in t.partitions}
    assert codes == {0}, (group, r)


def consumer_member(
    s: Server,
    group: str,
    offsets: Offsets,
    *,
    topics: list[str] | None = None,
    regex: str | None = None,
    instance_id: str | None = None,
    want_partitions: int = 1,
) -> tuple[WireClient, str, int]:
    """A KIP-848 member: heartbeats until it owns `want_partitions` partitions, then commits."""
    c = s.client()
    mid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    epoch = 0
    owned: list[dict[str, Any]] = []

    def beat() -> Any:
        return s.call(
            c, 68, 1, group_id=group, member_id=mid, member_epoch=epoch, instance_id=instance_id,
            rack_id=None, rebalance_timeout=30000, subscribed_topic_names=topics,
            subscribed_topic_regex=regex, server_assignor=None, topic_partitions=owned,
        )  # fmt: skip

    deadline = time.monotonic() + 30
    while True:
        r = beat()
        assert r.error_code == 0, (group, r)
        epoch = r.member_epoch
        if r.assignment is not None:
            owned = [
                {"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
                for tp in r.assignment.topic_partitions
            ]
        if sum(len(tp["partitions"]) for tp in owned) >= want_partitions:
            break
        assert time.monotonic() < deadline, (group, r)
        time.sleep(0.2)
    beat()  # acknowledge the assignment
    commit(s, c, group, offsets, epoch, mid)
    return c, mid, epoch


def make_groups(bootstrap: str) -> tuple[Server, dict[str, Offsets]]:
    """Create the topics and every group; returns the open server handle (keep it open until
    the server stops: the members stay) and the offsets committed per group."""
    from kafka.admin import KafkaAdminClient, NewTopic  # kafka-python

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()])
    finally:
        admin.close()
    with AdminWire(bootstrap, timeout=60) as wire:  # FindCoordinator creates __consumer_offsets
        for g in ALL_GROUPS:
            wire.coordinator(g)
    s = Server(bootstrap)
    want: dict[str, Offsets] = {
        "classic-static": {("orders", 0): 5, ("orders", 1): 6},
        "classic-dyn": {("orders", 2): 7},
        "cg-native": {("orders", 0): 8, ("orders", 3): 9},
        "cg-static": {("orders", 1): 10},
        "cg-regex": {("ev-a", 0): 11, ("ev-b", 1): 12},
        "cg-mixed": {("orders", 2): 13},
        "offsets-only": {("orders", 3): 14},
    }
    classic_member(s, "classic-static", want["classic-static"], instance_id="inst-1")
    classic_member(s, "classic-dyn", want["classic-dyn"])
    consumer_member(s, "cg-native", want["cg-native"], topics=["orders"])
    consumer_member(s, "cg-static", want["cg-static"], topics=["orders"], instance_id="static-1")
    consumer_member(s, "cg-regex", want["cg-regex"], regex="ev-.*", want_partitions=4)
    classic_member(s, "cg-mixed", {})
    # the classic member keeps every partition (it never rejoins): the new member owns none yet
    consumer_member(s, "cg-mixed", want["cg-mixed"], topics=["orders"], want_partitions=0)
    with AdminWire(bootstrap, timeout=30) as wire:
        codes = wire.commit_offsets("offsets-only", want["offsets-only"])
        assert set(codes.values()) == {0}, codes
    return s, want


def observed(bootstrap: str, groups: tuple[str, ...] = ALL_GROUPS, timeout: float = 60.0) -> dict[str, Any]:
    """What a server shows of each group: ListGroups' entry and the committed offsets (retried
    while the coordinator is still loading after a start)."""
    out: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    with AdminWire(bootstrap, timeout=timeout) as wire:
        for g in groups:
            while True:
                try:
                    out[g] = {"offsets": {k: v[0] for k, v in wire.offset_fetch(g).items()}}
                    break
                except KafkaError:
                    if time.monotonic() > deadline:
                        raise
                    wire.reset()
                    time.sleep(0.3)
        listed = {g["group"]: g for g in wire.list_groups()}
    for g in groups:
        out[g]["listed"] = listed.get(g)
    return out
