"""gateway/upstream/streams_topics.py's CreateTopics of a streams group's internal topics,
against a cluster stand-in that records the request and answers as Kafka's CreateTopics does:
the replication factor chosen, TOPIC_ALREADY_EXISTS taken as created, a refusal remembered
(and its reason shown) until the retry interval passed, an unanswered request the same. The
real clusters are in e2e/test_upstream_{groupshift,kafka,tansu,passthrough}.py."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.index import load_response_schema

from engine.metadata import EMPTY_IMAGE, MetadataImage, TopicImage, topic_id_for
from engine.streams.api import InternalTopic
from gateway.metrics import MetricsRegistry
from gateway.upstream import streams_topics
from gateway.upstream.link import UpstreamUnavailable
from protocol.entity_builder import build
from records.streams_group import KeyValue


class Cluster:
    """What `UpstreamInternalTopics` uses of `UpstreamCluster`: CreateTopics answered with the
    given per-topic errors, a created topic visible in the image after the next refresh."""

    def __init__(self, errors: dict[str, int] | None = None, create_version: int = 7) -> None:
        self.errors = errors or {}
        self.api_versions = {19: (0, create_version)}
        self.brokers = {1: object()}
        self.controller_id = 1
        self.request_timeout = 0.5
        self.image: MetadataImage = EMPTY_IMAGE
        self.calls: list[tuple[int | None, int, dict[str, Any]]] = []
        self._pending: list[TopicImage] = []
        self.unavailable = False

    def version_for(self, api_key: int, wanted: int) -> int:
        return min(wanted, self.api_versions[api_key][1])

    def request_refresh(self) -> None:
        if self._pending:
            self.image = MetadataImage([*self.image.topics(), *self._pending], self.image.version + 1)
            self._pending = []

    async def call(self, node: int | None, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.calls.append((node, version, body))
        if self.unavailable:
            raise UpstreamUnavailable("broker 1 went away")
        results = []
        for t in body["topics"]:
            code = self.errors.get(t["name"], 0)
            if code == 0:
                self._pending.append(TopicImage(topic_id_for(t["name"]), t["name"], t["num_partitions"], {}))
            results.append(
                {
                    "name": t["name"],
                    "topic_id": topic_id_for(t["name"]),
                    "error_code": code,
                    "error_message": None if code in (0, 36) else "Topic policy says no.",
                    "topic_config_error_code": 0,
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "configs": None,
                }
            )
        return build(load_response_schema(19, version), {"throttle_time": 0, "topics": results})


def _topics(*specs: tuple[str, int]) -> list[InternalTopic]:
    return [InternalTopic(name, 4, rf, (KeyValue("cleanup.policy", "compact"),)) for name, rf in specs]


def test_replication_factor_is_the_topologys_else_the_clusters_default() -> None:
    cluster = Cluster()
    creator = streams_topics.UpstreamInternalTopics(cluster, MetricsRegistry())  # type: ignore[arg-type]
    asyncio.run(creator.create(_topics(("app-a-changelog", 0), ("app-b-changelog", 3))))
    node, version, body = cluster.calls[0]
    assert node == 1 and version == 7  # the controller, CreateTopics v7
    assert [(t["name"], t["num_partitions"], t["replication_factor"]) for t in body["topics"]] == [
        ("app-a-changelog", 4, -1),
        ("app-b-changelog", 4, 3),
    ]
    assert body["topics"][0]["configs"] == [{"name": "cleanup.policy", "value": "compact"}]
    assert body["validate_only"] is False
    assert cluster.image.topic("app-a-changelog") is not None  # waited for until visible

    old = Cluster(create_version=3)  # no -1 before v4: the old cluster's topics get 1
    creator = streams_topics.UpstreamInternalTopics(old, MetricsRegistry())  # type: ignore[arg-type]
    asyncio.run(creator.create(_topics(("app-c-changelog", 0))))
    assert old.calls[0][1] == 3 and old.calls[0][2]["topics"][0]["replication_factor"] == 1


def test_refusals_are_remembered_until_the_retry_interval() -> None:
    now = [1000.0]
    cluster = Cluster({"app-bad-changelog": 44, "app-old-repartition": 36})  # POLICY_VIOLATION, EXISTS
    creator = streams_topics.UpstreamInternalTopics(
        cluster,  # type: ignore[arg-type]
        MetricsRegistry(),
        clock=lambda: now[0],
    )
    asyncio.run(creator.create(_topics(("app-bad-changelog", 0), ("app-old-repartition", 0))))
    assert creator.refusal("app-old-repartition") is None  # TOPIC_ALREADY_EXISTS: created
    assert creator.refusal("app-bad-changelog") == "POLICY_VIOLATION: Topic policy says no."
    now[0] += streams_topics.RETRY_SECONDS
    assert creator.refusal("app-bad-changelog") is None  # may be asked again

    cluster.unavailable = True
    asyncio.run(creator.create(_topics(("app-x-changelog", 0))))
    reason = creator.refusal("app-x-changelog")
    assert reason is not None and "did not answer CreateTopics" in reason
    assert "app-bad-changelog" not in creator.refused  # refusals past the interval are dropped
