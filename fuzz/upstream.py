"""Target `upstream`: the upstream proxy's frame parsing, on bytes it never decodes in full.

In upstream mode a client's request frame is routed before the dispatcher decodes it
(`gateway.upstream.proxy.forwarded_request`: the request header, and for FindCoordinator and
the config APIs the body), and a forwarded Produce has its `acks` read from the raw frame
(`expects_response` / `produce_acks`: header tagged fields and the compact transactional id
are varints from the client). Responses from the upstream broker are split by the link's
`protocol.framing.FrameReader`.

An input is `[max frame size / 8][chunking][byte stream]`: the stream is fed to a
`FrameReader` in chunks (as TCP may split it), and every frame it yields goes through the
proxy's routing and `expects_response`, as `UpstreamProxy.on_frame` and `_forward` run them.

Clean: `FrameSizeError` (the link fails, the client connection closes), raised only after
every frame before the bad size was taken. Asserted:
* the frames are exactly those an independent reading of the stream finds;
* routing and `expects_response` never raise (a malformed header is forwarded as expecting an
  answer: the broker decides), and varints are bounded (`protocol.varint`);
* for a Produce frame that kio decodes, `expects_response` is `acks != 0` of the decoded body;
* a Metadata frame translated for a cluster without topic ids (`topic_ids.MetadataTranslation`,
  upstream at v9) never raises, and what it sends decodes at the upstream's version with only
  names in it;
* a forwarded Fetch's `max_bytes` capped to the connection's answer budget (`fetch_capped`)
  never raises, and when kio decodes the frame it decodes the capped one to the same request
  with `max_bytes` at most the cap (unchanged when it was within it).
"""

from __future__ import annotations

import struct

from fuzz.common import Target
from fuzz.framing import expected
from gateway.upstream.proxy import FETCH, METADATA, PRODUCE, expects_response, fetch_capped, forwarded_request
from gateway.upstream.topic_ids import MetadataTranslation
from protocol.codec import DecodeFailure, api_schema, decode
from protocol.framing import FrameReader, FrameSizeError

_SIZE = struct.Struct(">i")


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    max_frame = data[0] * 8
    chunking = data[1]
    stream = data[2:]
    reader = FrameReader(max_frame)
    got: list[bytes] = []
    refused: FrameSizeError | None = None
    pos, step = 0, 0
    while pos < len(stream) and refused is None:
        n = 1 + ((chunking >> (step % 8)) & 1) * (1 + chunking % 13) * ((step % 3) + 1)
        reader.feed(stream[pos : pos + n])
        pos += n
        step += 1
        try:
            while (frame := reader.next_frame()) is not None:
                got.append(frame)
        except FrameSizeError as e:
            refused = e
    want, bad_size = expected(stream, max_frame)
    assert got == want, f"frames {len(got)} != expected {len(want)}"
    assert (refused is not None) == bad_size, f"refused={refused} but a bad size was {bad_size}"
    for frame in got:
        route_one(frame)
    if refused is not None:
        raise refused


def route_one(frame: bytes) -> None:
    """One client frame through the proxy's pre-decode path."""
    route = forwarded_request(frame)
    if route is None:
        return
    api_key, version, _ = route
    expect = expects_response(frame, api_key, version)
    if api_key == FETCH:
        check_fetch_capped(frame, version)
    if api_key == METADATA:
        check_metadata_translated(frame, version)
    if api_key == PRODUCE:
        schema = api_schema(api_key, version)
        if schema is None:
            return
        try:
            _, body = decode(schema, frame)
        except DecodeFailure:
            return
        assert expect == (int(body.acks) != 0), f"acks {body.acks} read as expect={expect}"


def check_metadata_translated(frame: bytes, version: int, upstream_max: int = 9) -> None:
    translated = MetadataTranslation.of_request(frame, version, upstream_max, lambda tid: None)
    if translated is None:
        return
    sent, translation = translated
    schema = api_schema(METADATA, translation.upstream_version)
    assert schema is not None
    _, body = decode(schema, sent)
    assert body.topics is None or all(t.name is not None for t in body.topics), "an id went upstream"


def check_fetch_capped(frame: bytes, version: int, cap: int = 1000) -> None:
    capped = fetch_capped(frame, version, cap)
    schema = api_schema(FETCH, version)
    if schema is None:
        return
    try:
        _, body = decode(schema, frame)
    except DecodeFailure:
        return
    _, got = decode(schema, capped)
    if version < 3 or 0 <= body.max_bytes <= cap:
        assert got == body, "a Fetch within the cap was changed"
    else:
        assert got.max_bytes == cap, f"max_bytes {got.max_bytes} after capping {body.max_bytes}"


def seeds() -> list[bytes]:
    from kio.index import load_request_schema

    from protocol.codec import encode_request
    from protocol.entity_builder import build

    frames: list[bytes] = []
    for version in (3, 7, 9, 11):
        for acks, txn in ((0, None), (1, "txn-1"), (-1, None)):
            request = build(
                load_request_schema(0, version),
                {
                    "transactional_id": txn,
                    "acks": acks,
                    "timeout": 1000,
                    "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"\x00" * 20}]}],
                },
            )
            frames.append(encode_request(request, correlation_id=5, client_id="fuzz"))
    for key_type in (0, 1):
        request = build(load_request_schema(10, 4), {"key_type": key_type, "coordinator_keys": ["k"]})
        frames.append(encode_request(request, correlation_id=6, client_id="fuzz"))
    metadata = build(
        load_request_schema(3, 12),
        {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
    )
    frames.append(encode_request(metadata, correlation_id=7, client_id="fuzz"))
    import uuid

    by_id = build(
        load_request_schema(3, 12),
        {
            "topics": [
                {"name": None, "topic_id": uuid.UUID(int=7)},
                {"name": "t", "topic_id": uuid.UUID(int=0)},
            ],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    frames.append(encode_request(by_id, correlation_id=7, client_id="fuzz"))  # ids: topic_ids
    for version in (4, 11, 12):  # Fetch by topic name (v13+ address topics by id)
        fetch = build(
            load_request_schema(1, version),
            {
                "max_wait": 500,
                "min_bytes": 1,
                "max_bytes": 64 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "forgotten_topics_data": [],
                "rack_id": "",
                "topics": [
                    {
                        "topic": "t",
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                    }
                ],
            },
        )
        frames.append(encode_request(fetch, correlation_id=8, client_id="fuzz"))
    # a Produce v9 header whose tagged-field count is an over-long varint
    frames.append(_SIZE.pack(20) + struct.pack(">hhih", 0, 9, 8, 1) + b"c" + b"\xff" * 9)
    stream = b"".join(frames)
    return [
        bytes([255, 0]) + stream,
        bytes([255, 0xA5]) + stream,
        bytes([16, 0x0F]) + frames[0] + frames[-1],
        bytes([255, 1]) + frames[1] + frames[2],
    ]


TARGET = Target(
    name="upstream",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(FrameSizeError,),
    instrument=("gateway.upstream.proxy", "protocol.framing", "protocol.varint"),
)
