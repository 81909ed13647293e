"""Client-side assignors (KIP-848 as designed: "Client Side Mode", "Assignor Selection",
"Member Selection", ConsumerGroupPrepareAssignment / ConsumerGroupInstallAssignment; Kafka never
shipped them, KAFKA-18327). Active only with `group.consumer.client.assignors.enable`.

The coordinator delegates the target assignment to one member instead of running its server
assignor when every member supports one client assignor:

* choice (`choose`): the assignor is the first name, in the priority order of the first member
  (group order), that every member supports (a classic member supports the names of its classic
  protocols, at metadata version -1, KIP-848's online upgrade); the assigning member is the first
  consumer-protocol member whose [minimum, maximum] version range covers every metadata version in
  use for that assignor. A member whose join or assignor change leaves no such member is refused
  with UNSUPPORTED_ASSIGNOR (so a client assignor that cannot read a classic member's version -1
  is refused while classic members are in the group);
* when the group epoch moves past the assignment epoch, members keep the current target and the
  assigning member's heartbeat response carries COMPUTE_ASSIGNMENT with the group epoch; the
  coordinator arms a timer of the member's rebalance timeout, and a member that has not installed
  by then is fenced, which hands the computation to the next member chosen;
* PrepareAssignment returns the group (members, subscriptions as topic ids, racks, each member's
  assignor metadata, the current target, the subscribed topics) at the group epoch;
* InstallAssignment validates the assignment against the group (the group epoch; every member
  known; every partition exists, is subscribed by its member and is given once) and writes it as
  the usual target-assignment records (k7 per changed member, then k6). An install for an older
  group epoch is refused with REBALANCE_IN_PROGRESS and the timer restarts for the new epoch; an
  install at the group epoch that names a static member replaced since PrepareAssignment (a
  takeover moves no epoch, KIP-345) is refused with REBALANCE_IN_PROGRESS too, the timer kept,
  and computed again with the new member id; any other
  invalid install is refused with INVALID_REQUEST and keeps the current target; an install that
  reports an assignor error keeps the current target and carries it to the group epoch (k6 only),
  so the group does not ask again until it changes.

Nothing here is kept outside the records but the timer: the choice is a function of the members,
which replay rebuilds (their client assignors are in tagged field 10000 of record type 5).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.assignment import EMPTY, Assignment
from engine.consumer import record_builders as rb
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import ConsumerGroupMember
from engine.consumer.membership import fence_member
from engine.consumer.target import member_topic_names
from engine.errors import CoordinatorError, Errors
from engine.metadata import TopicId
from engine.operation import Operation
from engine.timers import TimerKind, TimerTask
from records.consumer_group import ClientAssignmentMetadata, ClientAssignorMetadata

if TYPE_CHECKING:
    from engine.state import ShardState

CLASSIC_METADATA_VERSION = -1
"""The metadata version a classic member's protocol metadata counts as (KIP-848 upgrade)."""


@dataclass(frozen=True, slots=True)
class ClientAssignorChoice:
    """The client assignor every member supports, and the member to run it (None: no member
    can read every metadata version in use)."""

    name: str
    assigning_member: str | None
    versions: frozenset[int]


def _entry(member: ConsumerGroupMember, name: str) -> ClientAssignorMetadata | None:
    for a in member.client_assignors:
        if a.name == name:
            return a
    return None


def _classic_supports(member: ConsumerGroupMember, name: str) -> bool:
    meta = member.classic_member_metadata
    return meta is not None and any(p.name == name for p in meta.supported_protocols)


def choose(members: Iterable[ConsumerGroupMember]) -> ClientAssignorChoice | None:
    """KIP-848 "Assignor Selection" then "Member Selection"; None: the server assignor is used
    (no consumer-protocol member, or one of them lists no client assignor)."""
    consumer: list[ConsumerGroupMember] = []
    classic: list[ConsumerGroupMember] = []
    for m in members:
        (classic if m.uses_classic_protocol else consumer).append(m)
    if not consumer or any(not m.client_assignors for m in consumer):
        return None
    for candidate in consumer[0].client_assignors:
        name = candidate.name
        entries = [_entry(m, name) for m in consumer]
        if any(e is None for e in entries) or not all(_classic_supports(m, name) for m in classic):
            continue
        versions = {e.metadata_version for e in entries if e is not None}
        if classic:
            versions.add(CLASSIC_METADATA_VERSION)
        lo, hi = min(versions), max(versions)
        for m, e in zip(consumer, entries, strict=True):
            assert e is not None
            if e.minimum_version <= lo and hi <= e.maximum_version:
                return ClientAssignorChoice(name, m.member_id, frozenset(versions))
        return ClientAssignorChoice(name, None, frozenset(versions))
    return None


