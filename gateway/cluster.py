"""Who this node is, as clients must see it: node id, advertised host/port, cluster id.

groupshift is a single-node cluster: the node is the controller, the leader and only replica of
every partition, and the coordinator of every group, so Metadata, FindCoordinator and
DescribeCluster all answer with this one endpoint. The port is known only after binding
(`--listen 127.0.0.1:0`), hence a small mutable holder filled in by the server.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int


@dataclass(slots=True)
class ClusterView:
    cluster_id: str
    node: NodeEndpoint

    @property
    def controller_id(self) -> int:
        return self.node.node_id
