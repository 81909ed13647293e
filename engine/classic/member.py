"""A member of a classic group (Kafka `ClassicGroupMember`).

Mutable, like Kafka's: classic paths change members in place and write the whole group as one
GroupMetadata record. A member's parked JoinGroup/SyncGroup is a `Pending` handle (sans-IO
stand-in for Kafka's response futures).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.outcome import Pending

EMPTY_ASSIGNMENT = b""


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str
    metadata: bytes


class ClassicGroupMember:
    __slots__ = (
        "assignment",
        "awaiting_join",
        "awaiting_sync",
        "client_host",
        "client_id",
        "group_instance_id",
        "is_new",
        "member_id",
        "protocol_type",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "supported_protocols",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        supported_protocols: tuple[Protocol, ...],
        assignment: bytes = EMPTY_ASSIGNMENT,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = assignment
        self.awaiting_join: Pending | None = None
        self.awaiting_sync: Pending | None = None
        self.is_new = False

    def __repr__(self) -> str:
        return f"ClassicGroupMember({self.member_id!r}, instance={self.group_instance_id!r})"

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def metadata(self, protocol_name: str | None) -> bytes:
        for p in self.supported_protocols:
            if p.name == protocol_name:
                return p.metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name}")

    def has_satisfied_heartbeat(self) -> bool:
        """A new member never does (its join timeout is its heartbeat); others do while parked."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        for p in self.supported_protocols:
            if p.name in candidates:
                return p.name
        raise ValueError(f"member {self.member_id} does not support any of the candidate protocols")

    def protocol_names(self) -> set[str]:
        return {p.name for p in self.supported_protocols}
