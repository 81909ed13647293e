"""A worker other than worker 0 forwards the data plane to worker 0 (docs/workers.md).

In this slice the data plane (topics, partitions, producer ids, transactions, configs of topics
and the broker, ACLs, quotas) is worker 0's alone: it leads every partition and is the
controller, as Metadata says on every worker. Clients send Produce, Fetch, ListOffsets and the
like to the leader, so they reach worker 0 directly; but a client sends Metadata and the admin
APIs to whichever broker it likes (the least loaded one), so a worker answers the group APIs,
ApiVersions and FindCoordinator itself and forwards every other request, as raw bytes, to
worker 0, on a connection of the client connection's own (a broker answers a connection's
requests one at a time, so a long-polling Fetch of one client never holds up another's). Only
the correlation id is rewritten (`gateway.upstream.link`), and restored in the answer; except
that a Metadata or DescribeCluster answer to a client of another listener than the first (a
SASL_SSL one) gets that listener's broker addresses, since worker 0 answered the forwarding
connection on its first listener.

A streams group's missing internal topics, which the group layer creates itself in embedded
mode, are created the same way: `TopicFollower.create_topics` sends CreateTopics to worker 0 on
a connection of its own and reads `topics.json` again once it is answered.

`TopicFollower` keeps the worker's own metadata image (which its consumer groups' assignors
read) in step with worker 0's `topics.json`: it checks the file's identity every
`TOPICS_POLL_SECONDS` and, when it changed, reads it and applies the difference
(`DataPlane.follow`). It follows worker 0's SCRAM users (`scram-credentials.json`) the same
way, so a user created through any worker logs in on every worker's SASL listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import structlog
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from gateway.connection import KafkaConnection, ResponseSlot
from gateway.dataplane.plane import NewTopic, TopicError
from gateway.dataplane.topics import TOPICS_FILE, TopicInfo, TopicRegistry, TopicsFileError
from gateway.sasl.credentials import CREDENTIALS_FILE, CredentialsFileError, ScramCredentialStore
from gateway.upstream.link import UpstreamLink, UpstreamUnavailable
from gateway.upstream.proxy import SASL_APIS, SPLIT, TERMINATED, expects_response, forwards_split
from gateway.workers.plan import WorkerPlan
from protocol.codec import (
    DecodeFailure,
    api_schema,
    decode_response,
    encode_request,
    encode_response,
    peek,
    response_type_of,
)
from protocol.entity_builder import build
from protocol.framing import SIZE

if TYPE_CHECKING:
    from gateway.dataplane.plane import DataPlane
    from gateway.server import GatewayServer

log = structlog.get_logger("workers")

_CID = struct.Struct(">i")
_LINK = "workers.link"
FIND_COORDINATOR = 10
# Answered by every worker itself: the group APIs (scale-out's list and the streams group
# APIs), ApiVersions, SASL, FindCoordinator (the owner of a group, worker 0 for transactions).
LOCAL = TERMINATED | SASL_APIS | {88, 89, FIND_COORDINATOR}
# Answers naming the brokers' addresses, as worker 0 sees them on its first listener.
METADATA, DESCRIBE_CLUSTER = 3, 60
ADDRESSED = frozenset({METADATA, DESCRIBE_CLUSTER})
CONNECT_TIMEOUT_SECONDS = 5.0
# A forwarded request unanswered this long fails its client connection; above any Fetch wait or
# admin timeout a client sets (Kafka clients default to 30 s request timeouts).
REQUEST_TIMEOUT_SECONDS = 120.0
TOPICS_POLL_SECONDS = 0.2
CREATE_TOPICS, CREATE_TOPICS_VERSION = 19, 5
CLIENT_ID = "groupshift-worker"


def answered_locally(frame: bytes) -> bool:
    """Whether this worker answers `frame` itself (a frame it cannot peek goes to its own
    dispatcher, which refuses it as any malformed frame is refused)."""
    try:
        api_key, version, _ = peek(frame)
    except DecodeFailure:
        return True
    if api_key in SPLIT and api_key != FIND_COORDINATOR:
        return not forwards_split(api_key, version, frame)  # a GROUP resource's configs
    return api_key in LOCAL


class WorkerForwarder:
    def __init__(self, server: GatewayServer, plan: WorkerPlan) -> None:
        self.server = server
        self.target = (plan.host, plan.port_of(0))
        self.target_node = plan.node_of(0)
        self.main_listener = server.listeners[0].name
        self.forwarded = server.metrics.counter(
            "groupshift_worker_forwarded_requests_total", "Requests forwarded to worker 0 (its data plane)"
        )
        server.on_connection_lost.append(self._release)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wrap the dispatcher (created after the extensions) as the connections' frame handler."""
        inner = self.server.dispatcher.on_frame

        def on_frame(conn: KafkaConnection, frame: bytes, slot: ResponseSlot) -> None:
            if answered_locally(frame):
                inner(conn, frame, slot)
            else:
                self._forward(conn, frame, slot)

        self.server.frame_handler = on_frame

    def _link(self, conn: KafkaConnection) -> UpstreamLink:
        link: UpstreamLink | None = conn.ctx.attributes.get(_LINK)
        if link is None or link.closed:
            link = UpstreamLink(
                self.target_node,
                *self.target,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
            conn.ctx.attributes[_LINK] = link
        return link

    def _forward(self, conn: KafkaConnection, frame: bytes, slot: ResponseSlot) -> None:
        api_key, version, cid = peek(frame)
        expect = expects_response(frame, api_key, version)
        self.forwarded.inc()

        readdress = api_key in ADDRESSED and conn.ctx.listener_name != self.main_listener

        def answered(result: bytes | UpstreamUnavailable) -> None:
            if slot.done or conn.closing:
                return
            if isinstance(result, UpstreamUnavailable):
                conn.close("workers.worker0_unavailable", error=str(result))
                return
            if readdress:
                slot.complete(self._readdressed(conn, api_key, version, cid, result))
                return
            slot.complete(b"".join((SIZE.pack(len(result)), _CID.pack(cid), result[4:])))

        try:
            self._link(conn).forward(frame, answered if expect else None)
        except UpstreamUnavailable as e:
            conn.close("workers.worker0_unavailable", error=str(e))
            return
        if not expect:
            slot.complete(None)

    def _readdressed(self, conn: KafkaConnection, api_key: int, version: int, cid: int, raw: bytes) -> bytes:
        """Worker 0's Metadata or DescribeCluster answer with the brokers' addresses on the
        listener this client came in on: worker 0 answered on its first listener (the forwarding
        connection's), and a client on another listener (SASL_SSL) must be told that listener's
        addresses, as Kafka tells a client its own listener's."""
        schema = api_schema(api_key, version)
        assert schema is not None  # a frame the link forwarded was peeked as this API
        _, body = decode_response(schema.response_type, raw)
        at = {b.node_id: b for b in self.server.cluster.brokers_for(conn.ctx)}

        def moved(broker: Any) -> Any:
            node = broker.node_id if hasattr(broker, "node_id") else broker.broker_id
            ep = at.get(int(node))
            return broker if ep is None else dataclasses.replace(broker, host=ep.host, port=ep.port)

        body = dataclasses.replace(body, brokers=tuple(moved(b) for b in body.brokers))
        return encode_response(schema, cid, body)

    def _release(self, conn: KafkaConnection) -> None:
        link: UpstreamLink | None = conn.ctx.attributes.pop(_LINK, None)
        if link is not None:
            link.close()


class TopicFollower:
    def __init__(
        self, plane: DataPlane, plan: WorkerPlan, credentials: ScramCredentialStore | None = None
    ) -> None:
        self.plane = plane
        self.credentials = credentials
        self._credentials_seen: tuple[int, int, int] | None = None
        self.shared_dir = plan.shared_dir
        self.target = (plan.host, plan.port_of(0))
        self.target_node = plan.node_of(0)
        self._seen: tuple[int, int, int] | None = None
        self._task: asyncio.Task[None] | None = None

    def _identity(self, name: str = TOPICS_FILE) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.shared_dir / name)
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _sync_credentials(self) -> None:
        """Read worker 0's SCRAM users if their file changed: AlterUserScramCredentials is
        forwarded to worker 0, which writes them, and a SASL listener of every worker checks
        logins against them."""
        if self.credentials is None:
            return
        seen = self._identity(CREDENTIALS_FILE)
        if seen is None or seen == self._credentials_seen:
            return
        try:
            self.credentials.adopt(ScramCredentialStore.load(self.shared_dir))
        except CredentialsFileError as e:
            log.warning("workers.credentials_unreadable", error=str(e))
            return
        self._credentials_seen = seen
        log.info("workers.credentials_followed", users=len(self.credentials.users()))

    def sync(self) -> None:
        """Read worker 0's topics (and SCRAM users) if their files changed since the last read."""
        self._sync_credentials()
        seen = self._identity()
        if seen is None or seen == self._seen:
            return
        try:
            topics = TopicRegistry.load(self.shared_dir).all()
        except TopicsFileError as e:
            log.warning("workers.topics_unreadable", error=str(e))
            return
        self._seen = seen
        changes = self.plane.follow(topics)
        if changes:
            log.info("workers.topics_followed", changes=[f"{c.kind}:{c.topic.name}" for c in changes])

    async def create_topics(self, new: Sequence[NewTopic]) -> list[TopicInfo | TopicError]:
        """CreateTopics at worker 0, the controller (the group layer's `create_topics`)."""
        request = build(
            load_request_schema(CREATE_TOPICS, CREATE_TOPICS_VERSION),
            {
                "topics": [
                    {
                        "name": t.name,
                        "num_partitions": t.partitions,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                    }
                    for t in new
                ],
                "timeout": int(REQUEST_TIMEOUT_SECONDS * 1000),
                "validate_only": False,
            },
        )
        link = UpstreamLink(
            self.target_node,
            *self.target,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            request_timeout=REQUEST_TIMEOUT_SECONDS,
        )
        try:
            raw = await link.request(encode_request(request, correlation_id=0, client_id=CLIENT_ID)[4:])
        except UpstreamUnavailable as e:
            return [TopicError(ErrorCode.request_timed_out, f"worker 0 unavailable: {e}") for _ in new]
        finally:
            link.close()
        _, body = decode_response(response_type_of(request), raw)
        self.sync()
        by_name = {r.name: r for r in body.topics}
        out: list[TopicInfo | TopicError] = []
        for t in new:
            r = by_name.get(t.name)
            info = self.plane.topics.get(t.name)
            if r is not None and r.error_code == ErrorCode.none and info is not None:
                out.append(info)
            else:
                code = ErrorCode.unknown_server_error if r is None else ErrorCode(r.error_code)
                out.append(TopicError(code, "" if r is None else str(r.error_message or code.name)))
        return out

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._task = loop.create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(TOPICS_POLL_SECONDS)
            self.sync()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(Exception):
                self._task = None
