"""Classic Kafka Streams instances living inside a KIP-1071 streams group (issue 31, part 3:
online migration, which Kafka does not have; the pattern of KIP-848's classic members in consumer
groups, translation/classic_member.py, with Streams' own assignment protocol inside:
docs/streams-classic-groups.md).

A classic instance's consumer is a streams-group member with ClassicMemberMetadata (groupshift's
tagged field of record type 19). It is placed by the streams group's assignor and reconciled by
the same code as a `group.protocol=streams` member (engine/streams/heartbeat.py), so both kinds
move through the same epochs with revoke-before-assign across them:

* JoinGroup is answered at once, as a follower (no leader: the instance never runs
  StreamsPartitionAssignor), with its member epoch as the generation. The tasks it says it holds
  (its cooperative subscription's owned partitions mapped to tasks, and the active tasks of its
  SubscriptionInfo) are what it owns; a task it must give up stays pending revocation until it
  rejoins without it.
* SyncGroup gives it its current tasks as Streams' own AssignmentInfo at the SubscriptionInfo
  version it speaks, at most 11 (the partitions of its active tasks, one active task entry per
  partition in Streams' order, its standby tasks with their partitions, every instance's
  partitions by host). An instance probing with a newer version is answered at 11, as Kafka
  4.4's leader answers it, and downgrades (Streams' version probing, KIP-268).
* Heartbeat answers REBALANCE_IN_PROGRESS when its tasks are about to change (it lags the target,
  must revoke, or waits for a task since released).
* LeaveGroup and an expired session (its own session timeout) remove it as any member.

Standby tasks are held until the SyncGroup that drops them: a classic instance drops a standby
as soon as its SyncGroup no longer lists it, not before, and its SubscriptionInfo keeps listing
leftover state directories (offset sums of tasks it no longer runs). So the standbys it reports
at JoinGroup count as held only where its stored assignment still has them (assigned, or pending
revocation); one it must give up stays pending revocation, which keeps a member of the same
process from taking a second copy (UNRELEASED_TASKS), until its SyncGroup is answered: that
answer no longer lists it, the instance drops it, and the pending standbys are released by a
record written with the answer. The wait is bounded as every revocation is: by the instance's
rebalance timeout (it is fenced if it neither syncs nor rejoins without the task), its session
timeout, or its LeaveGroup (docs/streams-classic-groups.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from engine.classic.api import (
    DescribedGroup,
    DescribedGroupMember,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.context import RequestContext
from engine.errors import CoordinatorError, Errors
from engine.ids import consumer_member_id
from engine.metadata import MetadataImage
from engine.operation import Operation
from engine.state import ShardState
from engine.streams.group import (
    MemberState,
    StreamsGroup,
    StreamsMember,
    Tasks,
    tasks_intersect,
    tasks_minus,
    tasks_union,
)
from engine.streams.heartbeat import TaskRoles, member_tombstones, must_rejoin, remove_member, update_member
from engine.timers import TimerKind
from records.consumer_group import ClassicMemberMetadata, ClassicProtocol
from records.coordinator import CoordinatorRecord
from records.streams_group import (
    Endpoint,
    KeyValue,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupTopologyValue,
)
from translation.embedded_protocol import SchemaError, serialize_assignment
from translation.streams_classic_protocol import (
    LATEST_SUPPORTED_VERSION,
    NO_NEXT_REBALANCE,
    PROTOCOL_TYPE,
    STREAMS_PROTOCOL_NAME,
    AssignmentInfo,
    HostPartitions,
    StreamsClassicMember,
    SubscriptionInfo,
    TaskId,
    encode_assignment_info,
    parse_streams_member_metadata,
)
from translation.streams_conversion_rules import MIN_OFFSET_SUMS_VERSION

KNOWN_MEMBER_ID_REQUIRED_VERSION = 4


# --- tasks and partitions ------------------------------------------------------------------------


def topic_subtopologies(topology: StreamsGroupTopologyValue) -> dict[str, list[str]]:
    """Source or repartition source topic -> the subtopologies that read it."""
    out: dict[str, list[str]] = {}
    for sub in topology.subtopologies:
        for name in (*sub.source_topics, *(t.name for t in sub.repartition_source_topics)):
            out.setdefault(name, []).append(sub.subtopology_id)
    return out


def task_partitions(
    topology: StreamsGroupTopologyValue, image: MetadataImage, sid: str, partition: int
) -> list[tuple[str, int]]:
    """The partitions task `sid`_`partition` consumes: that partition of each source and
    repartition source topic of its subtopology that has it."""
    for sub in topology.subtopologies:
        if sub.subtopology_id != sid:
            continue
        out = []
        for name in (*sub.source_topics, *(t.name for t in sub.repartition_source_topics)):
            t = image.topic(name)
            if t is not None and partition < t.num_partitions:
                out.append((name, partition))
        return out
    return []


def to_tasks(ids: Iterable[TaskId]) -> Tasks:
    """Classic task ids "S_P" (named topologies aside) as streams-group tasks: subtopology "S"."""
    out: dict[str, frozenset[int]] = {}
    for t in ids:
        if t.topology is None:
            key = str(t.subtopology)
            out[key] = out.get(key, frozenset()) | {t.partition}
    return out


def owned_tasks(
    topology: StreamsGroupTopologyValue, member: StreamsClassicMember, stored: StreamsMember | None = None
) -> TaskRoles:
    """The tasks a classic instance says it holds: active, its cooperative subscription's owned
    partitions mapped to tasks and the tasks its SubscriptionInfo reports as run active; standby,
    the other tasks its SubscriptionInfo reports that its `stored` assignment still gives it or
    has pending revocation (the rest are leftover state directories: a standby it was told to
    drop at a SyncGroup is gone, whatever it reports)."""
    by_topic = topic_subtopologies(topology)
    active: dict[str, frozenset[int]] = dict(to_tasks(member.info.active_tasks))
    for topic, parts in member.subscription.owned_partitions:
        for sid in by_topic.get(topic, ()):
            active[sid] = active.get(sid, frozenset()) | frozenset(parts)
    standby: Tasks = {}
    if stored is not None:
        reported = tasks_minus(to_tasks(member.info.standby_or_state_tasks), active)
        standby = tasks_intersect(reported, tasks_union(stored.standby, stored.standby_pending_revocation))
    return TaskRoles(active, standby, {})


def endpoint_of(info: SubscriptionInfo) -> Endpoint | None:
    """`application.server` ("host:port") as the streams group's endpoint."""
    text = info.endpoint
    if not text or ":" not in text:
        return None
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        return None
    return Endpoint(host, number) if 0 <= number <= 0xFFFF else None


