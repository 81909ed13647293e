"""Classic group metadata values: `GroupMetadataValue` (record type 2), versions 0-4.

    v0  protocolType string, generation int32, protocol string?, leader string?,
        members [memberId, clientId, clientHost, sessionTimeout int32,
                 subscription bytes, assignment bytes]
    v1  + member rebalanceTimeout int32 (before sessionTimeout)
    v2  + currentStateTimestamp int64 (before members)
    v3  + member groupInstanceId string? (after memberId)
    v4  v3, flexible (compact strings/bytes/arrays, tagged fields per member and message)

We write v3 as Kafka does (`MetadataVersion.groupMetadataValueVersion()` for IBP >= 2.3): the
highest non-flexible version, readable by brokers older than 3.5 (KIP-915 keeps v4 for when a
tagged field is introduced). Missing fields read as the schema defaults: currentStateTimestamp
-1, groupInstanceId null, rebalanceTimeout -1, which the classic group replay reads as "same as
the session timeout" (what Kafka's pre-v1 members had).
"""

from __future__ import annotations

import struct

from records.classic_group import GroupMemberMetadata, GroupMetadataValue
from records.construct import positional_constructor
from records.wire import (
    nullable_string,
    read_array_length,
    read_bytes,
    read_compact_array_length,
    read_compact_bytes,
    read_compact_nullable_string,
    read_compact_string,
    read_nullable_string,
    read_string,
    skip_tagged_fields,
    string,
    trailing_bytes_error,
    unsupported_version_error,
    wire_bytes,
)

__all__ = ["decode_group_metadata_value", "encode_group_metadata_value"]

_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i32 = struct.Struct(">i").unpack_from
_unpack_i64 = struct.Struct(">q").unpack_from
_pack_i16 = struct.Struct(">h").pack
_pack_i32 = struct.Struct(">i").pack
_pack_i64 = struct.Struct(">q").pack
_I32_I32 = struct.Struct(">ii")

_new_value = positional_constructor(GroupMetadataValue)
_new_member = positional_constructor(GroupMemberMetadata)


def decode_group_metadata_value(buf: bytes) -> GroupMetadataValue:
    """Decode `int16 version` + GroupMetadataValue of that version (0-4)."""
    (version,) = _unpack_i16(buf, 0)
    if not 0 <= version <= 4:
        raise unsupported_version_error(version, "0-4")
    flexible = version >= 4
    if flexible:
        read_str, read_nstr, read_byt = (
            read_compact_string,
            read_compact_nullable_string,
            read_compact_bytes,
        )
    else:
        read_str, read_nstr, read_byt = read_string, read_nullable_string, read_bytes
    protocol_type, pos = read_str(buf, 2, "protocolType")
    (generation,) = _unpack_i32(buf, pos)
    protocol, pos = read_nstr(buf, pos + 4, "protocol")
    leader, pos = read_nstr(buf, pos, "leader")
    current_state_timestamp = -1
    if version >= 2:
        (current_state_timestamp,) = _unpack_i64(buf, pos)
        pos += 8
    # The smallest member: four empty strings/bytes and one int32.
    if flexible:
        count, pos = read_compact_array_length(buf, pos, "members", 4 + 8 + 2 + 1)
    else:
        count, pos = read_array_length(buf, pos, "members", 2 * 3 + 4 + 4 * 2)
    members = []
    for _ in range(count):
        member_id, pos = read_str(buf, pos, "memberId")
        group_instance_id = None
        if version >= 3:
            group_instance_id, pos = read_nstr(buf, pos, "groupInstanceId")
        client_id, pos = read_str(buf, pos, "clientId")
        client_host, pos = read_str(buf, pos, "clientHost")
        if version >= 1:
            rebalance_timeout, session_timeout = _I32_I32.unpack_from(buf, pos)
            pos += 8
        else:
            rebalance_timeout = -1
            (session_timeout,) = _unpack_i32(buf, pos)
            pos += 4
        subscription, pos = read_byt(buf, pos, "subscription")
        assignment, pos = read_byt(buf, pos, "assignment")
        if flexible:
            pos = skip_tagged_fields(buf, pos)
        members.append(
            _new_member(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    if flexible:
        pos = skip_tagged_fields(buf, pos)
    if pos != len(buf):
        raise trailing_bytes_error(pos, buf)
    return _new_value(protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members))


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """GroupMetadataValue.json v3."""
    parts = [
        _pack_i16(3),
        string(value.protocol_type),
        _pack_i32(value.generation),
        nullable_string(value.protocol),
        nullable_string(value.leader),
        _pack_i64(value.current_state_timestamp),
        _pack_i32(len(value.members)),
    ]
    for m in value.members:
        parts += (
            string(m.member_id),
            nullable_string(m.group_instance_id),
            string(m.client_id),
            string(m.client_host),
            _I32_I32.pack(m.rebalance_timeout, m.session_timeout),
            wire_bytes(m.subscription),
            wire_bytes(m.assignment),
        )
    return b"".join(parts)
