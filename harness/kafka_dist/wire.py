"""Two blocking Kafka requests over a raw socket, enough to tell that a broker is up.

A KRaft broker enables request processing on its client listener only at the end of its
startup (`BrokerServer` calls the socket server's `enableRequestProcessing` last), so an
answered ApiVersions means the broker serves requests. ApiVersions v0 is kept by every broker
version (it is how a client learns what else to send; KIP-511, KIP-896 keep it), and its answer
also says which APIs the broker offers, e.g. whether ConsumerGroupHeartbeat (KIP-848, key 68)
is enabled. Metadata then tells how many brokers the cluster has registered. Both use
non-flexible versions, so the encoding here is plain big-endian structs (the socket and the
framing are `protocol.client.WireClient`'s).
"""

from __future__ import annotations

import struct

from protocol.client import WireClient
from protocol.client_security import ClientSecurity
from protocol.framing import frame
from protocol.varint import encode_uvarint

API_METADATA = 3
API_VERSIONS = 18
API_CONSUMER_GROUP_HEARTBEAT = 68
_CLIENT_ID = b"groupshift-kafka-dist"


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> tuple[int, ...]:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def int16(self) -> int:
        return self.take(">h")[0]

    def int32(self) -> int:
        return self.take(">i")[0]

    def string(self) -> str | None:
        size = self.int16()
        if size < 0:
            return None
        raw = self.data[self.pos : self.pos + size]
        self.pos += size
        return raw.decode()


def _request(client: WireClient, api_key: int, version: int, correlation: int, body: bytes) -> _Reader:
    """Send a hand-encoded request (header v1: non-flexible) and read its response."""
    header = struct.pack(">hhih", api_key, version, correlation, len(_CLIENT_ID)) + _CLIENT_ID
    return _exchange(client, header + body, correlation)


def _exchange(client: WireClient, payload: bytes, correlation: int) -> _Reader:
    client.send_raw(frame(payload))
    response = client.read_frame()
    if response is None:
        raise ConnectionError("broker closed the connection")
    reader = _Reader(response)
    if reader.int32() != correlation:
        raise ConnectionError("response correlation id does not match")
    return reader


def _parse_api_versions(reader: _Reader) -> dict[int, tuple[int, int]]:
    error = reader.int16()
    if error != 0:
        raise ConnectionError(f"ApiVersions error code {error}")
    apis: dict[int, tuple[int, int]] = {}
    for _ in range(reader.int32()):
        key, low, high = reader.take(">hhh")
        apis[key] = (low, high)
    return apis


def _connect(host: str, port: int, timeout: float, security: ClientSecurity | None) -> WireClient:
    """A plain connection, or one through TLS and SASL on a secured listener."""
    if security is None:
        return WireClient(port, host, timeout)
    return security.connect(host, port, timeout)


def api_versions(
    host: str, port: int, timeout: float = 5.0, security: ClientSecurity | None = None
) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions answer: api key -> (min version, max version)."""
    with _connect(host, port, timeout, security) as client:
        return _parse_api_versions(_request(client, API_VERSIONS, 0, 1, b""))


def _metadata_body(version: int) -> bytes:
    body = struct.pack(">i", 0)  # no topics: brokers only
    if version >= 4:
        body += b"\x00"  # allow_auto_topic_creation
    if version >= 8:
        body += b"\x00\x00"  # include cluster / topic authorized operations
    return body


def broker_ids(
    host: str, port: int, timeout: float = 5.0, security: ClientSecurity | None = None
) -> list[int]:
    """Node ids of the brokers the cluster's metadata lists, via a non-flexible Metadata."""
    with _connect(host, port, timeout, security) as client:
        apis = _parse_api_versions(_request(client, API_VERSIONS, 0, 1, b""))
        low, high = apis[API_METADATA]
        version = min(high, 8)
        if version < max(low, 1):
            raise ConnectionError(f"no non-flexible Metadata version in {low}..{high}")
        reader = _request(client, API_METADATA, version, 2, _metadata_body(version))
        if version >= 3:
            reader.int32()  # throttle_time_ms
        ids: list[int] = []
        for _ in range(reader.int32()):
            ids.append(reader.int32())
            reader.string()  # host
            reader.int32()  # port
            reader.string()  # rack
        return sorted(ids)


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return encode_uvarint(len(raw) + 1) + raw


def consumer_group_heartbeat_error(
    host: str, port: int, group_id: str, member_id: str, topics: list[str], timeout: float = 10.0
) -> int:
    """The error code of a first ConsumerGroupHeartbeat v0 (epoch 0, joining) for `group_id`.

    0 means the broker runs KIP-848 groups; UNSUPPORTED_VERSION (35) means it advertises the
    API but the new protocol is not enabled (`group.coordinator.rebalance.protocols`). The
    member is left to expire with its session timeout.
    """
    body = (
        _compact_string(group_id)
        + _compact_string(member_id)
        + struct.pack(">i", 0)  # member epoch: joining
        + _compact_string(None)  # instance id
        + _compact_string(None)  # rack id
        + struct.pack(">i", 30000)  # rebalance timeout
        + encode_uvarint(len(topics) + 1)
        + b"".join(_compact_string(t) for t in topics)
        + _compact_string(None)  # server assignor
        + encode_uvarint(1)  # owned topic partitions: empty
        + b"\x00"  # tagged fields
    )
    header = struct.pack(">hhih", API_CONSUMER_GROUP_HEARTBEAT, 0, 7, len(_CLIENT_ID)) + _CLIENT_ID + b"\x00"
    with WireClient(port, host, timeout) as client:
        reader = _exchange(client, header + body, 7)
        reader.pos += 1  # response header tagged fields (none)
        reader.int32()  # throttle_time_ms
        return reader.int16()
