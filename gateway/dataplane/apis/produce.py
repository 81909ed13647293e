"""Produce (key 0, v3-v13): append client record batches to embedded partitions.

Kafka behaviour reproduced (`KafkaApis.handleProduceRequest`, `ReplicaManager.appendRecords`,
`ProduceRequest.validateRecords`, `LogValidator`):
  * acks must be -1, 0 or 1, else every partition gets INVALID_REQUIRED_ACKS;
  * per partition: unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (v13 addresses
    topics by id: an unknown id -> UNKNOWN_TOPIC_ID); exactly one magic-2 batch, consistent
    counts, no control batch -> else INVALID_RECORD; CRC-32C mismatch -> CORRUPT_MESSAGE;
    idempotent-producer sequence errors as in `producers`;
  * acks=0 gets no response at all; if any partition failed, Kafka closes the connection
    instead so the producer notices and refreshes metadata -- so do we;
  * acks=1/-1: the response waits until the appended batches are fsynced (single node: the
    leader is the whole ISR, so -1 and 1 mean the same here);
  * a batch larger than the topic's `max.message.bytes` (its override, else the broker's
    `message.max.bytes`) -> MESSAGE_TOO_LARGE (`UnifiedLog.analyzeAndValidateRecords`);
  * a write error, or a partition whose log failed (an fsync error, until restart) ->
    KAFKA_STORAGE_ERROR, logged as warning `partition.append_failed` at most once per 10 s per
    partition (with the count suppressed meanwhile: a full disk fails every append).
Transactions are not supported (InitProducerId refuses transactional ids), so a transactional
batch is refused with INVALID_RECORD. Log-append-time topics do not exist here, so
`log_append_time` is always -1.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from gateway.dataplane.plane import DataPlane, Partition, SequenceError
from gateway.log_rate import RateLimiter
from gateway.registry import NO_RESPONSE, CloseConnection, HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build
from records.batch import LOG_OVERHEAD, MAGIC
from records.errors import BatchError, CorruptBatchError, InvalidBatchError, LogError

log = structlog.get_logger("gateway.dataplane.produce")

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 13

_MAGIC_POS = 16  # the magic byte sits at the same place in every message format (v0-v2)
_MIN_RECORD_OVERHEAD = _MAGIC_POS + 1  # Kafka's LOG_OVERHEAD + the v0 fields up to magic


def single_produce_batch(records: bytes | None, api_version: int) -> bytes:
    """The one batch a v3+ Produce partition entry must hold (`ProduceRequest.validateRecords`).

    Kafka's batch iterator ignores an incomplete trailing batch, so trailing bytes that do not
    form a whole batch are dropped, as Kafka trims them before appending. Raises
    `InvalidBatchError` (no batch, more than one, not magic 2) or `CorruptBatchError` (a size
    below the minimum, a magic byte no format has).
    """
    data = records or b""
    first = _complete_batch_size(data, 0)
    if first is None:
        raise InvalidBatchError(
            f"Produce requests with version {api_version} must have at least one record batch per partition"
        )
    if data[_MAGIC_POS] != MAGIC:
        raise InvalidBatchError(
            f"Produce requests with version {api_version} are only allowed to contain record "
            "batches with magic version 2"
        )
    if _complete_batch_size(data, first) is not None:
        raise InvalidBatchError(
            f"Produce requests with version {api_version} are only allowed to contain exactly "
            "one record batch per partition"
        )
    return data[:first] if len(data) != first else data


def _complete_batch_size(data: bytes, pos: int) -> int | None:
    """Size of the batch at `pos` if it is entirely present, else None (Kafka's iterator)."""
    if len(data) - pos < LOG_OVERHEAD:
        return None
    size = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True) + LOG_OVERHEAD
    if size < _MIN_RECORD_OVERHEAD:
        raise CorruptBatchError(
            f"Record size {size} is less than the minimum record overhead ({_MIN_RECORD_OVERHEAD})",
            position=pos,
        )
    if len(data) - pos < size:
        return None
    magic = data[pos + _MAGIC_POS]
    if not 0 <= magic <= MAGIC:
        raise CorruptBatchError(f"Invalid magic found in record: {magic}", position=pos)
    return size


