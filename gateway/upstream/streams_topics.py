"""Streams groups (KIP-1071) in upstream mode: StreamsGroupHeartbeat and StreamsGroupDescribe
are answered by groupshift's engine, and the internal topics a topology lacks are created on
the upstream cluster.

Kafka's coordinator, when a heartbeat finds repartition or changelog topics missing, answers
MISSING_INTERNAL_TOPICS and asks its controller to create them (`AutoTopicCreationManager`);
the next heartbeat finds them in its metadata. A Kafka 3.x cluster (or Tansu, or any backend
without streams groups) has no such coordinator, so groupshift does the asking: the engine
names the topics to create, and this module sends one CreateTopics to the upstream cluster
(its controller when the metadata names one, else any broker) with groupshift's own upstream
credential, as a task off the request path. A topic stays "being created" until the cluster's
metadata shows it (a refresh is asked for at once), so at most one creation per topic is in
flight and a heartbeat in between does not ask again.

Replication factor: the topology's own (`replication_factor` of the TopicInfo, set from the
application's `replication.factor`) when positive, else -1, the cluster's
`default.replication.factor`, as Kafka's coordinator creates them. Topic configs are the
topology's (a changelog's `cleanup.policy=compact`, a repartition topic's retention).

A refusal (TOPIC_AUTHORIZATION_FAILED for groupshift's credential, POLICY_VIOLATION from the
cluster's create-topic policy, INVALID_REPLICATION_FACTOR, ...) is logged with Kafka's error and
message (`streams.internal_topic_refused`), counted, and the topic stays missing: the member's
heartbeats keep answering MISSING_INTERNAL_TOPICS (with the refusal's reason in the status
detail) and the creation is tried again on a later heartbeat, never sooner than
`RETRY_SECONDS` after the refusal. TOPIC_ALREADY_EXISTS (another gateway, or the application's
operator, was faster) counts as created.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import structlog
from kio.schema.errors import ErrorCode

from engine.streams.api import MISSING_INTERNAL_TOPICS, InternalTopic, Status
from gateway.groups.streams_apis import MAY_CREATE_TOPIC, StreamsApis
from gateway.registry import HandlerRegistry, RequestContext
from gateway.upstream.link import UpstreamUnavailable
from protocol.codec import DecodeFailure

if TYPE_CHECKING:
    from gateway.groups.service import GroupCoordinatorService
    from gateway.metrics import MetricsRegistry
    from gateway.upstream.cluster import UpstreamCluster

log = structlog.get_logger("coordinator")

CREATE_TOPICS = 19
TOPIC_ALREADY_EXISTS = 36
# A refused creation is not asked again sooner than this (heartbeats come every few seconds;
# a cluster refusing a topic for a policy refuses it again).
RETRY_SECONDS = 10.0


class UpstreamInternalTopics:
    """CreateTopics of a streams group's missing internal topics on the upstream cluster."""

    def __init__(
        self, cluster: UpstreamCluster, metrics: MetricsRegistry, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cluster = cluster
        self.clock = clock  # of the refusals' retry interval
        # topic -> (Kafka's error name and message, monotonic time of the refusal)
        self.refused: dict[str, tuple[str, float]] = {}
        self._created = metrics.counter(
            "groupshift_upstream_streams_topics_total",
            "Streams groups' internal topics groupshift asked the upstream cluster to create, by result",
            ("result",),
        )

    def refusal(self, name: str) -> str | None:
        """Why the cluster refused `name` lately (None: not refused, or long enough ago to try
        again)."""
        found = self.refused.get(name)
        if found is None:
            return None
        if self.clock() - found[1] >= RETRY_SECONDS:
            return None
        return found[0]

    async def create(self, topics: Sequence[InternalTopic]) -> None:
        """One CreateTopics for `topics`; returns once the created ones are in the cluster's
        metadata (or the request timeout passed), so that the caller's in-flight mark covers
        the window in which a heartbeat would still see them missing."""
        cluster = self.cluster
        # Only refusals within the retry interval matter: the map holds no more than those
        # (a client naming ever new topics does not grow it).
        now = self.clock()
        self.refused = {k: v for k, v in self.refused.items() if now - v[1] < RETRY_SECONDS}
        version = cluster.version_for(CREATE_TOPICS, 7)
        body = {
            "topics": [
                {
                    "name": t.name,
                    "num_partitions": t.partitions,
                    # -1 (the cluster's default) needs v4; older clusters get theirs as 1
                    "replication_factor": t.replication_factor
                    if t.replication_factor > 0
                    else (-1 if version >= 4 else 1),
                    "assignments": [],
                    "configs": [{"name": kv.key, "value": kv.value} for kv in t.configs],
                }
                for t in topics
            ],
            "timeout": int(cluster.request_timeout * 1000),
            "validate_only": False,
        }
        controller = cluster.controller_id if cluster.controller_id in cluster.brokers else None
        try:
            resp = await cluster.call(controller, CREATE_TOPICS, version, body)
        except (UpstreamUnavailable, TimeoutError, OSError, DecodeFailure) as e:
            now = self.clock()
            for t in topics:
                self.refused[t.name] = (f"the upstream cluster did not answer CreateTopics: {e}", now)
            self._created.labels("unavailable").inc(len(topics))
            log.warning("streams.internal_topic_refused", topics=[t.name for t in topics], error=str(e))
            return
        wanted = {t.name: t for t in topics}
        created: list[str] = []
        for r in resp.topics:
            if r.name not in wanted:
                continue
            t = wanted[r.name]
            code = int(r.error_code)
            if code in (0, TOPIC_ALREADY_EXISTS):
                self.refused.pop(t.name, None)
                created.append(t.name)
                self._created.labels("created" if code == 0 else "exists").inc()
                log.info(
                    "streams.internal_topic_created", topic=t.name, partitions=t.partitions, upstream=True
                )
                continue
            reason = _error_name(code)
            self.refused[t.name] = (f"{reason}: {r.error_message or ''}".rstrip(": "), self.clock())
            self._created.labels("refused").inc()
            log.warning(
                "streams.internal_topic_refused",
                topic=t.name,
                error=reason,
                reason=r.error_message,
                upstream=True,
            )
        if created:
            await self._until_visible(created)

    async def _until_visible(self, names: list[str]) -> None:
        """Metadata refreshes (every half second: a broker may learn of a new topic after its
        controller answered) until the image has `names`, at most the request timeout."""
        deadline = time.monotonic() + self.cluster.request_timeout
        polls = 0
        while time.monotonic() < deadline:
            if polls % 5 == 0:
                self.cluster.request_refresh()
            polls += 1
            await asyncio.sleep(0.1)
            if all(self.cluster.image.topic(n) is not None for n in names):
                return


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


class UpstreamStreamsApis(StreamsApis):
    """The embedded handlers with the internal topics created on the upstream cluster."""

    def __init__(self, service: GroupCoordinatorService, topics: UpstreamInternalTopics) -> None:
        super().__init__(service, None)
        self.topics = topics

    def _create_internal_topics(
        self, ctx: RequestContext, topics: tuple[InternalTopic, ...], status: tuple[Status, ...] | None
    ) -> tuple[Status, ...] | None:
        """Start creating, on the cluster, the missing internal topics the principal may
        create; the status says which may not be created and which the cluster refused."""
        may_create: Callable[[str], bool] | None = ctx.attributes.get(MAY_CREATE_TOPIC)
        unauthorized = sorted(t.name for t in topics if may_create is not None and not may_create(t.name))
        details: list[str] = []
        if unauthorized:
            details.append(f"Unauthorized to CREATE on topics {', '.join(unauthorized)}.")
        wanted: list[InternalTopic] = []
        for t in topics:
            if t.name in unauthorized or t.name in self._creating:
                continue
            reason = self.topics.refusal(t.name)
            if reason is not None:
                details.append(f"The upstream cluster refused to create {t.name}: {reason}.")
                continue
            wanted.append(t)
        if wanted:
            self._creating.update(t.name for t in wanted)
            task = asyncio.get_running_loop().create_task(self._create(wanted))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if details:
            status = (*(status or ()), *(Status(MISSING_INTERNAL_TOPICS, d) for d in details))
        return status

    async def _create(self, topics: list[InternalTopic]) -> None:
        try:
            await self.topics.create(topics)
        except Exception as e:  # never let a creation task die unseen
            log.error("streams.internal_topic_create_failed", topics=[t.name for t in topics], error=repr(e))
        finally:
            self._creating.difference_update(t.name for t in topics)


def install(
    registry: HandlerRegistry,
    service: GroupCoordinatorService,
    cluster: UpstreamCluster,
    metrics: MetricsRegistry,
) -> UpstreamStreamsApis:
    """Replace the embedded registration of 88 and 89 (same versions) with the upstream one."""
    apis = UpstreamStreamsApis(service, UpstreamInternalTopics(cluster, metrics))
    for key, fn in ((88, apis.streams_group_heartbeat), (89, apis.streams_group_describe)):
        spec = registry.get(key)
        assert spec is not None, "the group layer registers the streams APIs first"
        registry.register(key, spec.min_version, spec.max_version, fn, enabled=spec.enabled, replace=True)
    return apis