def numbered_subtopologies(topology: StreamsGroupTopologyValue) -> bool:
    """Kafka Streams numbers its subtopologies ("0", "1", ...), which classic task ids carry as
    integers; a topology named otherwise cannot be spoken to classic instances."""
    return all(s.subtopology_id.isdigit() and s.subtopology_id.isascii() for s in topology.subtopologies)


def streams_metadata(member: StreamsMember) -> StreamsClassicMember:
    """The member's `stream` protocol metadata, decoded (it decoded when the member joined)."""
    assert member.classic is not None
    for p in member.classic.supported_protocols:
        if p.name == STREAMS_PROTOCOL_NAME:
            return parse_streams_member_metadata(p.metadata)
    raise SchemaError("no `stream` protocol")


def build_member(
    base: StreamsMember,
    decoded: StreamsClassicMember,
    topology_epoch: int,
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    protocols: tuple[ClassicProtocol, ...],
    client_id: str,
    client_host: str,
    instance_id: str | None,
) -> StreamsMember:
    info = decoded.info
    return replace(
        base,
        instance_id=instance_id,
        rack_id=decoded.subscription.rack_id or None,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout_ms=rebalance_timeout_ms,
        topology_epoch=topology_epoch,
        process_id=str(info.process_id),
        user_endpoint=endpoint_of(info),
        client_tags=tuple(KeyValue(k, v) for k, v in sorted(info.tags.items())),
        classic=ClassicMemberMetadata(session_timeout_ms, protocols),
    )


# --- AssignmentInfo ------------------------------------------------------------------------------


