"""Which shards this node serves, and routing every group to its shard's owner (docs/scale-out.md).

Every shard always has a runtime (so listing, metrics and iteration code see one per shard);
a shard this node does not own runs on an empty, unowned storage that refuses appends, and the
group APIs never reach it: `gate` answers their requests NOT_COORDINATOR (assigned elsewhere) or
COORDINATOR_LOAD_IN_PROGRESS (assigned here, loading), as a Kafka broker answers for a
`__consumer_offsets` partition it does not lead or is still loading.

Gaining a shard (a new fleet view names this node): `fence_and_read` in a worker thread (fence
the previous writer, read the partition to its end), then the runtime reopens on a
`KafkaShardLog` holding those records. Losing one (a view names another node, the lease ran out,
or a commit failed, e.g. fenced): the runtime reopens on an empty storage; waiting responses fail
and their clients find the coordinator again. A shard lost on a failure while the view still
names this node asks the fleet for a new generation, which decides its owner afresh.

FindCoordinator answers the owner in the current view; Metadata answers list every fleet node
as a broker (`UpstreamProxy.extra_brokers`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.errors import ErrorCode

from engine.config import CoordinatorConfig
from engine.ids import IdSource
from engine.metadata import MetadataImage
from gateway.coordinator_storage import CoordinatorStorage
from gateway.error_response import error_response
from gateway.find_coordinator import NO_NODE, find_coordinator_response
from gateway.groups.routing import partition_for
from gateway.registry import HandlerRegistry, RequestContext
from gateway.scaleout.fleet import FleetMember, FleetView, NodeInfo
from gateway.scaleout.shard_log import KafkaShardLog, Loaded, ShardLogFailed, fence_and_read
from protocol.codec import response_type_of
from records.batch import BatchHeader
from records.durability import FsyncPolicy

if TYPE_CHECKING:
    from gateway.groups.service import GroupCoordinatorService
    from gateway.server import GatewayServer
    from gateway.upstream.cluster import UpstreamCluster
    from gateway.upstream.proxy import UpstreamProxy

log = structlog.get_logger("scaleout")

FIND_COORDINATOR = 10

# api key -> the group ids a request is about
GROUPS_OF: dict[int, Any] = {
    8: lambda r: [r.group_id],
    9: lambda r: [g.group_id for g in r.groups] if hasattr(r, "groups") else [r.group_id],
    11: lambda r: [r.group_id],
    12: lambda r: [r.group_id],
    13: lambda r: [r.group_id],
    14: lambda r: [r.group_id],
    15: lambda r: list(r.groups),
    28: lambda r: [r.group_id],
    42: lambda r: list(r.groups_names),
    47: lambda r: [r.group_id],
    68: lambda r: [r.group_id],
    69: lambda r: list(r.group_ids),
    88: lambda r: [r.group_id],
    89: lambda r: list(r.group_ids),
}


def install_group_gates(
    registry: HandlerRegistry, gate: Callable[[int, Any, bool, Any], Any], find_coordinator: Any
) -> None:
    """Wrap every registered group API of `GROUPS_OF` with `gate` and answer FindCoordinator with
    `find_coordinator` (after the group layer registered): how a node that owns only some
    coordinator shards (scale-out's nodes, `--workers`' processes) refuses the others' groups."""
    for key, groups_of in GROUPS_OF.items():
        spec = registry.get(key)
        if spec is None:
            continue
        registry.register(
            key,
            spec.min_version,
            spec.max_version,
            gate(key, spec.fn, spec.is_coroutine, groups_of),
            enabled=spec.enabled,
            replace=True,
        )
    spec = registry.get(FIND_COORDINATOR)
    lo, hi = (0, 6) if spec is None else (spec.min_version, spec.max_version)
    registry.register(FIND_COORDINATOR, lo, hi, find_coordinator, replace=True)


