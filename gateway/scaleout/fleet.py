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

Requests go over an `UpstreamLink` of its own to the group's coordinator broker (a JoinGroup
waits for the rebalance; it must not hold up other traffic on a shared connection), from a
thread and event loop of its own (`FleetMember`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from kio.index import load_request_schema, load_response_schema

from gateway.upstream.link import UpstreamLink, UpstreamUnavailable
from gateway.upstream.security import UpstreamSecurity
from protocol.codec import decode_response, encode_request
from protocol.entity_builder import build

log = structlog.get_logger("scaleout")

PROTOCOL_TYPE = "groupshift"
PROTOCOL_NAME = "shards-v1"

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
_REFIND = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
_RESET = {ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID}


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
    """The membership loop of one node, on a thread and event loop of its own.

    Like the Java consumer's heartbeat thread: a gateway loop busy with a storm of joins must
    not starve the fleet heartbeats, or the node would lose its membership (and every shard)
    because it is busy. The lease it maintains is a float the serving loop reads; views are
    handed to the serving loop with `call_soon_threadsafe`; `me()` must be safe to call from
    this thread (the ownership publishes an immutable snapshot for it).
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
        self.bootstrap = bootstrap
        self.security = security  # the `upstream.` security settings (TLS, SASL)
        self.group_id = group_id
        self.num_shards = num_shards
        self.session = session_timeout_ms / 1000
        self.interval = heartbeat_interval_ms / 1000
        self.connect_timeout = connect_timeout
        self.me = me
        self.on_view = on_view
        self.before_join = before_join
        self.member_id = ""
        self.generation = -1
        self.view: FleetView | None = None
        self.lease_deadline = 0.0  # time.monotonic() bound of the shards' ownership
        self._link: UpstreamLink | None = None
        self._coordinator: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._serving_loop: asyncio.AbstractEventLoop | None = None
        self._rejoin: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.rebalances = 0

    # -- control (from the serving loop) -------------------------------------------------------

    def start(self) -> None:
        self._serving_loop = asyncio.get_running_loop()
        started = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._rejoin = asyncio.Event()
            self._task = loop.create_task(self._run())
            started.set()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(self._task)
            loop.run_until_complete(asyncio.sleep(0.05))  # let a LeaveGroup reach the socket
            loop.close()

        self._thread = threading.Thread(target=main, name="fleet-membership", daemon=True)
        self._thread.start()
        started.wait(5)

    def request_rejoin(self) -> None:
        """A shard was dropped on a failure: a new generation decides its owner again."""
        loop, event = self._loop, self._rejoin
        if loop is not None and event is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(event.set)

    def close(self) -> None:
        """Stop; a member leaves the group on its way out (LeaveGroup, not waited for: the
        transport writes it before closing), so the others need not wait for its session to
        time out."""
        self._stopping = True
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._leave_and_stop)
        if self._thread is not None:
            self._thread.join(2.0)

    def _leave_and_stop(self) -> None:
        link = self._link
        if link is not None and not link.closed and self.member_id:
            request = build(
                load_request_schema(13, 3),
                {
                    "group_id": self.group_id,
                    "members": [{"member_id": self.member_id, "group_instance_id": None}],
                },
            )
            with contextlib.suppress(UpstreamUnavailable):
                link.send(
                    encode_request(request, correlation_id=0, client_id="groupshift-fleet")[4:],
                    expect_response=False,
                )
        if self._task is not None:
            self._task.cancel()
        if link is not None:
            link.close()

    def _deliver(self, view: FleetView) -> None:
        loop = self._serving_loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.on_view, view)

    # -- wire ----------------------------------------------------------------------------------

    async def _call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        link = await self._coordinator_link()
        return await self._request(link, api_key, version, body)

    async def _request(self, link: UpstreamLink, api_key: int, version: int, body: dict[str, Any]) -> Any:
        request = build(load_request_schema(api_key, version), body)
        frame = encode_request(request, correlation_id=0, client_id="groupshift-fleet")[4:]
        raw = await link.request(frame)
        return decode_response(load_response_schema(api_key, version), raw)[1]

    async def _coordinator_link(self) -> UpstreamLink:
        if self._link is not None and not self._link.closed:
            return self._link
        host, port = random.choice(self.bootstrap)
        link = UpstreamLink(
            -1,
            host,
            port,
            connect_timeout=self.connect_timeout,
            request_timeout=self.session,
            security=self.security,
        )
        try:
            resp = await self._request(link, 10, 3, {"key": self.group_id, "key_type": 0})
        finally:
            link.close()
        if int(resp.error_code) != NONE:
            raise UpstreamUnavailable(f"no fleet coordinator yet (error {int(resp.error_code)})")
        self._coordinator = int(resp.node_id)
        self._link = UpstreamLink(
            int(resp.node_id),
            str(resp.host),
            int(resp.port),
            connect_timeout=self.connect_timeout,
            request_timeout=self.session + 5.0,
            security=self.security,
        )
        return self._link

    def _drop_link(self) -> None:
        if self._link is not None:
            self._link.close()
        self._link = None

    # -- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            try:
                if await self._join():
                    await self._heartbeats()
            except asyncio.CancelledError:
                raise
            except (UpstreamUnavailable, OSError, TimeoutError) as e:
                log.info("scaleout.fleet_unreachable", error=str(e))
                self._drop_link()
                await asyncio.sleep(min(self.interval, 0.5))
            except Exception as e:  # never let the membership die silently
                log.error("scaleout.fleet_error", error=repr(e), exc_info=e)
                self._drop_link()
                await asyncio.sleep(self.interval)

    def _renew(self, sent: float) -> None:
        self.lease_deadline = max(self.lease_deadline, sent + self.session - self.interval)

    async def _join(self) -> bool:
        if self.before_join is not None:
            # Blocking (waits for the node's fences in flight): on a worker thread, so this
            # loop stays free; the heartbeats of the previous generation are over by now.
            await asyncio.get_running_loop().run_in_executor(None, self.before_join)
        me = self.me()
        sent = time.monotonic()
        resp = await self._call(
            11,
            5,
            {
                "group_id": self.group_id,
                "session_timeout": int(self.session * 1000),
                "rebalance_timeout": int(self.session * 1000),
                "member_id": self.member_id,
                "group_instance_id": None,
                "protocol_type": PROTOCOL_TYPE,
                "protocols": [{"name": PROTOCOL_NAME, "metadata": me.encode()}],
            },
        )
        code = int(resp.error_code)
        if code == MEMBER_ID_REQUIRED:
            self.member_id = str(resp.member_id)
            return False
        if code in _RESET:
            self.member_id = ""
            return False
        if code in _REFIND:
            self._drop_link()
            await asyncio.sleep(0.1)
            return False
        if code != NONE:
            log.warning("scaleout.join_failed", error_code=code)
            await asyncio.sleep(min(self.interval, 0.5))
            return False
        self._renew(sent)
        self.member_id = str(resp.member_id)
        self.generation = int(resp.generation_id)
        assignments: list[dict[str, Any]] = []
        if str(resp.leader) == self.member_id:
            members = {str(m.member_id): NodeInfo.decode(bytes(m.metadata)) for m in resp.members}
            view = plan(self.generation, members, self.num_shards)
            data = view.encode()
            assignments = [{"member_id": m, "assignment": data} for m in members]
            log.info("scaleout.fleet_assigned", generation=self.generation, members=len(members))
        sent = time.monotonic()
        sresp = await self._call(
            14,
            3,
            {
                "group_id": self.group_id,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": None,
                "assignments": assignments,
            },
        )
        code = int(sresp.error_code)
        if code in _RESET:
            self.member_id = ""
            return False
        if code in _REFIND:
            self._drop_link()
            return False
        if code != NONE or not sresp.assignment:
            return False
        self._renew(sent)
        self.view = FleetView.decode(bytes(sresp.assignment), self.member_id)
        self.rebalances += 1
        assert self._rejoin is not None
        self._rejoin.clear()
        log.info(
            "scaleout.fleet_view",
            generation=self.view.generation,
            mine=sorted(self.view.mine()),
            nodes=sorted(self.view.nodes),
        )
        self._deliver(self.view)
        return True

    async def _heartbeats(self) -> None:
        while not self._stopping:
            assert self._rejoin is not None
            try:
                await asyncio.wait_for(self._rejoin.wait(), self.interval)
                return  # rejoin asked for
            except TimeoutError:
                pass
            sent = time.monotonic()
            try:
                resp = await self._call(
                    12,
                    3,
                    {
                        "group_id": self.group_id,
                        "generation_id": self.generation,
                        "member_id": self.member_id,
                        "group_instance_id": None,
                    },
                )
            except (UpstreamUnavailable, OSError, TimeoutError) as e:
                log.info("scaleout.heartbeat_failed", error=str(e))
                self._drop_link()
                continue  # keep the member id; find the coordinator again
            code = int(resp.error_code)
            if code == NONE:
                self._renew(sent)
            elif code == REBALANCE_IN_PROGRESS:
                self._renew(sent)
                log.info("scaleout.fleet_rebalance", generation=self.generation)
                return
            elif code in _RESET:
                log.warning("scaleout.fleet_member_lost", generation=self.generation, error_code=code)
                self.member_id = ""
                return
            elif code in _REFIND:
                self._drop_link()
            else:
                log.warning("scaleout.heartbeat_error", error_code=code)
                return
