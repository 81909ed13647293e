"""groupshift's own topic ids for an upstream without them (gateway/upstream/topic_ids.py): the
derivation, the advertised caps, and the Metadata translation in both directions, on the wire
bytes kio writes and reads (the e2e module test_upstream_kafka24 runs it against Kafka 2.4)."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema

from gateway.config import build_config
from gateway.server import GatewayServer
from gateway.upstream import install_upstream_mode
from gateway.upstream.cluster import Broker
from gateway.upstream.proxy import UpstreamProxy, _kio_max
from gateway.upstream.topic_ids import (
    NAMESPACE,
    ZERO,
    MetadataTranslation,
    advertised_range,
    derived_topic_id,
    fill_ids,
    missing,
    names_topics_by_id,
    topic_id_of,
)
from protocol.codec import api_schema, decode, decode_response, encode_request, encode_response
from protocol.entity_builder import build

CLUSTER = "Kc2uEtBVQ4OHi4pnNfnLWg"
NO_OPS = -(2**31)


def test_derived_ids_are_stable_per_cluster_and_name_and_never_zero() -> None:
    a = derived_topic_id(CLUSTER, "orders")
    assert a == derived_topic_id(CLUSTER, "orders")  # another node, another restart: the same
    assert a != derived_topic_id(CLUSTER, "payments")
    assert a != derived_topic_id("another-cluster", "orders")
    assert derived_topic_id(None, "orders") == derived_topic_id("", "orders")
    assert not missing(a) and a.version == 5


def test_a_derived_id_never_reads_as_an_option_in_base64() -> None:
    """Kafka's `Uuid.randomUuid` never hands out an id whose base64 form starts with "-" (tools
    would read it as an option); the derivation skips such ids the same way."""
    names = (f"t{i}" for i in range(10_000))
    name = next(n for n in names if _b64(uuid.uuid5(NAMESPACE, f"{CLUSTER}/{n}")).startswith("-"))
    tid = derived_topic_id(CLUSTER, name)
    assert not _b64(tid).startswith("-")
    assert tid != uuid.uuid5(NAMESPACE, f"{CLUSTER}/{name}")
    assert tid == derived_topic_id(CLUSTER, name)


def _b64(tid: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(tid.bytes).decode()


def test_the_upstream_id_wins_unless_it_is_missing() -> None:
    real = uuid.uuid4()
    assert topic_id_of(CLUSTER, "t", real) == real
    assert topic_id_of(CLUSTER, "t", None) == derived_topic_id(CLUSTER, "t")
    assert topic_id_of(CLUSTER, "t", ZERO) == derived_topic_id(CLUSTER, "t")


@pytest.mark.parametrize(
    ("api_key", "lo", "hi", "expected"),
    [
        (1, 4, 11, (4, 11)),  # Fetch of Kafka 2.4: by name already
        (1, 4, 17, (4, 12)),  # Fetch v13+ names topics by id
        (0, 3, 13, (3, 12)),  # Produce v13 too
        (20, 1, 6, (1, 5)),  # DeleteTopics v6 may name topics by id
        (75, 0, 0, None),  # DescribeTopicPartitions: not advertised
        (2, 1, 9, (1, 9)),  # ListOffsets: by name, unchanged
        (1, 13, 17, None),  # a backend serving only by-id Fetch: nothing left to advertise
    ],
)
def test_apis_naming_topics_by_id_are_capped(
    api_key: int, lo: int, hi: int, expected: tuple[int, int] | None
) -> None:
    assert advertised_range(api_key, lo, hi) == expected


def test_requests_that_may_name_topics_by_id_are_refused_behind_such_a_cluster() -> None:
    """What a client negotiated before the cluster showed a topic without an id."""
    assert names_topics_by_id(1, 13) and names_topics_by_id(0, 13) and names_topics_by_id(20, 6)
    assert names_topics_by_id(75, 0)
    assert not names_topics_by_id(1, 12) and not names_topics_by_id(20, 5) and not names_topics_by_id(3, 12)
    for key, first in ((1, 13), (0, 13), (20, 6)):  # the same line as the advertised caps
        assert advertised_range(key, 0, first) == (0, first - 1)


def _metadata_request(version: int, topics: list[dict[str, Any]] | None) -> bytes:
    req = build(
        load_request_schema(3, version),
        {
            "topics": topics,
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": True,
        },
    )
    return encode_request(req, correlation_id=42, client_id="rdkafka")[4:]


def test_a_request_by_id_goes_upstream_by_name_at_the_upstream_version() -> None:
    known, stranger = derived_topic_id(CLUSTER, "orders"), uuid.uuid4()
    names = {known: "orders"}
    frame = _metadata_request(
        12,
        [
            {"name": None, "topic_id": known},
            {"name": "payments", "topic_id": ZERO},
            {"name": None, "topic_id": stranger},
        ],
    )
    out = MetadataTranslation.of_request(frame, 12, 9, lambda tid: names.get(tid))
    assert out is not None
    sent, translation = out
    assert translation == MetadataTranslation(12, 9, (stranger,))
    schema = api_schema(3, 9)
    assert schema is not None
    header, req = decode(schema, sent)
    assert (header.request_api_version, header.correlation_id, header.client_id) == (9, 42, "rdkafka")
    assert [t.name for t in req.topics] == ["orders", "payments"]
    assert req.include_topic_authorized_operations is True and req.allow_auto_topic_creation is False


def test_all_topics_stays_all_topics_and_a_bad_frame_is_left_alone() -> None:
    out = MetadataTranslation.of_request(_metadata_request(12, None), 12, 9, lambda tid: None)
    assert out is not None
    schema = api_schema(3, 9)
    assert schema is not None
    assert decode(schema, out[0])[1].topics is None
    assert (
        MetadataTranslation.of_request(b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff", 12, 9, lambda tid: None)
        is None
    )


def _topic(
    name: str | None, topic_id: uuid.UUID | None = None, error: int = 0, parts: int = 2
) -> dict[str, Any]:
    return {
        "error_code": error,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "topic_authorized_operations": NO_OPS,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": p,
                "leader_id": 1,
                "leader_epoch": 0,
                "replica_nodes": [1],
                "isr_nodes": [1],
                "offline_replicas": [],
            }
            for p in range(parts)
        ],
    }


def _metadata_response(version: int, topics: list[dict[str, Any]]) -> Any:
    return build(
        load_response_schema(3, version),
        {
            "throttle_time": 0,
            "brokers": [{"node_id": 1, "host": "10.0.0.1", "port": 9092, "rack": "r1"}],
            "cluster_id": CLUSTER,
            "controller_id": 1,
            "topics": topics,
            "cluster_authorized_operations": NO_OPS,
            "error_code": 0,
        },
    )


def _wire(version: int, body: Any) -> bytes:
    """The upstream's answer as the link hands it over: no size prefix, correlation id first."""
    schema = api_schema(3, version)
    assert schema is not None
    return encode_response(schema, 42, body)[4:]


