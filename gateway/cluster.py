"""Who this node is, as clients must see it: node id, advertised host/port, cluster id.

groupshift is a single-node cluster: the node is the controller, the leader and only replica of
every partition, and the coordinator of every group, so Metadata, FindCoordinator and
DescribeCluster all answer with this one node. As Kafka does, they answer with the advertised
address *of the listener the request came in on* (`advertised.listeners`, KIP-103), so a client
behind NAT and one on the host each get an address they reach. The port is known only after
binding (`--listen 127.0.0.1:0`), hence small mutable holders filled in by the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int


class _HasListenerName(Protocol):
    @property
    def listener_name(self) -> str: ...


@dataclass(slots=True)
class ClusterView:
    cluster_id: str
    node: NodeEndpoint
    """The main listener's advertised endpoint."""
    endpoints: dict[str, NodeEndpoint] = field(default_factory=dict)
    """Listener name -> this node as advertised on that listener."""
    peers: list[NodeEndpoint] = field(default_factory=list)
    """The other nodes of a `serve --workers N` cluster (docs/workers.md), listed as brokers by
    Metadata and DescribeCluster; empty for a single node."""
    listener_peers: dict[str, list[NodeEndpoint]] = field(default_factory=dict)
    """The other nodes as advertised on each listener (a worker listens on every listener), by
    listener name; a listener without an entry answers `peers`."""
    controller: int | None = None
    """The controller's node id when it is not this node (a worker of `--workers N`: node 0)."""

    def endpoint_for(self, ctx: _HasListenerName) -> NodeEndpoint:
        """This node as the client of `ctx` must see it: its listener's advertised address."""
        return self.endpoints.get(ctx.listener_name, self.node)

    def brokers_for(self, ctx: _HasListenerName) -> list[NodeEndpoint]:
        """Every broker as the client of `ctx` must see them: this node first, then its peers."""
        return [self.endpoint_for(ctx), *self.listener_peers.get(ctx.listener_name, self.peers)]

    @property
    def controller_id(self) -> int:
        return self.node.node_id if self.controller is None else self.controller
