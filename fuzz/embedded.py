"""Target `embedded`: the consumer protocol's embedded Subscription/Assignment parser.

Classic members carry a `ConsumerProtocolSubscription` in JoinGroup's protocol metadata and a
`ConsumerProtocolAssignment` in SyncGroup's assignments (Kafka's `ConsumerProtocol`); a
classic member inside a consumer group (KIP-848 upgrade path) has them parsed by
`translation.embedded_protocol`. An input is one such blob; its first byte picks the parser.

Clean: `SchemaError` (`translation.classic_member` answers INCONSISTENT_GROUP_PROTOCOL /
falls back to version 0). Also asserted: a parsed subscription or assignment serializes back
to bytes that parse to the same value (what the conversions rely on when they re-encode).
"""

from __future__ import annotations

from fuzz.common import Target
from translation.embedded_protocol import (
    Assignment,
    SchemaError,
    Subscription,
    parse_assignment,
    parse_subscription,
    serialize_assignment,
    serialize_subscription,
)


def seeds() -> list[bytes]:
    subs = [
        Subscription(v, topics, ud, owned, gen, rack)
        for v in range(4)
        for topics, ud, owned, gen, rack in (
            (("orders",), None, (), -1, None),
            (("a", "b", "ü-topic"), b"\x00\x01user", (("a", (0, 1, 2)),), 7, "rack-1"),
            ((), b"", (("t", ()),), 0, ""),
        )
    ]
    out = [b"\x00" + serialize_subscription(s) for s in subs]
    for v in range(4):
        out.append(b"\x01" + serialize_assignment({"orders": [0, 1], "x": []}, v, b"ud"))
        out.append(b"\x01" + serialize_assignment([], v, None))
    out.append(b"\x00" + b"\x00\x05" + serialize_subscription(subs[-1])[2:])  # a future version, read as v3
    return out


def one_input(data: bytes) -> None:
    if not data:
        return
    blob = data[1:]
    if data[0] & 1 == 0:
        sub = parse_subscription(blob)
        again = parse_subscription(serialize_subscription(sub))
        assert again == sub, f"subscription does not round-trip: {sub} -> {again}"
    else:
        a = parse_assignment(blob)
        again_a = parse_assignment(serialize_assignment(a.partitions, a.version, a.user_data))
        assert again_a == a, f"assignment does not round-trip: {a} -> {again_a}"
        assert isinstance(again_a, Assignment)


TARGET = Target(
    name="embedded",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(SchemaError,),
    instrument=("translation.embedded_protocol",),
)
