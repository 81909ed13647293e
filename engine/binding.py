"""Member binding: a live member id or static instance id answers only to the principal that
created it. Not a Kafka behaviour: groupshift goes beyond Kafka here (issue 26 point 5;
docs/deviations.md, docs/security.md "Member binding").

Kafka checks READ on the group and nothing else, so any client allowed to consume from a group
can send another member's id (learnt from DescribeGroups, ConsumerGroupDescribe, a classic
leader's JoinGroup response or a log) in a heartbeat, commit, sync or leave, or take over a
static member's `group.instance.id`, and so take over or revoke that member's partitions. Here
each member id and instance id is bound, in the shard's memory, to the principal of the request
that created it (or, after a reload, of the first request that presents it), and a request of
another principal that carries it is refused before its group sees it.

What a refusal answers: UNKNOWN_MEMBER_ID, the error Kafka gives for a member id it does not know.
It tells the sender nothing (a forged id and an unknown one look alike), it is never fatal for a
real client (Kafka clients reset their member id and rejoin, which is what a client whose
principal really changed, e.g. after a certificate rotation, must do), and the bound member is
not touched at all.

Why only live ids are protected: a binding whose member or instance id has left the group is
stale; a request carrying it then meets what Kafka would answer (a new member joining under a
client-generated id, a new static member under a released instance id), and it binds the id to
its own principal if it creates it again. So a principal that loses its member (a certificate
rotated to a new subject, a restarted static member under a new principal) gets its id or
instance id back once the old member's session expired, and stale bindings never block anything.

Why the table holds only live ids: a soak (10 members replaced a second) showed the table as the
one thing growing in the server, because a stale binding stayed until a sweep and a shard swept
only past `SWEEP_MIN` entries, which a shard of 200 members takes hours of churn to reach (the
server has 50 shards). So a consumer-group member whose records are deleted (it left, was fenced,
its session expired, a static member was replaced) queues its ids (`member_left`, from the
replay of its tombstone), and `Shard.commit` forgets those still not live once the whole
operation is applied (a conversion to a classic group keeps the same ids live). Classic groups
change their members in place, without records per member, so their departed ids are left to
the sweep in `bind`, which keeps the table within twice the live ids plus `SWEEP_MIN`.

Why in memory only: Kafka's member records have no principal field, and a field or record of
groupshift's own in `__consumer_offsets` would have to stay invisible to Kafka's tools and older
groupshift versions. After a reload (restart, shard moved by scale-out) the table is empty and the
first request presenting each live id binds it again; members heartbeat every few seconds, so
the window in which another principal who already knows an id could claim it first is one
heartbeat interval after the load (docs/security.md says so).

The table is written only by `Operation.after` actions, i.e. by `Shard.commit` once the
operation is accepted (docs/architecture.md, "one way to change state").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.classic.api import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest
from engine.classic.group import ClassicGroup
from engine.connect.group import ConnectGroup
from engine.consumer.api import ConsumerGroupHeartbeatRequest
from engine.consumer.group import ConsumerGroup
from engine.errors import CoordinatorError, Errors
from engine.offsets.api import OffsetCommitRequest
from protocol.connect_wire import ConnectHeartbeatRequest

MEMBER = "member"
INSTANCE = "instance"

# (group id, MEMBER or INSTANCE, the id)
Key = tuple[str, str, str]

# The table is swept of stale bindings (classic members that left) when it grows past twice its
# size after the last sweep, and never below this many entries (so small shards rarely sweep).
SWEEP_MIN = 128

REFUSED_EVENT = "member.binding_refused"
REASON = "member id bound to another principal"


def carried(group_id: str, req: Any) -> list[Key]:
    """The member and instance ids a group request presents (empty ids are none)."""
    keys: list[Key] = []
    t = type(req)
    if t is ConsumerGroupHeartbeatRequest:
        member_id, instance_id = req.member_id, req.instance_id
    elif t is JoinGroupRequest or t is SyncGroupRequest or t is HeartbeatRequest or t is OffsetCommitRequest:
        member_id, instance_id = req.member_id, req.group_instance_id
    elif t is ConnectHeartbeatRequest:
        member_id, instance_id = req.member_id, None
    elif t is LeaveGroupRequest:
        for m in req.members:
            if m.member_id:
                keys.append((group_id, MEMBER, m.member_id))
            if m.group_instance_id:
                keys.append((group_id, INSTANCE, m.group_instance_id))
        return keys
    else:
        return keys
    if member_id:
        keys.append((group_id, MEMBER, member_id))
    if instance_id:
        keys.append((group_id, INSTANCE, instance_id))
    return keys


def is_live(group: object, kind: str, ident: str) -> bool:
    """Does `group` have this member id (pending classic members included) or instance id?"""
    if type(group) is ConsumerGroup:
        return ident in (group.members if kind == MEMBER else group.static_members)
    if type(group) is ClassicGroup:
        if kind == MEMBER:
            return ident in group.members or ident in group.pending_join_members
        return ident in group.static_members
    if type(group) is ConnectGroup:
        return kind == MEMBER and ident in group.members
    return False


class MemberBindings:
    """The principal each live member id and instance id of a shard is bound to."""

    __slots__ = ("_principals", "_sweep_at", "departed")

    def __init__(self) -> None:
        self._principals: dict[Key, str] = {}
        self._sweep_at = SWEEP_MIN
        # Bound keys of consumer-group members whose records were just deleted, to forget at the
        # end of the operation unless live again (`forget_departed`).
        self.departed: list[Key] = []

    def __len__(self) -> int:
        return len(self._principals)

    def principal_of(self, key: Key) -> str | None:
        return self._principals.get(key)

    def check_request(self, group: object, group_id: str, req: Any, principal: str) -> list[Key] | None:
        """`check` of the ids `req` carries. A request that carries only a member id bound to its
        own principal (every steady heartbeat and commit) costs one tuple and one lookup."""
        t = type(req)
        if t is ConsumerGroupHeartbeatRequest:
            member_id, instance_id = req.member_id, req.instance_id
        elif (
            t is HeartbeatRequest
            or t is OffsetCommitRequest
            or t is SyncGroupRequest
            or t is JoinGroupRequest
        ):
            member_id, instance_id = req.member_id, req.group_instance_id
        else:
            keys = carried(group_id, req)
            return self.check(group, keys, principal) if keys else None
        if not instance_id:
            if not member_id:
                return None
            key = (group_id, MEMBER, member_id)
            if self._principals.get(key) == principal:
                return None
            return self.check(group, [key], principal)
        return self.check(group, carried(group_id, req), principal)

    def check(self, group: object, keys: list[Key], principal: str) -> list[Key] | None:
        """The keys to bind to `principal` if the request goes through (unbound, or bound while
        no longer live), or None when there is none; raises `Refused` when a live key is bound to
        another principal. Every steady request of its own member returns None at one lookup per
        key."""
        to_bind: list[Key] | None = None
        principals = self._principals
        for key in keys:
            bound = principals.get(key)
            if bound == principal:
                continue
            if bound is not None and is_live(group, key[1], key[2]):
                raise Refused(key, bound, principal)
            if to_bind is None:
                to_bind = []
            to_bind.append(key)
        return to_bind

    def bind(self, groups: Mapping[str, object], keys: Iterable[Key], principal: str) -> None:
        """Bind each key that is live now (after the operation that presented it committed)."""
        principals = self._principals
        for key in keys:
            if is_live(groups.get(key[0]), key[1], key[2]):
                principals[key] = principal
        self._maybe_sweep(groups)

    def bind_created(self, groups: Mapping[str, object], key: Key, principal: str) -> None:
        """Bind a member id the coordinator has just generated for `principal`'s request."""
        self._principals[key] = principal
        self._maybe_sweep(groups)

    def member_left(self, group_id: str, member_id: str, instance_id: str | None) -> None:
        """A consumer-group member's records were deleted: its bound ids are forgotten at the end
        of the operation (`forget_departed`) unless live again by then."""
        principals = self._principals
        key = (group_id, MEMBER, member_id)
        if key in principals:
            self.departed.append(key)
        if instance_id:
            key = (group_id, INSTANCE, instance_id)
            if key in principals:
                self.departed.append(key)

    def forget_departed(self, groups: Mapping[str, object]) -> None:
        """Drop the departed keys that are not live once the operation is applied."""
        principals = self._principals
        for key in self.departed:
            if not is_live(groups.get(key[0]), key[1], key[2]):
                principals.pop(key, None)
        self.departed.clear()

    def _maybe_sweep(self, groups: Mapping[str, object]) -> None:
        if len(self._principals) <= self._sweep_at:
            return
        self._principals = {
            k: p for k, p in self._principals.items() if is_live(groups.get(k[0]), k[1], k[2])
        }
        self._sweep_at = max(SWEEP_MIN, 2 * len(self._principals))


class Refused(CoordinatorError):
    """A request carried a live id bound to another principal: answered UNKNOWN_MEMBER_ID."""

    def __init__(self, key: Key, bound: str, principal: str) -> None:
        # Kafka's own words for an id it does not know: the sender learns nothing more.
        message = (
            f"Member {key[2]} is not a member of group {key[0]}."
            if key[1] == MEMBER
            else f"Instance id {key[2]} is unknown."
        )
        super().__init__(Errors.UNKNOWN_MEMBER_ID, message)
        self.key = key
        self.bound = bound
        self.principal = principal

    def event(self, api: str) -> tuple[str, dict[str, Any]]:
        """The refusal as the runtime logs it and the gateway audits it (`acl.denied`)."""
        group_id, kind, ident = self.key
        return (
            REFUSED_EVENT,
            {
                "api": api,
                "group": group_id,
                kind: ident,
                "principal": self.principal,
                "bound_principal": self.bound,
                "reason": REASON,
            },
        )
