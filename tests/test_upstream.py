"""Upstream mode's pure parts: the `upstream.*` settings, reading a Produce request's acks
without decoding it, the endpoint rewriting of forwarded responses, and ApiVersions' mix of
forwarded and terminated APIs. The forwarding itself runs against real backends in
e2e/test_upstream_*.py."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema

from gateway.config import ConfigError, build_config
from gateway.server import GatewayServer
from gateway.upstream import install_upstream_mode
from gateway.upstream.cluster import Broker
from gateway.upstream.proxy import (
    UpstreamProxy,
    _kio_max,
    forwarded_request,
    forwards_split,
    produce_acks,
    upstream_api_label,
)
from protocol.codec import api_schema, decode_response, encode_request, encode_response
from protocol.entity_builder import build

# -- settings ------------------------------------------------------------------------------------


def test_upstream_keys_build_an_upstream_config() -> None:
    cfg = build_config(
        {
            "upstream.bootstrap.servers": "PLAINTEXT://10.0.0.1:9092, 10.0.0.2:9093",
            "upstream.request.timeout.ms": "5000",
            "upstream.node.port.base": "19000",
        }
    )
    assert cfg.upstream is not None
    assert cfg.upstream.bootstrap == [("10.0.0.1", 9092), ("10.0.0.2", 9093)]
    assert cfg.upstream.request_timeout_ms == 5000
    assert cfg.upstream.node_port_base == 19000
    assert build_config({}).upstream is None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"upstream.request.timeout.ms": "5000"}, "upstream.bootstrap.servers is required"),
        ({"upstream.bootstrap.servers": "nohost"}, "upstream.bootstrap.servers: expected HOST:PORT"),
        ({"upstream.bootstrap.servers": "TLS://h:9093"}, "TLS:// is not a security protocol"),
        (
            {"upstream.bootstrap.servers": "h:9092", "upstream.security.protocol": "SASL_SSL"},
            "upstream.sasl.mechanism=GSSAPI (Kerberos) is not supported",  # Kafka's default mechanism
        ),
        (
            {"upstream.bootstrap.servers": "h:9092", "upstream.request.timeout.ms": "5"},
            "upstream.request.timeout.ms",
        ),
        (
            {"upstream.bootstrap.servers": "h:9092", "upstream.nope": "1"},
            "unknown configuration key 'upstream.nope'",
        ),
    ],
)
def test_bad_upstream_settings_name_the_key(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_config(settings)


# -- Produce acks --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 7, 8, 9, 10, 11])
@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("transactional_id", [None, "txn-1"])
def test_produce_acks_is_read_from_the_raw_frame(
    version: int, acks: int, transactional_id: str | None
) -> None:
    schema = api_schema(0, version)
    assert schema is not None
    request = build(
        load_request_schema(0, version),
        {
            "transactional_id": transactional_id,
            "acks": acks,
            "timeout": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"\x00" * 70}]}],
        },
    )
    frame = encode_request(request, correlation_id=5, client_id="a-client-id")[4:]
    assert produce_acks(frame, version) == acks


# -- rewriting -----------------------------------------------------------------------------------

LISTENERS = {1: ("127.0.0.1", 19001), 2: ("127.0.0.1", 19002)}
UPSTREAM_BROKERS = {n: Broker(n, f"10.0.0.{n}", 9092, None) for n in LISTENERS}


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[UpstreamProxy]:
    config = build_config(
        {
            "upstream.bootstrap.servers": "10.0.0.1:9092",
            "log.dirs": str(tmp_path / "data"),
            "offsets.topic.num.partitions": "1",
        }
    )
    installed: list[UpstreamProxy] = []
    server = GatewayServer(config, extensions=[lambda s: installed.append(install_upstream_mode(s))])
    proxy = installed[0]
    proxy.listeners.update(LISTENERS)
    proxy.cluster.brokers.update(UPSTREAM_BROKERS)
    yield proxy
    for hook in server.on_stop:
        hook()
    asyncio.run(server.plane.close())


def _upstream_response(api_key: int, version: int, values: dict[str, Any], cid: int = 99) -> bytes:
    schema = api_schema(api_key, version)
    assert schema is not None
    return encode_response(schema, cid, build(schema.response_type, values))[4:]


def _decode(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    schema = api_schema(api_key, version)
    assert schema is not None
    return decode_response(schema.response_type, frame[4:])


def test_metadata_brokers_become_groupshift_listeners(proxy: UpstreamProxy) -> None:
    raw = _upstream_response(
        3,
        12,
        {
            "throttle_time": 0,
            "brokers": [{"node_id": n, "host": f"10.0.0.{n}", "port": 9092, "rack": "r1"} for n in (1, 2)],
            "cluster_id": "c",
            "controller_id": 1,
            "topics": [],
        },
    )
    out = proxy._rewrite(3, 12, 7, raw)
    assert isinstance(out, bytes)
    cid, body = _decode(3, 12, out)
    assert cid == 7
    assert [(b.node_id, b.host, b.port, b.rack) for b in body.brokers] == [
        (1, "127.0.0.1", 19001, "r1"),
        (2, "127.0.0.1", 19002, "r1"),
    ]
    assert body.controller_id == 1


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_brokers_become_groupshift_listeners(proxy: UpstreamProxy, version: int) -> None:
    """DescribeCluster's brokers carry `broker_id`, not Metadata's `node_id`: the rewrite raised
    AttributeError and closed the connection (a Java admin client's describeCluster through
    upstream mode, as Kafka Streams' classic assignor calls it, never got an answer)."""
    raw = _upstream_response(
        60,
        version,
        {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "endpoint_type": 1,
            "cluster_id": "c",
            "controller_id": 2,
            "brokers": [{"broker_id": n, "host": f"10.0.0.{n}", "port": 9092, "rack": None} for n in (1, 2)],
            "cluster_authorized_operations": -2147483648,
        },
    )
    out = proxy._rewrite(60, version, 7, raw)
    assert isinstance(out, bytes)
    cid, body = _decode(60, version, out)
    assert cid == 7
    assert [(b.broker_id, b.host, b.port) for b in body.brokers] == [
        (1, "127.0.0.1", 19001),
        (2, "127.0.0.1", 19002),
    ]
    assert body.controller_id == 2


def test_identical_metadata_answers_reuse_the_rewrite(proxy: UpstreamProxy) -> None:
    """Many clients refreshing at once get byte-identical upstream answers: the second is
    served from the rewrite cache, with its own correlation id; a different answer is not."""

    def answer(host: str) -> bytes:
        return _upstream_response(
            3,
            12,
            {
                "throttle_time": 0,
                "brokers": [{"node_id": 1, "host": host, "port": 9092, "rack": None}],
                "cluster_id": "c",
                "controller_id": 1,
                "topics": [],
            },
        )

    first = proxy._rewrite(3, 12, 7, answer("10.0.0.1"))
    again = proxy._rewrite(3, 12, 8, answer("10.0.0.1"))
    assert isinstance(first, bytes) and isinstance(again, bytes)
    assert len(proxy._rewrite_cache) == 1
    assert _decode(3, 12, first)[0] == 7 and _decode(3, 12, again)[0] == 8
    assert first[:4] == again[:4] and first[8:] == again[8:]
    other = proxy._rewrite(3, 12, 9, answer("10.9.9.9"))
    assert isinstance(other, bytes) and len(proxy._rewrite_cache) == 2
    assert [(b.host, b.port) for b in _decode(3, 12, other)[1].brokers] == [("127.0.0.1", 19001)]


def test_transaction_coordinator_is_rewritten(proxy: UpstreamProxy) -> None:
    raw = _upstream_response(
        10,
        4,
        {
            "throttle_time": 0,
            "coordinators": [
                {
                    "key": "tx",
                    "node_id": 2,
                    "host": "10.0.0.2",
                    "port": 9092,
                    "error_code": 0,
                    "error_message": None,
                },
                {"key": "tz", "node_id": -1, "host": "", "port": -1, "error_code": 15, "error_message": None},
            ],
        },
    )
    out = proxy._rewrite(10, 4, 3, raw)
    assert isinstance(out, bytes)
    _, body = _decode(10, 4, out)
    assert [(c.node_id, c.host, c.port) for c in body.coordinators] == [(2, "127.0.0.1", 19002), (-1, "", -1)]


def _fetch(node_endpoints: list[dict[str, Any]]) -> bytes:
    return _upstream_response(
        1,
        16,
        {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": 0,
            "node_endpoints": node_endpoints,
            "responses": [
                {
                    "topic_id": uuid.uuid4(),
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 6 if node_endpoints else 0,
                            "high_watermark": 10,
                            "last_stable_offset": 10,
                            "log_start_offset": 0,
                            "aborted_transactions": None,
                            "preferred_read_replica": -1,
                            "records": b"opaque record bytes",
                        }
                    ],
                }
            ],
        },
    )