class UnownedLog:
    """The log of a shard this node does not own: empty, and every append is refused."""

    def __init__(self, shard: int) -> None:
        self.shard = shard

    @property
    def directory(self) -> str:
        return f"unowned:{self.shard}"

    @property
    def fsync_policy(self) -> FsyncPolicy:
        return "none"

    @property
    def end_offset(self) -> int:
        return 0

    @property
    def durable_offset(self) -> int:
        return 0

    def append_records(
        self, records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int
    ) -> tuple[int, int]:
        raise ShardLogFailed(f"shard {self.shard} is not owned by this node")

    def sync(self) -> int:
        return 0

    def begin_sync(self) -> Any:
        raise ShardLogFailed(f"shard {self.shard} is not owned by this node")

    def finish_sync(self, pending: Any) -> int:
        return 0

    def batches(self, from_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        return iter(())

    def close(self) -> None:
        pass


class ShardOwnership:
    def __init__(self, server: GatewayServer, cluster: UpstreamCluster) -> None:
        self.server = server
        self.cluster = cluster
        cfg = cluster.config
        self.node_id = server.config.node_id
        self.topic = cfg.coordinator_topic
        self.bootstrap = cfg.bootstrap_servers
        self.timeout_ms = cfg.request_timeout_ms
        self.replication_factor = cfg.coordinator_replication_factor
        self.num_shards = server.config.group.offsets_topic_num_partitions
        self.service: GroupCoordinatorService | None = None
        self.proxy: UpstreamProxy | None = None
        self.view: FleetView | None = None
        self.serving: set[int] = set()  # shards whose runtime holds a loaded KafkaShardLog
        self._ready: dict[int, Loaded] = {}  # loaded, waiting to be installed by the opener
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="shard-load")
        self._watchdog: asyncio.Task[None] | None = None
        self._start_task: asyncio.Task[None] | None = None
        self._claimed: tuple[int, ...] = ()  # serving | loading, published for the fleet thread
        # Fences in flight and whether a rejoin is under way (see `_before_join`).
        self._fence_gate = threading.Condition()
        self._fences_in_flight = 0
        self._rejoining = False
        self.fleet = FleetMember(
            cfg.bootstrap,
            connect_timeout=cluster.connect_timeout,
            group_id=cfg.fleet_group_id,
            num_shards=self.num_shards,
            session_timeout_ms=cfg.fleet_session_timeout_ms,
            heartbeat_interval_ms=cfg.fleet_heartbeat_interval_ms,
            me=self._me,
            on_view=self._on_view,
            before_join=self._before_join,
            security=cluster.security,
        )
        m = server.metrics
        m.gauge("groupshift_scaleout_shards_owned", "Coordinator shards this node serves").set_function(
            lambda: len(self.serving)
        )
        m.gauge("groupshift_scaleout_fleet_generation", "Generation of the fleet group").set_function(
            lambda: -1 if self.view is None else self.view.generation
        )

    # -- the storage factory of every shard runtime --------------------------------------------

    def open_shard(
        self, index: int, now: int, config: CoordinatorConfig, ids: IdSource, image: MetadataImage
    ) -> CoordinatorStorage:
        loaded = self._ready.pop(index, None)
        if loaded is None:
            was_serving = index in self.serving
            self.serving.discard(index)
            self._publish()
            if was_serving and self._assigned_here(index):
                log.warning("scaleout.shard_dropped_on_failure", shard=index)
                self.fleet.request_rejoin()
            return CoordinatorStorage.load(UnownedLog(index), config=config, ids=ids, image=image, now_ms=now)
        shard_log = KafkaShardLog(loaded, self.topic, timeout_ms=self.timeout_ms)
        storage = CoordinatorStorage.load(shard_log, config=config, ids=ids, image=image, now_ms=now)
        self.serving.add(index)
        self._publish()
        log.info(
            "scaleout.shard_loaded",
            shard=index,
            records=loaded.records,
            end_offset=loaded.end_offset,
            fence_and_read_seconds=round(loaded.seconds, 3),
            fence_seconds=round(loaded.fence_seconds, 3),
            groups=len(storage.shard.groups),
        )
        return storage

    # -- lifecycle -----------------------------------------------------------------------------

    def _me(self) -> NodeInfo:
        """This node's member metadata (called on the fleet thread: reads published values)."""
        host, _ = self.server.config.listen_address
        return NodeInfo(self.node_id, host, self.server.port, self._claimed)

    def _publish(self) -> None:
        self._claimed = tuple(sorted(self.serving | set(self._loading)))

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._start_task = loop.create_task(self._start())
        self._watchdog = loop.create_task(self._watch_lease())

    async def _start(self) -> None:
        await self.cluster.ready.wait()
        if self.node_id in self.cluster.brokers:
            log.error(
                "scaleout.node_id_collides",
                node_id=self.node_id,
                reason="node.id must differ from every upstream broker id; clients would mix them up",
            )
        loop = asyncio.get_running_loop()
        while True:
            try:
                await loop.run_in_executor(self._executor, self._ensure_topic)
                break
            except Exception as e:
                log.warning("scaleout.topic_not_ready", topic=self.topic, error=str(e))
                await asyncio.sleep(1.0)
        self.fleet.start()

    def _ensure_topic(self) -> None:
        """Create the shard topic (compacted, one partition per shard) or check its partitions."""
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap, **self.cluster.security.librdkafka_config()}
        )
        md = admin.list_topics(timeout=self.timeout_ms / 1000)
        topic = md.topics.get(self.topic)
        if topic is None or topic.error is not None:
            rf = max(1, min(self.replication_factor, len(md.brokers)))
            configs = {"cleanup.policy": "compact", "min.insync.replicas": "2" if rf >= 3 else "1"}
            fut = admin.create_topics([NewTopic(self.topic, self.num_shards, rf, config=configs)])[self.topic]
            try:
                fut.result(self.timeout_ms / 1000)
                log.info(
                    "scaleout.topic_created",
                    topic=self.topic,
                    partitions=self.num_shards,
                    replication_factor=rf,
                )
            except Exception as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise
            md = admin.list_topics(self.topic, timeout=self.timeout_ms / 1000)
            topic = md.topics.get(self.topic)
        if topic is None or len(topic.partitions) != self.num_shards:
            have = None if topic is None else len(topic.partitions)
            raise RuntimeError(
                f"topic {self.topic} has {have} partitions, offsets.topic.num.partitions is {self.num_shards}"
            )

    def close(self) -> None:
        for t in (self._watchdog, self._start_task, *self._loading.values()):
            if t is not None:
                t.cancel()
        self.fleet.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- views ---------------------------------------------------------------------------------

    def _assigned_here(self, shard: int) -> bool:
        return self.view is not None and shard in self.view.mine()

    def _lease_valid(self) -> bool:
        return time.monotonic() < self.fleet.lease_deadline

    def _before_join(self) -> None:
        """Called on the fleet thread before every JoinGroup: no new fence starts until the
        next view, and the fences already in flight finish first (bounded by half the session
        timeout, within the rebalance timeout).

        A fence is Kafka's `InitProducerId` for the shard's transactional id, and the last one
        wins. A fence started under the previous view (say, retrying while the transaction
        coordinator is still loading) that completed after the new owner's would fence the new
        owner; its load is discarded, but the new owner's next commit fails and the shard is
        reloaded. Holding the rejoin until those fences are done -- like a classic consumer
        revoking its partitions before it rejoins -- means the generation that moves a shard
        forms only after every earlier fence of it is over."""
        deadline = time.monotonic() + self.fleet.session / 2
        with self._fence_gate:
            self._rejoining = True
            while self._fences_in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("scaleout.fences_still_in_flight", fences=self._fences_in_flight)
                    return
                self._fence_gate.wait(left)

    def _fence_and_read(self, shard: int) -> Loaded | None:
        """`fence_and_read` on a worker thread, unless a rejoin is under way (None then). The
        fence counts as in flight until `init_transactions` returns; the read after it does not
        hold up a rejoin."""
        with self._fence_gate:
            if self._rejoining or not self._assigned_here(shard):
                return None
            self._fences_in_flight += 1

        counted = True

        def fenced() -> None:  # once: when the fence is over, or on any failure before it
            nonlocal counted
            with self._fence_gate:
                if counted:
                    counted = False
                    self._fences_in_flight -= 1
                    self._fence_gate.notify_all()

        try:
            return fence_and_read(
                self.bootstrap,
                self.topic,
                shard,
                timeout_ms=self.timeout_ms,
                on_fenced=fenced,
                security=self.cluster.security.librdkafka_config(),
            )
        finally:
            fenced()

    def _on_view(self, view: FleetView | None) -> None:
        with self._fence_gate:
            self._rejoining = False
        self.view = view
        mine = set() if view is None else view.mine()
        for s in sorted(self.serving - mine):
            self._drop(s, "reassigned")
        for s in sorted(mine - self.serving - set(self._loading)):
            self._loading[s] = asyncio.get_running_loop().create_task(self._gain(s, view))
        self._publish()

    async def _gain(self, shard: int, view: FleetView | None) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._assigned_here(shard):
                try:
                    loaded = await loop.run_in_executor(self._executor, self._fence_and_read, shard)
                except Exception as e:
                    log.warning("scaleout.shard_load_failed", shard=shard, error=str(e))
                    await asyncio.sleep(1.0)
                    continue
                if loaded is None:
                    return  # a rejoin is under way: the next view starts the loads it names
                if not self._assigned_here(shard) or not self._lease_valid():
                    log.info("scaleout.shard_load_discarded", shard=shard)
                    return
                self._install(shard, loaded)
                return
        finally:
            self._loading.pop(shard, None)
            self._publish()

    def _install(self, shard: int, loaded: Loaded) -> None:
        assert self.service is not None
        self._ready[shard] = loaded
        try:
            self.service.runtimes[shard].reopen("scaleout.shard_gained")
        except Exception as e:
            log.error("scaleout.shard_install_failed", shard=shard, error=str(e))
            self._ready.pop(shard, None)
            with contextlib.suppress(Exception):
                self.service.runtimes[shard].reopen("scaleout.shard_dropped")

    def _drop(self, shard: int, reason: str) -> None:
        if self.service is None or shard not in self.serving:
            return
        self.serving.discard(shard)
        self._publish()
        log.info("scaleout.shard_dropped", shard=shard, reason=reason)
        self.service.runtimes[shard].reopen("scaleout.shard_dropped")

    async def _watch_lease(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            if (self.serving or self._loading) and not self._lease_valid():
                log.warning("scaleout.lease_expired", shards=sorted(self.serving))
                self.view = None
                for t in list(self._loading.values()):
                    t.cancel()
                for s in sorted(self.serving):
                    self._drop(s, "lease expired")
                # The cluster may still count this node a member (the lease is conservative):
                # a new generation hands the shards out again, here or elsewhere.
                self.fleet.request_rejoin()

    # -- routing -------------------------------------------------------------------------------

    def shard_error(self, group_id: str) -> ErrorCode | None:
        s = partition_for(group_id, self.num_shards)
        if s in self.serving and self._lease_valid():
            return None
        if self._assigned_here(s) and self._lease_valid():
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.not_coordinator

    def install(self, registry: HandlerRegistry) -> None:
        install_group_gates(registry, self._gate, self._find_coordinator)

    def _gate(self, key: int, fn: Any, is_coroutine: bool, groups_of: Any) -> Any:
        def handler(ctx: RequestContext, header: Any, req: Any) -> Any:
            errors = {self.shard_error(g) for g in groups_of(req)} - {None}
            if errors:
                code = (
                    ErrorCode.not_coordinator if ErrorCode.not_coordinator in errors else next(iter(errors))
                )
                assert code is not None
                return error_response(key, response_type_of(req), req, code)
            result = fn(ctx, header, req)
            return asyncio.ensure_future(result) if is_coroutine else result

        return handler

    def endpoints(self) -> list[tuple[int, str, int]]:
        """Every fleet node as (node id, host, port): this one, and the view's."""
        host, _ = self.server.config.listen_address
        nodes = {self.node_id: (host, self.server.port)}
        if self.view is not None:
            nodes.update(self.view.nodes)
        return [(n, h, p) for n, (h, p) in sorted(nodes.items())]

    def _find_coordinator(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        key_type = int(getattr(request, "key_type", 0))
        view = self.view

        def lookup(key: str) -> dict[str, Any]:
            if key_type != 0:
                return {
                    "error_code": ErrorCode.invalid_request,
                    "error_message": f"coordinator key type {key_type} is not supported",
                    **NO_NODE,
                }
            owner = None if view is None else view.owners.get(partition_for(key, self.num_shards))
            if owner is None or view is None or owner not in view.nodes:
                return {
                    "error_code": ErrorCode.coordinator_not_available,
                    "error_message": "no groupshift node owns this group's shard yet",
                    **NO_NODE,
                }
            host, port = view.nodes[owner]
            return {
                "error_code": ErrorCode.none,
                "error_message": None,
                "node_id": owner,
                "host": host,
                "port": port,
            }

        return find_coordinator_response(request, lookup)


def install_scaleout(server: GatewayServer, cluster: UpstreamCluster) -> ShardOwnership:
    """Create the ownership before the group layer (its runtimes open storage through it)."""
    return ShardOwnership(server, cluster)
