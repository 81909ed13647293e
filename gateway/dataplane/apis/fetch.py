"""Fetch (key 1, v4-v16): read record batches, long-polling until data arrives.

Kafka behaviour reproduced (`KafkaApis.handleFetchRequest`, `ReplicaManager.fetchMessages`,
`DelayedFetch`, `FetchSession`):
  * answer at once when at least `min_bytes` are available, when any partition has an error,
    or when `max_wait_ms` is 0; otherwise wait until an append to one of the fetched partitions
    brings enough bytes, or until `max_wait_ms` passes (appends wake waiting fetches);
  * per partition, whole batches from the one containing `fetch_offset`, up to
    `partition_max_bytes`, and up to the response's `max_bytes` overall; the first non-empty
    partition always gets at least one batch even if it is larger (KIP-74), the others stop
    at the limit;
  * an offset outside [log start, log end] -> OFFSET_OUT_OF_RANGE (offsets -1 in the entry);
    unknown topic/partition -> UNKNOWN_TOPIC_OR_PARTITION; v13+ address topics by id and an
    unknown id gets UNKNOWN_TOPIC_ID; a `current_leader_epoch` above ours (0) is
    UNKNOWN_LEADER_EPOCH, below it FENCED_LEADER_EPOCH;
  * a partition whose log failed (an fsync error, until restart) -> KAFKA_STORAGE_ERROR;
  * `records` is always bytes, empty when there is nothing (kafka-python 3 crashes on null);
  * no transactions, so the last stable offset equals the high watermark and
    `aborted_transactions` is null (read_uncommitted) or empty (read_committed);
  * incremental fetch sessions (KIP-227, v7+): a full fetch (epoch 0 or -1) is answered with
    session id 0, i.e. "no session was created" -- Kafka's answer when its session cache is
    full -- so clients keep sending full fetches; an incremental fetch (epoch > 0) names a
    session we never created and gets FETCH_SESSION_ID_NOT_FOUND, after which clients fall
    back to a full fetch.

Memory (docs/robustness.md, Bounds): the response's `max_bytes` is further limited by what the
connection's unsent-answer budget has left (`socket.response.buffer.max.bytes`,
`gateway.connection.ResponseBudget`), as Kafka bounds a response by its `fetch.max.bytes`.
With the budget used up (the client does not read its answers) a fetch reads nothing and
answers like one that found no data, after `max_wait_ms`; with some left, KIP-74's "at least
one batch" still holds, so a consumer always makes progress. The bytes read are held in the
budget until the answer is queued for writing.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.connection import response_budget_of
from gateway.dataplane.plane import DataPlane, Partition
from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build
from records.errors import LogError

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 16

LEADER_EPOCH = 0
READ_COMMITTED = 1


@dataclass(slots=True)
class _Wanted:
    index: int
    partition: Partition | None
    error: ErrorCode
    offset: int
    max_bytes: int


@dataclass(slots=True)
class _Topic:
    name: str | None
    topic_id: uuid.UUID | None
    partitions: list[_Wanted]


def _epoch_error(requested: int) -> ErrorCode:
    if requested < 0 or requested == LEADER_EPOCH:
        return ErrorCode.none
    if requested > LEADER_EPOCH:
        return ErrorCode.unknown_leader_epoch
    return ErrorCode.fenced_leader_epoch


class FetchApi:
    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(API_KEY, MIN_VERSION, MAX_VERSION, self.handle)

    def _resolve(self, request: Any, by_id: bool) -> list[_Topic]:
        topics = []
        for ft in request.topics:
            if by_id:
                info = self.plane.topic_by_id(ft.topic_id)
                missing = ErrorCode.unknown_topic_id
            else:
                info = self.plane.topic(ft.topic)
                missing = ErrorCode.unknown_topic_or_partition
            wanted = []
            for fp in ft.partitions:
                p = None if info is None else self.plane.partition(info.name, fp.partition)
                if info is not None and p is None:
                    error = ErrorCode.unknown_topic_or_partition
                elif p is None:
                    error = missing
                else:
                    error = _epoch_error(getattr(fp, "current_leader_epoch", -1))
                wanted.append(_Wanted(fp.partition, p, error, fp.fetch_offset, fp.partition_max_bytes))
            topics.append(
                _Topic(
                    None if by_id else ft.topic,
                    ft.topic_id if by_id else None,
                    wanted,
                )
            )
        return topics

    def _read(
        self, topics: list[_Topic], max_bytes: int, read_committed: bool, budget_left: bool = True
    ) -> tuple[list[dict[str, Any]], int, bool]:
        """(response topics, record bytes, any partition error) for the current log state.

        `budget_left` False: the connection's answer budget is used up, so not even KIP-74's
        one batch is read (every partition answers without records)."""
        total = 0
        has_error = False
        out = []
        aborted: list[Any] | None = [] if read_committed else None
        for t in topics:
            parts = []
            for w in t.partitions:
                p = w.partition
                error = w.error
                records = b""
                if p is not None and error == ErrorCode.none:
                    start, end = p.log_start_offset, p.high_watermark
                    if not start <= w.offset <= end:
                        error = ErrorCode.offset_out_of_range
                    else:
                        limit = min(w.max_bytes, max_bytes - total)
                        if limit > 0 or (total == 0 and budget_left):
                            try:
                                records = p.store.read(w.offset, max(limit, 1))
                            except LogError:  # the log failed (an fsync error): until restart
                                error = ErrorCode.kafka_storage_error
                            if total > 0 and len(records) > limit:
                                records = b""  # only the first non-empty partition may exceed
                        total += len(records)
                if error != ErrorCode.none or p is None:
                    has_error = True
                    hw = lso = log_start = -1
                else:
                    hw = lso = p.high_watermark
                    log_start = p.log_start_offset
                parts.append(
                    {
                        "partition_index": w.index,
                        "error_code": error,
                        "high_watermark": hw,
                        "last_stable_offset": lso,
                        "log_start_offset": log_start,
                        "aborted_transactions": aborted,
                        "preferred_read_replica": -1,
                        "records": records,
                    }
                )
            out.append({"topic": t.name, "topic_id": t.topic_id, "partitions": parts})
        return out, total, has_error

    async def handle(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        version = request.__version__
        response_type = response_type_of(request)
        if version >= 7 and request.session_epoch > 0:
            return build(
                response_type,
                {
                    "throttle_time": 0,
                    "error_code": ErrorCode.fetch_session_id_not_found,
                    "session_id": 0,
                    "responses": [],
                },
            )
        topics = self._resolve(request, by_id=version >= 13)
        read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
        max_bytes = request.max_bytes
        budget = response_budget_of(ctx)
        max_wait = request.max_wait.total_seconds()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait
        while True:
            left = None if budget is None else budget.available()
            allowed = max_bytes if left is None else min(max_bytes, left)
            out, total, has_error = self._read(topics, allowed, read_committed, left != 0)
            remaining = deadline - loop.time()
            if total >= request.min_bytes or has_error or remaining <= 0 or self.plane.closing:
                break
            await self._wait_for_append(topics, remaining)
        if budget is not None:
            budget.hold(total)
        return build(
            response_type,
            {
                "throttle_time": 0,
                "error_code": ErrorCode.none,
                "session_id": 0,
                "responses": out,
            },
        )

    async def _wait_for_append(self, topics: list[_Topic], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        partitions = [w.partition for t in topics for w in t.partitions if w.partition is not None]
        for p in partitions:
            p.add_waiter(fut)
        timer = loop.call_later(timeout, _resolve, fut)
        try:
            await fut
        finally:
            timer.cancel()
            for p in partitions:
                p.remove_waiter(fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