def test_fetch_without_leader_hints_passes_through(proxy: UpstreamProxy) -> None:
    assert proxy._rewrite(1, 16, 3, _fetch([])) is None
    assert proxy._rewrite(1, 15, 3, b"never decoded") is None


def test_fetch_leader_hints_are_rewritten_and_records_kept(proxy: UpstreamProxy) -> None:
    raw = _fetch([{"node_id": 2, "host": "10.0.0.2", "port": 9092, "rack": None}])
    out = proxy._rewrite(1, 16, 3, raw)
    assert isinstance(out, bytes)
    _, body = _decode(1, 16, out)
    assert [(e.node_id, e.host, e.port) for e in body.node_endpoints] == [(2, "127.0.0.1", 19002)]
    assert bytes(body.responses[0].partitions[0].records) == b"opaque record bytes"


def test_api_versions_mix_forwarded_and_terminated(proxy: UpstreamProxy) -> None:
    proxy.cluster.api_versions = {
        0: (3, 12),
        1: (4, 17),
        3: (0, 13),
        10: (0, 5),
        25: (0, 4),
        28: (0, 4),
        80: (0, 1),
    }
    adv = {k: (lo, hi) for k, lo, hi in proxy.advertised()}
    assert adv[0] == (3, _kio_max(0, 12))  # capped at what the codec can rewrite
    assert adv[1][0] == 4
    assert adv[10] == (0, 5)  # ours is 0-6: the intersection
    assert 11 in adv and 68 in adv  # terminated group APIs
    # streams groups: groupshift's, whatever the cluster (Kafka 4.4's versions)
    assert adv[88] == (0, 1) and adv[89] == (0, 1) and adv[93] == (0, 0)
    assert adv[25] == (0, 4)  # AddOffsetsToTxn: forwarded to the cluster's transaction coordinator
    assert adv[28] == (0, 4)  # TxnOffsetCommit: answered by groupshift (docs/transactions.md)
    assert 80 not in adv  # not a client API groupshift forwards
    assert 19 not in adv  # the upstream does not serve CreateTopics here
    del proxy.cluster.api_versions[25]  # a cluster without transactions: neither is advertised
    adv = {k: (lo, hi) for k, lo, hi in proxy.advertised()}
    assert 25 not in adv and 28 not in adv


