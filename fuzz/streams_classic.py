"""Target `streams_classic`: Kafka Streams' SubscriptionInfo / AssignmentInfo, the user data of a
classic Kafka Streams group's JoinGroup metadata and SyncGroup assignments
(`translation.streams_classic_protocol`), which `groups describe/migration` and `check upgrade`
decode from whatever a member sent. An input is one such blob; its first byte picks the decoder.

Clean: `SchemaError` (its `StreamsProtocolError`: the tools show the member's metadata as not
decodable, `check upgrade` refuses with the reason). Also asserted: whatever decodes encodes back
to exactly the same bytes (what lets groupshift answer a member in its own version later).
"""

from __future__ import annotations

import uuid

from fuzz.common import Target
from translation.embedded_protocol import SchemaError
from translation.streams_classic_protocol import (
    LATEST_OFFSET,
    AssignmentInfo,
    HostPartitions,
    SubscriptionInfo,
    TaskId,
    TaskOffsetSum,
    decode_assignment_info,
    decode_subscription_info,
    encode_assignment_info,
    encode_subscription_info,
)


def seeds() -> list[bytes]:
    pid = uuid.UUID("8bc81155-738b-4de2-ab6b-5e4b4b1b89c0")
    out = []
    for v in range(1, 13):
        latest = -1 if v <= 2 else max(v, 11)
        if v > 11:
            sub = SubscriptionInfo(v, latest, uuid.UUID(int=0), future=b"\x00" * 16)
        elif v >= 7:
            sums = (TaskOffsetSum(TaskId(0, 0), LATEST_OFFSET), TaskOffsetSum(TaskId(1, 2), 42))
            sub = SubscriptionInfo(
                v, latest, pid, user_endpoint=b"localhost:7101", task_offset_sums=sums,
                unique_field=3 if v >= 8 else 0, client_tags=((b"rack", b"r1"),) if v >= 11 else (),
            )  # fmt: skip
        else:
            sub = SubscriptionInfo(
                v, latest, pid, (TaskId(0, 0),), (TaskId(1, 2),), b"localhost:7101" if v >= 2 else b""
            )
        out.append(b"\x00" + encode_subscription_info(sub))
        if v > 11:
            a = AssignmentInfo(v, v, future=b"\x00" * 8)
        else:
            hosts = (HostPartitions("localhost", 7101, (("words-in", 0), ("app-words-repartition", 0))),)
            a = AssignmentInfo(
                v, latest if v >= 3 else -1, (TaskId(0, 0), TaskId(1, 0)),
                ((TaskId(1, 2), (("app-words-repartition", 2),)),),
                hosts if v >= 2 else (), hosts if v >= 6 else (), 0,
            )  # fmt: skip
        out.append(b"\x01" + encode_assignment_info(a))
    return out


def one_input(data: bytes) -> None:
    if not data:
        return
    blob = data[1:]
    if data[0] & 1 == 0:
        again = encode_subscription_info(decode_subscription_info(blob))
        assert again == blob, f"subscription does not come back byte-identical: {blob.hex()} -> {again.hex()}"
    else:
        again = encode_assignment_info(decode_assignment_info(blob))
        assert again == blob, f"assignment does not come back byte-identical: {blob.hex()} -> {again.hex()}"


TARGET = Target(
    name="streams_classic",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(SchemaError,),
    instrument=("translation.streams_classic_protocol",),
)
