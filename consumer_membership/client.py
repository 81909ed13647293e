"""`ConsumerMembership`: the asyncio driver of `consumer_membership.core`.

Runs the KIP-848 member state machine on the asyncio driver it shares with the classic
membership client (`membership.driver`: one connection to the coordinator over
`membership.connection`, TLS and SASL, ApiVersions), encoding what kio has no schema for with
`protocol.client_assignment_wire`: the heartbeat's client-assignor tag, the response's
COMPUTE_ASSIGNMENT and assignment-metadata tags, the two extension APIs. `ConsumerMembershipThread`
runs it on a thread and loop of its own (as Kafka's background thread does).

Callbacks (`on_assigned`, `on_revoked`, `on_computed`) run on the driver's loop, in order, before
the next request: a revocation is delivered before the heartbeat that tells the coordinator the
partitions are released, as Kafka's reconciliation does.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kio.index import load_request_schema, load_response_schema

from consumer_membership.assignor import Assignor
from consumer_membership.core import (
    CONSUMER_GROUP_HEARTBEAT,
    FIND_COORDINATOR,
    INSTALL_ASSIGNMENT,
    METADATA,
    PREPARE_ASSIGNMENT,
    Assigned,
    Computed,
    ConsumerMembershipCore,
    ConsumerMembershipError,
    Fatal,
    HeartbeatAnswer,
    Joined,
    Request,
    Revoked,
    Settings,
    State,
    TopicPartition,
)
from membership.connection import BrokerConnection, ConnectionFailed
from membership.driver import ClientAssignmentDriver, MemberThread
from membership.event_log import EventLog, StdlibEventLog
from protocol import client_assignment_wire as caw
from protocol.client_security import ClientSecurity
from protocol.codec import decode_response, encode_request
from protocol.entity_builder import build

# What this client speaks: ConsumerGroupHeartbeat v0-v1 (v1: the member id is the client's,
# KIP-1082), FindCoordinator v0-v4, Metadata v12 (topic ids and replica nodes), the extensions v0.
VERSIONS: dict[int, tuple[int, int]] = {
    CONSUMER_GROUP_HEARTBEAT: (0, 1),
    FIND_COORDINATOR: (0, 4),
    METADATA: (12, 12),
    PREPARE_ASSIGNMENT: (caw.EXTENSION_VERSION, caw.EXTENSION_VERSION),
    INSTALL_ASSIGNMENT: (caw.EXTENSION_VERSION, caw.EXTENSION_VERSION),
}

OnAssigned = Callable[[frozenset[TopicPartition]], Awaitable[None] | None]
OnRevoked = Callable[[frozenset[TopicPartition], bool], Awaitable[None] | None]
OnComputed = Callable[[Computed], Awaitable[None] | None]
OnJoined = Callable[[Joined], Awaitable[None] | None]


class ConsumerMembership(ClientAssignmentDriver[ConsumerMembershipCore, ConsumerMembershipError]):
    """One member of consumer group `group_id` subscribed to `topics`, offering `assignors` (in
    priority order) to the coordinator. Records are not fetched: this is the membership and
    assignment half of a consumer (any consumer reads the partitions the callbacks name)."""

    EVENT_PREFIX = "consumer_membership"
    TASK_NAME = "consumer-membership"
    # An extension answer the wire layer cannot read counts as no answer, as a bad frame does.
    REQUEST_FAILURES = (ConnectionFailed, caw.MalformedExtension)

    def __init__(
        self,
        bootstrap: str | Sequence[tuple[str, int]],
        group_id: str,
        topics: Sequence[str],
        assignors: Sequence[Assignor],
        *,
        on_assigned: OnAssigned | None = None,
        on_revoked: OnRevoked | None = None,
        on_computed: OnComputed | None = None,
        on_joined: OnJoined | None = None,
        rebalance_timeout_ms: int = 300_000,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30_000,
        group_instance_id: str | None = None,
        rack_id: str | None = None,
        security: ClientSecurity | None = None,
        client_id: str = "groupshift-consumer-membership",
        log: EventLog | None = None,
    ) -> None:
        core = ConsumerMembershipCore(
            Settings(
                group_id,
                tuple(topics),
                rebalance_timeout_ms=rebalance_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                request_timeout_ms=request_timeout_ms,
                group_instance_id=group_instance_id,
                rack_id=rack_id,
                client_id=client_id,
            ),
            tuple(assignors),
            log=log or StdlibEventLog(),
        )
        super().__init__(bootstrap, core, security)
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.on_computed = on_computed
        self.on_joined = on_joined

    @property
    def owned(self) -> frozenset[TopicPartition]:
        return self.core.owned

    @property
    def state(self) -> State:
        return self.core.state

    async def close(self) -> None:
        """Revoke, then leave the group (epoch -1; a static member -2, which keeps its place for
        the session timeout) and stop."""
        await super().close()

    async def _send(self, conn: BrokerConnection, request: Request, timeout: float) -> Any:
        key = request.api_key
        lo, hi = VERSIONS[key]
        if key == CONSUMER_GROUP_HEARTBEAT:
            return await self._heartbeat(conn, request, timeout)
        if key in (PREPARE_ASSIGNMENT, INSTALL_ASSIGNMENT):
            body = (
                caw.write_prepare_request(request.body)
                if key == PREPARE_ASSIGNMENT
                else caw.write_install_request(request.body)
            )
            frame, offset = await self._exchange_extension(conn, key, body, timeout)
            if key == PREPARE_ASSIGNMENT:
                return caw.read_prepare_response(frame, offset)
            return caw.read_install_response(frame, offset)
        version = conn.negotiate(key, lo, hi)
        return await conn.request_at(key, version, request.body, timeout)

    async def _heartbeat(self, conn: BrokerConnection, request: Request, timeout: float) -> HeartbeatAnswer:
        lo, hi = VERSIONS[CONSUMER_GROUP_HEARTBEAT]
        version = conn.negotiate(CONSUMER_GROUP_HEARTBEAT, lo, hi)
        kio_request = build(load_request_schema(CONSUMER_GROUP_HEARTBEAT, version), request.body)
        cid = conn.client_id
        assignors = request.assignors

        def encode(correlation: int) -> bytes:
            frame = encode_request(kio_request, correlation_id=correlation, client_id=cid)
            if assignors is None:
                return frame
            tagged = caw.with_top_level_tag(
                frame[4:], caw.CLIENT_ASSIGNORS_TAG, caw.client_assignors_field(assignors)
            )
            return struct.pack(">i", len(tagged)) + tagged

        frame = await conn.exchange(encode, timeout, CONSUMER_GROUP_HEARTBEAT)
        tags_at = caw.heartbeat_response_tags_start(frame, caw.response_body_offset(frame))
        compute = caw.read_compute_assignment(frame, tags_at)
        metadata = caw.read_assignment_metadata(frame, tags_at)
        try:
            _, body = decode_response(
                load_response_schema(CONSUMER_GROUP_HEARTBEAT, version),
                caw.without_top_level_tags(frame, tags_at),
            )
        except Exception as exc:
            conn.close()
            raise ConnectionFailed(f"undecodable ConsumerGroupHeartbeat response: {exc!r}") from None
        return HeartbeatAnswer(body, compute, metadata)

    async def _deliver_event(self, event: Any) -> None:
        if isinstance(event, Joined):
            await self._call(self.on_joined, event)
        elif isinstance(event, Assigned):
            await self._call(self.on_assigned, event.partitions)
        elif isinstance(event, Revoked):
            await self._call(self.on_revoked, event.partitions, event.lost)
        elif isinstance(event, Computed):
            await self._deliver_computed(event)
        elif isinstance(event, Fatal):
            self._fatal(event.error)


class ConsumerMembershipThread(MemberThread[ConsumerMembership]):
    """A `ConsumerMembership` on a thread and event loop of its own; callbacks run on it."""

    def __init__(self, membership: ConsumerMembership, *, name: str = "consumer-membership") -> None:
        super().__init__(membership, name=name)