@pytest.mark.parametrize("client_version", [10, 12, 13])
def test_a_v9_answer_reaches_the_client_at_its_version_with_ids(client_version: int) -> None:
    stranger = uuid.uuid4()
    raw = _wire(9, _metadata_response(9, [_topic("orders"), _topic("gone", error=3, parts=0)]))
    unknown = (stranger,) if client_version >= 12 else ()
    body = MetadataTranslation(client_version, 9, unknown).response(raw, CLUSTER)
    assert body.__version__ == client_version
    # what the client reads back, after groupshift re-encodes it
    _, seen = decode_response(load_response_schema(3, client_version), _wire(client_version, body))
    got = {t.name: (t.topic_id, int(t.error_code), len(t.partitions)) for t in seen.topics}
    want: dict[str | None, tuple[uuid.UUID | None, int, int]] = {
        "orders": (derived_topic_id(CLUSTER, "orders"), 0, 2),
        "gone": (None, 3, 0),  # an error keeps the zero UUID (kio reads it as None)
    }
    if unknown:
        want[None] = (stranger, 100, 0)  # UNKNOWN_TOPIC_ID
    assert got == want
    assert [(b.node_id, b.host, b.port, b.rack) for b in seen.brokers] == [(1, "10.0.0.1", 9092, "r1")]
    assert seen.cluster_id == CLUSTER


def test_zero_ids_at_the_same_version_are_filled_and_real_ids_left_alone() -> None:
    real = uuid.uuid4()
    zero = _metadata_response(12, [_topic("a", ZERO), _topic("b", real)])
    filled = fill_ids(zero, 12, CLUSTER)
    assert [t.topic_id for t in filled.topics] == [derived_topic_id(CLUSTER, "a"), real]
    untouched = _metadata_response(12, [_topic("b", real)])
    assert fill_ids(untouched, 12, CLUSTER) is untouched
    old = _metadata_response(9, [_topic("a")])
    assert fill_ids(old, 9, CLUSTER) is old  # no ids at v9: nothing to add
    # The cluster's own id (the one the engine's image used) wins over the answer's.
    assert fill_ids(zero, 12, "other").topics[0].topic_id == derived_topic_id("other", "a")


