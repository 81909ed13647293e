"""A public client for KIP-848 consumer groups with client-side assignors (groupshift extension).

`ConsumerMembership` joins a consumer group with ConsumerGroupHeartbeat, reconciles the
assignment the coordinator gives it (callbacks on assigned and revoked partitions), leaves on
close, and, when the coordinator asks it (COMPUTE_ASSIGNMENT), computes the whole group's target
with its `Assignor`: PrepareAssignment, `assign`, InstallAssignment. Two assignors come with it:
`StickyAssignor` (balanced, sticky, rack-aware option) and `CooperativeStickyAdapter` (reads
classic `cooperative-sticky` members' metadata: the KAFKA-18134 upgrade). It fetches no records:
it is the membership and assignment half of a consumer. docs/client-side-assignors.md.

The state machine is sans-IO (`consumer_membership.core`); `consumer_membership.client` drives
it on asyncio; `python -m consumer_membership` is a runnable member printing JSON events.
"""

from consumer_membership.assignor import (
    Assignor,
    AssignorError,
    GroupAssignment,
    GroupState,
    MemberAssignment,
    MemberInfo,
    TopicInfo,
)
from consumer_membership.client import ConsumerMembership, ConsumerMembershipThread
from consumer_membership.cooperative_sticky import CooperativeStickyAdapter
from consumer_membership.core import Computed, ConsumerMembershipError, State, TopicPartition
from consumer_membership.sticky import StickyAssignor

__all__ = [
    "Assignor",
    "AssignorError",
    "Computed",
    "ConsumerMembership",
    "ConsumerMembershipError",
    "ConsumerMembershipThread",
    "CooperativeStickyAdapter",
    "GroupAssignment",
    "GroupState",
    "MemberAssignment",
    "MemberInfo",
    "State",
    "StickyAssignor",
    "TopicInfo",
    "TopicPartition",
]
