"""A public client for Kafka's classic group membership protocol, any protocol type.

`Membership` joins a group, runs the application's assignor when it is the leader and calls back
on assignment and revocation; `LeaderElection` elects one leader on top of it. Both speak to
groupshift and to Apache Kafka alike (docs/membership.md). The state machine is sans-IO
(`membership.core`); `membership.client` drives it on asyncio; `python -m membership` is a
runnable leader-election example.
"""

from membership.client import Membership, MembershipThread
from membership.core import Assignment, GroupJoined, Member, MembershipError, State
from membership.leader_election import LeaderElection, Leadership

__all__ = [
    "Assignment",
    "GroupJoined",
    "LeaderElection",
    "Leadership",
    "Member",
    "Membership",
    "MembershipError",
    "MembershipThread",
    "State",
]
