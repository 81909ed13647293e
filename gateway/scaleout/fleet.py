"""Fleet membership: every groupshift node joins one classic group on the upstream cluster.

The classic group protocol with groupshift's own protocol type (`groupshift`) is Kafka's
generic "group membership for resource management" (the protocol Kafka Connect's workers use
with protocol type `connect`): the upstream group coordinator tracks which nodes are alive
(JoinGroup / SyncGroup / Heartbeat, `session.timeout.ms`), elects a leader, and hands every
member the assignment the leader computed. Here the resources are coordinator shards.

* Member metadata (JSON): the node's id, the endpoint clients reach it at, the shards it owns.
* The leader's assignment (`assign`): balanced (every member gets floor or ceil of shards /
  members) and sticky (a member keeps what it owns up to its share, so a rebalance moves only
  the shards that must move).
* Every member receives the whole view (generation, shard -> node, node endpoints), so every node
  can route every group to its owner.

The lease: a member whose heartbeat, sent at time t, succeeded cannot be removed from the group
by the coordinator before t + session timeout. `FleetMember.lease_deadline` is that bound minus
one heartbeat interval: past it the node must assume its shards were given away (docs/scale-out.md,
"node partitioned from the upstream cluster").

The membership itself is the public membership client (`membership`, docs/membership.md):
`FleetMember` gives it this protocol type, the node's metadata, the leader's assignor and the
callbacks, and runs it on a thread and event loop of its own (`MembershipThread`) with a
connection of its own to the group's coordinator broker (a JoinGroup waits for the rebalance; it
must not hold up other traffic on a shared connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import structlog

from gateway.upstream.security import UpstreamSecurity
from membership import Assignment, GroupJoined, Membership, MembershipThread

log = structlog.get_logger("scaleout")

PROTOCOL_TYPE = "groupshift"
PROTOCOL_NAME = "shards-v1"


@dataclass(frozen=True)
class NodeInfo:
    node_id: int
    host: str
    port: int
    owned: tuple[int, ...] = ()

    def encode(self) -> bytes:
        return json.dumps(
            {"node_id": self.node_id, "host": self.host, "port": self.port, "owned": list(self.owned)}
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> NodeInfo:
        d = json.loads(data)
        return cls(
            int(d["node_id"]), str(d["host"]), int(d["port"]), tuple(int(s) for s in d.get("owned", ()))
        )


@dataclass(frozen=True)
class FleetView:
    """One generation's assignment, as every member receives it.

    Ownership is by member id (`members`), routing by node id (`owners`, `nodes`): two processes
    started with the same `node.id` by mistake are still two members, and only one of them is
    ever given shards (`FleetMember` leaves the other out and logs it)."""

    generation: int
    owners: dict[int, int]  # shard -> node id
    nodes: dict[int, tuple[str, int]]  # node id -> (host, port)
    members: dict[int, str] = field(default_factory=dict)  # shard -> member id
    local_member: str = ""  # the receiving member's id (not sent)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "generation": self.generation,
                "owners": {str(s): n for s, n in self.owners.items()},
                "nodes": {str(n): [h, p] for n, (h, p) in self.nodes.items()},
                "members": {str(s): m for s, m in self.members.items()},
            }
        ).encode()

    @classmethod
    def decode(cls, data: bytes, local_member: str = "") -> FleetView:
        d = json.loads(data)
        return cls(
            int(d["generation"]),
            {int(s): int(n) for s, n in d["owners"].items()},
            {int(n): (str(hp[0]), int(hp[1])) for n, hp in d["nodes"].items()},
            {int(s): str(m) for s, m in d.get("members", {}).items()},
            local_member,
        )

    def shards_of(self, node_id: int) -> set[int]:
        return {s for s, n in self.owners.items() if n == node_id}

    def mine(self) -> set[int]:
        """The shards assigned to the receiving member."""
        if not self.local_member:
            return set()
        return {s for s, m in self.members.items() if m == self.local_member}


def assign(members: dict[str, NodeInfo], num_shards: int) -> dict[int, str]:
    """Shard -> member id: balanced, keeping each member's current shards up to its share.

    Members are ordered by how many shards they own now (most first), then by node id, so the
    members that get the larger share (when shards do not divide evenly) are the ones that
    already hold more: fewer moves.
    """
    if not members:
        return {}
    order = sorted(members, key=lambda m: (-len(members[m].owned), members[m].node_id, m))
    base, extra = divmod(num_shards, len(order))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    out: dict[int, str] = {}
    load = dict.fromkeys(order, 0)
    for m in order:
        for s in sorted(members[m].owned):
            if 0 <= s < num_shards and s not in out and load[m] < quota[m]:
                out[s] = m
                load[m] += 1
    for s in range(num_shards):
        if s in out:
            continue
        m = min(order, key=lambda x: (load[x] - quota[x], load[x], members[x].node_id, x))
        out[s] = m
        load[m] += 1
    return out


def plan(generation: int, members: dict[str, NodeInfo], num_shards: int) -> FleetView:
    """The leader's view: members with a node id already taken (two processes started with the
    same `node.id`) get no shards, since clients could not tell them apart."""
    eligible: dict[str, NodeInfo] = {}
    seen: dict[int, str] = {}
    for mid in sorted(members):
        info = members[mid]
        if info.node_id in seen:
            log.error(
                "scaleout.duplicate_node_id",
                node_id=info.node_id,
                members=[seen[info.node_id], mid],
                reason="two fleet nodes share node.id; the second gets no shards",
            )
            continue
        seen[info.node_id] = mid
        eligible[mid] = info
    shard_owner = assign(eligible, num_shards)
    return FleetView(
        generation,
        {s: eligible[m].node_id for s, m in shard_owner.items()},
        {i.node_id: (i.host, i.port) for i in eligible.values()},
        dict(shard_owner),
    )


class FleetMember:
    """The membership of one node, on a thread and event loop of its own (`MembershipThread`).

    Like the Java consumer's heartbeat thread: a gateway loop busy with a storm of joins must
    not starve the fleet heartbeats, or the node would lose its membership (and every shard)
    because it is busy. The lease is the membership's (`lease_deadline`, a float the serving
    loop reads); views are handed to the serving loop with `call_soon_threadsafe`; `me()` must be
    safe to call from the membership's thread (the ownership publishes an immutable snapshot for
    it). `before_join` runs (on a worker thread) when the node's view is revoked, which is always
    before the JoinGroup that follows.
    """

    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        *,
        group_id: str,
        num_shards: int,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        connect_timeout: float,
        me: Callable[[], NodeInfo],
        on_view: Callable[[FleetView | None], None],
        before_join: Callable[[], None] | None = None,
        security: UpstreamSecurity | None = None,
    ) -> None:
        self.group_id = group_id
        self.num_shards = num_shards
        self.session = session_timeout_ms / 1000
        self.interval = heartbeat_interval_ms / 1000
        self.connect_timeout = connect_timeout
        self.me = me
        self.on_view = on_view
        self.before_join = before_join
        self.view: FleetView | None = None
        self.rebalances = 0
        self._serving_loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self.membership = Membership(
            bootstrap,
            group_id,
            PROTOCOL_TYPE,
            lambda: [(PROTOCOL_NAME, self.me().encode())],
            self._assign,
            on_assigned=self._assigned,
            on_revoked=self._revoked,
            session_timeout_ms=session_timeout_ms,
            # The whole fleet rejoins within a session (before_join waits at most half of it).
            rebalance_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            request_timeout_ms=session_timeout_ms,
            security=None if security is None else security.client,
            client_id="groupshift-fleet",
            log=log,
        )
        # Never let the membership die: a fatal answer (an ACL not granted yet, say) or a bug is
        # logged and the node joins again as a new member.
        self._thread = MembershipThread(self.membership, name="fleet-membership", restart_after=1.0)

    @property
    def member_id(self) -> str:
        return self.membership.member_id

    @property
    def generation(self) -> int:
        return self.membership.generation

    @property
    def lease_deadline(self) -> float:
        """`time.monotonic()` bound of the shards' ownership (the membership's lease)."""
        return self.membership.lease_deadline

    # -- control (from the serving loop) -------------------------------------------------------

    def start(self) -> None:
        self._serving_loop = asyncio.get_running_loop()
        self._thread.start()

    def request_rejoin(self) -> None:
        """A shard was dropped on a failure: a new generation decides its owner again."""
        self._thread.call(lambda: self.membership.request_rejoin("a shard was dropped"))

    def close(self) -> None:
        """Stop; a member leaves the group on its way out (LeaveGroup), so the others need not
        wait for its session to time out."""
        self._stopping = True
        self._thread.close(2.0)

    # -- the membership's callbacks (on its thread) --------------------------------------------

    def _assign(self, joined: GroupJoined) -> Mapping[str, bytes]:
        members = {m.member_id: NodeInfo.decode(m.metadata) for m in joined.members}
        data = plan(joined.generation, members, self.num_shards).encode()
        log.info("scaleout.fleet_assigned", generation=joined.generation, members=len(members))
        return dict.fromkeys(members, data)

    async def _revoked(self, assignment: Assignment, reason: str, lost: bool) -> None:
        log.info("scaleout.fleet_rebalance", generation=assignment.generation, reason=reason, lost=lost)
        if self.before_join is not None and not self._stopping:
            # Blocking (waits for the node's fences in flight): on a worker thread, so the
            # membership's loop stays free; no heartbeat of this generation is due any more.
            await asyncio.get_running_loop().run_in_executor(None, self.before_join)

    def _assigned(self, assignment: Assignment) -> None:
        if not assignment.data:
            self.membership.request_rejoin("empty fleet view")
            return
        self.view = FleetView.decode(assignment.data, assignment.member_id)
        self.rebalances += 1
        log.info(
            "scaleout.fleet_view",
            generation=self.view.generation,
            mine=sorted(self.view.mine()),
            nodes=sorted(self.view.nodes),
        )
        loop = self._serving_loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.on_view, self.view)
