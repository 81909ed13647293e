"""Kafka request/response wire codec on top of kio.

A request frame (after the 4-byte size prefix) is `RequestHeader` (v1, or v2 for flexible
versions) followed by the body. The header version follows from the API key and version, which
sit at fixed offsets, so `peek` reads them without decoding anything else; any request may be
the first one on a connection (no ApiVersions handshake is required, as in Kafka).

Responses are `ResponseHeader` v0 (correlation id) or v1 (plus empty tagged fields) followed by
the body; kio's response classes carry their header version, which already encodes Kafka's
exception that ApiVersions responses always use header v0.

Decoding is kio's native reader, preceded by `length_guard` (kio would otherwise pre-allocate
attacker-sized arrays and abort the process); encoding is `response_writer`, compiled per
response class and byte-identical to kio's pure-Python writer. Everything per (api key,
version) is resolved once and cached in an `ApiSchema`.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import KioIndexError, load_request_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError

from protocol import client_assignment_wire as caw
from protocol import connect_wire as cw
from protocol import kafka_schemas
from protocol.heartbeat_wire import response_frame
from protocol.length_guard import Guard, MalformedLength, check_lengths, guard_for
from protocol.response_writer import Writer, writer_for

_HEADER_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_CORRELATION_V0 = struct.Struct(">i")
_CORRELATION_V1 = struct.Struct(">iB")  # correlation id + zero tagged fields


class DecodeFailure(ValueError):
    """The frame is not a well-formed request of the version its header names."""


@dataclass(frozen=True, slots=True)
class ApiSchema:
    """Everything needed to decode one (api key, version) request and encode its response."""

    api_key: int
    version: int
    request_type: type
    response_type: type
    read_header: Any
    read_body: Any
    guard: Guard | None
    write_body: Writer
    flexible_response_header: bool


@cache
def api_schema(api_key: int, version: int) -> ApiSchema | None:
    """The cached codec for (api_key, version), or None if neither kio, the Kafka schemas kio
    lacks (`protocol.kafka_schemas`) nor groupshift's extensions (`extension_schema`) know that
    pair."""
    try:
        req = kafka_schemas.request_schema(api_key, version)
        resp = kafka_schemas.response_schema(api_key, version)
    except KioIndexError:
        return extension_schema(api_key, version)
    return ApiSchema(
        api_key=api_key,
        version=version,
        request_type=req,
        response_type=resp,
        read_header=entity_reader(req.__header_schema__),
        read_body=_tag_tolerant_heartbeat_reader(entity_reader(req), version)
        if api_key == caw.CONSUMER_GROUP_HEARTBEAT_KEY
        else entity_reader(req),
        guard=guard_for(req),
        write_body=writer_for(resp),
        flexible_response_header=bool(resp.__header_schema__.__flexible__),
    )


def _tag_tolerant_heartbeat_reader(read: Any, version: int) -> Any:
    """kio's ConsumerGroupHeartbeat reader, skipping top-level tags it does not know as Kafka's
    generated readers do (kio raises on them). Only a request carrying such a tag (groupshift's
    ClientAssignors field, docs/client-side-assignors.md) pays for the second read: the body is
    read again from a copy whose tag section is empty."""

    def read_body(frame: bytes, offset: int) -> tuple[Any, int]:
        try:
            body, end = read(frame, offset)
        except KeyError as e:
            if "tagged field" not in str(e):
                raise
            try:
                start = caw.heartbeat_tags_start(frame, offset, version)
            except caw.MalformedExtension as bad:
                raise ValueError(str(bad)) from bad
            body, _ = read(frame[:start] + b"\x00", offset)
            end = len(frame)
        return body, end

    return read_body


# --- groupshift's extension APIs (keys outside Kafka's range; docs/client-side-assignors.md) --


def _extension_reader(read: Any) -> Any:
    """A body reader in kio's shape, `(frame, offset) -> (body, end)`, from a
    `client_assignment_wire` reader; malformed bytes become `SerialError`'s sibling that
    `decode` maps to DecodeFailure."""

    def read_body(frame: bytes, offset: int) -> tuple[Any, int]:
        try:
            return read(frame, offset), len(frame)
        except caw.MalformedExtension as e:
            raise ValueError(str(e)) from e

    return read_body


def _extension_writer(write: Any) -> Writer:
    def write_body(append: Any, response: Any) -> None:
        append(write(response))

    return write_body


_EXTENSIONS: dict[int, tuple[type, type, Any, Any]] = {
    caw.PREPARE_ASSIGNMENT_KEY: (
        caw.PrepareAssignmentRequest,
        caw.PrepareAssignmentResponse,
        caw.read_prepare_request,
        caw.write_prepare_response,
    ),
    caw.INSTALL_ASSIGNMENT_KEY: (
        caw.InstallAssignmentRequest,
        caw.InstallAssignmentResponse,
        caw.read_install_request,
        caw.write_install_response,
    ),
    cw.CONNECT_HEARTBEAT_KEY: (
        cw.ConnectHeartbeatRequest,
        cw.ConnectHeartbeatResponse,
        cw.read_heartbeat_request,
        cw.write_heartbeat_response,
    ),
    cw.CONNECT_PREPARE_KEY: (
        cw.ConnectPrepareRequest,
        cw.ConnectPrepareResponse,
        cw.read_prepare_request,
        cw.write_prepare_response,
    ),
    cw.CONNECT_INSTALL_KEY: (
        cw.ConnectInstallRequest,
        cw.ConnectInstallResponse,
        cw.read_install_request,
        cw.write_install_response,
    ),
}
"""Extension key -> (request type, response type, request reader, response writer)."""


def extension_schema(api_key: int, version: int) -> ApiSchema | None:
    """The codec of one of groupshift's extension APIs (flexible v0 only), or None."""
    if version != caw.EXTENSION_VERSION or api_key not in cw.EXTENSION_NAMES:
        return None
    header = load_request_schema(68, 1).__header_schema__  # RequestHeader v2
    req_t, resp_t, read, write = _EXTENSIONS[api_key]
    return ApiSchema(
        api_key=api_key,
        version=version,
        request_type=req_t,
        response_type=resp_t,
        read_header=entity_reader(header),
        read_body=_extension_reader(read),
        guard=None,
        write_body=_extension_writer(write),
        flexible_response_header=True,
    )


