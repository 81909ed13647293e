"""Kafka request handlers of the embedded data plane, one module per API family."""

from __future__ import annotations

from gateway.cluster import ClusterView
from gateway.dataplane.apis.client_quotas import register_client_quota_apis
from gateway.dataplane.apis.configs import register_config_apis
from gateway.dataplane.apis.delete_records import DeleteRecordsApi
from gateway.dataplane.apis.describe_cluster import DescribeClusterApi
from gateway.dataplane.apis.fetch import FetchApi
from gateway.dataplane.apis.list_offsets import ListOffsetsApi
from gateway.dataplane.apis.metadata import MetadataApi
from gateway.dataplane.apis.produce import ProduceApi
from gateway.dataplane.apis.producer_ids import InitProducerIdApi
from gateway.dataplane.apis.topics_admin import TopicsAdminApi
from gateway.dataplane.plane import DataPlane
from gateway.registry import HandlerRegistry


def register_dataplane_apis(registry: HandlerRegistry, plane: DataPlane, cluster: ClusterView) -> None:
    """Metadata, Produce, Fetch, ListOffsets, topic admin, InitProducerId, DescribeCluster,
    DeleteRecords, the config APIs (TOPIC and BROKER resources) and DescribeClientQuotas."""
    MetadataApi(plane, cluster).register(registry)
    ProduceApi(plane).register(registry)
    FetchApi(plane).register(registry)
    ListOffsetsApi(plane).register(registry)
    TopicsAdminApi(plane, cluster).register(registry)
    InitProducerIdApi(plane).register(registry)
    DescribeClusterApi(cluster).register(registry)
    DeleteRecordsApi(plane).register(registry)
    register_config_apis(registry, plane)
    register_client_quota_apis(registry)
