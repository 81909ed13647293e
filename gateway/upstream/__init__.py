"""Upstream mode: groupshift in front of an existing Kafka cluster.

Group coordination is terminated in groupshift (its engine, its log); everything else is
forwarded to the cluster given by `upstream.bootstrap.servers` (`serve --upstream`). The parts:

* `config`: the `upstream.*` settings;
* `link`: one pipelined TCP connection to a broker, correlation ids remapped (TLS, SASL and
  KIP-368 re-authentication when the settings ask for them);
* `security`: the `upstream.` TLS and SASL settings made usable by every upstream connection
  (links, fleet membership, the shard log's librdkafka clients) and the start-up check;
* `cluster`: bootstrap, periodic Metadata refresh, brokers and the engine's topic image;
* `proxy`: per-broker listeners, the frame path (terminate or forward), endpoint rewriting,
  ApiVersions;
* `forwarded_acls`: the `gateway` identity's authorization of forwarded requests with
  groupshift's ACLs (only with an authorizer);
* `offsets`: offsets imported from the cluster on a group's first appearance and mirrored back;
* `streams_topics`: streams groups (KIP-1071) answered here, their missing internal topics
  created on the cluster (docs/streams-groups.md);
* `transactions`: TxnOffsetCommit for the cluster's transactions, pending until their outcome
  is read there (docs/transactions.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.upstream.cluster import UpstreamCluster
from gateway.upstream.offsets import OffsetBridge
from gateway.upstream.proxy import UpstreamProxy
from gateway.upstream.streams_topics import install as install_streams
from gateway.upstream.transactions import TransactionalOffsets

# TxnOffsetCommit v0-v4 (v4 is v3 in the flexible encoding); v5 is KIP-890 part 2's, not served.
TXN_OFFSET_COMMIT_MAX_VERSION = 4

if TYPE_CHECKING:
    from gateway.server import GatewayServer


def install_upstream_mode(server: GatewayServer) -> UpstreamProxy:
    """Extension for `GatewayServer`: the group layer, with upstream forwarding around it."""
    from gateway.groups.service import install_group_layer

    config = server.config.upstream
    if config is None:
        raise ValueError("upstream mode needs upstream.bootstrap.servers")
    cluster = UpstreamCluster(config)
    scaleout = None
    if config.coordinator_storage == "kafka":  # docs/scale-out.md
        from gateway.scaleout.ownership import ShardOwnership

        scaleout = ShardOwnership(server, cluster)
    service = install_group_layer(server, None if scaleout is None else scaleout.open_shard)
    proxy = UpstreamProxy(server, cluster)
    proxy.install()
    bridge = OffsetBridge(service, cluster, server.metrics)
    txn = TransactionalOffsets(service, cluster, bridge, server.metrics)
    txn.install(server.registry, TXN_OFFSET_COMMIT_MAX_VERSION)  # before the bridge wraps its imports
    bridge.install(server.registry)
    # streams groups: groupshift's, their internal topics created on the cluster
    install_streams(server.registry, service, cluster, server.metrics)
    if scaleout is not None:
        scaleout.service = service
        scaleout.proxy = proxy
        scaleout.install(server.registry)
        proxy.extra_brokers = scaleout.endpoints
        proxy.broker_listeners_coordinate = False

    def on_image(image: Any) -> None:
        service._on_topic_change(None, image)

    cluster.on_image.append(on_image)
    if proxy.probes is not None:
        # passthrough: every terminated API behind Kafka's rule, answered by the cluster's ACLs
        # (gateway.upstream.passthrough); groupshift has no authorizer of its own then.
        from gateway.authorizer.checks import install_checks

        install_checks(server.registry, proxy.probes.authorizer, proxy.probes.topics)  # type: ignore[arg-type]

    def start(loop: Any) -> None:
        proxy.start(loop)
        cluster.start()
        if scaleout is not None:
            scaleout.start()

    def stop() -> None:
        if scaleout is not None:
            scaleout.close()
        txn.close()
        bridge.close()
        cluster.close()
        proxy.close()

    server.on_start.append(start)
    server.on_stop.append(stop)
    return proxy
