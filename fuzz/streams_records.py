"""Target `streams_records`: KIP-1071 streams-group records (types 17, 19-23), decoded and replayed.

A shard loading its log decodes every record (`records.codec.decode_record`) and replays it into
its groups (`engine.replay`); a streams record lands on a live streams group. An input is the
`records` target's `[flags][key length: 2 bytes][key][value]`. A record that decodes is replayed
into a shard that already holds a real streams group `app` (a word count, two members on two
processes, one standby replica, built by the engine's own heartbeats), then the shard is read as
the server reads it: StreamsGroupDescribe, ListGroups, the persisted view, and a heartbeat of
each member still in the group (the engine must answer, with any error code, and not raise).

Clean, what the server does with it:
* `CoordinatorRecordError` (`UnknownRecordTypeError`: the loader skips the record;
  `RecordDecodeError`: the load stops with `CoordinatorLoadError` naming the offset);
* `ReplayRefused`: `replay` raised `ReplayError` or `ValueError`, which `load_shard` turns into
  `CoordinatorLoadError` ("cannot replay record at offset ...").

Seeds: the base group's own records, and `tests/streams_record_samples.SAMPLES` (every field of
every type at and off its default) under the base group's id and a member id it has, plus a
tombstone of each key type.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any

from engine.config import CoordinatorConfig
from engine.consumer.group import ReplayError
from engine.context import RequestContext
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.shard import Shard
from engine.streams.api import StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse
from engine.streams.group import StreamsGroup, task_ids, tasks_union
from fuzz.common import Target
from records.codec import CoordinatorRecordError, decode_record, encode_record
from records.coordinator import CoordinatorRecord
from records.streams_group import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMetadataKey,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTopologyKey,
)

_LEN = struct.Struct(">H")
GROUP = "app"
_STREAMS_KEYS = (
    StreamsGroupMetadataKey,
    StreamsGroupMemberMetadataKey,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupTopologyKey,
)
_CTX = RequestContext("fuzz", "/127.0.0.1", 0)
_CONFIG = CoordinatorConfig.from_kafka(
    {
        "group.streams.num.standby.replicas": 1,
        "group.streams.initial.rebalance.delay.ms": 0,
        "group.streams.assignment.interval.ms": 0,
    }
)


class ReplayRefused(Exception):
    """`replay` refused the record: what `load_shard` reports as `CoordinatorLoadError`."""


def _image() -> MetadataImage:
    names = ("words-in", "app-counts-repartition", "app-counts-changelog")
    return MetadataImage([TopicImage(topic_id_for(n), n, 4) for n in names])


@cache
def base_records() -> tuple[CoordinatorRecord, ...]:
    """A stable word-count group written by the engine: m1 on p1, m2 on p2, tasks and standbys
    acknowledged."""
    from tests.streams_record_samples import WORD_COUNT_APP_TOPOLOGY

    shard = Shard(_CONFIG, SeededIds(7), _image())
    out: list[CoordinatorRecord] = []
    now = 1000
    epochs: dict[str, int] = {}
    held: dict[str, tuple[Any, Any]] = {}
    for member, process in (("m1", "p1"), ("m2", "p2")):
        now += 10
        o = shard.streams_group_heartbeat(
            StreamsGroupHeartbeatRequest(
                GROUP,
                member,
                0,
                rebalance_timeout_ms=60000,
                topology=WORD_COUNT_APP_TOPOLOGY,
                process_id=process,
                active_tasks=(),
                standby_tasks=(),
                warmup_tasks=(),
            ),
            _CTX,
            now,
        )
        out.extend(o.records)
        r = o.response
        assert isinstance(r, StreamsGroupHeartbeatResponse) and r.error_code == 0, r
        epochs[member] = r.member_epoch
        held[member] = (r.active_tasks or (), r.standby_tasks or ())
    for _ in range(4):
        for member in sorted(epochs):
            now += 10
            a, s = held[member]
            o = shard.streams_group_heartbeat(
                StreamsGroupHeartbeatRequest(
                    GROUP, member, epochs[member], active_tasks=a, standby_tasks=s, warmup_tasks=()
                ),
                _CTX,
                now,
            )
            out.extend(o.records)
            r = o.response
            assert isinstance(r, StreamsGroupHeartbeatResponse) and r.error_code == 0, r
            epochs[member] = r.member_epoch
            held[member] = (
                a if r.active_tasks is None else r.active_tasks,
                s if r.standby_tasks is None else r.standby_tasks,
            )
    g = shard.groups[GROUP]
    assert isinstance(g, StreamsGroup) and g.state() == "Stable", g
    return tuple(out)


def frame(key: bytes, value: bytes | None) -> bytes:
    return bytes([1 if value is None else 0]) + _LEN.pack(len(key)) + key + (value or b"")


def _key_for(record_type: int, member: str) -> Any:
    if record_type == 17:
        return StreamsGroupMetadataKey(GROUP)
    if record_type == 19:
        return StreamsGroupMemberMetadataKey(GROUP, member)
    if record_type == 20:
        return StreamsGroupTargetAssignmentMetadataKey(GROUP)
    if record_type == 21:
        return StreamsGroupTargetAssignmentMemberKey(GROUP, member)
    if record_type == 22:
        return StreamsGroupCurrentMemberAssignmentKey(GROUP, member)
    return StreamsGroupTopologyKey(GROUP)


def seeds() -> list[bytes]:
    from tests.streams_record_samples import SAMPLES

    out = [frame(*encode_record(r)) for r in base_records()]
    for i, (rtype, value) in enumerate(SAMPLES):
        member = ("m1", "m2", "m9")[i % 3]
        out.append(frame(*encode_record(CoordinatorRecord(_key_for(rtype, member), value))))
    for rtype in (17, 19, 20, 21, 22, 23):
        out.append(frame(*encode_record(CoordinatorRecord(_key_for(rtype, "m2"), None))))
    return out


def one_input(data: bytes) -> None:
    if len(data) < 3:
        data = data.ljust(3, b"\x00")
    (n,) = _LEN.unpack_from(data, 1)
    key = data[3 : 3 + n]
    value = None if data[0] & 1 else data[3 + n :]
    record = decode_record(key, value)
    if not isinstance(record.key, _STREAMS_KEYS):
        return
    shard = Shard(_CONFIG, SeededIds(0), _image())
    shard.apply(base_records())
    try:
        shard.replay(record)
    except (ReplayError, ValueError) as e:
        raise ReplayRefused(str(e)) from None
    read_as_the_server_does(shard, record.key.group_id)


def read_as_the_server_does(shard: Shard, group_id: str) -> None:
    """Describe, list, the persisted view, the load duties, and one heartbeat per member."""
    ids = sorted({group_id, GROUP})
    for d in shard.describe_streams_groups(ids):
        assert d.group_id in ids
    shard.list_groups()
    shard.persisted_state()
    now = 5000
    shard.on_loaded(now)
    g = shard.groups.get(group_id)
    if not isinstance(g, StreamsGroup):
        return
    for mid, m in sorted(g.members.items()):
        now += 10
        out = shard.streams_group_heartbeat(
            StreamsGroupHeartbeatRequest(
                group_id,
                mid,
                m.member_epoch,
                active_tasks=task_ids(tasks_union(m.active, m.active_pending_revocation)),
                standby_tasks=task_ids(tasks_union(m.standby, m.standby_pending_revocation)),
                warmup_tasks=task_ids(tasks_union(m.warmup, m.warmup_pending_revocation)),
            ),
            _CTX,
            now,
        )
        assert isinstance(out.response, StreamsGroupHeartbeatResponse), out.response
    shard.describe_streams_groups([group_id])


TARGET = Target(
    name="streams_records",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(CoordinatorRecordError, ReplayRefused),
    instrument=(
        "records.codec",
        "records.key_codec",
        "records.streams_group_codec",
        "records.wire",
        "engine.replay",
        "engine.streams",
    ),
)
