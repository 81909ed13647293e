"""ListOffsets (key 2, v1-v11): earliest/latest offsets and offset lookup by timestamp.

Kafka behaviour reproduced (`KafkaApis.handleListOffsetRequest`,
`UnifiedLog.fetchOffsetByTimestamp`):
  * -2 (earliest) -> log start offset; -1 (latest) -> high watermark, which is also the last
    stable offset since there are no transactions; both with timestamp -1;
  * -4 (earliest local, v8+) = earliest, as there is no tiered storage;
  * -5 (latest tiered, v9+) and -6 (earliest pending upload, v11) -> offset -1, timestamp -1
    (Kafka's answer without tiered storage);
  * -3 (max timestamp, v7+) -> the record with the largest timestamp: the first batch with the
    largest max timestamp, then its record (KIP-734);
  * a timestamp >= 0 -> the first record with timestamp >= it, or offset -1 / timestamp -1 if
    there is none;
  * unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION; a current leader epoch above 0
    -> UNKNOWN_LEADER_EPOCH, below -> FENCED_LEADER_EPOCH; leader epoch 0 in answers (v4+);
  * a partition whose log failed (an fsync error, until restart) -> KAFKA_STORAGE_ERROR.
For compressed batches the by-timestamp answers use batch-level information (the batch's first
offset, its max timestamp) because the data plane never decompresses.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.dataplane.plane import DataPlane, Partition
from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build
from records.batch import iter_batch_headers, iter_records, read_batch_header
from records.errors import LogError

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING = (
    -1,
    -2,
    -3,
    -4,
    -5,
    -6,
)
LEADER_EPOCH = 0
_SCAN_CHUNK = 1 << 20


def max_timestamp_offset(p: Partition) -> tuple[int, int] | None:
    """(offset, timestamp) of the record with the largest timestamp (scans the partition)."""
    best: tuple[int, bytes] | None = None  # (max timestamp, that batch's bytes)
    offset = p.log_start_offset
    end = p.high_watermark
    while offset < end:
        chunk = p.store.read(offset, _SCAN_CHUNK)
        last = offset
        for pos, h in iter_batch_headers(chunk):
            if best is None or h.max_timestamp > best[0]:
                best = (h.max_timestamp, chunk[pos : pos + h.size])
            last = h.last_offset
        offset = last + 1
    if best is None:
        return None
    max_ts, batch = best
    header = read_batch_header(batch)
    if header.compression == 0:
        for record in iter_records(batch):
            if record.timestamp == max_ts:
                return record.offset, record.timestamp
    return header.base_offset, max_ts


class ListOffsetsApi:
    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(API_KEY, MIN_VERSION, MAX_VERSION, self.handle)

    def _lookup(self, p: Partition, timestamp: int) -> tuple[int, int]:
        """(offset, timestamp) for one partition and one target timestamp."""
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return p.log_start_offset, -1
        if timestamp == LATEST:
            return p.high_watermark, -1
        if timestamp in (LATEST_TIERED, EARLIEST_PENDING):
            return -1, -1
        found = (
            max_timestamp_offset(p) if timestamp == MAX_TIMESTAMP else p.store.offset_for_timestamp(timestamp)
        )
        if found is None:
            return -1, -1
        if found[0] < p.log_start_offset:  # DeleteRecords moved the start past it
            return p.log_start_offset, found[1]
        return found[0], found[1]

    def _partition(self, topic: str, req_part: Any) -> dict[str, Any]:
        index = req_part.partition_index
        p = self.plane.partition(topic, index)
        out: dict[str, Any] = {
            "partition_index": index,
            "timestamp": -1,
            "offset": -1,
            "leader_epoch": -1,
        }
        if p is None:
            return {**out, "error_code": ErrorCode.unknown_topic_or_partition}
        epoch = getattr(req_part, "current_leader_epoch", -1)
        if epoch >= 0 and epoch != LEADER_EPOCH:
            code = ErrorCode.unknown_leader_epoch if epoch > LEADER_EPOCH else ErrorCode.fenced_leader_epoch
            return {**out, "error_code": code}
        try:
            offset, ts = self._lookup(p, req_part.timestamp)
        except LogError:  # the partition's log failed (an fsync error): until restart
            return {**out, "error_code": ErrorCode.kafka_storage_error}
        return {
            **out,
            "error_code": ErrorCode.none,
            "offset": offset,
            "timestamp": ts,
            "leader_epoch": LEADER_EPOCH if offset >= 0 else -1,
        }

    def handle(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        topics = [
            {"name": t.name, "partitions": [self._partition(t.name, rp) for rp in t.partitions]}
            for t in request.topics
        ]
        return build(response_type_of(request), {"throttle_time": 0, "topics": topics})
