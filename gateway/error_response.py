"""The error response of any served request (Kafka `AbstractRequest.getErrorResponse`).

When a handler fails unexpectedly Kafka does not close the connection: `KafkaApis.handle`
catches the exception and sends `request.getErrorResponse(e)`, which each request class builds
its own way: a top-level `error_code` where the response has one, and for a request about many
things (topics and partitions, groups, config resources, coordinator keys) one entry per
requested thing carrying the error, named as in the request. The error is UNKNOWN_SERVER_ERROR,
except for the group coordinator's APIs (`failure_error`). Clients then retry or report that
one request, and the connection (with every other request in flight on it) lives on.

Here one generic builder does what those per-class methods do, from kio's response schemas:
every `error_code` field reached is set to the error; every array of the response that mirrors
an array of the request (the table `_MIRRORS`, per API) gets one entry per request item, with
its identity fields (topic name or id, partition index, group id, member id, resource, key)
copied from the item; every other required field takes Kafka's "unknown" value (-1 for offsets,
epochs, ids and ports as Kafka's error responses write them; 0, "", empty or null otherwise).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

from protocol.entity_builder import build

# (api key, response array field) -> (request array field, the response entry's field that a
# request item which is a bare string or int fills, or None when request items are entities).
_MIRRORS: Mapping[int, Mapping[str, tuple[str, str | None]]] = {
    0: {"responses": ("topic_data", None), "partition_responses": ("partition_data", None)},
    1: {"responses": ("topics", None), "partitions": ("partitions", None)},
    2: {"topics": ("topics", None), "partitions": ("partitions", None)},
    3: {"topics": ("topics", None)},
    8: {"topics": ("topics", None), "partitions": ("partitions", None)},
    9: {
        "groups": ("groups", None),
        "topics": ("topics", None),
        "partitions": ("partition_indexes", "partition_index"),
    },
    10: {"coordinators": ("coordinator_keys", "key")},
    13: {"members": ("members", None)},
    15: {"groups": ("groups", "group_id")},
    19: {"topics": ("topics", None)},
    20: {"responses": ("topics", None)},
    21: {
        "topics": ("topics", None),
        "partitions": ("partitions", None),
    },  # v6+; v1-5 name topics as strings (below)
    23: {"topics": ("topics", None), "partitions": ("partitions", None)},
    28: {"topics": ("topics", None), "partitions": ("partitions", None)},
    30: {"results": ("creations", None)},
    31: {"filter_results": ("filters", None)},
    32: {"results": ("resources", None)},
    33: {"responses": ("resources", None)},
    37: {"results": ("topics", None)},
    42: {"results": ("groups_names", "group_id")},
    44: {"responses": ("resources", None)},
    47: {"topics": ("topics", None), "partitions": ("partitions", None)},
    61: {"topics": ("topics", None), "partitions": ("partition_indexes", "partition_index")},
    65: {"transaction_states": ("transactional_ids", "transactional_id")},
    69: {"groups": ("group_ids", "group_id")},
    89: {"groups": ("group_ids", "group_id")},
}
_ALTER_USER_SCRAM_CREDENTIALS = 51
# DeleteTopics v1-5 list topic names as strings.
_FALLBACK_MIRRORS: Mapping[tuple[int, str], tuple[str, str | None]] = {
    (20, "responses"): ("topic_names", "name"),
}

# The fields that name what an entry is about; copied from the request item.
_IDENTITY = frozenset(
    {
        "name",
        "topic",
        "topic_id",
        "topic_name",
        "index",
        "partition_index",
        "partition",
        "group_id",
        "member_id",
        "group_instance_id",
        "key",
        "resource_type",
        "resource_name",
    }
)
_SYNONYMS = {"partition_index": ("partition",)}

# Kafka writes -1 ("unknown") into these fields of an error response.
_MINUS_ONE = frozenset(
    {
        "base_offset",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "committed_offset",
        "offset",
        "timestamp",
        "leader_id",
        "leader_epoch",
        "committed_leader_epoch",
        "node_id",
        "port",
        "producer_id",
        "producer_epoch",
        "generation_id",
        "member_epoch",
        "group_epoch",
        "assignment_epoch",
        "controller_id",
        "num_partitions",
        "replication_factor",
    }
)

_ZERO_BY_KAFKA_TYPE: Mapping[str, Any] = {
    "bool": False,
    "bytes": b"",
    "string": "",
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "float64": 0.0,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "uuid": uuid.UUID(int=0),
}


# The group coordinator's APIs. Kafka answers a coordinator bug with UNKNOWN_SERVER_ERROR too,
# but KIP-848 consumers (librdkafka, the Java client) treat that error on ConsumerGroupHeartbeat
# as fatal and stop for good; COORDINATOR_NOT_AVAILABLE, which every version of these APIs
# has, makes every client rediscover the coordinator and retry (docs/deviations.md).
COORDINATOR_APIS = frozenset({8, 9, 11, 12, 13, 14, 15, 16, 28, 42, 47, 68, 69, 88, 89, 93})


def failure_error(api_key: int) -> ErrorCode:
    """The error that answers a request whose handler failed unexpectedly."""
    if api_key in COORDINATOR_APIS:
        return ErrorCode.coordinator_not_available
    return ErrorCode.unknown_server_error


def error_response(api_key: int, response_type: type, request: Any, error: ErrorCode) -> Any:
    """A response of `response_type` telling the client that `request` failed with `error`."""
    if api_key == _ALTER_USER_SCRAM_CREDENTIALS:
        # One result per user named by a deletion or an upsertion (Kafka's getErrorResponse).
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return build(
            response_type,
            {
                "throttle_time": 0,
                "results": [{"user": u, "error_code": error, "error_message": None} for u in users],
            },
        )
    return _fill(api_key, response_type, request, error, None, top=True)


@cache
def _fields(cls: type) -> tuple[tuple[dataclasses.Field[Any], Any, bool], ...]:
    out = []
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append((f, classify_field(f), required))
    return tuple(out)


def _fill(
    api_key: int, cls: type, source: Any, error: ErrorCode, item_field: str | None, *, top: bool = False
) -> Any:
    """One entity of `cls`; `source` is the request entity it answers (or a bare string/int
    item of a request array, which fills `item_field`), None when nothing mirrors it. The top
    level copies nothing (Kafka answers e.g. a failed JoinGroup with an unknown member id)."""
    mirrors = _MIRRORS.get(api_key, {})
    values: dict[str, Any] = {}
    bare = source is not None and not dataclasses.is_dataclass(source)
    copy_identity = not top and source is not None and not bare
    for f, kind, required in _fields(cls):
        name = f.name
        if name == "error_code":
            values[name] = error
        elif isinstance(kind, EntityTupleField):
            values[name] = _mirror_array(api_key, kind.type_, name, source, error, bare, mirrors)
        elif isinstance(kind, EntityField):
            if required:
                values[name] = None if is_optional(f) else _fill(api_key, kind.type_, None, error, None)
        elif isinstance(kind, PrimitiveTupleField):
            if required:
                values[name] = None if is_optional(f) else ()
        elif bare and name == item_field:
            values[name] = source
        elif copy_identity and name in _IDENTITY and _copy(source, name, values):
            pass
        elif required:
            values[name] = _unknown(f)
    return cls(**values)


def _copy(source: Any, name: str, values: dict[str, Any]) -> bool:
    for candidate in (name, *_SYNONYMS.get(name, ())):
        if hasattr(source, candidate):
            values[name] = getattr(source, candidate)
            return True
    return False


def _mirror_array(
    api_key: int,
    item_type: type,
    name: str,
    source: Any,
    error: ErrorCode,
    bare: bool,
    mirrors: Mapping[str, tuple[str, str | None]],
) -> tuple[Any, ...]:
    if source is None or bare:
        return ()
    for link in (mirrors.get(name), _FALLBACK_MIRRORS.get((api_key, name))):
        if link is None or not hasattr(source, link[0]):
            continue
        items = getattr(source, link[0]) or ()
        return tuple(_fill(api_key, item_type, item, error, link[1]) for item in items)
    return ()


def _unknown(f: dataclasses.Field[Any]) -> Any:
    if f.metadata.get("kafka_type") == "records":
        # Kafka answers an empty record set (`MemoryRecords.EMPTY`), never a null one: librdkafka
        # cannot parse a null record set in a Fetch answer and retries at once, without a backoff.
        return b""
    if is_optional(f):
        return None
    if f.name in _MINUS_ONE:
        return -1
    kafka_type = f.metadata.get("kafka_type", "")
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
    return _ZERO_BY_KAFKA_TYPE.get(kafka_type, 0)