def batch_error_code(e: BatchError) -> ErrorCode:
    """The Kafka error a refused batch is answered with (records.errors' table)."""
    return ErrorCode.corrupt_message if isinstance(e, CorruptBatchError) else ErrorCode.invalid_record


def _result(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


class ProduceApi:
    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane
        self._failures = RateLimiter()  # partition.append_failed warnings, per partition

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(API_KEY, MIN_VERSION, MAX_VERSION, self.handle)

    def _append(self, p: Partition, index: int, records: Any, version: int) -> dict[str, Any]:
        try:
            batch = single_produce_batch(records, version)
            limit = self.plane.configs.max_message_bytes(p.topic.name)
            if len(batch) > limit:
                return _result(
                    index,
                    ErrorCode.message_too_large,
                    f"The record batch size in the append to {p.topic.name}-{p.index} is "
                    f"{len(batch)} bytes which exceeds the maximum configured value of {limit}.",
                )
            base, _ = p.append(batch)
        except BatchError as e:
            return _result(index, batch_error_code(e), e.reason)
        except SequenceError as e:
            return _result(index, e.code, e.message)
        except (LogError, OSError) as e:  # a write error (nothing appended), or the log failed
            suppressed = self._failures.allow((p.topic.name, p.index))
            if suppressed is not None:
                log.warning(
                    "partition.append_failed",
                    topic=p.topic.name,
                    partition=p.index,
                    error=str(e),
                    suppressed=suppressed,
                    answered="KAFKA_STORAGE_ERROR",
                )
            return _result(index, ErrorCode.kafka_storage_error, str(e))
        return {**_result(index, ErrorCode.none), "base_offset": base, "log_start_offset": p.log_start_offset}

    def handle(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        """Append now, answer once durable.

        The appends run synchronously, in the order requests arrive on the connection (Kafka
        handles one request per connection at a time, so a request pipelined after a Produce
        sees its records); only the wait for the fsync is deferred, as a future.
        """
        version = request.__version__
        acks = request.acks
        by_id = version >= 13
        topics_out = []
        appended: list[tuple[Partition, dict[str, Any]]] = []
        failed = False
        for td in request.topic_data:
            topic = self.plane.topic_by_id(td.topic_id) if by_id else self.plane.topic(td.name)
            unknown = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
            results = []
            for pd in td.partition_data:
                p = None if topic is None else self.plane.partition(topic.name, pd.index)
                if acks not in (-1, 0, 1):
                    r = _result(pd.index, ErrorCode.invalid_required_acks)
                elif p is None:
                    code = ErrorCode.unknown_topic_or_partition if topic else unknown
                    r = _result(pd.index, code)
                else:
                    r = self._append(p, pd.index, pd.records, version)
                    if r["error_code"] == ErrorCode.none:
                        appended.append((p, r))
                failed = failed or r["error_code"] != ErrorCode.none
                results.append(r)
            key = {"topic_id": td.topic_id} if by_id else {"name": td.name}
            topics_out.append({**key, "partition_responses": results})
        if acks == 0:
            if failed:
                raise CloseConnection(
                    "produce.failed_with_acks_0",
                    errors=sorted(
                        {
                            ErrorCode(r["error_code"]).name
                            for t in topics_out
                            for r in t["partition_responses"]
                            if r["error_code"] != ErrorCode.none
                        }
                    ),
                )
            return NO_RESPONSE
        response_type = response_type_of(request)
        if not appended:
            return build(response_type, {"responses": topics_out, "throttle_time": 0})
        return asyncio.ensure_future(self._when_durable(response_type, topics_out, appended))

    async def _when_durable(
        self,
        response_type: type,
        topics_out: list[dict[str, Any]],
        appended: list[tuple[Partition, dict[str, Any]]],
    ) -> Any:
        """fsync every partition appended to (shared with concurrent requests), then answer."""
        by_partition: dict[int, tuple[Partition, list[dict[str, Any]]]] = {}
        for p, r in appended:
            by_partition.setdefault(id(p), (p, []))[1].append(r)
        entries = list(by_partition.values())
        outcomes = await asyncio.gather(*(p.make_durable() for p, _ in entries), return_exceptions=True)
        for (_, results), outcome in zip(entries, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                for r in results:
                    r.update(_result(r["index"], ErrorCode.kafka_storage_error, str(outcome)))
        return build(response_type, {"responses": topics_out, "throttle_time": 0})