def members_with(
    group: ConsumerGroup, old: ConsumerGroupMember | None, new: ConsumerGroupMember
) -> list[ConsumerGroupMember]:
    """The group's members in group order once `new` replaces `old`, as the records will leave
    them: a member updated in place keeps its place; a new member, and a static member's new
    incarnation (the member it replaces, of either protocol, is removed and the new id written),
    come last."""
    out: list[ConsumerGroupMember] = []
    placed = False
    for mid, m in group.members.items():
        replaced = new.instance_id is not None and m.instance_id == new.instance_id
        if replaced or (old is not None and mid == old.member_id) or mid == new.member_id:
            if not placed and mid == new.member_id:
                out.append(new)
                placed = True
            continue
        out.append(m)
    if not placed:
        out.append(new)
    return out


def refuse_unsupported(
    shard: ShardState, group: ConsumerGroup, old: ConsumerGroupMember | None, new: ConsumerGroupMember
) -> None:
    """UNSUPPORTED_ASSIGNOR when a consumer-protocol member's join or assignor change leaves no
    member able to run the chosen client assignor (KIP-848 "Metadata Version Handling"). Checked
    only for such a change: a steady heartbeat costs nothing."""
    if not shard.config.consumer_client_assignors_enable or not new.client_assignors:
        return
    if old is not None and old.client_assignors == new.client_assignors:
        return
    choice = choose(members_with(group, old, new))
    if choice is not None and choice.assigning_member is None:
        raise CoordinatorError(
            Errors.UNSUPPORTED_ASSIGNOR,
            f"No member of group {group.group_id} supports every metadata version in use "
            f"({sorted(choice.versions)}) of client assignor {choice.name}"
            + (
                "; classic members count as version -1."
                if CLASSIC_METADATA_VERSION in choice.versions
                else "."
            ),
        )


def client_choice(
    shard: ShardState,
    group: ConsumerGroup,
    old: ConsumerGroupMember | None,
    new: ConsumerGroupMember,
    group_epoch: int,
) -> ClientAssignorChoice | None:
    """The client assignor and member that compute the next target, when one is needed
    (`group_epoch` past the assignment epoch) and a client assignor applies; None otherwise
    (no assigning member: the server assignor computes, see the module docstring)."""
    if not shard.config.consumer_client_assignors_enable or group_epoch <= group.assignment_epoch:
        return None
    choice = choose(members_with(group, old, new))
    if choice is None or choice.assigning_member is None:
        return None
    return choice


def notify_assigning_member(
    group: ConsumerGroup, member: ConsumerGroupMember, group_epoch: int, op: Operation
) -> int:
    """The epoch to put in COMPUTE_ASSIGNMENT, arming the member's rebalance timeout once (its
    deadline starts at the first notification, KIP-848 "Client Side Mode")."""
    timeout = max(member.rebalance_timeout_ms, 0)
    op.schedule_if_absent(
        TimerKind.CLIENT_ASSIGNMENT, group.group_id, member.member_id, timeout, group_epoch, timeout
    )
    return group_epoch


def fence_late_assigning_member(shard: ShardState, task: TimerTask, op: Operation) -> None:
    """The assigning member did not install within its rebalance timeout: fence it (another
    member is chosen at the next heartbeat), unless the computation is no longer its own."""
    group = shard.consumer_group(task.group_id)
    if group is None or group.assignment_epoch >= task.epoch:
        return
    member = group.members.get(task.member_id)
    choice = choose(group.members.values())
    if member is None or choice is None or choice.assigning_member != member.member_id:
        return
    fence_member(
        shard,
        group,
        member,
        op,
        f"it did not install the assignment for group epoch {task.epoch} within {task.data}ms.",
    )


# --- PrepareAssignment / InstallAssignment ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PrepareAssignmentRequest:
    group_id: str
    member_id: str
    member_epoch: int


@dataclass(frozen=True, slots=True)
class PreparedMember:
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: tuple[TopicId, ...]
    reason: int
    metadata_version: int
    metadata: bytes
    target: Assignment


