"""Regex subscriptions (KIP-848 regex subscriptions) and topic metadata changes (KIP-848 consumer group
protocol)."""

from __future__ import annotations

from engine.metadata import TopicImage, topic_id_for
from records.consumer_group import (
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
)
from tests.consumer_harness import BAR, FOO, Harness


def _regex_records(h: Harness) -> list[tuple[str, tuple[str, ...] | None]]:
    out = []
    for r in h.records:
        if isinstance(r.key, ConsumerGroupRegularExpressionKey):
            v = r.value
            out.append(
                (
                    r.key.regular_expression,
                    v.topics if isinstance(v, ConsumerGroupRegularExpressionValue) else None,
                )
            )
    return out


def test_regex_is_a_full_match_with_re2_syntax() -> None:
    h = Harness(topics={"topic-1": 2, "topic-2": 2, "xtopic-3": 2})
    r = h.join("m1", topics=(), subscribed_topic_regex="topic-.*")
    assert r.error_code == 0
    assert _regex_records(h) == [("topic-.*", ("topic-1", "topic-2"))]
    assert {t.topic_id for t in r.assignment or ()} == {topic_id_for("topic-1"), topic_id_for("topic-2")}


def test_regex_that_only_prefix_matches_subscribes_to_nothing() -> None:
    # RE2/J full match: `^topic*` does not match `topic-1` (migration pitfall #6).
    h = Harness(topics={"topic-1": 2})
    r = h.join("m1", topics=(), subscribed_topic_regex="^topic*")
    assert r.error_code == 0 and r.assignment == ()


def test_empty_regex_beside_topic_names_means_no_regex() -> None:
    # librdkafka sends SubscribedTopicRegex="" with a topic-name subscription.
    h = Harness()
    r = h.join("m1", topics=("foo",), subscribed_topic_regex="")
    assert r.assignment is not None and r.assignment[0].topic_id == FOO
    assert _regex_records(h) == []
    assert h.group.subscribed_regexes == {}


def test_regex_used_by_another_member_is_not_resolved_again() -> None:
    h = Harness()
    h.join("m1", topics=(), subscribed_topic_regex="fo.*")
    h.join("m2", topics=(), subscribed_topic_regex="fo.*")
    assert _regex_records(h) == []
    assert h.group.subscribed_regexes == {"fo.*": 2}


def test_last_member_leaving_a_regex_deletes_its_record() -> None:
    h = Harness()
    h.join("m1", topics=(), subscribed_topic_regex="fo.*")
    h.join("m2", topics=("bar",))
    h.hb(member_id="m1", member_epoch=-1)
    assert _regex_records(h) == [("fo.*", None)]
    assert h.group.resolved_regexes == {}


def test_switching_regex_writes_the_new_one_and_deletes_the_old_one() -> None:
    h = Harness()
    h.join("m1", topics=(), subscribed_topic_regex="fo.*")
    h.hb(member_id="m1", member_epoch=2, subscribed_topic_regex="ba.*")
    assert _regex_records(h) == [("fo.*", None), ("ba.*", ("bar",))]
    assert set(h.group.resolved_regexes) == {"ba.*"}


def test_new_topic_matching_a_regex_rebalances_on_the_next_heartbeat() -> None:
    h = Harness(topics={"foo": 2})
    h.join("m1", topics=(), subscribed_topic_regex="fo.*")
    epoch = h.group.group_epoch
    h.shard.update_metadata(h.shard.image.with_topic(TopicImage(topic_id_for("fox"), "fox", 3)))
    assert h.group.group_epoch == epoch  # nothing happens until a member heartbeats
    r = h.hb(member_id="m1", member_epoch=2)
    assert _regex_records(h) == [("fo.*", ("fox", "foo"))] or _regex_records(h) == [("fo.*", ("foo", "fox"))]
    assert h.group.group_epoch == epoch + 1
    assert {t.topic_id for t in r.assignment or ()} == {FOO, topic_id_for("fox")}


def test_partition_count_change_of_a_subscribed_topic_bumps_the_epoch() -> None:
    h = Harness()
    h.join("m1")
    h.shard.update_metadata(h.shard.image.with_topic(TopicImage(FOO, "foo", 8)))
    r = h.hb(member_id="m1", member_epoch=2)
    assert h.record_types()[:2] == ["k4", "k3"]
    assert r.member_epoch == 3 and r.assignment is not None and len(r.assignment[0].partitions) == 8


def test_deleting_a_subscribed_topic_bumps_the_epoch_and_revokes_it() -> None:
    h = Harness()
    h.join("m1", topics=("foo", "bar"))
    h.shard.update_metadata(h.shard.image.without_topic("bar"))
    r = h.hb(member_id="m1", member_epoch=2)
    assert h.group.group_epoch == 3
    assert "bar" not in h.group.subscription_metadata
    # bar's partitions must be given up (revocation), foo's are kept
    assert h.member("m1").partitions_pending_revocation.get(BAR) == (0, 1, 2)
    assert r.assignment is not None and {t.topic_id for t in r.assignment} == {FOO}


def test_creating_a_subscribed_topic_that_did_not_exist_bumps_the_epoch() -> None:
    h = Harness(topics={"foo": 2})
    h.join("m1", topics=("foo", "later"))
    h.shard.update_metadata(h.shard.image.with_topic(TopicImage(topic_id_for("later"), "later", 2)))
    r = h.hb(member_id="m1", member_epoch=2)
    assert r.member_epoch == 3
    assert {t.topic_id for t in r.assignment or ()} == {FOO, topic_id_for("later")}


def test_change_to_an_unsubscribed_topic_does_not_touch_the_group() -> None:
    h = Harness()
    h.join("m1", topics=("foo",))
    marked = h.shard.update_metadata(h.shard.image.with_topic(TopicImage(BAR, "bar", 9))).response
    assert marked == set()
    h.hb(member_id="m1", member_epoch=2)
    assert h.records == []


def test_partition_rack_change_of_a_subscribed_topic_bumps_the_epoch() -> None:
    h = Harness()
    h.join("m1")
    h.shard.update_metadata(h.shard.image.with_topic(TopicImage(FOO, "foo", 6, {0: ("r1",), 1: ("r2",)})))
    h.hb(member_id="m1", member_epoch=2)
    assert h.group.group_epoch == 3
    assert [p.racks for p in h.group.subscription_metadata["foo"].partition_metadata] == [("r1",), ("r2",)]
