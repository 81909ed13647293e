"""Target `connect_classic`: a classic Kafka Connect worker's JoinGroup metadata (WorkerState /
ExtendedWorkerState) and the SyncGroup assignment its leader wrote (ConnectProtocol v0,
IncrementalCooperativeConnectProtocol v1/v2; `translation.connect_classic_protocol`), which `groups
describe/migration` and `check upgrade` decode from whatever a worker sent. An input is one such
blob; its first byte picks the decoder.

Clean: `SchemaError` (its `ConnectProtocolError`: the tools show the worker's metadata as not
decodable, `check upgrade` refuses with the reason). Also asserted: whatever decodes encodes back
to exactly the same bytes, and the tools' view of a worker (`decode_worker`) never raises.
"""

from __future__ import annotations

from fuzz.common import Target
from tools.groups.connect_classic import decode_worker
from translation.connect_classic_protocol import (
    ConnectWorkerMetadata,
    build_assignment,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from translation.embedded_protocol import SchemaError


def seeds() -> list[bytes]:
    out = []
    for v in (0, 1, 2, 3):
        a = build_assignment(
            v, "connect-1", "http://w1:8083/", 7, ["src", "sink"], [("src", 0), ("sink", 2)],
            ["old"], [("old", 1)], delay=2000 if v else 0,
        )  # fmt: skip
        out.append(b"\x01" + encode_assignment(a))
        meta = ConnectWorkerMetadata(v, "http://w2:8083/", 7, None if v == 0 else (a if v % 2 else None))
        out.append(b"\x00" + encode_metadata(meta))
    return out


def one_input(data: bytes) -> None:
    if not data:
        return
    blob = data[1:]
    if data[0] & 1 == 0:
        again = encode_metadata(decode_metadata(blob))
        assert again == blob, f"metadata does not come back byte-identical: {blob.hex()} -> {again.hex()}"
        decode_worker("m", "c", "/h", None, blob, None)
    else:
        again = encode_assignment(decode_assignment(blob))
        assert again == blob, f"assignment does not come back byte-identical: {blob.hex()} -> {again.hex()}"
        decode_worker("m", "c", "/h", None, None, blob)


TARGET = Target(
    name="connect_classic",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(SchemaError,),
    instrument=("translation.connect_classic_protocol",),
)
