"""DescribeCluster (key 60, v0-v2): the cluster id, the controller and the one broker.

Sent by admin clients (librdkafka's `describe_cluster`, Kafka's AdminClient). Kafka answers a
request for controller endpoints (`endpoint_type` 2, v1+) sent to a broker with
UNSUPPORTED_ENDPOINT_TYPE; groupshift does the same since it exposes only its broker listener.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.cluster import ClusterView
from gateway.dataplane.apis.metadata import CLUSTER_OPERATIONS, NOT_REQUESTED
from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

API_KEY = 60
BROKERS = 1


class DescribeClusterApi:
    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(API_KEY, 0, 2, self.handle)

    def handle(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        endpoint_type = getattr(request, "endpoint_type", BROKERS)
        ok = endpoint_type == BROKERS
        return build(
            response_type_of(request),
            {
                "throttle_time": 0,
                "error_code": ErrorCode.none if ok else ErrorCode.unsupported_endpoint_type,
                "error_message": None if ok else "The request was sent to a broker, not to a controller.",
                "endpoint_type": endpoint_type,
                "cluster_id": self.cluster.cluster_id,
                "controller_id": self.cluster.controller_id,
                "brokers": [
                    {
                        "broker_id": broker.node_id,
                        "host": broker.host,
                        "port": broker.port,
                        "rack": None,
                        "is_fenced": False,
                    }
                    for broker in self.cluster.brokers_for(ctx)
                ]
                if ok
                else [],
                "cluster_authorized_operations": (
                    CLUSTER_OPERATIONS if request.include_cluster_authorized_operations else NOT_REQUESTED
                ),
            },
        )
