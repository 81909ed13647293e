"""Leader election on the classic group protocol: the member the leader's assignment names leads.

What Schema Registry's coordinator does with Kafka's AbstractCoordinator (protocol type `sr`):
every candidate joins one group with its identity (bytes the application chooses: a URL, a node
name) as member metadata; the coordinator makes one member the group leader; that member's
assignor hands every member the same assignment naming its identity. A member leads once its
SyncGroup completed a generation whose leader it is, and every member learns the leader's member
id (JoinGroup) and identity (the assignment) in that same generation. The identity, not a member
id, is what the assignment carries: a static leader restarted under its `group.instance.id`
gets a new member id and the group's stored assignment back (KIP-814 skip_assignment), which
still names the right identity.

`on_elected(Leadership)` runs when this member is told it leads, `on_demoted(reason)` when a
generation it led ends (rebalance, session lost, close) -- before it joins again, so an
application that stops acting as leader in `on_demoted` never overlaps with the next leader as
long as it also stops when `lease_deadline` passes (docs/membership.md, "The lease").
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from membership.client import Membership
from membership.core import Assignment, GroupJoined
from protocol.client_security import ClientSecurity

PROTOCOL_TYPE = "leader"
PROTOCOL_NAME = "leader-v1"


@dataclass(frozen=True)
class Leadership:
    """Who leads one generation, as every member receives it."""

    generation: int
    leader_id: str
    leader_identity: bytes
    member_id: str

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id

    def encode(self) -> bytes:
        return json.dumps(
            {
                "generation": self.generation,
                "leader_id": self.leader_id,
                "identity": self.leader_identity.hex(),
            }
        ).encode()

    @classmethod
    def of(cls, assignment: Assignment) -> Leadership:
        identity = bytes.fromhex(json.loads(assignment.data)["identity"])
        return cls(assignment.generation, assignment.leader_id, identity, assignment.member_id)


def elect_self(joined: GroupJoined) -> Mapping[str, bytes]:
    """The leader's assignor: the same assignment, naming the leader, for every member."""
    identity = next((m.metadata for m in joined.members if m.member_id == joined.member_id), b"")
    view = Leadership(joined.generation, joined.member_id, identity, "").encode()
    return {m.member_id: view for m in joined.members}


class LeaderElection:
    """Elect one leader among the processes that join `group_id`."""

    def __init__(
        self,
        bootstrap: str | Sequence[tuple[str, int]],
        group_id: str,
        identity: bytes,
        *,
        on_elected: Callable[[Leadership], Awaitable[None] | None] | None = None,
        on_demoted: Callable[[str], Awaitable[None] | None] | None = None,
        on_leader: Callable[[Leadership], Awaitable[None] | None] | None = None,
        protocol_type: str = PROTOCOL_TYPE,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 1_000,
        rebalance_timeout_ms: int = 10_000,
        group_instance_id: str | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.on_elected = on_elected
        self.on_demoted = on_demoted
        self.on_leader = on_leader
        self.leadership: Leadership | None = None
        self.membership = Membership(
            bootstrap,
            group_id,
            protocol_type,
            [(PROTOCOL_NAME, identity)],
            elect_self,
            on_assigned=self._assigned,
            on_revoked=self._revoked,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            group_instance_id=group_instance_id,
            security=security,
            client_id="groupshift-leader-election",
        )

    @property
    def is_leader(self) -> bool:
        return self.leadership is not None and self.leadership.is_leader

    async def _assigned(self, assignment: Assignment) -> None:
        if not assignment.data:  # a leader that skipped the assignment left it empty: rejoin
            self.membership.request_rejoin("empty leadership assignment")
            return
        try:
            self.leadership = Leadership.of(assignment)
        except (ValueError, KeyError, TypeError):  # not a leader-v1 assignment: elect again
            self.membership.request_rejoin("unreadable leadership assignment")
            return
        if self.on_leader is not None:
            await _maybe_await(self.on_leader(self.leadership))
        if self.leadership.is_leader and self.on_elected is not None:
            await _maybe_await(self.on_elected(self.leadership))

    async def _revoked(self, assignment: Assignment, reason: str, lost: bool) -> None:
        was_leader = self.is_leader
        self.leadership = None
        if was_leader and self.on_demoted is not None:
            await _maybe_await(self.on_demoted(reason))

    async def run(self) -> None:
        await self.membership.run()

    async def close(self) -> None:
        await self.membership.close()


async def _maybe_await(result: Awaitable[None] | None) -> None:
    if result is not None:
        await result
