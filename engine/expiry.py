"""What a fired timer does: one table from timer kind to handler (Kafka's timer callbacks:
`consumerGroupSessionTimeoutExpired`, `consumerGroupRebalanceTimeoutExpired`,
`classicGroupJoinToConsumerGroup`'s join and sync timeouts, `expireClassicGroupMemberHeartbeat`,
`completeClassicGroupJoin`, `tryCompleteInitialRebalanceElseSchedule`, `expirePendingSync`,
`cleanupGroupMetadata`).

Rules of this file:
* A timer is a `TimerTask` (kind + group + member + epoch), never a closure, so what is scheduled
  can be listed, compared and replayed; the shard pops a due task and runs `EXPIRY[task.kind]` as
  one operation of its own.
* The replay mode of that operation is in the table: consumer-group timers write records that the
  shard replays; classic-group timers change the group in place.
* When a replaying operation's append fails, the state it would have changed is still there, so
  the task is armed again after `RETRY_BACKOFF_MS` (Kafka's timers retry the same way).
* A handler finds the group again by id and does nothing when the state the timer was for is
  gone (the member left, the epoch or generation moved on, the group changed type).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from engine.classic.rebalance import (
    complete_join_by_id,
    expire_member_heartbeat,
    expire_pending_sync,
    try_complete_initial_rebalance,
)
from engine.connect import heartbeat as connect_heartbeat
from engine.consumer.client_assignment import fence_late_assigning_member
from engine.consumer.membership import fence_expired_member
from engine.offsets.operations import expire_offsets
from engine.operation import Operation
from engine.state import ShardState
from engine.streams.group import StreamsGroup
from engine.streams.heartbeat import compute_delayed_target_assignment
from engine.streams.heartbeat import fence_expired_member as fence_expired_streams_member
from engine.streams.heartbeat import fence_unrevoked_member as fence_unrevoked_streams_member
from engine.timers import TimerKind, TimerTask

K = TimerKind

# Kafka `CoordinatorTimer`: a timer operation that fails to write is retried after this delay.
RETRY_BACKOFF_MS = 500


class Expiry(NamedTuple):
    replay: bool  # the operation's replay mode (True: consumer-group records, replayed)
    fire: Callable[[ShardState, TimerTask, Operation], None]
    # Periodic: armed again after every run, whatever the run's outcome.
    periodic: bool = False


def _session(s: ShardState, t: TimerTask, op: Operation) -> None:
    fence_expired_member(s, t, op, "the member session expired.")


def _rebalance(s: ShardState, t: TimerTask, op: Operation) -> None:
    reason = f"it failed to transition from epoch {t.epoch} within {t.data}ms."
    fence_expired_member(s, t, op, reason, only_at_epoch=t.epoch)


def _classic_member_join(s: ShardState, t: TimerTask, op: Operation) -> None:
    _fence_classic_member(s, t, op, "the classic member failed to join within the rebalance timeout.")


def _classic_member_sync(s: ShardState, t: TimerTask, op: Operation) -> None:
    _fence_classic_member(s, t, op, "the member failed to sync within timeout.")


def _fence_classic_member(s: ShardState, t: TimerTask, op: Operation, reason: str) -> None:
    """A classic member's join or sync timer, in a consumer group or (a classic Kafka Streams
    instance) in a streams group."""
    if isinstance(s.groups.get(t.group_id), StreamsGroup):
        fence_expired_streams_member(s, t.group_id, t.member_id, op, reason)
    else:
        fence_expired_member(s, t, op, reason)


def _classic_heartbeat(s: ShardState, t: TimerTask, op: Operation) -> None:
    expire_member_heartbeat(s, t.group_id, t.member_id, op)


def _join_phase(s: ShardState, t: TimerTask, op: Operation) -> None:
    complete_join_by_id(s, t.group_id, op)


def _initial_rebalance(s: ShardState, t: TimerTask, op: Operation) -> None:
    try_complete_initial_rebalance(s, t.group_id, t.epoch, t.data, op)


def _sync_phase(s: ShardState, t: TimerTask, op: Operation) -> None:
    expire_pending_sync(s, t.group_id, t.epoch, op)


def _streams_session(s: ShardState, t: TimerTask, op: Operation) -> None:
    fence_expired_streams_member(s, t.group_id, t.member_id, op)


def _streams_rebalance(s: ShardState, t: TimerTask, op: Operation) -> None:
    fence_unrevoked_streams_member(s, t.group_id, t.member_id, t.epoch, t.data, op)


def _streams_initial_rebalance(s: ShardState, t: TimerTask, op: Operation) -> None:
    compute_delayed_target_assignment(s, t.group_id, op)


def _offsets(s: ShardState, t: TimerTask, op: Operation) -> None:
    expire_offsets(s, op)


EXPIRY: dict[TimerKind, Expiry] = {
    #  timer kind                     replay  handler
    K.CONSUMER_SESSION: Expiry(True, _session),
    K.CONSUMER_REBALANCE: Expiry(True, _rebalance),
    K.CLASSIC_MEMBER_JOIN: Expiry(True, _classic_member_join),
    K.CLASSIC_MEMBER_SYNC: Expiry(True, _classic_member_sync),
    K.CLASSIC_HEARTBEAT: Expiry(False, _classic_heartbeat),
    K.CLASSIC_JOIN_PHASE: Expiry(False, _join_phase),
    K.CLASSIC_INITIAL_REBALANCE: Expiry(False, _initial_rebalance),
    K.CLASSIC_SYNC_PHASE: Expiry(False, _sync_phase),
    K.OFFSET_EXPIRATION: Expiry(True, _offsets, periodic=True),
    K.STREAMS_SESSION: Expiry(True, _streams_session),
    K.STREAMS_REBALANCE: Expiry(True, _streams_rebalance),
    K.STREAMS_INITIAL_REBALANCE: Expiry(True, _streams_initial_rebalance),
    K.CLIENT_ASSIGNMENT: Expiry(True, fence_late_assigning_member),
    K.CONNECT_SESSION: Expiry(True, connect_heartbeat.expire_session),
    K.CONNECT_REBALANCE: Expiry(True, connect_heartbeat.expire_revocation),
    K.CONNECT_ASSIGNMENT: Expiry(True, connect_heartbeat.expire_assignment),
    K.CONNECT_DELAY: Expiry(True, connect_heartbeat.release_delayed),
}


def schedule_offset_expiration(s: ShardState, op: Operation) -> None:
    op.schedule(K.OFFSET_EXPIRATION, "", "", s.config.offsets_retention_check_interval_ms)
