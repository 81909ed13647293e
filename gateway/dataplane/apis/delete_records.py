"""DeleteRecords (21, v0-v2): advance a partition's log start offset (`kafka-delete-records`).

Kafka behaviour reproduced (`ReplicaManager.deleteRecords`, `UnifiedLog.maybeIncrementLogStartOffset`):
  * the offset -1 means the high watermark; any other offset outside [0, high watermark] ->
    OFFSET_OUT_OF_RANGE with low watermark -1;
  * an offset below the current log start changes nothing; the answer's low watermark is the
    log start offset after the call;
  * an unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION;
  * a partition named twice is answered once (Kafka keys the request by partition; the last
    offset wins).
Afterwards Fetch below the new start answers OFFSET_OUT_OF_RANGE, ListOffsets EARLIEST answers
the new start, and the start survives restarts (the partition's `log-start-offset` file).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.dataplane.plane import DataPlane
from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

API_KEY = 21
HIGH_WATERMARK = -1


class DeleteRecordsApi:
    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(API_KEY, 0, 2, self.handle)

    def _delete(self, topic: str, index: int, offset: int) -> dict[str, Any]:
        out: dict[str, Any] = {"partition_index": index, "low_watermark": -1}
        p = self.plane.partition(topic, index)
        if p is None:
            return {**out, "error_code": ErrorCode.unknown_topic_or_partition}
        if offset == HIGH_WATERMARK:
            offset = p.high_watermark
        if not 0 <= offset <= p.high_watermark:
            return {**out, "error_code": ErrorCode.offset_out_of_range}
        try:
            low = p.delete_records_before(offset)
        except OSError:
            return {**out, "error_code": ErrorCode.kafka_storage_error}
        return {**out, "error_code": ErrorCode.none, "low_watermark": low}

    def handle(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        wanted: dict[str, dict[int, int]] = {}
        for t in request.topics:
            parts = wanted.setdefault(t.name, {})
            for rp in t.partitions:
                parts[rp.partition_index] = rp.offset
        topics = [
            {"name": name, "partitions": [self._delete(name, i, off) for i, off in parts.items()]}
            for name, parts in wanted.items()
        ]
        return build(response_type_of(request), {"throttle_time": 0, "topics": topics})
