"""Classic group API data: JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13),
DescribeGroups (15), ListGroups (16) — engine-side shapes; the gateway maps the wire versions.

Field defaults are Kafka's response defaults (e.g. JoinGroup generation -1, leader "").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.classic.member import Protocol

UNKNOWN_MEMBER_ID = ""


@dataclass(slots=True)
class JoinGroupRequest:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v0 has none: the gateway passes -1 and the session timeout is used
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(slots=True)
class JoinGroupResponseMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True)
class JoinGroupResponse:
    error_code: int = 0
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: list[JoinGroupResponseMember] = field(default_factory=list)


@dataclass(slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncGroupResponse:
    error_code: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(slots=True)
class HeartbeatResponse:
    error_code: int = 0


@dataclass(slots=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(slots=True)
class LeaveGroupRequest:
    """v0-2 carry one member id (the gateway wraps it in `members`); v3+ a batch."""

    group_id: str
    members: list[MemberIdentity]


@dataclass(slots=True)
class MemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: int = 0


@dataclass(slots=True)
class LeaveGroupResponse:
    error_code: int = 0
    members: list[MemberResponse] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DescribedGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error_code: int = 0
    error_message: str | None = None
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedGroupMember, ...] = ()
