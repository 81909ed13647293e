"""Classic ("generic") group record: GroupMetadata, record type 2 (Kafka `GroupMetadataValue`).

Value versions 0-4 are readable; Kafka writes version 3 (the highest non-flexible version, so
pre-3.5 brokers can still read it) and so do we. `subscription` and `assignment` are the opaque
protocol bytes (for protocol type "consumer": the embedded ConsumerProtocol messages).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    RECORD_TYPE: ClassVar[int] = 2
    group: str


@dataclass(frozen=True, slots=True)
class GroupMemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    VERSION: ClassVar[int] = 3
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[GroupMemberMetadata, ...]
