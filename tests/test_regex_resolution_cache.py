"""The regex resolution cache (`engine.consumer.regex.resolve_image`): per (regex, metadata
image), shared by every group, incremental on a newer image, and always equal to a full
resolution (RE2 full match, as Kafka's RE2/J)."""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from engine.consumer import regex as regexes
from engine.metadata import MetadataImage, TopicImage, topic_id_for


def image_of(names: list[str], version: int = 0) -> MetadataImage:
    return MetadataImage([TopicImage(topic_id_for(n), n, 1) for n in names], version)


def listings(monkeypatch: pytest.MonkeyPatch, refuse: MetadataImage | None = None) -> list[MetadataImage]:
    """The images whose every topic name is listed from now on: a full resolution lists them all
    (`resolve(pattern, image.topic_names())`), a cached or incremental one does not; listing
    `refuse`'s names fails the test. Counted on MetadataImage, an interpreted class in both builds:
    the compiled build (mypyc) calls `resolve` natively, past any patch of the module's attribute."""
    listed: list[MetadataImage] = []
    real = MetadataImage.topic_names

    def topic_names(self: MetadataImage) -> Iterable[str]:
        if self is refuse:
            pytest.fail("full resolution for a delta")
        listed.append(self)
        return real(self)

    monkeypatch.setattr(MetadataImage, "topic_names", topic_names)
    return listed


def test_same_image_is_resolved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    image = image_of([f"orders-{i}" for i in range(100)] + ["payments"])
    listed = listings(monkeypatch)
    first = regexes.resolve_image("orders-.*", image)
    again = regexes.resolve_image("orders-.*", image)
    assert first is again and len(first) == 100 and listed == [image]


def test_derived_image_rematches_only_changed_names(monkeypatch: pytest.MonkeyPatch) -> None:
    base = image_of([f"t-{i}" for i in range(50)] + ["other"])
    assert len(regexes.resolve_image("t-.*", base)) == 50
    newer = base.with_topics([TopicImage(topic_id_for("t-new"), "t-new", 1)], removed=["t-3"])
    listings(monkeypatch, refuse=newer)
    assert regexes.resolve_image("t-.*", newer) == frozenset(
        {f"t-{i}" for i in range(50) if i != 3} | {"t-new"}
    )


def test_changed_topic_names_of_a_derived_image_is_its_delta() -> None:
    base = image_of(["a", "b", "c"])
    newer = base.with_topics(
        [TopicImage(topic_id_for("b"), "b", 2), TopicImage(topic_id_for("d"), "d", 1)], ["c"]
    )
    assert base.changed_topic_names(newer) == {"b", "c", "d"}
    assert newer.version == base.version + 1
    unrelated = image_of(["a", "b", "c"], version=7)
    assert unrelated.changed_topic_names(newer) == {"b", "c", "d"}
    same = base.with_topics([TopicImage(topic_id_for("a"), "a", 1)])  # replaced by an equal entry
    assert base.changed_topic_names(same) == set()


@pytest.mark.parametrize("seed", range(5))
def test_cache_always_equals_full_resolution(seed: int) -> None:
    rng = random.Random(seed)
    pool = [f"{p}{i}" for p in ("orders.", "orders_", "pay-", "x") for i in range(30)]
    patterns = ["orders[._].*", "pay-1.*", "x[0-9]", ".*", "nothing"]
    image = image_of(rng.sample(pool, 40))
    for _ in range(30):
        added = [n for n in rng.sample(pool, 5) if image.topic(n) is None]
        removed = [n for n in image.topic_names() if rng.random() < 0.1]
        if rng.random() < 0.2:  # sometimes an image not derived from the cached one
            image = image_of(sorted(set(image.topic_names()) - set(removed) | set(added)), image.version + 1)
        else:
            image = image.with_topics([TopicImage(topic_id_for(n), n, 1) for n in added], removed)
        for p in patterns:
            assert regexes.resolve_image(p, image) == regexes.resolve(p, image.topic_names()), p


def test_full_match_semantics_kept() -> None:
    names = ["topic", "topic-1", "topicc", "a.b", "aXb"]
    assert regexes.resolve("^topic*", names) == {"topic", "topicc"}  # a full match, as RE2/J
    assert regexes.resolve("a\\.b", names) == {"a.b"}
    assert regexes.resolve("", names) == frozenset()
    with pytest.raises(Exception, match="not a valid regular expression"):
        regexes.resolve("[a-", names)
