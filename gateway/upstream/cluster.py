"""The upstream cluster as groupshift sees it: brokers, API versions, topics.

Bootstrap follows a Kafka client's (`NetworkClient`/`Metadata`): ApiVersions then Metadata to
any reachable bootstrap address, then a Metadata refresh every `upstream.metadata.max.age.ms`
and on demand (a forwarded response shows a topic or broker groupshift does not know, a topic
was created, deleted or grown through the gateway). Each refresh

* hands the broker list to the proxy, which opens a local listener for a broker it has not
  seen (a broker added upstream) and stops forwarding to one that left;
* turns the topics into the engine's `MetadataImage` (name, topic id, partition count, replica
  racks) for the assignors, fed to every coordinator shard when it changed, exactly as the
  embedded data plane feeds its own topic changes.

groupshift's own requests (this refresh, the offset import and mirror) go over links of their
own, one per broker, never over a client's link.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from kio.index import load_request_schema, load_response_schema

from engine.metadata import EMPTY_IMAGE, MetadataImage, TopicImage
from gateway.upstream.config import UpstreamConfig
from gateway.upstream.link import UpstreamLink, UpstreamUnavailable
from gateway.upstream.security import UpstreamSecurity
from gateway.upstream.topic_ids import METADATA_IDS_FROM, missing, topic_id_of
from protocol.codec import DecodeFailure, decode_response, encode_request
from protocol.entity_builder import build

log = structlog.get_logger("upstream")

BOOTSTRAP_NODE = -1


@dataclasses.dataclass(frozen=True, slots=True)
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None


class UpstreamCluster:
    def __init__(self, config: UpstreamConfig, security: UpstreamSecurity | None = None) -> None:
        self.config = config
        # The `upstream.` security settings, shared by every upstream connection of this server.
        self.security = security if security is not None else UpstreamSecurity(config.client_security())
        self.connect_timeout = config.connect_timeout_ms / 1000
        self.request_timeout = config.request_timeout_ms / 1000
        self.brokers: dict[int, Broker] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.image = EMPTY_IMAGE
        #: The cluster gives some topic no id (Metadata before v10, or a zero UUID): groupshift's
        #: own ids are in use (gateway.upstream.topic_ids). Once set, it stays set.
        self.topic_ids_missing = False
        self._image_version = 0
        self.ready = asyncio.Event()
        self._links: dict[int, UpstreamLink] = {}
        self._refresh_now = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.on_brokers: list[Callable[[dict[int, Broker]], Awaitable[None]]] = []
        self.on_image: list[Callable[[MetadataImage], None]] = []
        self.refreshes = 0

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self.security.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def close(self) -> None:
        self.security.close()
        if self._task is not None:
            self._task.cancel()
        for link in self._links.values():
            link.close()
        self._links.clear()

    def request_refresh(self) -> None:
        self._refresh_now.set()

    async def _run(self) -> None:
        backoff = 0.2
        while True:
            try:
                await self.refresh()
                backoff = 0.2
                wait = self.config.metadata_max_age_ms / 1000
            except (UpstreamUnavailable, OSError, TimeoutError) as e:
                log.warning("upstream.refresh_failed", error=str(e), retry_in_seconds=backoff)
                wait = backoff
                backoff = min(backoff * 2, 5.0)
            except Exception as e:  # never let the refresh loop die
                log.error("upstream.refresh_failed", error=repr(e), exc_info=e)
                wait = backoff
            self._refresh_now.clear()
            try:
                await asyncio.wait_for(self._refresh_now.wait(), wait)
                await asyncio.sleep(0.05)  # coalesce bursts of triggers
            except TimeoutError:
                pass

    # -- internal requests ---------------------------------------------------------------------

    def _link(self, node_id: int) -> UpstreamLink:
        link = self._links.get(node_id)
        if link is None or link.closed:
            if node_id == BOOTSTRAP_NODE:
                host, port = random.choice(self.config.bootstrap)
            else:
                b = self.brokers.get(node_id)
                if b is None:
                    raise UpstreamUnavailable(f"broker {node_id} is not in the upstream metadata")
                host, port = b.host, b.port
            link = self._links[node_id] = UpstreamLink(
                node_id,
                host,
                port,
                connect_timeout=self.connect_timeout,
                request_timeout=self.request_timeout,
                security=self.security,
            )
        return link

    def version_for(self, api_key: int, wanted: int) -> int:
        """`wanted`, lowered to what the upstream serves (its maximum when it is lower)."""
        lo, hi = self.api_versions.get(api_key, (0, wanted))
        if hi < wanted:
            return hi
        return max(wanted, lo)

    async def call(self, node_id: int | None, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """Send one request built from `body` to `node_id` (None: any broker); the decoded response."""
        request = build(load_request_schema(api_key, version), body)
        frame = encode_request(request, correlation_id=0, client_id="groupshift")[4:]
        targets = [node_id] if node_id is not None else self._any_nodes()
        last: Exception | None = None
        for target in targets:
            try:
                raw = await self._link(target).request(frame)
            except UpstreamUnavailable as e:
                last = e
                continue
            try:
                return decode_response(load_response_schema(api_key, version), raw)[1]
            except Exception as e:  # kio's reader errors: a body that is not Kafka's shape
                raise DecodeFailure(
                    f"broker {target}: cannot decode api_key={api_key} v{version} response: "
                    f"{type(e).__name__}: {e}"
                ) from e
        raise last if last is not None else UpstreamUnavailable("no upstream broker is known")

    def _any_nodes(self) -> list[int]:
        nodes = list(self.brokers)
        random.shuffle(nodes)
        up = [n for n in nodes if n in self._links and not self._links[n].closed]
        return [*up, *(n for n in nodes if n not in up), BOOTSTRAP_NODE]

    # -- refresh -------------------------------------------------------------------------------

    async def refresh(self) -> None:
        if not self.api_versions:
            resp = await self.call(
                None, 18, 3, {"client_software_name": "groupshift", "client_software_version": "1"}
            )
            if resp.error_code != 0:
                resp = await self.call(None, 18, 0, {})
            self.api_versions = {
                int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys
            }
            log.info(
                "upstream.api_versions",
                apis=[f"{k}:{lo}-{hi}" for k, (lo, hi) in sorted(self.api_versions.items())],
            )
        version = self.version_for(3, 12)
        resp = await self.call(
            None,
            3,
            version,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
                "include_cluster_authorized_operations": False,
            },
        )
        self.refreshes += 1
        brokers = {int(b.node_id): Broker(int(b.node_id), b.host, int(b.port), b.rack) for b in resp.brokers}
        self.cluster_id = getattr(resp, "cluster_id", None)
        self.controller_id = int(getattr(resp, "controller_id", -1))
        if brokers != self.brokers:
            added = sorted(set(brokers) - set(self.brokers))
            removed = sorted(set(self.brokers) - set(brokers))
            log.info("upstream.brokers_changed", brokers=sorted(brokers), added=added, removed=removed)
            for n in removed:
                link = self._links.pop(n, None)
                if link is not None:
                    link.close()
            self.brokers = brokers
            for hook in self.on_brokers:
                await hook(brokers)
        if version < METADATA_IDS_FROM and not self.topic_ids_missing:
            self.topic_ids_missing = True
            log.info("upstream.topic_ids_missing", metadata_version=version)
        self._update_image(resp.topics, brokers)
        if not self.ready.is_set():
            log.info(
                "upstream.ready", cluster_id=self.cluster_id, brokers=sorted(brokers), topics=len(self.image)
            )
            self.ready.set()

    def _update_image(self, topics: Any, brokers: dict[int, Broker]) -> None:
        images = []
        for t in topics:
            if t.error_code != 0 or t.is_internal or t.name is None:
                continue
            racks: dict[int, tuple[str, ...]] = {}
            for p in t.partitions:
                rs = tuple(
                    sorted({r for n in p.replica_nodes if (r := getattr(brokers.get(int(n)), "rack", None))})
                )
                if rs:
                    racks[int(p.partition_index)] = rs
            # No id upstream (Metadata before v10, or a zero UUID): groupshift's derived id.
            upstream_id = getattr(t, "topic_id", None)
            if missing(upstream_id) and not self.topic_ids_missing:
                self.topic_ids_missing = True
                log.info("upstream.topic_ids_missing", topic=t.name, metadata_version=t.__version__)
            topic_id = topic_id_of(self.cluster_id, t.name, upstream_id)
            images.append(TopicImage(topic_id, t.name, len(t.partitions), racks))
        current = {t.name: t for t in self.image.topics()}
        if current == {t.name: t for t in images}:
            return
        self._image_version += 1
        self.image = MetadataImage(images, self._image_version)
        log.info("upstream.topics_changed", topics=len(images), version=self._image_version)
        for hook in self.on_image:
            hook(self.image)

    def knows_topic(self, name: str, partitions: int) -> bool:
        t = self.image.topic(name)
        return t is not None and t.num_partitions == partitions