def peek(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame."""
    if len(frame) < _HEADER_PREFIX.size:
        raise DecodeFailure(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def decode(schema: ApiSchema, frame: bytes) -> tuple[Any, Any]:
    """(RequestHeader, request body) decoded from a complete frame."""
    try:
        header, offset = schema.read_header(frame, 0)
        if schema.guard is not None:
            check_lengths(schema.guard, frame, offset)
        body, _ = schema.read_body(frame, offset)
    except (SerialError, MalformedLength, ValueError, KeyError, TypeError) as e:
        raise DecodeFailure(
            f"cannot decode api_key={schema.api_key} v{schema.version}: {type(e).__name__}: {e}"
        ) from e
    return header, body


def encode_response(schema: ApiSchema, correlation_id: int, response: Any) -> bytes:
    """A size-prefixed response frame.

    `response` is an instance of `schema.response_type`, or `bytes` holding an already encoded
    body (an escape hatch for hand-written fast paths).
    """
    if type(response) is bytes:  # the hand-encoded bodies of the hot paths: one pack, one copy
        return response_frame(correlation_id, schema.flexible_response_header, response)
    parts = [
        b"",
        _CORRELATION_V1.pack(correlation_id, 0)
        if schema.flexible_response_header
        else _CORRELATION_V0.pack(correlation_id),
    ]
    if isinstance(response, bytes | bytearray | memoryview):
        parts.append(bytes(response))
    else:
        schema.write_body(parts.append, response)
    parts[0] = _SIZE.pack(sum(map(len, parts)))
    return b"".join(parts)


def encode_request(request: Any, *, correlation_id: int, client_id: str | None = "") -> bytes:
    """A size-prefixed request frame (for tests, benchmarks and tooling that speak to a server)."""
    header_type = request.__header_schema__
    header = header_type(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    entity_writer(header_type)(buf, header)
    entity_writer(type(request))(buf, request)
    size = buf.tell() - 4
    buf.seek(0)
    buf.write(_SIZE.pack(size))
    return buf.getvalue()


def decode_response(response_type: Any, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of a response frame without its size prefix (client side)."""
    header_type = response_type.__header_schema__
    header, offset = entity_reader(header_type)(frame, 0)
    body: Any = entity_reader(response_type)(frame, offset)[0]
    return header.correlation_id, body


def response_type_of(request: Any) -> type:
    """The kio response class matching a decoded request's API and version."""
    schema = api_schema(request.__api_key__, request.__version__)
    if schema is None:  # pragma: no cover - a decoded request always has a schema
        raise LookupError(f"no schema for {type(request).__name__}")
    return schema.response_type
