"""Offsets and group deletion are records too: replaying every record written by a random
sequence of commits, offset deletions, group deletions, topic deletions and expiry runs rebuilds
exactly the live offsets and groups (Kafka `OffsetMetadataManager`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import CoordinatorConfig
from engine.context import RequestContext
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.offsets.api import (
    CommitPartition,
    CommitTopic,
    FetchTopic,
    OffsetCommitRequest,
    OffsetDeleteRequest,
)
from engine.offsets.operations import expire_offsets
from engine.operation import Operation
from engine.shard import Shard
from records.coordinator import CoordinatorRecord

GROUPS = ["g1", "g2", "g3"]
TOPICS = ["a", "b", "c"]

op_strategy = st.one_of(
    st.tuples(
        st.just("commit"),
        st.sampled_from(GROUPS),
        st.sampled_from(TOPICS),
        st.integers(0, 2),
        st.integers(0, 10_000),
        st.sampled_from([-1, 1000]),
    ),
    st.tuples(st.just("delete_offsets"), st.sampled_from(GROUPS), st.sampled_from(TOPICS)),
    st.tuples(st.just("delete_group"), st.sampled_from(GROUPS)),
    st.tuples(st.just("delete_topic"), st.sampled_from(TOPICS)),
    st.tuples(st.just("advance"), st.integers(0, 120_000)),
    st.tuples(st.just("expire")),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(op_strategy, max_size=40))
def test_replaying_offset_records_rebuilds_the_live_offsets(ops: list[tuple[object, ...]]) -> None:
    cfg = CoordinatorConfig.from_kafka({"offsets.retention.minutes": 1})
    image = MetadataImage([TopicImage(topic_id_for(t), t, 3) for t in TOPICS])
    shard = Shard(cfg, image=image)
    log: list[CoordinatorRecord] = []
    now = 1000
    ctx = RequestContext("c", "/h", 8)
    for o in ops:
        kind = o[0]
        if kind == "commit":
            _, g, t, p, off, retention = o
            out = shard.offset_commit(
                OffsetCommitRequest(
                    str(g),
                    -1,
                    "",
                    None,
                    int(retention),  # type: ignore[call-overload]
                    [CommitTopic(str(t), [CommitPartition(int(p), int(off))])],
                ),
                ctx,
                now,
            )  # type: ignore[call-overload]
        elif kind == "delete_offsets":
            _, g, t = o
            out = shard.offset_delete(OffsetDeleteRequest(str(g), [FetchTopic(str(t), [0, 1, 2])]), ctx, now)
        elif kind == "delete_group":
            out = shard.delete_groups([str(o[1])], ctx, now)
        elif kind == "delete_topic":
            out = shard.update_metadata(shard.image.without_topic(str(o[1])), now)
        elif kind == "advance":
            now += int(o[1])  # type: ignore[call-overload]
            continue
        else:
            shard.tick(now)
            op = Operation()
            expire_offsets(shard.state, op)  # as engine/expiry.py calls it
            out = shard.commit(op, None)
        log.extend(out.records)
    fresh = Shard(cfg, image=image)
    fresh.apply(log)
    assert fresh.persisted_state() == shard.persisted_state()
