"""InitProducerId (key 22, v0-v5): producer ids for idempotent producers.

Kafka (`KafkaApis.handleInitProducerIdRequest`): without a transactional id, a fresh producer
id at epoch 0 is allocated on every call (also when the request names an existing id/epoch,
KIP-360). kafka-python 3 calls this by default (`enable_idempotence=True`), librdkafka when
`enable.idempotence=true`. Transactional ids need a transaction coordinator, which groupshift
does not have: they are refused with INVALID_REQUEST (non-retriable, so the client fails fast
instead of looping). v6 (KIP-939 two-phase commit) is not offered.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.dataplane.plane import DataPlane
from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


class InitProducerIdApi:
    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(API_KEY, MIN_VERSION, MAX_VERSION, self.handle)

    def handle(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        if request.transactional_id is not None:
            values = {"error_code": ErrorCode.invalid_request, "producer_id": -1, "producer_epoch": -1}
        else:
            values = {
                "error_code": ErrorCode.none,
                "producer_id": self.plane.producer_ids.next_id(),
                "producer_epoch": 0,
            }
        return build(response_type_of(request), {"throttle_time": 0, **values})
