"""Target `requests`: every request decoder the gateway serves, as `Dispatcher.on_frame` runs it.

An input is a request frame (without its 4-byte size). Its first byte picks one served
(api key, version) and is replaced by that pair, so almost every input exercises a real
decoder; the rest is the frame from the correlation id on. The path is the dispatcher's:
`codec.peek`, the served-version check, then `codec.decode` (kio's reader behind
`length_guard`).

Clean: `DecodeFailure` (the dispatcher logs `request.malformed` / `request.header_invalid` and
closes the connection, as Kafka does on a request it cannot parse). Anything else escaping
`decode` would reach the connection's `data_received` and is a finding.

Served (api, version) pairs are read from a real `GatewayServer` with the group layer (the
one `groupshift serve` builds), not from a list kept here. Seeds are real encodings: one
request per served pair, every field filled (one element per array), encoded with
`codec.encode_request`.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import tempfile
import uuid
from functools import cache
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field

from fuzz.common import Target
from protocol.codec import DecodeFailure, api_schema, decode, encode_request, peek
from protocol.kafka_schemas import request_schema

_PAIR = struct.Struct(">hh")


@cache
def served() -> tuple[tuple[int, int], ...]:
    """Every (api key, version) a `groupshift serve` gateway accepts, sorted."""
    from gateway.config import ServerConfig
    from gateway.groups.service import install_group_layer
    from gateway.server import GatewayServer

    with tempfile.TemporaryDirectory(prefix="fuzz-served-") as d:
        server = GatewayServer(ServerConfig(log_dirs=d), extensions=[install_group_layer])
        pairs = []
        for key, lo, hi in server.registry.advertised():
            spec = server.registry.get(key)
            assert spec is not None
            pairs += [(key, v) for v in range(lo, hi + 1) if spec.supports(v)]
        for stop in server.on_stop:
            stop()
    return tuple(sorted(pairs))


_PRIMITIVE: dict[str, Any] = {
    "int8": 1,
    "int16": 1,
    "int32": 1,
    "int64": 1,
    "uint16": 1,
    "uint32": 1,
    "uint64": 1,
    "float64": 1.0,
    "string": "t",
    "bytes": b"\x00\x01",
    "bool": True,
    "uuid": uuid.UUID(int=1),
    "records": None,
    "error_code": 0,
    "timedelta_i32": datetime.timedelta(milliseconds=1),
    "timedelta_i64": datetime.timedelta(milliseconds=1),
    "datetime_i64": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
}


def filled(cls: type) -> Any:
    """An instance of a kio entity with every field set (one element per array)."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            kwargs[f.name] = (filled(kind.type_),)
        elif isinstance(kind, EntityField):
            kwargs[f.name] = filled(kind.type_)
        else:
            v = _PRIMITIVE.get(f.metadata.get("kafka_type", ""))
            if f.metadata.get("kafka_type") == "error_code":
                from kio.schema.errors import ErrorCode

                v = ErrorCode.none
            kwargs[f.name] = (v,) if isinstance(kind, PrimitiveTupleField) else v
    return cls(**kwargs)


def seeds() -> list[bytes]:
    return [
        encode_request(filled(request_schema(key, version)), correlation_id=7, client_id="fuzz")[4:]
        for key, version in served()
    ]


def one_input(data: bytes) -> None:
    pairs = served()
    if not data:
        raise DecodeFailure("empty frame")
    key, version = pairs[data[0] % len(pairs)]
    frame = _PAIR.pack(key, version) + data[1:]
    api_key, api_version, _ = peek(frame)
    schema = api_schema(api_key, api_version)
    assert schema is not None, (api_key, api_version)
    decode(schema, frame)


def _with_selector(frames: list[bytes]) -> list[bytes]:
    index = {p: i for i, p in enumerate(served())}
    return [bytes([index[_PAIR.unpack_from(f)]]) + f[4:] for f in frames]


TARGET = Target(
    name="requests",
    doc=__doc__ or "",
    seeds=lambda: _with_selector(seeds()),
    one_input=one_input,
    clean=(DecodeFailure,),
    instrument=("protocol.codec", "protocol.length_guard", "kio.serial"),
)
