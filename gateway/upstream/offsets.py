"""Committed offsets in upstream mode: groupshift's log is the truth, the upstream a copy.

* Import. The first time a group shows up (a JoinGroup, ConsumerGroupHeartbeat,
  StreamsGroupHeartbeat, OffsetFetch or OffsetCommit for a group id that has neither state nor
  offsets in groupshift's log), its committed offsets are read from the upstream's group
  coordinator (FindCoordinator, then OffsetFetch for all topics) and written to groupshift's
  log as a simple-group commit before the request is served. A fleet that committed directly
  to the cluster and is restarted against groupshift resumes from those commits. While the
  upstream cannot be asked, the request closes its connection (the client retries), so a
  group never starts from `auto.offset.reset` because of an unreachable cluster.
* Mirror. Every offset groupshift accepts (OffsetCommit answered without error) is copied to
  the upstream's `__consumer_offsets` as a simple-group commit (generation -1, empty member
  id: Kafka's "standalone" commit, as `kafka-consumer-groups --reset-offsets` writes), so lag
  tools reading the cluster keep working. It happens after the client's commit was answered,
  on a background task per group that sends only the latest offset of each partition, and it
  never delays or fails the client's commit.
* Conflict. A live group of the same id on the upstream (clients bypassing the gateway)
  refuses simple commits: UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION on a classic group,
  STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID on a consumer group, REBALANCE_IN_PROGRESS. That is
  logged (`upstream.mirror_conflict`) and counted
  (`groupshift_upstream_mirror_conflicts_total`); the offsets stay pending and are retried
  with back-off until the upstream group is gone. groupshift's own commit is never affected.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import structlog

from engine.context import RequestContext as EngineContext
from engine.offsets.api import CommitPartition, CommitTopic, OffsetCommitRequest
from gateway.registry import CloseConnection, HandlerRegistry, RequestContext
from gateway.upstream.cluster import UpstreamCluster
from gateway.upstream.link import UpstreamUnavailable
from protocol.codec import DecodeFailure

if TYPE_CHECKING:
    from gateway.groups.service import GroupCoordinatorService
    from gateway.metrics import MetricsRegistry

log = structlog.get_logger("upstream")

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, CONSUMER_GROUP_HEARTBEAT, DELETE_GROUPS = 8, 9, 11, 68, 42
STREAMS_GROUP_HEARTBEAT = 88
TXN_OFFSET_COMMIT = 28
# Errors of a coordinator that moved or is loading: ask FindCoordinator again and retry.
RETRY_COORDINATOR = frozenset({14, 15, 16})  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR
# A live group of the same id refuses a simple commit.
CONFLICT = frozenset({22, 25, 27, 82, 110, 113})
UNKNOWN_TOPIC_OR_PARTITION = 3
IMPORT_CONTEXT = EngineContext("groupshift-upstream-import", "/upstream", 8)

Offset = tuple[int, int, str | None]  # offset, leader epoch, metadata


class OffsetBridge:
    def __init__(
        self, service: GroupCoordinatorService, cluster: UpstreamCluster, metrics: MetricsRegistry
    ) -> None:
        self.service = service
        self.cluster = cluster
        self.import_enabled = cluster.config.offsets_import_enable
        self.mirror_enabled = cluster.config.offsets_mirror_enable
        self._known: set[str] = set()
        self._name_topics = False  # the upstream cannot answer OffsetFetch with topics null
        self._importing: dict[str, asyncio.Future[None]] = {}
        self._pending: dict[str, dict[tuple[str, int], Offset]] = {}
        self._mirrors: dict[str, asyncio.Task[None]] = {}
        self._coordinators: dict[str, int] = {}
        self._deletes: set[asyncio.Task[None]] = set()
        self._imports = metrics.counter(
            "groupshift_upstream_offset_imports_total",
            "Groups checked for offsets on the upstream, by result",
            ("result",),
        )
        self._mirrored = metrics.counter(
            "groupshift_upstream_mirrored_offsets_total",
            "Partition offsets written to the upstream by the mirror",
        )
        self._conflicts = metrics.counter(
            "groupshift_upstream_mirror_conflicts_total",
            "Mirror commits refused by a live group of the same id on the upstream",
        )
        metrics.gauge(
            "groupshift_upstream_mirror_pending_offsets", "Partition offsets waiting to be mirrored"
        ).set_function(lambda: sum(len(p) for p in self._pending.values()))

    # -- installation --------------------------------------------------------------------------

    def install(self, registry: HandlerRegistry) -> None:
        for key, group_ids in (
            (JOIN_GROUP, lambda r: [r.group_id]),
            (CONSUMER_GROUP_HEARTBEAT, lambda r: [r.group_id]),
            (STREAMS_GROUP_HEARTBEAT, lambda r: [r.group_id]),
            (
                OFFSET_FETCH,
                lambda r: [g.group_id for g in r.groups] if hasattr(r, "groups") else [r.group_id],
            ),
            (OFFSET_COMMIT, lambda r: [r.group_id]),
            (TXN_OFFSET_COMMIT, lambda r: [r.group_id]),
        ):
            spec = registry.get(key)
            if spec is None:
                continue
            fn = spec.fn
            if key == OFFSET_COMMIT and self.mirror_enabled:
                fn = self._mirroring(fn)
            if self.import_enabled:
                fn = self._importing_first(fn, group_ids)
            registry.register(key, spec.min_version, spec.max_version, fn, enabled=spec.enabled, replace=True)

        spec = registry.get(DELETE_GROUPS)
        if spec is not None and self.mirror_enabled:
            registry.register(
                DELETE_GROUPS, spec.min_version, spec.max_version, self._deleting(spec.fn), replace=True
            )

    def close(self) -> None:
        for task in self._mirrors.values():
            task.cancel()
        for task in self._deletes:
            task.cancel()

    # -- import --------------------------------------------------------------------------------

    def _is_known(self, group_id: str) -> bool:
        if group_id in self._known:
            return True
        shard = self.service.runtime_for(group_id).shard
        if group_id in shard.groups or shard.offsets.has_offsets(group_id):
            self._known.add(group_id)
            return True
        return False

    def _importing_first(
        self, fn: Callable[..., Any], group_ids: Callable[[Any], list[str]]
    ) -> Callable[..., Any]:
        def handler(ctx: RequestContext, header: Any, req: Any) -> Any:
            new = [g for g in group_ids(req) if g and not self._is_known(g)]
            if not new:
                return fn(ctx, header, req)
            return asyncio.ensure_future(self._import_then(new, fn, ctx, header, req))

        return handler

    async def _import_then(
        self, groups: list[str], fn: Callable[..., Any], ctx: RequestContext, header: Any, req: Any
    ) -> Any:
        for g in groups:
            fut = self._importing.get(g)
            if fut is None:
                fut = self._importing[g] = asyncio.ensure_future(self._import(g))
                fut.add_done_callback(self._import_done(g))
            try:
                await asyncio.shield(fut)
            except (UpstreamUnavailable, OSError, TimeoutError) as e:
                raise CloseConnection("upstream.offset_import_failed", group_id=g, error=str(e)) from None
        result = fn(ctx, header, req)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _import_done(self, group_id: str) -> Callable[[asyncio.Future[None]], None]:
        def done(_: asyncio.Future[None]) -> None:
            self._importing.pop(group_id, None)

        return done

    async def offset_fetch_all(self, node: int | None, version: int, group_id: str) -> Any:
        """OffsetFetch of every committed offset of the group (`topics` null: all of them).

        Some Kafka-compatible brokers (Tansu 0.6) answer the null form with a truncated body
        (no top-level error code); groupshift then names every topic the cluster has (read
        afresh), with all their partitions, which every broker answers, and keeps doing so for
        this cluster."""
        if not self._name_topics:
            body: dict[str, Any] = {"group_id": group_id, "topics": None, "require_stable": False}
            try:
                return await self.cluster.call(node, OFFSET_FETCH, version, body)
            except DecodeFailure as e:
                self._name_topics = True
                log.warning("upstream.offset_fetch_all_unsupported", group_id=group_id, error=str(e))
        # The group's topics may be newer than the last periodic refresh (a fleet cut over right
        # after creating them): read the cluster's topics now.
        await self.cluster.refresh()
        topics = [
            {"name": t.name, "partition_indexes": list(range(t.num_partitions))}
            for t in self.cluster.image.topics()
        ]
        body = {"group_id": group_id, "topics": topics, "require_stable": False}
        return await self.cluster.call(node, OFFSET_FETCH, version, body)

    async def _import(self, group_id: str) -> None:
        await asyncio.wait_for(self.cluster.ready.wait(), self.cluster.request_timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cluster.request_timeout
        while True:
            node = await self.coordinator(group_id)
            version = self.cluster.version_for(OFFSET_FETCH, 7)
            resp = await self.offset_fetch_all(node, version, group_id)
            code = int(resp.error_code)
            if code in RETRY_COORDINATOR and loop.time() < deadline:
                self._coordinators.pop(group_id, None)
                await asyncio.sleep(0.2)
                continue
            break
        if self._is_known(group_id):
            return  # the group appeared while we asked (another request created it)
        if code != 0:
            self._imports.labels("error").inc()
            log.warning("upstream.offset_import_skipped", group_id=group_id, error_code=code)
            self._known.add(group_id)
            return
        topics = [
            CommitTopic(
                t.name,
                [
                    CommitPartition(
                        int(p.partition_index),
                        int(p.committed_offset),
                        int(getattr(p, "committed_leader_epoch", -1)),
                        p.metadata,
                    )
                    for p in t.partitions
                    if int(p.committed_offset) >= 0 and int(p.error_code) == 0
                ],
            )
            for t in resp.topics
        ]
        topics = [t for t in topics if t.partitions]
        if topics:
            request = OffsetCommitRequest(group_id=group_id, topics=topics)
            result = self.service.runtime_for(group_id).run(
                lambda c, now: c.offset_commit(request, IMPORT_CONTEXT, now)
            )
            if isinstance(result, asyncio.Future):
                await result
            count = sum(len(t.partitions) for t in topics)
            self._imports.labels("imported").inc()
            log.info(
                "upstream.offsets_imported",
                group_id=group_id,
                partitions=count,
                topics=[t.name for t in topics],
            )
        else:
            self._imports.labels("empty").inc()
        self._known.add(group_id)

    def forget_coordinator(self, group_id: str) -> None:
        """The group's upstream coordinator moved: the next `coordinator` asks again."""
        self._coordinators.pop(group_id, None)

    async def coordinator(self, group_id: str) -> int:
        node = self._coordinators.get(group_id)
        if node is not None and node in self.cluster.brokers:
            return node
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cluster.request_timeout
        while True:
            version = self.cluster.version_for(10, 3)
            body: dict[str, Any] = (
                {"key_type": 0, "coordinator_keys": [group_id]}
                if version >= 4
                else {"key": group_id, "key_type": 0}
            )
            resp = await self.cluster.call(None, 10, version, body)
            entry = resp.coordinators[0] if version >= 4 else resp
            if int(entry.error_code) == 0 and int(entry.node_id) in self.cluster.brokers:
                self._coordinators[group_id] = int(entry.node_id)
                return int(entry.node_id)
            if loop.time() > deadline:
                raise UpstreamUnavailable(
                    f"no upstream coordinator for group {group_id!r} (error {int(entry.error_code)})"
                )
            if int(entry.error_code) == 0:
                self.cluster.request_refresh()
            await asyncio.sleep(0.2)

    # -- mirror --------------------------------------------------------------------------------

    def _mirroring(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def handler(ctx: RequestContext, header: Any, req: Any) -> Any:
            result = fn(ctx, header, req)
            if isinstance(result, asyncio.Future):
                result.add_done_callback(
                    lambda f: None if f.cancelled() or f.exception() else self._accepted(req, f.result())
                )
            else:
                self._accepted(req, result)
            return result

        return handler

    def _accepted(self, req: Any, response: Any) -> None:
        """Queue the partitions the response accepted for mirroring."""
        if isinstance(response, bytes | bytearray):
            return
        ok = {
            (t.name, int(p.partition_index))
            for t in response.topics
            for p in t.partitions
            if int(p.error_code) == 0
        }
        if not ok:
            return
        pending = self._pending.setdefault(req.group_id, {})
        for t in req.topics:
            for p in t.partitions:
                key = (t.name, int(p.partition_index))
                if key in ok:
                    pending[key] = (
                        int(p.committed_offset),
                        int(getattr(p, "committed_leader_epoch", -1)),
                        p.committed_metadata,
                    )
        task = self._mirrors.get(req.group_id)
        if task is None or task.done():
            self._mirrors[req.group_id] = asyncio.ensure_future(self._mirror(req.group_id))

    def mirror(self, group_id: str, offsets: dict[tuple[str, int], Offset]) -> None:
        """Queue offsets groupshift committed by another path than OffsetCommit (a committed
        transaction's offsets, `gateway.upstream.transactions`) for the mirror."""
        if not self.mirror_enabled or not offsets:
            return
        self._pending.setdefault(group_id, {}).update(offsets)
        task = self._mirrors.get(group_id)
        if task is None or task.done():
            self._mirrors[group_id] = asyncio.ensure_future(self._mirror(group_id))

    async def _mirror(self, group_id: str) -> None:
        backoff = 0.1
        conflicted = False
        while self._pending.get(group_id):
            batch = self._pending.pop(group_id)
            try:
                await asyncio.wait_for(self.cluster.ready.wait(), self.cluster.request_timeout)
                node = await self.coordinator(group_id)
                errors = await self._send(node, group_id, batch.items())
            except (UpstreamUnavailable, OSError, TimeoutError) as e:
                log.info("upstream.mirror_retry", group_id=group_id, error=str(e), retry_in_seconds=backoff)
                self._requeue(group_id, batch)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            retry: dict[tuple[str, int], Offset] = {}
            conflict_codes = set()
            done = 0
            for key, code in errors.items():
                if code == 0:
                    done += 1
                elif code in RETRY_COORDINATOR:
                    self._coordinators.pop(group_id, None)
                    retry[key] = batch[key]
                elif code in CONFLICT:
                    conflict_codes.add(code)
                    retry[key] = batch[key]
                elif code == UNKNOWN_TOPIC_OR_PARTITION:
                    log.warning(
                        "upstream.mirror_dropped",
                        group_id=group_id,
                        topic=key[0],
                        partition=key[1],
                        error_code=code,
                    )
                else:
                    retry[key] = batch[key]
            self._mirrored.inc(done)
            if conflict_codes:
                self._conflicts.inc()
                if not conflicted:
                    log.warning(
                        "upstream.mirror_conflict",
                        group_id=group_id,
                        error_codes=sorted(conflict_codes),
                        partitions=len(retry),
                        detail="a live group with this id exists on the upstream; groupshift keeps its own "
                        "offsets and retries the mirror until that group is gone",
                    )
                conflicted = True
            elif conflicted:
                log.info("upstream.mirror_resumed", group_id=group_id)
                conflicted = False
            if retry:
                self._requeue(group_id, retry)
                await asyncio.sleep(backoff if not conflict_codes else 5.0)
                backoff = min(backoff * 2, 5.0)
            else:
                backoff = 0.1
        self._mirrors.pop(group_id, None)

    # -- deletes -------------------------------------------------------------------------------

    def _deleting(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """DeleteGroups through the gateway also deletes the upstream's copy (best effort), so a
        later group of the same id does not import the deleted group's mirrored offsets."""

        def handler(ctx: RequestContext, header: Any, req: Any) -> Any:
            result = fn(ctx, header, req)
            if isinstance(result, asyncio.Future):
                result.add_done_callback(
                    lambda f: None if f.cancelled() or f.exception() else self._deleted(f.result())
                )
            else:
                self._deleted(result)
            return result

        return handler

    def _deleted(self, response: Any) -> None:
        for r in response.results:
            if int(r.error_code) != 0:
                continue
            group_id = r.group_id
            self._known.add(group_id)  # nothing to import again in this process
            self._pending.pop(group_id, None)
            task = asyncio.ensure_future(self._delete_upstream(group_id))
            self._deletes.add(task)
            task.add_done_callback(self._deletes.discard)

    async def _delete_upstream(self, group_id: str) -> None:
        try:
            mirror = self._mirrors.get(group_id)
            if mirror is not None:
                await asyncio.wait([mirror], timeout=self.cluster.request_timeout)
            node = await self.coordinator(group_id)
            version = self.cluster.version_for(DELETE_GROUPS, 2)
            resp = await self.cluster.call(node, DELETE_GROUPS, version, {"groups_names": [group_id]})
            code = int(resp.results[0].error_code)
        except (UpstreamUnavailable, OSError, TimeoutError) as e:
            log.warning("upstream.group_delete_failed", group_id=group_id, error=str(e))
            return
        if code not in (0, 69):  # GROUP_ID_NOT_FOUND: nothing was mirrored
            log.warning("upstream.group_delete_failed", group_id=group_id, error_code=code)
        else:
            log.info("upstream.group_deleted", group_id=group_id)

    def _requeue(self, group_id: str, batch: dict[tuple[str, int], Offset]) -> None:
        # Newer offsets committed meanwhile win over the ones being retried.
        pending = self._pending.setdefault(group_id, {})
        for key, value in batch.items():
            pending.setdefault(key, value)

    async def _send(
        self, node: int, group_id: str, items: Iterable[tuple[tuple[str, int], Offset]]
    ) -> dict[tuple[str, int], int]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), (offset, epoch, metadata) in items:
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": epoch,
                    "committed_timestamp": -1,
                    "committed_metadata": metadata,
                }
            )
        version = self.cluster.version_for(OFFSET_COMMIT, 7)
        resp = await self.cluster.call(
            node,
            OFFSET_COMMIT,
            version,
            {
                "group_id": group_id,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "retention_time": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            },
        )
        return {
            (t.name, int(p.partition_index)): int(p.error_code) for t in resp.topics for p in t.partitions
        }
