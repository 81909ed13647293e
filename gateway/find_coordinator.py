"""FindCoordinator (key 10, v0-v6), answered with this node for every group and transaction id.

Clients cannot reach any group API without it, so the gateway serves it from day one; the group
layer may replace this registration once groups are sharded (`register(..., replace=True)`).

Kafka behaviour (`KafkaApis.handleFindCoordinatorRequest`): v0 has only a key (a group id);
v1-v3 add `key_type` (0 = group, 1 = transaction); v4+ batch `coordinator_keys` and answer one
entry per key (KIP-699), each with its own error. Key type 2 (share groups) needs v6 and a share
coordinator, which groupshift does not have, so it gets INVALID_REQUEST, as Kafka answers
without one. An error answer carries Kafka's "no node" (-1, "", -1).

Error messages, as Kafka 4.3.1 answers them (measured by the differential suite): v1-v3 carry
the error's own message (`Errors.message()`: "NONE" on success); v4+ entries leave it empty,
except when the whole request fails (an unknown key type), where every entry carries the
error's default message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.cluster import ClusterView
from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP, TRANSACTION = 0, 1
# Kafka's default message of INVALID_REQUEST (`Errors.INVALID_REQUEST.message()`).
INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or the "
    "message was sent to an incompatible broker. See the broker logs for more details."
)


#: The coordinator fields of an answer that names no node (an error): Kafka's `Node.noNode()`.
NO_NODE: Mapping[str, Any] = {"node_id": -1, "host": "", "port": -1}


def find_coordinator_response(request: Any, lookup: Callable[[str], dict[str, Any]]) -> Any:
    """The FindCoordinator response to `request`, `lookup(key)` answering for each key: v4+
    (KIP-699) one `coordinators` entry per key of `coordinator_keys`, earlier versions the one
    `key` answered at the top level. Every server of the API (this one, the scale-out fleet's
    shard owners, the upstream proxy) differs only in its lookup."""
    response_type = response_type_of(request)
    keys = getattr(request, "coordinator_keys", None)
    if keys is not None:
        return build(
            response_type, {"throttle_time": 0, "coordinators": [{"key": k, **lookup(k)} for k in keys]}
        )
    return build(response_type, {"throttle_time": 0, **lookup(request.key)})


class FindCoordinatorApi:
    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(API_KEY, MIN_VERSION, MAX_VERSION, self.handle)

    def _lookup(self, ctx: RequestContext, key_type: int, key: str, batched: bool) -> dict[str, Any]:
        node = self.cluster.endpoint_for(ctx)  # the address of the listener the client used
        if key_type not in (GROUP, TRANSACTION):
            return {
                "error_code": ErrorCode.invalid_request,
                "error_message": INVALID_REQUEST_MESSAGE,
                **NO_NODE,
            }
        return {
            "error_code": ErrorCode.none,
            "error_message": "" if batched else "NONE",
            "node_id": node.node_id,
            "host": node.host,
            "port": node.port,
        }

    def handle(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        key_type = getattr(request, "key_type", GROUP)
        batched = getattr(request, "coordinator_keys", None) is not None  # v4+: one answer per key
        return find_coordinator_response(request, lambda key: self._lookup(ctx, key_type, key, batched))