def _host_partitions(
    st: ShardState, group: StreamsGroup, topology: StreamsGroupTopologyValue, standby: bool
) -> tuple[HostPartitions, ...]:
    by_endpoint: dict[tuple[str, int], set[tuple[str, int]]] = {}
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        if m.user_endpoint is None:
            continue
        parts = by_endpoint.setdefault((m.user_endpoint.host, m.user_endpoint.port), set())
        for sid, ps in (m.standby if standby else m.active).items():
            for p in ps:
                parts.update(task_partitions(topology, st.image, sid, p))
    return tuple(HostPartitions(h, port, tuple(sorted(ps))) for (h, port), ps in sorted(by_endpoint.items()))


def assignment_of(st: ShardState, group: StreamsGroup, member: StreamsMember) -> bytes:
    """The member's ConsumerProtocolAssignment with Streams' AssignmentInfo as user data, at the
    SubscriptionInfo version the member speaks; the commonly supported version is the lowest
    latest version of the group's classic instances (Streams' version probing: an instance
    upgrades its subscription once every instance supports the newer one)."""
    topology = group.topology
    assert topology is not None
    decoded = streams_metadata(member)
    version = min(decoded.info.version, LATEST_SUPPORTED_VERSION)
    common = min(
        (
            min(streams_metadata(m).info.latest_supported_version, LATEST_SUPPORTED_VERSION)
            for m in group.members.values()
            if m.classic is not None
        ),
        default=LATEST_SUPPORTED_VERSION,
    )
    common = max(common, version)
    # Streams reads the active task of the i-th partition of the sorted assignment at index i.
    owner: dict[tuple[str, int], TaskId] = {}
    for sid, ps in member.active.items():
        for p in ps:
            for tp in task_partitions(topology, st.image, sid, p):
                owner[tp] = TaskId(int(sid), p)
    partitions = sorted(owner)
    standby = tuple(
        (TaskId(int(sid), p), tuple(task_partitions(topology, st.image, sid, p)))
        for sid, ps in sorted(member.standby.items(), key=lambda kv: int(kv[0]))
        for p in sorted(ps)
    )
    info = AssignmentInfo(
        version=version,
        commonly_supported_version=common,
        active_tasks=tuple(owner[tp] for tp in partitions),
        standby_tasks=standby,
        partitions_by_host=_host_partitions(st, group, topology, False) if version >= 2 else (),
        standby_partitions_by_host=_host_partitions(st, group, topology, True) if version >= 6 else (),
        error_code=0,
        next_rebalance_ms=NO_NEXT_REBALANCE,
    )
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    embedded_version = decoded.subscription.version
    return serialize_assignment(sorted(by_topic.items()), embedded_version, encode_assignment_info(info))


# --- the classic APIs ----------------------------------------------------------------------------


def _inconsistent(why: str) -> CoordinatorError:
    return CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL, why)