def test_produce_leader_hints_are_rewritten(proxy: UpstreamProxy) -> None:
    version = _kio_max(0, 11)
    values = {
        "throttle_time": 0,
        "node_endpoints": [{"node_id": 1, "host": "10.0.0.1", "port": 9092, "rack": None}],
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {
                        "index": 0,
                        "error_code": 6,
                        "base_offset": -1,
                        "log_append_time": -1,
                        "log_start_offset": -1,
                        "record_errors": [],
                        "error_message": None,
                        "current_leader": {"leader_id": 1, "leader_epoch": 3},
                    }
                ],
            }
        ],
    }
    out = proxy._rewrite(0, version, 11, _upstream_response(0, version, values))
    assert isinstance(out, bytes)
    cid, body = _decode(0, version, out)
    assert cid == 11
    assert [(e.node_id, e.host, e.port) for e in body.node_endpoints] == [(1, "127.0.0.1", 19001)]
    assert body.responses[0].partition_responses[0].current_leader.leader_id == 1
    values["node_endpoints"] = []
    assert proxy._rewrite(0, version, 11, _upstream_response(0, version, values)) is None
    assert proxy._rewrite(0, 9, 11, b"never decoded") is None


def test_a_config_request_with_a_null_resources_array_is_forwarded_not_raised() -> None:
    """fuzz/upstream's finding: kio reads a -1 `Resources` length as None; routing must not raise."""
    frame = struct.pack(">hhih", 32, 1, 9, 1) + b"c" + struct.pack(">i", -1) + b"\x00"
    assert forwards_split(32, 1, frame)
    assert forwarded_request(frame) == (32, 1, 9)