@dataclass(frozen=True, slots=True)
class PreparedTopic:
    topic_id: TopicId
    topic_name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class PrepareAssignmentResponse:
    error_code: int = 0
    error_message: str | None = None
    group_epoch: int = -1
    assignor_name: str = ""
    members: tuple[PreparedMember, ...] = ()
    topics: tuple[PreparedTopic, ...] = ()


@dataclass(frozen=True, slots=True)
class InstallAssignmentRequest:
    group_id: str
    member_id: str
    member_epoch: int
    group_epoch: int
    error: int
    members: Mapping[str, Assignment]
    # member id -> the assignor's metadata for it (KIP-848 MetadataVersion / MetadataBytes)
    metadata: Mapping[str, ClientAssignmentMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InstallAssignmentResponse:
    error_code: int = 0
    error_message: str | None = None


def _check_request(group_id: str, member_id: str, member_epoch: int) -> None:
    if not group_id or not group_id.strip():
        raise CoordinatorError(Errors.INVALID_REQUEST, "GroupId can't be empty.")
    if not member_id or not member_id.strip():
        raise CoordinatorError(Errors.INVALID_REQUEST, "MemberId can't be empty.")
    if member_epoch < 0:
        raise CoordinatorError(Errors.INVALID_REQUEST, "MemberEpoch must be >= 0.")


def _assigning_group(
    shard: ShardState, group_id: str, member_id: str, member_epoch: int
) -> tuple[ConsumerGroup, ClientAssignorChoice]:
    """KIP-848's steps 1-4 of both APIs: the group, the member, its epoch, that it is chosen."""
    _check_request(group_id, member_id, member_epoch)
    group = shard.consumer_group(group_id)
    if group is None:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
    member = group.members.get(member_id)
    if member is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
        )
    if member.member_epoch != member_epoch:
        raise CoordinatorError(
            Errors.STALE_MEMBER_EPOCH,
            f"The member epoch {member_epoch} is not the current one ({member.member_epoch}).",
        )
    choice = choose(group.members.values())
    if choice is None or choice.assigning_member != member_id:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID,
            f"Member {member_id} is not the member chosen to compute the assignment of group {group_id}.",
        )
    return group, choice


def _subscribed_ids(group: ConsumerGroup, member: ConsumerGroupMember) -> tuple[TopicId, ...]:
    meta = group.subscription_metadata
    names = member_topic_names(member, group.resolved_regexes)
    return tuple(sorted((meta[n].topic_id for n in names if n in meta), key=str))


def prepare_assignment(
    shard: ShardState, req: PrepareAssignmentRequest, op: Operation
) -> PrepareAssignmentResponse:
    """ConsumerGroupPrepareAssignment: the group state for the assignor; writes nothing."""
    group, choice = _assigning_group(shard, req.group_id, req.member_id, req.member_epoch)
    members = []
    for m in group.members.values():
        entry = _entry(m, choice.name)
        if entry is not None:
            reason, version, metadata = entry.reason, entry.metadata_version, entry.metadata
        else:  # a classic member: its protocol's metadata, version -1
            reason, version, metadata = 0, CLASSIC_METADATA_VERSION, b""
            assert m.classic_member_metadata is not None
            for p in m.classic_member_metadata.supported_protocols:
                if p.name == choice.name:
                    metadata = p.metadata
        members.append(
            PreparedMember(
                member_id=m.member_id,
                member_epoch=m.member_epoch,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                subscribed_topic_ids=_subscribed_ids(group, m),
                reason=reason,
                metadata_version=version,
                metadata=metadata,
                target=group.target(m.member_id),
            )
        )
    topics = tuple(
        PreparedTopic(t.topic_id, name, t.num_partitions)
        for name, t in sorted(group.subscription_metadata.items())
    )
    return PrepareAssignmentResponse(
        group_epoch=group.group_epoch, assignor_name=choice.name, members=tuple(members), topics=topics
    )


def _invalid(group: ConsumerGroup, req: InstallAssignmentRequest) -> str | None:
    """Why the assignment cannot be installed, or None (KIP-848 "Assignment Validation")."""
    counts = {t.topic_id: t.num_partitions for t in group.subscription_metadata.values()}
    seen: dict[tuple[TopicId, int], str] = {}
    for mid, assignment in req.members.items():
        member = group.members.get(mid)
        if member is None:
            return f"member {mid} is not a member of group {group.group_id}"
        subscribed = set(_subscribed_ids(group, member))
        for topic_id, partitions in assignment.items():
            if topic_id not in subscribed:
                return f"member {mid} is given topic {topic_id}, which it does not subscribe to"
            n = counts[topic_id]
            for p in partitions:
                if not 0 <= p < n:
                    return f"partition {p} of topic {topic_id} does not exist ({n} partitions)"
                other = seen.get((topic_id, p))
                if other is not None:
                    return f"partition {topic_id}-{p} is given to both {other} and {mid}"
                seen[(topic_id, p)] = mid
    return None