def join(
    st: ShardState, group: StreamsGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> JoinGroupResponse:
    gid = group.group_id
    names = [p.name for p in req.protocols]
    if req.protocol_type != PROTOCOL_TYPE or STREAMS_PROTOCOL_NAME not in names:
        op.explain(
            "request.protocols_not_supported", group=gid, protocol_type=req.protocol_type, protocols=names
        )
        raise _inconsistent(
            f"Group {gid} is a streams group: only Kafka Streams instances (protocol `stream`) join it."
        )
    topology = group.topology
    if topology is None:
        raise _inconsistent(f"Streams group {gid} has no topology yet.")
    member_id = req.member_id
    unknown = member_id == ""
    if unknown:
        member_id = consumer_member_id(st.ids)
        st.bind_created(op, gid, member_id, ctx.principal)
    member = group.members.get(member_id)
    replaced = _static_predecessor(group, unknown, member_id, req.group_instance_id)
    # A member id the group does not know is a new member (the one MEMBER_ID_REQUIRED handed
    # out: nothing is recorded for it until it joins with it), as for consumer groups.
    if member is not None and member.classic is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} does not use the classic protocol."
        )
    if member is None and replaced is None and len(group.members) >= st.config.streams_max_size:
        raise CoordinatorError(
            Errors.GROUP_MAX_SIZE_REACHED,
            f"The streams group has reached its maximum capacity of {st.config.streams_max_size} members.",
        )
    if unknown and req.group_instance_id is None and ctx.api_version >= KNOWN_MEMBER_ID_REQUIRED_VERSION:
        return JoinGroupResponse(error_code=int(Errors.MEMBER_ID_REQUIRED), member_id=member_id)
    metadata = next(p.metadata for p in req.protocols if p.name == STREAMS_PROTOCOL_NAME)
    try:
        decoded = parse_streams_member_metadata(metadata)
    except SchemaError as e:
        op.explain(
            "group.conversion_refused", group=gid, direction="join", reason="streams-metadata", error=str(e)
        )
        raise _inconsistent(f"Member {member_id}'s Kafka Streams metadata does not decode: {e}") from None
    version = decoded.info.version
    # A version above LATEST_SUPPORTED_VERSION is a newer Streams probing (KIP-268): it joins as
    # Kafka 4.4's StreamsPartitionAssignor takes it as leader (its process FUTURE_ID, the nil
    # UUID the decoder gives it, with no previous tasks; assigned like any instance), and its
    # SyncGroup answers AssignmentInfo at version 11, so it downgrades and rejoins with a
    # SubscriptionInfo this side reads in full.
    if version < MIN_OFFSET_SUMS_VERSION:
        op.explain(
            "group.conversion_refused", group=gid, direction="join", reason="streams-version", version=version
        )
        raise _inconsistent(
            f"Member {member_id} speaks SubscriptionInfo version {version}; a streams group takes "
            f"version {MIN_OFFSET_SUMS_VERSION} or above."
        )
    if decoded.info.is_future:
        op.event("member.version_probing", group=gid, member=member_id, version=version)
    if not numbered_subtopologies(topology):
        op.explain(
            "group.conversion_refused", group=gid, direction="join", reason="streams-topology", detail="ids"
        )
        raise _inconsistent(
            f"Streams group {gid}'s subtopologies are not numbered as Kafka Streams numbers them."
        )
    known_topics = topic_subtopologies(topology)
    stray = sorted(t for t in decoded.subscription.topics if t not in known_topics)
    if stray:
        op.explain(
            "group.conversion_refused", group=gid, direction="join", reason="streams-topology", topics=stray
        )
        raise _inconsistent(
            f"Member {member_id} subscribes to topics the group's topology does not read "
            f"({', '.join(stray)}): it runs another topology."
        )
    if replaced is not None:
        # A classic static instance back under a new member id (a restart) takes its
        # predecessor's place, target and tasks at once, as a classic static member always
        # could (KIP-345): no rebalance, and the old member id is fenced from now on.
        op.records += member_tombstones(gid, replaced.member_id)
        for kind in CLASSIC_MEMBER_TIMERS:
            op.cancel(kind, gid, replaced.member_id)
        member = replace(replaced, member_id=member_id)
        op.event(
            "member.replaced",
            group=gid,
            member=member_id,
            replaced=replaced.member_id,
            instance_id=req.group_instance_id,
            protocol="classic",
        )
    base = member if member is not None else StreamsMember(member_id)
    updated = build_member(
        base,
        decoded,
        topology.epoch,
        req.session_timeout_ms,
        req.rebalance_timeout_ms,
        tuple(ClassicProtocol(p.name, p.metadata) for p in req.protocols),
        ctx.client_id,
        ctx.client_host,
        req.group_instance_id,
    )
    reconciled = update_member(
        st, group, member, updated, owned_tasks(topology, decoded, member), op, replaced
    )
    if member is None:
        op.event("member.joined", group=gid, member=member_id, protocol="classic", process=updated.process_id)
    op.schedule(TimerKind.STREAMS_SESSION, gid, member_id, req.session_timeout_ms)
    # As for classic members of consumer groups (Kafka `classicGroupJoinToConsumerGroup`): the
    # SyncGroup must follow within the rebalance timeout, or the instance is fenced.
    op.cancel(TimerKind.CLASSIC_MEMBER_JOIN, gid, member_id)
    op.schedule(TimerKind.CLASSIC_MEMBER_SYNC, gid, member_id, max(req.rebalance_timeout_ms, 0))
    return JoinGroupResponse(
        member_id=member_id,
        generation_id=reconciled.member_epoch,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=STREAMS_PROTOCOL_NAME,
        leader="",
        skip_assignment=False,
        members=[],
    )


