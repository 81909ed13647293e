"""A new metadata image installed in every coordinator shard (`Shard.update_metadata`, Kafka's
`onNewMetadataImage`): the delta between the two images is computed once for all shards
(`MetadataImage.delta`), and each group is checked against the changed names without copying its
subscriptions (`ConsumerGroup.subscribes_to_any`), so a CreateTopics of 300 topics does not cost
each of 50 shards a walk over every topic of every group on the event loop."""

from __future__ import annotations

import random

import pytest

from engine.consumer.group import ConsumerGroup
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from tests.consumer_harness import Harness


def image_of(names: list[str]) -> MetadataImage:
    return MetadataImage([TopicImage(topic_id_for(n), n, 2) for n in names])


def test_the_delta_is_computed_once_for_every_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    base = image_of([f"t{i}" for i in range(100)])
    shards = [Harness(topics={}) for _ in range(5)]
    for h in shards:
        h.shard.state.image = base
    newer = base.with_topics([TopicImage(topic_id_for(f"n{i}"), f"n{i}", 2) for i in range(300)], ["t1"])
    calls = 0
    real = MetadataImage.changed_topic_names

    def counting(self: MetadataImage, other: MetadataImage) -> set[str]:
        nonlocal calls
        calls += 1
        return real(self, other)

    monkeypatch.setattr(MetadataImage, "changed_topic_names", counting)
    for h in shards:
        h.shard.update_metadata(newer, h.now + 1)
    assert calls == 1
    delta = base.delta(newer)
    assert delta.deleted == {"t1"} and len(delta.changed) == len(delta.created_or_deleted) == 301
    # Another pair is computed anew, not served from the cache.
    assert image_of(["n0"]).delta(newer).deleted == frozenset()


def test_groups_marked_for_refresh_are_those_subscribed_to_a_changed_topic() -> None:
    h = Harness(topics={"a": 2, "b": 2, "c": 2, "d": 2})
    h.join("m1", group_id="by-name", topics=("a", "b"))
    h.join("m2", group_id="by-regex", topics=None, subscribed_topic_regex="c|z")
    h.join("m3", group_id="other", topics=("d",))
    h.advance(10)  # the regex resolves
    image = h.shard.state.image
    grown = image.with_topic(TopicImage(topic_id_for("b"), "b", 3))
    assert h.shard.update_metadata(grown, h.now).response == {"by-name"}
    grown2 = grown.with_topic(TopicImage(topic_id_for("c"), "c", 5))  # a regex-resolved topic grows
    assert h.shard.update_metadata(grown2, h.now).response == {"by-regex"}
    created = grown2.with_topic(TopicImage(topic_id_for("zz"), "zz", 1))  # regex groups recheck
    assert h.shard.update_metadata(created, h.now).response == {"by-regex"}


@pytest.mark.parametrize("seed", range(3))
def test_subscribes_to_any_equals_the_subscribed_set(seed: int) -> None:
    rng = random.Random(seed)
    topics = {f"t{i}": 1 for i in range(40)}
    h = Harness(topics=topics)
    for i in range(8):
        h.join(f"m{i}", topics=tuple(rng.sample(sorted(topics), rng.randrange(1, 10))))
    group = h.shard.consumer_group("g")
    assert isinstance(group, ConsumerGroup)
    for _ in range(200):
        names = frozenset(rng.sample([*topics, "x", "y"], rng.randrange(0, 30)))
        assert group.subscribes_to_any(names) == (not names.isdisjoint(group.subscribed_topic_names()))
