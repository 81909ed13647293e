"""Wire helpers the consumer-group differential scenarios share: ConsumerGroupHeartbeat, the
classic JoinGroup/SyncGroup/Heartbeat/LeaveGroup, ConsumerGroupDescribe and DescribeGroups, each
recording an answer in a shape two servers can agree on (assignments as sorted topic names and
partitions, member lists sorted by their normalised id, embedded protocol bytes decoded)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from e2e.differential import Session, plain
from translation.embedded_protocol import Subscription, parse_assignment, serialize_subscription


def new_member_id(s: Session) -> str:
    """A client-generated member id (KIP-848), known to the normaliser from the start so that
    messages naming it compare equal."""
    m = str(uuid.uuid4())
    s.norm.member(m)
    return m


def _names(s: Session, topic_partitions: Any) -> dict[str, list[int]] | None:
    """An assignment (`[{topic_id, partitions}]`) as {topic name: sorted partitions}."""
    if topic_partitions is None:
        return None
    out: dict[str, list[int]] = {}
    for tp in plain(topic_partitions):
        name = s.norm.topic_ids.get(str(tp["topic_id"]), str(tp["topic_id"]))
        out[name] = sorted(tp["partitions"])
    return dict(sorted(out.items()))


def cgh(
    s: Session,
    label: str,
    member_id: str,
    epoch: int,
    *,
    topics: list[str] | None = None,
    owned: dict[str, list[int]] | None = None,
    version: int = 1,
    **over: Any,
) -> Any:
    """A ConsumerGroupHeartbeat of group `g`; a join (epoch 0) sends every field, a heartbeat
    sends only what `over`/`topics`/`owned` give. Records the answer, returns it raw."""
    join = epoch == 0
    fields: dict[str, Any] = {
        "group_id": s.group(),
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000 if join else -1,
        "subscribed_topic_names": topics if topics is not None else ([s.topic()] if join else None),
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [] if join else None,
    }
    if owned is not None:
        fields["topic_partitions"] = [
            {"topic_id": s.topic_id(t), "partitions": ps} for t, ps in owned.items()
        ]
    fields.update(over)
    r = s.raw(68, version, **fields)
    p = plain(r)
    s.note(
        label,
        {
            "error_code": p["error_code"],
            "error_message": p["error_message"],
            "member_id": p["member_id"],
            "member_epoch": p["member_epoch"],
            "heartbeat_interval": p["heartbeat_interval"],
            "assignment": None if p["assignment"] is None else _names(s, p["assignment"]["topic_partitions"]),
        },
    )
    return r


def owned_of(s: Session, r: Any) -> dict[str, list[int]]:
    """The assignment a heartbeat answer carries, by topic name (for the next heartbeat's
    owned partitions)."""
    a = plain(r)["assignment"]
    out: dict[str, list[int]] = {}
    for tp in a["topic_partitions"] if a else []:
        name = s.norm.topic_ids[str(tp["topic_id"])].removeprefix("<topic:").removesuffix(">")
        out[name] = sorted(tp["partitions"])
    return out


def subscription(topics: list[str], user_data: bytes | None = None, owned: Any = ()) -> bytes:
    return serialize_subscription(
        Subscription(version=3, topics=tuple(topics), user_data=user_data, owned_partitions=owned)
    )


def join(
    s: Session,
    label: str,
    member_id: str = "",
    *,
    instance_id: str | None = None,
    topics: list[str] | None = None,
    protocols: list[tuple[str, bytes]] | None = None,
    protocol_type: str = "consumer",
    version: int = 9,
    session_timeout: int = 30000,
    rebalance_timeout: int = 10000,
) -> Any:
    """A classic JoinGroup of group `g`; records the answer (member metadata decoded)."""
    if protocols is None:
        protocols = [("range", subscription(topics if topics is not None else [s.topic()]))]
    r = s.raw(
        11,
        version,
        group_id=s.group(),
        session_timeout=session_timeout,
        rebalance_timeout=rebalance_timeout,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocols=[{"name": n, "metadata": m} for n, m in protocols],
        reason=None,
    )
    p = plain(r)
    p["members"] = sorted((m["member_id"] for m in p["members"]), key=s.norm.member)
    s.note(label, p)
    return r


def sync(
    s: Session,
    label: str,
    member_id: str,
    generation: int,
    *,
    assignments: dict[str, dict[str, list[int]]] | None = None,
    instance_id: str | None = None,
    user_data: bytes | None = None,
) -> Any:
    """A classic SyncGroup v5; a leader passes `assignments` (member id -> topic -> partitions)."""
    from translation.embedded_protocol import serialize_assignment

    r = s.raw(
        14,
        5,
        group_id=s.group(),
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            {"member_id": m, "assignment": serialize_assignment(a, 3, user_data)}
            for m, a in (assignments or {}).items()
        ],
    )
    p = plain(r)
    data = bytes(r.assignment)
    if data:
        a = parse_assignment(data)
        p["assignment"] = {
            "partitions": dict(sorted((t, sorted(ps)) for t, ps in a.partitions)),
            "user_data": a.user_data,
        }
    s.note(label, p)
    return r


def heartbeat(s: Session, label: str, member_id: str, generation: int, instance_id: str | None = None) -> Any:
    return s.call(
        12,
        4,
        label,
        group_id=s.group(),
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
    )


def leave(s: Session, label: str, member_id: str, instance_id: str | None = None) -> Any:
    return s.call(
        13,
        5,
        label,
        group_id=s.group(),
        members=[{"member_id": member_id, "group_instance_id": instance_id, "reason": None}],
    )


def _canon(value: Any) -> Any:
    """Lists sorted by their JSON form: member and partition order carry no meaning in a
    description."""
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_canon(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
    return value


def describe(s: Session, label: str, *, version: int = 1, authorized_operations: bool = False) -> Any:
    """ConsumerGroupDescribe of group `g`, members sorted."""
    r = s.raw(69, version, group_ids=[s.group()], include_authorized_operations=authorized_operations)
    p = plain(r)
    s._learn(p)
    s.note(label, _canon(s.norm(p)))
    return r


def describe_classic(s: Session, label: str) -> Any:
    """DescribeGroups v5 of group `g`: state, protocol, member ids (metadata left out)."""
    r = s.raw(15, 5, groups=[s.group()], include_authorized_operations=False)
    (g,) = plain(r)["groups"]
    s.note(
        label,
        {
            "error_code": g["error_code"],
            "group_state": g["group_state"],
            "protocol_type": g["protocol_type"],
            "protocol_data": g["protocol_data"],
            "members": sorted((m["member_id"] for m in g["members"]), key=s.norm.member),
        },
    )
    return r


def list_type(s: Session, label: str) -> None:
    """The group's type and state as ListGroups v5 reports them."""
    r = plain(s.raw(16, 5, states_filter=[], types_filter=[]))
    mine = [g for g in r["groups"] if g["group_id"] == s.group()]
    s.note(label, [{"state": g["group_state"], "type": g["group_type"]} for g in mine])