CLASSIC_MEMBER_TIMERS = (
    TimerKind.STREAMS_SESSION,
    TimerKind.STREAMS_REBALANCE,
    TimerKind.CLASSIC_MEMBER_JOIN,
    TimerKind.CLASSIC_MEMBER_SYNC,
)


def _static_predecessor(
    group: StreamsGroup, unknown: bool, member_id: str, instance_id: str | None
) -> StreamsMember | None:
    """Classic static membership in a streams group (KIP-345, Kafka's classic group rules): a
    JoinGroup with an instance id the group holds under another member id replaces the holder
    when it comes with no member id (a restarted instance; whatever the holder's protocol: a
    classic static member always takes its instance id over), and is FENCED_INSTANCE_ID when
    it comes with another member id (the instance that was replaced). The member it replaces,
    or None."""
    if instance_id is None:
        return None
    holder = next((m for m in group.members.values() if m.instance_id == instance_id), None)
    if holder is None or holder.member_id == member_id:
        return None
    if not unknown:
        raise CoordinatorError(
            Errors.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by member "
            f"{holder.member_id}.",
        )
    return holder


def _classic_member(
    group: StreamsGroup, member_id: str, generation: int, instance_id: str | None = None
) -> StreamsMember:
    member = group.members.get(member_id)
    if instance_id is not None and (member is None or member.instance_id != instance_id):
        holder = next((m for m in group.members.values() if m.instance_id == instance_id), None)
        if holder is None:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        raise CoordinatorError(
            Errors.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by member "
            f"{holder.member_id}.",
        )
    if member is None or member.classic is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a classic member of group {group.group_id}."
        )
    if member.member_epoch != generation:
        raise CoordinatorError(
            Errors.ILLEGAL_GENERATION,
            f"The request generation id {generation} is not equal to the member epoch "
            f"{member.member_epoch} of member {member_id}.",
        )
    return member


def _session_timeout(member: StreamsMember) -> int:
    assert member.classic is not None
    return member.classic.session_timeout_ms


def sync(st: ShardState, group: StreamsGroup, req: SyncGroupRequest, op: Operation) -> SyncGroupResponse:
    member = _classic_member(group, req.member_id, req.generation_id, req.group_instance_id)
    if req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE:
        raise _inconsistent(f"The protocol type {req.protocol_type} is not {PROTOCOL_TYPE}.")
    if req.protocol_name is not None and req.protocol_name != STREAMS_PROTOCOL_NAME:
        raise _inconsistent(f"The protocol name {req.protocol_name} is not {STREAMS_PROTOCOL_NAME}.")
    op.schedule(TimerKind.STREAMS_SESSION, group.group_id, member.member_id, _session_timeout(member))
    if group.assignment_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_TASKS:
        _schedule_join_timeout(group, member, op)  # an answer, not a raise: the timer must outlive it
        return SyncGroupResponse(error_code=int(Errors.REBALANCE_IN_PROGRESS))
    op.cancel(TimerKind.CLASSIC_MEMBER_SYNC, group.group_id, member.member_id)
    release_standbys(group, member, op)
    return SyncGroupResponse(
        protocol_type=PROTOCOL_TYPE,
        protocol_name=STREAMS_PROTOCOL_NAME,
        assignment=assignment_of(st, group, member),
    )


def release_standbys(group: StreamsGroup, member: StreamsMember, op: Operation) -> None:
    """The SyncGroup answer lists the instance's tasks without the standby (and warm-up) tasks
    pending revocation, and the instance drops them on reading it: they are released with the
    answer (a record written before it is sent), so a member of the same process waiting for
    them (UNRELEASED_TASKS) gets them at its next heartbeat or JoinGroup. The member stays
    UNREVOKED_TASKS at its epoch (its generation does not change before it rejoins): its next
    Heartbeat answers REBALANCE_IN_PROGRESS and its JoinGroup moves it to the target."""
    if not (member.standby_pending_revocation or member.warmup_pending_revocation):
        return
    released = replace(member, standby_pending_revocation={}, warmup_pending_revocation={})
    op.records.append(
        CoordinatorRecord(
            StreamsGroupCurrentMemberAssignmentKey(group.group_id, member.member_id),
            released.assignment_value(),
        )
    )


