"""FindCoordinator answers with this node, per key from v4 (KIP-699), as Kafka does."""

from __future__ import annotations

from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from gateway.cluster import ClusterView, NodeEndpoint
from gateway.find_coordinator import FindCoordinatorApi
from gateway.registry import RequestContext
from protocol.entity_builder import build

CTX = RequestContext(1, ("127.0.0.1", 1), ("127.0.0.1", 9092))


def ask(version: int, **values: Any) -> Any:
    api = FindCoordinatorApi(ClusterView("cluster", NodeEndpoint(3, "127.0.0.1", 9092)))
    return api.handle(CTX, None, build(load_request_schema(10, version), values))


def test_v0_to_v3_answer_one_key_with_this_node() -> None:
    v0 = ask(0, key="group-a")
    assert (v0.error_code, v0.node_id, v0.host, v0.port) == (ErrorCode.none, 3, "127.0.0.1", 9092)
    txn = ask(2, key="txn-1", key_type=1)
    assert (txn.error_code, txn.node_id) == (ErrorCode.none, 3)


def test_v4_and_later_answer_every_key_of_the_batch() -> None:
    v6 = ask(6, key_type=0, coordinator_keys=["a", "b", "c"])
    assert [(c.key, c.error_code, c.node_id, c.port) for c in v6.coordinators] == [
        (k, ErrorCode.none, 3, 9092) for k in "abc"
    ]


def test_share_and_unknown_key_types_get_invalid_request_and_no_node() -> None:
    share = ask(6, key_type=2, coordinator_keys=["g:topic:0"])
    (c,) = share.coordinators
    assert (c.error_code, c.node_id, c.host, c.port) == (ErrorCode.invalid_request, -1, "", -1)
    odd = ask(3, key="x", key_type=9)
    assert odd.error_code == ErrorCode.invalid_request