def _compute_again(
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    req: InstallAssignmentRequest,
    op: Operation,
    reason: str,
    message: str,
) -> InstallAssignmentResponse:
    """A stale install: nothing written, REBALANCE_IN_PROGRESS; the assigning member's next
    heartbeat response asks it to compute for the group epoch."""
    op.event(
        "group.client_assignment_stale",
        group=group.group_id,
        member=member.member_id,
        installed_epoch=req.group_epoch,
        group_epoch=group.group_epoch,
        reason=reason,
    )
    return InstallAssignmentResponse(
        int(Errors.REBALANCE_IN_PROGRESS),
        f"{message}; compute it again for epoch {group.group_epoch}.",
    )


def _names_replaced_static_members(group: ConsumerGroup, req: InstallAssignmentRequest) -> bool:
    """The install names member ids the group no longer has, and as many static members of the
    group are missing from it: what a static takeover between PrepareAssignment and
    InstallAssignment leaves (the replacement inherits the member's target under a new id, and
    the group epoch does not move). An assignor that invents ids is refused as invalid."""
    unknown = sum(1 for mid in req.members if mid not in group.members)
    unnamed_static = sum(
        1 for mid, m in group.members.items() if m.instance_id is not None and mid not in req.members
    )
    return 0 < unknown <= unnamed_static


def install_assignment(
    shard: ShardState, req: InstallAssignmentRequest, op: Operation
) -> InstallAssignmentResponse:
    """ConsumerGroupInstallAssignment: validate, then write the target as k7 records and k6."""
    group, _ = _assigning_group(shard, req.group_id, req.member_id, req.member_epoch)
    gid = group.group_id
    member = group.members[req.member_id]
    if req.group_epoch != group.group_epoch:
        # Computed for an older epoch: refused, and the computation starts over for the current
        # one (the member's next heartbeat response asks for it; a fresh rebalance timeout).
        timeout = max(member.rebalance_timeout_ms, 0)
        op.schedule(TimerKind.CLIENT_ASSIGNMENT, gid, member.member_id, timeout, group.group_epoch, timeout)
        return _compute_again(
            group,
            member,
            req,
            op,
            "the group epoch moved",
            f"The assignment was computed for group epoch {req.group_epoch} but the group is at "
            f"epoch {group.group_epoch}",
        )
    if req.error != 0:
        # The assignor failed: the current target stays, carried to the group epoch.
        op.records.append(rb.target_epoch(gid, group.group_epoch))
        op.cancel(TimerKind.CLIENT_ASSIGNMENT, gid, member.member_id)
        op.event(
            "group.client_assignment_failed",
            group=gid,
            member=member.member_id,
            group_epoch=group.group_epoch,
            assignor_error=req.error,
        )
        return InstallAssignmentResponse()
    why = _invalid(group, req)
    if why is not None and _names_replaced_static_members(group, req):
        # Not the assignor's fault: recomputed from a fresh PrepareAssignment, under the
        # rebalance timeout that already runs (so an assignor that invents ids is still fenced).
        return _compute_again(
            group,
            member,
            req,
            op,
            "a static member was replaced",
            f"The assignment names members no longer in the group ({why}); a static member was "
            "replaced since it was prepared",
        )
    if why is not None:
        raise CoordinatorError(Errors.INVALID_REQUEST, f"Invalid assignment: {why}.")
    for mid in group.members:
        new = req.members.get(mid, EMPTY)
        meta = req.metadata.get(mid)
        old = group.target_assignment.get(mid)
        if old is None or dict(old) != dict(new) or group.target_client_metadata.get(mid) != meta:
            op.records.append(rb.target_member(gid, mid, new, meta))
    op.records.append(rb.target_epoch(gid, group.group_epoch))
    op.cancel(TimerKind.CLIENT_ASSIGNMENT, gid, member.member_id)
    op.event(
        "group.target_assignment_computed",
        group=gid,
        assignment_epoch=group.group_epoch,
        assignor=f"client:{member.member_id}",
        members=len(group.members),
    )
    return InstallAssignmentResponse()