def test_per_broker_listeners_advertise_the_advertised_host(tmp_path: Path) -> None:
    """Port per broker with an advertised host (as Kroxylicious does): the listeners bind the
    `--listen` host and clients are told `upstream.advertised.host`, so the gateway runs behind
    NAT, Docker or Kubernetes; without it, the main listener's advertised host."""
    config = build_config(
        {
            "upstream.bootstrap.servers": "10.0.0.1:9092",
            "upstream.advertised.host": "gw.example.com",
            "listeners": "127.0.0.1:0",
            "log.dirs": str(tmp_path / "data"),
            "offsets.topic.num.partitions": "1",
        }
    )
    installed: list[UpstreamProxy] = []
    server = GatewayServer(config, extensions=[lambda s: installed.append(install_upstream_mode(s))])
    proxy = installed[0]

    async def open_listeners() -> None:
        await proxy._on_brokers(UPSTREAM_BROKERS)
        for srv in server.extra_servers:
            assert srv.sockets[0].getsockname()[0] == "127.0.0.1"
            srv.close()

    try:
        asyncio.run(open_listeners())
        assert {n: host for n, (host, _) in proxy.listeners.items()} == {
            1: "gw.example.com",
            2: "gw.example.com",
        }
    finally:
        for hook in server.on_stop:
            hook()
        asyncio.run(server.plane.close())
    with pytest.raises(ConfigError, match=r"nonroutable meta-address 0\.0\.0\.0"):
        build_config({"upstream.bootstrap.servers": "h:9092", "upstream.advertised.host": "0.0.0.0"})


def test_upstream_metrics_are_labelled_with_api_names(proxy: UpstreamProxy) -> None:
    """The upstream counters carry Kafka's API name (`api`, as groupshift_requests_total has it)
    beside the key (`api_key`, which older dashboards select on)."""
    metadata = {"throttle_time": 0, "brokers": [], "cluster_id": "c", "controller_id": 1, "topics": []}
    proxy._rewrite(3, 12, 7, _upstream_response(3, 12, metadata))
    text = proxy.server.metrics.render()
    assert 'groupshift_upstream_requests_total{api_key="1",api="Fetch"} 0' in text
    assert 'groupshift_upstream_rewritten_total{api_key="3",api="Metadata"} 1' in text
    assert upstream_api_label(0) == "Produce" and upstream_api_label(68) == "ConsumerGroupHeartbeat"


def test_broker_listeners_list_no_group_in_a_scale_out_fleet(proxy: UpstreamProxy) -> None:
    """ListGroups: alone, a node's broker listeners split its groups between them (each lists
    those FindCoordinator sends to it) and its main listener, no broker of the metadata, lists
    them all; in a fleet the main listener is a broker of the metadata and FindCoordinator
    never names a broker listener, so those list nothing, else an admin client asking every
    broker sees each group twice (docs/scale-out.md, Routing)."""
    from gateway.registry import RequestContext

    groups = [f"g{i}" for i in range(8)]
    schema = api_schema(16, 5)
    assert schema is not None
    every = build(
        schema.response_type,
        {
            "throttle_time": 0,
            "error_code": 0,
            "groups": [
                {"group_id": g, "protocol_type": "", "group_state": "Stable", "group_type": "streams"}
                for g in groups
            ],
        },
    )
    handle = proxy._lister(lambda ctx, header, request: every)
    proxy._port_to_node.update({port: node for node, (_, port) in LISTENERS.items()})

    def listed(port: int) -> list[str]:
        ctx = RequestContext(1, ("127.0.0.1", 50000), ("127.0.0.1", port))
        return [str(g.group_id) for g in handle(ctx, None, None).groups]

    main = 9092
    split = [listed(port) for _, port in LISTENERS.values()]
    assert sorted(g for part in split for g in part) == groups and all(split), split
    assert listed(main) == groups
    proxy.broker_listeners_coordinate = False  # what install_upstream_mode sets for a fleet
    assert [listed(port) for _, port in LISTENERS.values()] == [[], []]
    assert listed(main) == groups