def heartbeat(st: ShardState, group: StreamsGroup, req: HeartbeatRequest, op: Operation) -> HeartbeatResponse:
    member = _classic_member(group, req.member_id, req.generation_id, req.group_instance_id)
    op.schedule(TimerKind.STREAMS_SESSION, group.group_id, member.member_id, _session_timeout(member))
    if must_rejoin(st, group, member):
        _schedule_join_timeout(group, member, op)
        return HeartbeatResponse(int(Errors.REBALANCE_IN_PROGRESS))
    return HeartbeatResponse(0)


def _schedule_join_timeout(group: StreamsGroup, member: StreamsMember, op: Operation) -> None:
    """A classic instance told to rejoin must do so within its rebalance timeout, or it is
    fenced (Kafka's join timer for classic members of consumer groups,
    `scheduleConsumerGroupJoinTimeoutIfAbsent`): one that heartbeats but never rejoins would
    otherwise keep its place, and the tasks it holds, for good."""
    op.schedule_if_absent(
        TimerKind.CLASSIC_MEMBER_JOIN, group.group_id, member.member_id, max(member.rebalance_timeout_ms, 0)
    )


def leave(st: ShardState, group: StreamsGroup, req: LeaveGroupRequest, op: Operation) -> LeaveGroupResponse:
    gid = group.group_id
    out: list[MemberResponse] = []
    gone: list[str] = []
    for ident in req.members:
        mid, iid = ident.member_id, ident.group_instance_id
        member = (
            group.members.get(mid)
            if iid is None
            else next((m for m in group.members.values() if m.instance_id == iid), None)
        )
        if member is None or member.classic is None or member.member_id in gone:
            out.append(MemberResponse(mid, iid, int(Errors.UNKNOWN_MEMBER_ID)))
            continue
        if iid is not None and mid and member.member_id != mid:
            out.append(MemberResponse(mid, iid, int(Errors.FENCED_INSTANCE_ID)))
            continue
        remove_member(st, group, member.member_id, op, gone)
        for kind in CLASSIC_MEMBER_TIMERS:
            op.cancel(kind, gid, member.member_id)
        gone.append(member.member_id)
        op.event("member.left", group=gid, member=member.member_id, protocol="classic", reason="LeaveGroup")
        out.append(MemberResponse(member.member_id, iid))
    return LeaveGroupResponse(members=out)


# --- DescribeGroups ------------------------------------------------------------------------------


def describe(st: ShardState, group: StreamsGroup) -> DescribedGroup:
    """DescribeGroups of a streams group. Kafka 4.4 answers Dead ("Group X is not a classic
    group.", GROUP_ID_NOT_FOUND from v6) for every streams group, and so does groupshift for one
    without classic instances. With classic Kafka Streams instances inside (which Kafka never
    has), the group is described as their consumer group: protocol type `consumer`, protocol
    `stream`, each instance's own JoinGroup metadata and its current AssignmentInfo, so
    `kafka-consumer-groups.sh --describe` keeps working mid-roll. The `group.protocol=streams`
    members are left out: DescribeGroups has no form for them (StreamsGroupDescribe describes
    them)."""
    classic = sorted((m for m in group.members.values() if m.classic is not None), key=lambda m: m.member_id)
    if not classic or group.topology is None:
        return not_a_classic_group(group.group_id)
    members = []
    for m in classic:
        assert m.classic is not None
        metadata = next(
            (p.metadata for p in m.classic.supported_protocols if p.name == STREAMS_PROTOCOL_NAME), b""
        )
        members.append(
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=metadata,
                member_assignment=assignment_of(st, group, m),
            )
        )
    return DescribedGroup(
        group_id=group.group_id,
        group_state=group.state(group.validated_topology_epoch >= 0),
        protocol_type=PROTOCOL_TYPE,
        protocol_data=STREAMS_PROTOCOL_NAME,
        members=tuple(members),
    )


def not_a_classic_group(group_id: str) -> DescribedGroup:
    """Kafka 4.4's answer to DescribeGroups of a group of another type (`classicGroup` throws
    GroupIdNotFoundException): Dead, with the reason v6 carries."""
    return DescribedGroup(
        group_id=group_id, group_state="Dead", error_message=f"Group {group_id} is not a classic group."
    )
