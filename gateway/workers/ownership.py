"""Static ownership of coordinator shards by the workers of `serve --workers N` (docs/workers.md).

Kafka's group coordinator for a group is the leader of the group's `__consumer_offsets`
partition; here worker `shard mod N` owns the shard, fixed for the life of the setting, so no
membership protocol and no Kafka are needed. Every worker keeps a runtime for every shard (as
in scale-out, docs/scale-out.md): an owned shard opens its log in the shared
`<data dir>/coordinator`, an unowned one runs on the empty `UnownedLog` that refuses appends.

Routing, as a Kafka broker that does not lead the partition answers:

* FindCoordinator (groups) answers the owning worker's node and address; for transactional ids
  it answers worker 0, whose data plane runs the transactions;
* a group API request for a group of a shard owned elsewhere is answered NOT_COORDINATOR, the
  client then finds the coordinator again;
* Metadata and DescribeCluster list every worker as a broker (`ClusterView.peers`, and
  `listener_peers` with each listener's addresses), and worker 0 as the controller;
  FindCoordinator names the owner on the listener the client used.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from engine.config import CoordinatorConfig
from engine.ids import IdSource
from engine.metadata import MetadataImage
from gateway.cluster import NodeEndpoint
from gateway.coordinator_storage import CoordinatorStorage
from gateway.error_response import error_response
from gateway.find_coordinator import NO_NODE, find_coordinator_response
from gateway.groups.routing import partition_for
from gateway.registry import HandlerRegistry, RequestContext
from gateway.scaleout.ownership import UnownedLog, install_group_gates
from gateway.workers.plan import WorkerPlan
from protocol.codec import response_type_of

if TYPE_CHECKING:
    from gateway.server import GatewayServer

FIND_COORDINATOR = 10
GROUP, TRANSACTION = 0, 1


class StaticShardOwnership:
    def __init__(self, server: GatewayServer, plan: WorkerPlan) -> None:
        self.server = server
        self.plan = plan
        self.num_shards = server.config.group.offsets_topic_num_partitions
        self.base = plan.shared_dir / "coordinator"
        # Worker i listens on every listener's port + i, so each listener's peers follow from
        # this worker's own endpoint on it (fixed ports: plan.refusal).
        cluster = server.cluster
        self.listener_nodes = {
            name: {plan.node_of(i): (ep.host, ep.port - plan.index + i) for i in range(plan.count)}
            for name, ep in cluster.endpoints.items()
        }
        self.nodes = {plan.node_of(i): (plan.host, plan.port_of(i)) for i in range(plan.count)}
        cluster.listener_peers = {
            name: [NodeEndpoint(node, h, p) for node, (h, p) in nodes.items() if node != plan.node_id]
            for name, nodes in self.listener_nodes.items()
        }
        cluster.peers = [
            NodeEndpoint(node, h, p) for node, (h, p) in self.nodes.items() if node != plan.node_id
        ]
        cluster.controller = plan.node_of(0)

    def open_shard(
        self, index: int, now: int, config: CoordinatorConfig, ids: IdSource, image: MetadataImage
    ) -> CoordinatorStorage:
        """The storage factory of every shard runtime: the shared log of an owned shard."""
        directory = self.base / f"__consumer_offsets-{index}"
        if not self.plan.owns(index):
            # Every worker makes every shard's directory, so that the data directory holds
            # `offsets.topic.num.partitions` coordinator logs from the first start on (the
            # count `serve` checks), whichever worker started first.
            directory.mkdir(parents=True, exist_ok=True)
            return CoordinatorStorage.load(UnownedLog(index), config=config, ids=ids, image=image, now_ms=now)
        settings = self.server.config
        return CoordinatorStorage.open(
            str(directory),
            config=config,
            ids=ids,
            image=image,
            now_ms=now,
            fsync_policy=settings.coordinator_fsync_policy,
            tombstone_retention_ms=settings.log_cleaner_delete_retention_ms,
        )

    def owner_node(self, group_id: str) -> int:
        return self.plan.node_of(self.plan.owner_of_shard(partition_for(group_id, self.num_shards)))

    def owns_group(self, group_id: str) -> bool:
        return self.plan.owns(partition_for(group_id, self.num_shards))

    def install(self, registry: HandlerRegistry) -> None:
        """Gate every group API and answer FindCoordinator (after the group layer registered)."""
        install_group_gates(registry, self._gate, self._find_coordinator)

    def _gate(self, key: int, fn: Any, is_coroutine: bool, groups_of: Any) -> Any:
        def handler(ctx: RequestContext, header: Any, req: Any) -> Any:
            # A request naming a group owned elsewhere is refused whole, as in scale-out
            # (clients batch such requests per coordinator; deviations.md).
            if not all(self.owns_group(g) for g in groups_of(req)):
                return error_response(key, response_type_of(req), req, ErrorCode.not_coordinator)
            result = fn(ctx, header, req)
            return asyncio.ensure_future(result) if is_coroutine else result

        return handler

    def _find_coordinator(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        key_type = int(getattr(request, "key_type", GROUP))
        batched = getattr(request, "coordinator_keys", None) is not None

        def lookup(key: str) -> dict[str, Any]:
            if key_type not in (GROUP, TRANSACTION):
                return {
                    "error_code": ErrorCode.invalid_request,
                    "error_message": f"coordinator key type {key_type} is not supported",
                    **NO_NODE,
                }
            node = self.owner_node(key) if key_type == GROUP else self.plan.node_of(0)
            # The owner's address on the listener the client used, as Kafka answers.
            host, port = self.listener_nodes.get(ctx.listener_name, self.nodes)[node]
            return {
                "error_code": ErrorCode.none,
                "error_message": "" if batched else "NONE",
                "node_id": node,
                "host": host,
                "port": port,
            }

        return find_coordinator_response(request, lookup)