# -- in the proxy and the cluster ------------------------------------------------------------------


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[UpstreamProxy]:
    config = build_config({"upstream.bootstrap.servers": "10.0.0.1:9092", "log.dirs": str(tmp_path / "data")})
    installed: list[UpstreamProxy] = []
    server = GatewayServer(config, extensions=[lambda s: installed.append(install_upstream_mode(s))])
    proxy = installed[0]
    proxy.listeners[1] = ("127.0.0.1", 19001)
    proxy.cluster.brokers[1] = Broker(1, "10.0.0.1", 9092, None)
    proxy.cluster.cluster_id = CLUSTER
    yield proxy
    for hook in server.on_stop:
        hook()
    asyncio.run(server.plane.close())


def test_api_versions_behind_a_cluster_without_ids(proxy: UpstreamProxy) -> None:
    """Kafka 2.4's ranges: Metadata is raised to groupshift's (translated), Fetch stays by name."""
    proxy.cluster.api_versions = {0: (0, 8), 1: (0, 11), 3: (0, 9), 20: (0, 4), 75: (0, 0)}
    before = {k: (lo, hi) for k, lo, hi in proxy.advertised()}
    assert before[3] == (0, 9) and 75 in before  # a cluster with ids: the upstream's own ranges
    proxy.cluster.topic_ids_missing = True
    adv = {k: (lo, hi) for k, lo, hi in proxy.advertised()}
    assert adv[3] == (0, _kio_max(3, 99)) and adv[3][1] >= 12
    assert adv[1] == (0, 11) and adv[0] == (0, 8) and adv[20] == (0, 4)
    assert 75 not in adv
    proxy.cluster.api_versions[1] = (4, 17)
    assert {k: (lo, hi) for k, lo, hi in proxy.advertised()}[1] == (4, 12)


def test_a_translated_answer_has_ids_and_groupshifts_endpoints(proxy: UpstreamProxy) -> None:
    raw = _wire(9, _metadata_response(9, [_topic("orders")]))
    out = proxy._rewrite(3, 12, 7, raw, MetadataTranslation(12, 9))
    assert isinstance(out, bytes)
    cid, body = decode_response(load_response_schema(3, 12), out[4:])
    assert cid == 7
    assert [(b.host, b.port) for b in body.brokers] == [("127.0.0.1", 19001)]
    assert [(t.name, t.topic_id) for t in body.topics] == [("orders", derived_topic_id(CLUSTER, "orders"))]
    assert len(proxy._rewrite_cache) == 1
    # An answer naming an id groupshift does not know is not the upstream bytes' only answer.
    stranger = uuid.uuid4()
    out = proxy._rewrite(3, 12, 8, raw, MetadataTranslation(12, 9, (stranger,)))
    assert isinstance(out, bytes)
    assert len(proxy._rewrite_cache) == 1
    again = proxy._rewrite(3, 12, 9, raw, MetadataTranslation(12, 9))
    assert isinstance(again, bytes)
    assert stranger not in {
        t.topic_id for t in decode_response(load_response_schema(3, 12), again[4:])[1].topics
    }


def test_the_engine_image_has_the_ids_clients_see(proxy: UpstreamProxy) -> None:
    cluster = proxy.cluster
    real = uuid.uuid4()
    _, v9 = decode_response(load_response_schema(3, 9), _wire(9, _metadata_response(9, [_topic("old")])))
    cluster._update_image(v9.topics, cluster.brokers)
    assert cluster.topic_ids_missing
    image = cluster.image.topic("old")
    assert image is not None and image.topic_id == derived_topic_id(CLUSTER, "old")
    zero = _metadata_response(12, [_topic("z", ZERO), _topic("r", real)])
    _, v12 = decode_response(load_response_schema(3, 12), _wire(12, zero))
    cluster._update_image(v12.topics, cluster.brokers)
    assert {t.name: t.topic_id for t in cluster.image.topics()} == {
        "z": derived_topic_id(CLUSTER, "z"),
        "r": real,
    }
