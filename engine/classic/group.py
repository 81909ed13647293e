"""A classic group (Kafka `ClassicGroup`): members, generation, protocol, leader.

Unlike consumer groups, a classic group is changed in place by its handlers, and one
GroupMetadata record (type 2) persists its stable part: generation, protocol type and name,
leader, and each member's subscription and assignment. What is not persisted (the state between
Empty and Stable, parked requests, pending members) is rebuilt as Kafka does on load: Stable
when the record has members, Empty otherwise.

Member order is insertion order (Kafka uses a HashMap); it decides who becomes leader when the
leader leaves and breaks protocol-vote ties, so it must be deterministic.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from engine.classic.member import ClassicGroupMember, Protocol
from engine.classic.state import ClassicGroupState, check_transition
from engine.errors import CoordinatorError, Errors
from engine.operation import Operation
from engine.outcome import Pending

S = ClassicGroupState
CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics_v0(metadata: bytes) -> list[str] | None:
    """The topic list at the front of every ConsumerProtocolSubscription version (v0 prefix).

    Kafka reads only this prefix (`computeSubscribedTopics`), which keeps it compatible with
    future subscription versions. None when the bytes are not a subscription."""
    try:
        pos = 2  # int16 version
        (n,) = struct.unpack_from(">i", metadata, pos)
        pos += 4
        if n < 0:
            return None
        topics = []
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if ln < 0 or pos + ln > len(metadata):
                return None
            topics.append(metadata[pos : pos + ln].decode("utf-8"))
            pos += ln
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


class ClassicGroup:
    GROUP_TYPE = "classic"

    def __init__(
        self,
        group_id: str,
        now_ms: int,
        state: ClassicGroupState = S.EMPTY,
        generation_id: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
        current_state_timestamp: int | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = S.DEAD
        # None: unknown (a record written without it); Kafka's Optional<Long>
        self.current_state_timestamp: int | None = (
            now_ms if current_state_timestamp is None else current_state_timestamp
        )
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: dict[str, None] = {}  # an ordered set
        self.pending_sync_members: dict[str, None] = {}
        self.num_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False

    def __repr__(self) -> str:
        return (
            f"ClassicGroup({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
            f"members={list(self.members)})"
        )

    # --- reads ---------------------------------------------------------------------------

    def is_in_state(self, state: ClassicGroupState) -> bool:
        return self.state is state

    def is_empty(self) -> bool:
        return self.state is S.EMPTY

    def is_simple(self) -> bool:
        """An offsets-only group: no protocol type, no members (never written as a record)."""
        return self.protocol_type is None and not self.members and not self.pending_join_members

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    @property
    def num_members(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def rebalance_timeout_ms(self) -> int:
        """The join phase lasts as long as the slowest member may take (max rebalance timeout)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    def group_assignment(self) -> dict[str, bytes]:
        return {mid: m.assignment for mid, m in self.members.items()}

    # --- protocol negotiation --------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Kafka `supportsProtocols`: an empty group takes any non-empty type and protocol list;
        otherwise the type must match and some protocol must be supported by every member."""
        names = list(names)
        if self.state is S.EMPTY:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == n for name in names
        )

    def select_protocol(self) -> str:
        """Each member votes for its first preference among the protocols all members support;
        most votes wins (ties: the first voted, in member order)."""
        if not self.members:
            raise ValueError(f"Cannot select protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            name = m.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        best = max(votes.values())
        return next(name for name, v in votes.items() if v == best)

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                parsed = subscribed_topics_v0(m.metadata(self.protocol_name))
            except ValueError:
                return None
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    # --- state -----------------------------------------------------------------------------

    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        check_transition(self.group_id, self.state, state)
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(S.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(S.EMPTY, now_ms)
        self.pending_sync_members.clear()

    # --- membership ------------------------------------------------------------------------

    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID as Kafka's `validateMember`."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise CoordinatorError(Errors.FENCED_INSTANCE_ID)
        if member_id not in self.members:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID)

    def add(self, member: ClassicGroupMember, pending: Pending | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(
                    f"Static member with groupInstanceId={member.group_instance_id} cannot be "
                    f"added to group {self.group_id} since it is already a member."
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise ValueError("The group and member's protocol type must be the same.")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.awaiting_join = pending
        if pending is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self._count_protocols(removed, -1)
            if removed.is_awaiting_join:
                self.num_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.pop(member_id, None)
        self.pending_sync_members.pop(member_id, None)

    def _count_protocols(self, member: ClassicGroupMember, delta: int) -> None:
        for p in member.supported_protocols:
            self.supported_protocols[p.name] = self.supported_protocols.get(p.name, 0) + delta

    def add_pending_member(self, member_id: str) -> None:
        if member_id in self.members:
            raise ValueError(f"pending member {member_id} is already a member of {self.group_id}")
        self.pending_join_members[member_id] = None

    def update_member(
        self,
        member: ClassicGroupMember,
        protocols: tuple[Protocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        pending: Pending | None,
    ) -> None:
        self._count_protocols(member, -1)
        member.supported_protocols = protocols
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if pending is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif pending is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.awaiting_join = pending

    def maybe_elect_new_joined_leader(self) -> bool:
        """When the leader did not rejoin, any member that did becomes leader."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for m in self.members.values():
            if m.is_awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str, op: Operation
    ) -> ClassicGroupMember:
        """KIP-345: the new process takes the old member's place (and assignment); the old
        member's parked requests are answered FENCED_INSTANCE_ID."""
        from engine.classic.api import JoinGroupResponse, SyncGroupResponse

        old = self.members.pop(old_member_id, None)
        if old is None:
            raise ValueError(f"Cannot replace non-existing member id {old_member_id}")
        self.complete_join(
            old,
            JoinGroupResponse(
                error_code=int(Errors.FENCED_INSTANCE_ID),
                member_id=old_member_id,
                protocol_type=None,
                protocol_name=None,
                leader="",
            ),
            op,
        )
        self.complete_sync(
            old,
            SyncGroupResponse(
                error_code=int(Errors.FENCED_INSTANCE_ID),
                protocol_type=None,
                protocol_name=None,
                assignment=b"",
            ),
            op,
        )
        new = ClassicGroupMember(
            new_member_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.supported_protocols,
            old.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return new

    # --- parked requests --------------------------------------------------------------------

    def complete_join(self, member: ClassicGroupMember, response: object, op: Operation) -> bool:
        if member.awaiting_join is None:
            return False
        op.complete(member.awaiting_join, response)
        member.awaiting_join = None
        self.num_awaiting_join -= 1
        return True

    def complete_sync(self, member: ClassicGroupMember, response: object, op: Operation) -> bool:
        if member.awaiting_sync is None:
            return False
        op.complete(member.awaiting_sync, response)
        member.awaiting_sync = None
        return True

    def leader_members(self) -> list[tuple[str, str | None, bytes]]:
        """What the leader's JoinGroup response lists: (member id, instance id, metadata)."""
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        ]