def wait_visible_to_groups(s: Session, topics: list[str], timeout: float = 15.0) -> None:
    """Kafka's group coordinator learns of a new topic from its metadata image a moment after
    the topic answers Metadata; a member joining before that gets no partitions of it. A probe
    group (unrecorded) heartbeats until it is assigned every topic, then leaves."""
    probe = s.group("probe")
    member = str(uuid.uuid4())
    s.wait_coordinator(probe)
    epoch = 0
    deadline = time.monotonic() + timeout
    while True:
        r = s.raw(
            68, 1, group_id=probe, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
            rebalance_timeout=30000 if epoch == 0 else -1,
            subscribed_topic_names=topics if epoch == 0 else None, subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[] if epoch == 0 else None,
        )  # fmt: skip
        if r.error_code == 0:
            epoch = r.member_epoch
            if r.assignment is not None and len(r.assignment.topic_partitions) == len(topics):
                break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{s.backend}: topics {topics} not visible to the group coordinator")
        time.sleep(0.1)
    s.raw(
        68, 1, group_id=probe, member_id=member, member_epoch=-1, instance_id=None, rack_id=None,
        rebalance_timeout=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=None,
    )  # fmt: skip


def until(s: Session, check: Any, timeout: float = 15.0) -> Any:
    """Poll `check()` (not recorded) until it returns something truthy: Kafka's asynchronous
    steps (regex resolution) need a moment."""
    deadline = time.monotonic() + timeout
    while True:
        v = check()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.2)
