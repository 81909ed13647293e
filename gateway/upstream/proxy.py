"""Upstream mode's request path: terminate the group APIs, forward everything else.

Every client connection (on the main listener or on a broker's listener) is handled frame by
frame before the dispatcher decodes anything:

* group APIs (Join/Sync/Heartbeat/Leave, ConsumerGroupHeartbeat/Describe, StreamsGroupHeartbeat/
  Describe, OffsetCommit/Fetch/Delete, List/Describe/DeleteGroups, FindCoordinator for groups,
  DescribeConfigs and IncrementalAlterConfigs on GROUP resources) and ApiVersions go to the
  dispatcher and are answered by groupshift's engine, as in embedded mode (streams groups too,
  on any cluster: gateway.upstream.streams_topics);
* with an authorizer (`upstream.identity=gateway`), a forwarded request is first authorized
  with groupshift's ACLs (`gateway.upstream.forwarded_acls`), and the ACL and SCRAM APIs are
  groupshift's own; without one, nothing below is decoded for authorization;
* data-plane and topic-admin APIs are forwarded: the raw request frame, with only its
  correlation id rewritten, goes to the upstream broker behind the listener the client used
  (the main listener sticks to one live broker per connection), and the response frame comes
  back with the client's correlation id restored. Record batches are never decoded.
* the upstream link a request goes on is the client connection's own (leased per broker); idle
  links are pooled per broker and credential: with `upstream.identity.credentials.file`
  (gateway.upstream.principal_credentials) a principal's links authenticate with its own
  upstream credential and are never handed to another principal;
* with `upstream.identity=passthrough` (gateway.upstream.passthrough) each client connection has
  one link of its own, never pooled, with no login of groupshift's: the client's SaslHandshake,
  SaslAuthenticate and delegation-token requests are relayed on it, and the APIs groupshift
  answers are authorized by probes of the cluster's ACLs on that link;
* a BROKER DescribeConfigs answer shows groupshift's own group coordinator settings
  (`gateway.upstream.group_settings_configs`): groupshift, not the broker, enforces them;
* responses that carry broker addresses are decoded and re-encoded with the broker endpoints
  replaced by groupshift's listeners: Metadata, DescribeCluster, FindCoordinator for
  transactions, and Produce (v10+) / Fetch (v16+) when their KIP-951 leader hints
  (`NodeEndpoints`) are present; any other response of those two is passed on as received.

Memory (docs/robustness.md, Bounds): a forwarded Fetch asks for at most the client
connection's answer budget (`socket.response.buffer.max.bytes`: its `max_bytes` is patched,
`fetch_capped`), and when the client has that much unread, the link answering it stops reading
until the client's buffer drains: the answers wait in the broker, not here, as in any proxy
that pairs the two sockets' flow control.

Response order per client connection is the connection's slot queue (`gateway.connection`);
the upstream broker answers the requests of one link in order too. A broker that cannot be reached, drops
its connection or does not answer within `upstream.request.timeout.ms` closes the client
connections that were waiting on it: to the client this is the network error a dead broker
gives (it reconnects and refreshes metadata, which by then no longer names that broker as a
leader). A leader that moved answers NOT_LEADER_OR_FOLLOWER itself, and that is passed on.

ApiVersions answers, per API, the upstream's versions for forwarded APIs (capped to what
groupshift can decode where it rewrites), groupshift's for terminated ones, and the
intersection for FindCoordinator and the config APIs that are both. Transactions are the
cluster's (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn are forwarded);
TxnOffsetCommit is terminated here, since the group is groupshift's
(`gateway.upstream.transactions`, docs/transactions.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import struct
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.errors import ErrorCode

from gateway.api_versions import ApiVersionsApi
from gateway.connection import KafkaConnection, ResponseSlot
from gateway.find_coordinator import NO_NODE, find_coordinator_response
from gateway.registry import CloseConnection, Handler, HandlerRegistry, RequestContext, api_name
from gateway.sasl.delegation_token_apis import DELEGATION_TOKEN_APIS
from gateway.upstream.cluster import Broker, UpstreamCluster
from gateway.upstream.forwarded_acls import SECURITY_APIS, ForwardedAcls
from gateway.upstream.group_settings_configs import enforced_settings, requested_broker_keys, rewrite_answer
from gateway.upstream.link import UpstreamLink, UpstreamUnavailable
from gateway.upstream.passthrough import ClusterAclProbes
from gateway.upstream.principal_credentials import REQUIRED_SETTING, PrincipalCredentials, UpstreamIdentity
from gateway.upstream.security import UpstreamSecurity
from gateway.upstream.topic_ids import MetadataTranslation, advertised_range, names_topics_by_id
from protocol.codec import (
    DecodeFailure,
    api_schema,
    decode,
    decode_response,
    encode_response,
    peek,
)
from protocol.framing import SIZE as _SIZE
from protocol.varint import read_uvarint

if TYPE_CHECKING:
    from gateway.server import GatewayServer

log = structlog.get_logger("upstream")

_CID = struct.Struct(">i")
_I16 = struct.Struct(">h")

API_VERSIONS, FIND_COORDINATOR, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 18, 10, 32, 44
PRODUCE, FETCH, METADATA, DESCRIBE_CLUSTER = 0, 1, 3, 60
ADD_OFFSETS_TO_TXN, TXN_OFFSET_COMMIT = 25, 28
LIST_GROUPS = 16
GROUP_RESOURCE = 32

# Answered by groupshift alone (the group APIs of the registry, TxnOffsetCommit, ApiVersions).
TERMINATED = frozenset(
    {API_VERSIONS, 8, 9, 11, 12, 13, 14, 15, 16, TXN_OFFSET_COMMIT, 42, 47, 68, 69, 88, 89, 93}
)
# Answered by groupshift or forwarded, depending on the request (group key / GROUP resource).
SPLIT = frozenset({FIND_COORDINATOR, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS})
# SaslHandshake and SaslAuthenticate: consumed by groupshift's own SASL listeners
# (gateway.sasl.gate) and answered ILLEGAL_SASL_STATE elsewhere; kept advertised, since a client
# reads their versions from ApiVersions before it authenticates. The delegation-token APIs
# (38-41) are answered by groupshift too, never advertised, as Kafka with tokens disabled
# (gateway.sasl.delegation_token_apis): in the `gateway` identity the cluster's tokens are not
# groupshift's to hand out.
SASL_APIS = frozenset({17, 36})
# passthrough: relayed to the cluster on the client's own link (its login, its tokens).
RELAYED = SASL_APIS | DELEGATION_TOKEN_APIS
SASL_HANDSHAKE = 17
# Client-facing APIs forwarded when the upstream serves them. Broker-to-broker and controller
# APIs, SASL (security is reserved), share groups and telemetry are left out (streams groups are
# terminated: a cluster before Kafka 4.2 has none, gateway.upstream.streams_topics).
FORWARDED = frozenset(
    {
        PRODUCE, FETCH, 2, METADATA, 19, 20, 21, 22, 23, 24, ADD_OFFSETS_TO_TXN, 26, 29, 30, 31, 33, 35,
        37, 43,
        45, 46, 48, 49, 50, 51, 57, DESCRIBE_CLUSTER, 61, 65, 66, 75,
    }
)  # fmt: skip
# Forwarded APIs whose responses name brokers: decoded, so capped at what kio can decode.
REWRITTEN = frozenset({PRODUCE, FETCH, METADATA, DESCRIBE_CLUSTER, FIND_COORDINATOR})
CACHED_REWRITES = frozenset({METADATA, DESCRIBE_CLUSTER})
TOPIC_CHANGES = frozenset({19, 20, 37})  # CreateTopics, DeleteTopics, CreatePartitions
LEADER_HINTS_FROM = {PRODUCE: 10, FETCH: 16}
IDLE_LINKS_PER_BROKER = 16
# Rewritten Metadata / DescribeCluster answers kept by their upstream bytes: many clients
# refreshing at once (after a leader change, say) get byte-identical answers from the upstream.
REWRITE_CACHE_SIZE = 64
DOWN_SECONDS = 10.0  # the main listener avoids a broker this long after a link to it failed

_LINKS = "upstream.links"
_NODE = "upstream.node"


def upstream_api_label(api_key: int) -> str:
    """Kafka's name of an API (`Produce`, `Fetch`) for the `api` label of the upstream metrics:
    from the lowest version kio has a schema for (some APIs start above v0)."""
    for version in range(0, 20):
        name = api_name(api_key, version)
        if name != f"Api{api_key}":
            return name
    return f"Api{api_key}"


def _kio_max(api_key: int, hi: int) -> int:
    while hi >= 0 and api_schema(api_key, hi) is None:
        hi -= 1
    return hi


def produce_acks(frame: bytes, version: int) -> int:
    """The `acks` of a Produce request frame, read without decoding the records.

    Header: key, version, correlation id, client id (int16-length string); header v2 (Produce
    v9+) adds tagged fields. Body: transactional id (nullable string; compact from v9), then
    acks (int16). These are a client's bytes: a frame that ends early raises `struct.error` or
    `IndexError`, an over-long varint `protocol.varint.OverlongVarintError` (a `ValueError`).
    """
    pos = 8
    (n,) = _I16.unpack_from(frame, pos)
    pos += 2 + max(n, 0)
    if version >= 9:
        pos = _skip_tagged(frame, pos)
        n, pos = read_uvarint(frame, pos)  # compact nullable string: length + 1, 0 = null
        pos += max(n - 1, 0)
    else:
        (n,) = _I16.unpack_from(frame, pos)
        pos += 2 + max(n, 0)
    return int(_I16.unpack_from(frame, pos)[0])


def fetch_capped(frame: bytes, version: int, max_bytes: int) -> bytes:
    """The Fetch request frame with its response `max_bytes` lowered to `max_bytes` (the client
    connection's answer budget), read and patched in place without decoding the request.

    Kafka's broker caps a Fetch answer at its `fetch.max.bytes` the same way; KIP-74's "at
    least one batch" still holds upstream. Header: key, version, correlation id, client id
    (int16-length string); header v2 (Fetch v12+) adds tagged fields. Body: replica id (before
    v15), max wait, min bytes, then max bytes (v3+). A frame too short to hold them is
    forwarded as it is (the broker answers it)."""
    if version < 3:
        return frame
    try:
        pos = 8
        (n,) = _I16.unpack_from(frame, pos)
        pos += 2 + max(n, 0)
        if version >= 12:
            pos = _skip_tagged(frame, pos)
        pos += 8 if version >= 15 else 12
        (current,) = _CID.unpack_from(frame, pos)
    except (struct.error, IndexError, ValueError):
        return frame
    if 0 <= current <= max_bytes:
        return frame
    return b"".join((frame[:pos], _CID.pack(max_bytes), frame[pos + 4 :]))


def _skip_tagged(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


# -- a client's request frame, before anything is decoded -------------------------------------------
# These read a client's bytes: they are the upstream fuzz target (`fuzz/upstream.py`).


def forwarded_request(frame: bytes) -> tuple[int, int, int] | None:
    """(api key, version, correlation id) of a client request frame that goes upstream; None
    for one groupshift answers itself (or refuses: a frame without a request header)."""
    try:
        api_key, version, cid = peek(frame)
    except DecodeFailure:
        return None
    if api_key in FORWARDED or (api_key in SPLIT and forwards_split(api_key, version, frame)):
        return api_key, version, cid
    return None


def relayed_request(frame: bytes) -> tuple[int, int, int] | None:
    """passthrough: (api key, version, correlation id) of a SASL or delegation-token request,
    which goes to the cluster; None for any other."""
    try:
        api_key, version, cid = peek(frame)
    except DecodeFailure:
        return None
    return (api_key, version, cid) if api_key in RELAYED else None


def forwards_split(api_key: int, version: int, frame: bytes) -> bool:
    """Whether a FindCoordinator / DescribeConfigs / IncrementalAlterConfigs request goes upstream:
    FindCoordinator for transactions does, config requests naming no GROUP resource do."""
    schema = api_schema(api_key, version)
    if schema is None:
        return False
    try:
        _, req = decode(schema, frame)
    except DecodeFailure:
        return False  # the dispatcher rejects it
    if api_key == FIND_COORDINATOR:
        return int(getattr(req, "key_type", 0)) == 1  # transactions live upstream
    # kio reads a -1 array length as None although `Resources` is not nullable: such a request
    # names no GROUP resource, and goes to the broker, which refuses it (found by fuzz/upstream).
    return not any(int(r.resource_type) == GROUP_RESOURCE for r in req.resources or ())


def expects_response(frame: bytes, api_key: int, version: int) -> bool:
    """Whether the upstream answers this forwarded request: all but a Produce with acks=0. A
    Produce whose header cannot be read is forwarded as expecting an answer (the broker decides
    what to do with it)."""
    if api_key != PRODUCE:
        return True
    try:
        return produce_acks(frame, version) != 0
    except (struct.error, IndexError, ValueError):  # ValueError: an over-long varint
        return True


class _Unmapped(Exception):
    """The connection's principal has no upstream credential and groupshift's own may not
    stand in for it (`upstream.identity.credentials.required=true`)."""


def _broker_id(api_key: int, broker: Any) -> int:
    """A broker entry's id: Metadata names it `node_id`, DescribeCluster `broker_id` (the Java
    admin client's describeCluster, which Kafka Streams' classic assignor calls)."""
    return int(broker.broker_id if api_key == DESCRIBE_CLUSTER else broker.node_id)


class UpstreamProxy:
    def __init__(self, server: GatewayServer, cluster: UpstreamCluster) -> None:
        self.server = server
        self.cluster = cluster
        self.registry: HandlerRegistry = server.registry
        host, port = server.config.listen_address
        self.host = host
        # What clients are told for a broker's listener: `upstream.advertised.host`, else the
        # main listener's advertised host (port-per-broker behind NAT, Docker, Kubernetes).
        self.advertised_host = cluster.config.advertised_host or server.cluster.node.host
        base = cluster.config.node_port_base
        self.port_base: int | None = base if base is not None else None
        self._main_port_configured = port
        self.listeners: dict[int, tuple[str, int]] = {}
        self._port_to_node: dict[int, int] = {}
        self._servers: dict[int, asyncio.Server] = {}
        # Idle links by (broker, credential): a link authenticated with a principal's own
        # upstream credential (`upstream.identity.credentials.file`) is only ever reused by
        # that principal; "" is groupshift's own credential.
        self._idle: dict[tuple[int, str], list[UpstreamLink]] = {}
        self.identities = PrincipalCredentials(
            cluster.security,
            cluster.config.principal_credentials(),
            required=cluster.config.identity_credentials_required,
        )
        # `upstream.identity=passthrough` (gateway.upstream.passthrough): each client connection
        # has one link of its own, TLS as configured but no login of groupshift's: the client's
        # SASL frames are relayed on it, and it is never pooled.
        self.passthrough = cluster.config.identity == "passthrough"
        own = cluster.security.client
        self._relay = UpstreamIdentity(
            "\x00relay",
            UpstreamSecurity(
                dataclasses.replace(
                    own,
                    protocol="SSL" if own.uses_tls else "PLAINTEXT",
                    sasl_mechanism=None,
                    username=None,
                    password=None,
                    tokens=None,
                )
            ),
        )
        self.probes = (
            ClusterAclProbes(
                cluster,
                cluster.config.passthrough_acl_cache_ms,
                self._relay_link,
                lambda c, f, s: self._inner(c, f, s),
            )
            if self.passthrough
            else None
        )
        self._down: dict[int, float] = {}  # node -> when a link to it last failed
        self._inner: Callable[[KafkaConnection, bytes, ResponseSlot], None] = lambda c, f, s: None
        # Scale-out (docs/scale-out.md): fleet nodes (id, host, port) added to Metadata answers.
        self.extra_brokers: Callable[[], list[tuple[int, str, int]]] = list
        # Scale-out: FindCoordinator names fleet nodes, never a broker listener, so those list
        # no group (`_lister`).
        self.broker_listeners_coordinate = True
        # (api key, version, upstream answer without its correlation id) -> rewritten frame.
        # Cleared whenever a listener is added (listeners are never removed or moved).
        # Metadata answers also list the scale-out fleet's nodes, so their key includes them.
        self._rewrite_cache: OrderedDict[tuple[int, int, bytes, tuple[tuple[int, str, int], ...]], bytes] = (
            OrderedDict()
        )
        m = server.metrics
        self._forwarded = m.counter(
            "groupshift_upstream_requests_total",
            "Requests forwarded to the upstream cluster, by API (Kafka's name and its key)",
            ("api_key", "api"),
        )
        self._unavailable = m.counter(
            "groupshift_upstream_unavailable_total",
            "Client connections closed because their upstream broker was unreachable or silent",
        )
        self._links_paused = m.counter(
            "groupshift_upstream_links_paused_total",
            "Times a link stopped reading because its client had not read its answers",
        )
        self._rewritten = m.counter(
            "groupshift_upstream_rewritten_total",
            "Forwarded responses re-encoded with groupshift's endpoints, by API (name and key)",
            ("api_key", "api"),
        )
        m.gauge("groupshift_upstream_brokers", "Upstream brokers in the last metadata").set_function(
            lambda: len(cluster.brokers)
        )
        m.gauge("groupshift_upstream_idle_links", "Pooled idle links to upstream brokers").set_function(
            lambda: sum(len(v) for v in self._idle.values())
        )
        # group coordinator settings groupshift enforces: its own in BROKER DescribeConfigs answers
        self._enforced = enforced_settings(server.config.group.model_dump(by_alias=True))
        # `api` (Kafka's name, as groupshift_requests_total has it) beside `api_key`, which
        # dashboards written before the name was there still select on.
        self._forwarded_children = {
            k: self._forwarded.labels(str(k), upstream_api_label(k)) for k in FORWARDED | SPLIT | RELAYED
        }
        self._rewritten_children = {
            k: self._rewritten.labels(str(k), upstream_api_label(k)) for k in REWRITTEN
        }
        cluster.on_brokers.append(self._on_brokers)
        server.on_connection_lost.append(self._release)
        # `upstream.identity=gateway` with an authorizer: forwarded requests are authorized with
        # groupshift's ACLs first (gateway.upstream.forwarded_acls); without one, raw frames.
        self.acls = (
            None
            if server.authorizer is None
            else ForwardedAcls(
                cluster, server.authorizer, self._forward, lambda c, f, s: self._inner(c, f, s)
            )
        )

    # -- installation --------------------------------------------------------------------------

    def install(self) -> None:
        registry = self.registry
        keep = TERMINATED | SPLIT | SASL_APIS | DELEGATION_TOKEN_APIS
        if self.acls is not None:
            keep |= SECURITY_APIS
        for key in list(registry):
            if key not in keep:
                registry.unregister(key)  # the embedded data plane's handlers
        versions = _UpstreamApiVersions(registry, self)
        registry.register(API_VERSIONS, 0, 4, versions.handle, replace=True)
        registry.register(FIND_COORDINATOR, 0, 6, self._find_coordinator, replace=True)
        listing = registry.get(LIST_GROUPS)
        if listing is not None:
            registry.register(
                LIST_GROUPS, listing.min_version, listing.max_version, self._lister(listing.fn), replace=True
            )

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Runs once the main listener is bound (its port decides the default port base)."""
        if self.port_base is None and self._main_port_configured != 0:
            self.port_base = self.server.port + 1
        self._inner = self.server.dispatcher.on_frame
        self.server.frame_handler = self.on_frame
        self.identities.start()
        if len(self.identities):
            log.info("upstream.identity_credentials", principals=self.identities.principals)

    def close(self) -> None:
        for links in self._idle.values():
            for link in links:
                link.close()
        self._idle.clear()
        self.identities.close()

    # -- listeners -----------------------------------------------------------------------------

    async def _on_brokers(self, brokers: dict[int, Broker]) -> None:
        loop = asyncio.get_running_loop()
        for node_id in sorted(brokers):
            if node_id in self.listeners:
                continue
            port = 0 if self.port_base is None else self.port_base + node_id
            if port > 65535:
                log.warning("upstream.listener_port_out_of_range", node_id=node_id, port=port)
                port = 0
            try:
                srv = await loop.create_server(
                    self.server.new_connection,
                    self.host,
                    port,
                    reuse_address=True,
                    backlog=1024,
                    ssl=self.server.ssl_context(),
                )
            except OSError as e:
                if port == 0:
                    raise
                log.warning("upstream.listener_port_taken", node_id=node_id, port=port, error=str(e))
                srv = await loop.create_server(
                    self.server.new_connection,
                    self.host,
                    0,
                    reuse_address=True,
                    backlog=1024,
                    ssl=self.server.ssl_context(),
                )
            bound = int(srv.sockets[0].getsockname()[1])
            self._servers[node_id] = srv
            self.server.extra_servers.append(srv)
            self.listeners[node_id] = (self.advertised_host, bound)
            self._rewrite_cache.clear()
            self._port_to_node[bound] = node_id
            b = brokers[node_id]
            log.info(
                "upstream.listening", node_id=node_id, host=self.host, port=bound, broker=f"{b.host}:{b.port}"
            )

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        return self.listeners.get(node_id)

    # -- the frame path ------------------------------------------------------------------------

    def on_frame(self, conn: KafkaConnection, frame: bytes, slot: ResponseSlot) -> None:
        route = forwarded_request(frame)
        if self.probes is not None:  # passthrough
            if route is None:
                route = relayed_request(frame)
            if route is None:
                self.probes.on_frame(conn, frame, slot)  # the cluster's ACLs, then groupshift
            else:
                self._forward(conn, frame, slot, *route)
            return
        if route is None:
            self._inner(conn, frame, slot)
        elif self.acls is not None:
            self.acls.forward(conn, frame, slot, *route)
        else:
            self._forward(conn, frame, slot, *route)

    def _forward(
        self, conn: KafkaConnection, frame: bytes, slot: ResponseSlot, api_key: int, version: int, cid: int
    ) -> None:
        if not self.cluster.ready.is_set():
            task = asyncio.ensure_future(self._forward_when_ready(conn, frame, slot, api_key, version, cid))
            slot.task = task
            return
        ranges = self.cluster.api_versions.get(api_key)
        translation = None  # a cluster without topic ids: Metadata at its version, with ids
        if api_key == METADATA and ranges is not None and self.cluster.topic_ids_missing:
            image = self.cluster.image
            translated = MetadataTranslation.of_request(
                frame, version, ranges[1], lambda tid: getattr(image.topic_by_id(tid), "name", None)
            )
            if translated is not None:
                frame, translation = translated
                if translation.unknown_ids:
                    self.cluster.request_refresh()  # a topic created since the last refresh?
        sent = version if translation is None else translation.upstream_version
        if (
            ranges is None
            or not ranges[0] <= sent <= ranges[1]
            or (self.cluster.topic_ids_missing and names_topics_by_id(api_key, version))
            or (api_key in REWRITTEN and api_schema(api_key, version) is None)
        ):
            log.warning(
                "request.rejected",
                connection_id=conn.connection_id,
                reason="api.version_unsupported",
                api_key=api_key,
                api_version=version,
            )
            conn.close("api.version_unsupported", api_key=api_key, api_version=version)
            return
        node = self._node_for(conn)
        if node is None:
            self._unavailable.inc()
            conn.close("upstream.unavailable", error="no upstream broker is known")
            return
        expect = expects_response(frame, api_key, version)
        self._forwarded_children[api_key].inc()
        own = requested_broker_keys(frame, version, self._enforced) if api_key == DESCRIBE_CONFIGS else None

        budget = conn.response_budget
        if api_key == FETCH:
            frame = fetch_capped(frame, version, budget.limit)

        def answered(result: bytes | UpstreamUnavailable) -> None:
            if own is not None and not isinstance(result, UpstreamUnavailable):
                entry_of = self.server.plane.configs.broker_entry
                result = rewrite_answer(result, version, own, self._enforced, lambda n: entry_of(n, True))
            self._answered(conn, slot, api_key, version, cid, node, result, translation)
            # The client has the budget's worth unread: the answers behind wait in the broker.
            if budget.exhausted() and not conn.closing and not link.read_paused:
                link.pause_reading()
                self._links_paused.inc()
                budget.when_drained(link.resume_reading)

        try:
            link = self._lease(conn, node)  # `answered` runs later, on this link's answer
            link.forward(frame, answered if expect else None)
        except _Unmapped:
            log.warning(
                "upstream.identity_unmapped",
                connection_id=conn.connection_id,
                principal=conn.ctx.principal,
                setting=REQUIRED_SETTING,
            )
            conn.close("upstream.identity_unmapped", principal=conn.ctx.principal)
            return
        except UpstreamUnavailable as e:  # a listener of a broker that left the cluster
            self._down[node] = time.monotonic()
            self._unavailable.inc()
            conn.close("upstream.unavailable", node_id=node, error=str(e))
            return
        if not expect:
            slot.complete(None)

    async def _forward_when_ready(
        self, conn: KafkaConnection, frame: bytes, slot: ResponseSlot, api_key: int, version: int, cid: int
    ) -> None:
        try:
            await asyncio.wait_for(self.cluster.ready.wait(), self.cluster.request_timeout)
        except TimeoutError:
            self._unavailable.inc()
            conn.close("upstream.unavailable", error="upstream cluster not reachable yet")
            return
        self._forward(conn, frame, slot, api_key, version, cid)

    def _node_for(self, conn: KafkaConnection) -> int | None:
        node = self._port_to_node.get(conn.ctx.listener[1])
        if node is not None:
            return node
        attrs = conn.ctx.attributes
        node = attrs.get(_NODE)
        if self.passthrough and node is not None and node not in self.cluster.brokers:
            return None  # its link was the client's login there: it cannot move to another broker
        if node is None or node not in self.cluster.brokers:
            if not self.cluster.brokers:
                return None
            # Prefer brokers whose links did not fail lately: a dead broker stays in the
            # cluster's metadata until its session times out.
            now = time.monotonic()
            healthy = [
                n for n in self.cluster.brokers if now - self._down.get(n, -DOWN_SECONDS) >= DOWN_SECONDS
            ]
            node = attrs[_NODE] = random.choice(sorted(healthy or self.cluster.brokers))
        return int(node)

    def _lease(self, conn: KafkaConnection, node: int) -> UpstreamLink:
        """The client connection's link to `node`, authenticated with the credential of the
        connection's principal: its own, else a pooled idle one of the same credential, else a
        new one."""
        identity = self._relay if self.passthrough else self.identities.identity_of(conn.ctx.principal)
        if identity is None:
            raise _Unmapped(conn.ctx.principal)
        key = (node, identity.key)
        links: dict[tuple[int, str], UpstreamLink] | None = conn.ctx.attributes.get(_LINKS)
        if links is None:
            links = conn.ctx.attributes[_LINKS] = {}
        link = links.get(key)
        if link is not None and not link.closed:
            return link
        idle = self._idle.get(key)
        while idle:
            candidate = idle.pop()
            if not candidate.closed:
                links[key] = candidate
                return candidate
        b = self.cluster.brokers.get(node)
        if b is None:
            # A listener of a broker that left the cluster: nothing to reach.
            raise UpstreamUnavailable(f"broker {node} is not in the upstream metadata")
        link = UpstreamLink(
            node,
            b.host,
            b.port,
            connect_timeout=self.cluster.connect_timeout,
            request_timeout=self.cluster.request_timeout,
            security=identity.security,
        )
        links[key] = link
        return link

    def _relay_link(self, conn: KafkaConnection) -> UpstreamLink:
        """passthrough: the connection's own link (its broker's), for the ACL probes."""
        node = self._node_for(conn)
        if node is None:
            raise UpstreamUnavailable("no upstream broker is known")
        return self._lease(conn, node)

    def _release(self, conn: KafkaConnection) -> None:
        links: dict[tuple[int, str], UpstreamLink] | None = conn.ctx.attributes.pop(_LINKS, None)
        if not links:
            return
        for key, link in links.items():
            node = key[0]
            idle = self._idle.setdefault(key, [])
            if (
                self.passthrough  # the link is the client's login: never anyone else's
                or link.closed
                or link.in_flight
                or len(idle) >= IDLE_LINKS_PER_BROKER
                or node not in self.cluster.brokers
            ):
                link.close()
            else:
                idle.append(link)

    def _answered(
        self,
        conn: KafkaConnection,
        slot: ResponseSlot,
        api_key: int,
        version: int,
        cid: int,
        node: int,
        result: bytes | UpstreamUnavailable,
        translation: MetadataTranslation | None = None,
    ) -> None:
        """Called by the link, in the same event-loop step that read the response."""
        if slot.done or conn.closing:
            return  # the client went away (its links were closed with it): nothing to answer
        if isinstance(result, UpstreamUnavailable):
            self._down[node] = time.monotonic()
            self._unavailable.inc()
            conn.close("upstream.unavailable", node_id=node, error=str(result))
            return
        raw = result
        if api_key in TOPIC_CHANGES:
            self.cluster.request_refresh()  # the assignors should see the change promptly
        if api_key in REWRITTEN:
            try:
                rewritten = self._rewrite(api_key, version, cid, raw, translation)
            except Exception as e:
                log.error(
                    "upstream.rewrite_failed", api_key=api_key, api_version=version, error=repr(e), exc_info=e
                )
                conn.close("upstream.rewrite_failed", api_key=api_key)
                return
            if isinstance(rewritten, asyncio.Future):
                slot.task = rewritten
                rewritten.add_done_callback(
                    lambda f: None if f.cancelled() or f.exception() else slot.complete(f.result())
                )
                return
            if rewritten is not None:
                slot.complete(rewritten)
                return
        with memoryview(raw) as view:  # no copy of a large answer (Fetch) before the join
            slot.complete(b"".join((_SIZE.pack(len(raw)), _CID.pack(cid), view[4:])))

    # -- rewriting -----------------------------------------------------------------------------

    def _rewrite(
        self, api_key: int, version: int, cid: int, raw: bytes, translation: MetadataTranslation | None = None
    ) -> bytes | asyncio.Future[bytes] | None:
        """The response frame with groupshift's endpoints; None to pass `raw` on unchanged."""
        if api_key in LEADER_HINTS_FROM and version < LEADER_HINTS_FROM[api_key]:
            return None
        # An answer naming ids the client asked for and groupshift does not know is not the
        # upstream bytes' only answer: not cached.
        cacheable = api_key in CACHED_REWRITES and (translation is None or not translation.unknown_ids)
        if cacheable:
            fleet = tuple(self.extra_brokers()) if api_key == METADATA else ()
            key = (api_key, version, raw[4:], fleet)
            hit = self._rewrite_cache.get(key)
            if hit is not None:
                # Same upstream bytes as an answer already rewritten (and already noticed).
                self._rewrite_cache.move_to_end(key)
                self._rewritten_children[api_key].inc()
                return b"".join((hit[:4], _CID.pack(cid), hit[8:]))
        schema = api_schema(api_key, version)
        assert schema is not None
        if translation is not None:
            body = translation.response(raw, self.cluster.cluster_id)
        else:
            _, body = decode_response(schema.response_type, raw)
        if api_key in LEADER_HINTS_FROM:
            if not body.node_endpoints:
                return None
            nodes = [int(e.node_id) for e in body.node_endpoints]
        elif api_key == FIND_COORDINATOR:
            if hasattr(body, "coordinators"):
                nodes = [int(c.node_id) for c in body.coordinators if c.node_id >= 0]
            else:
                nodes = [int(body.node_id)] if body.node_id >= 0 else []
        else:
            nodes = [_broker_id(api_key, b) for b in body.brokers]
            if api_key == METADATA:
                self._notice_metadata(body)
        missing = [n for n in nodes if n not in self.listeners]
        if missing:
            return asyncio.ensure_future(self._rewrite_later(schema, api_key, cid, body))
        self._rewritten_children[api_key].inc()
        frame = encode_response(schema, cid, self._replace(api_key, body))
        if cacheable:
            self._rewrite_cache[key] = frame
            if len(self._rewrite_cache) > REWRITE_CACHE_SIZE:
                self._rewrite_cache.popitem(last=False)
        return frame

    async def _rewrite_later(self, schema: Any, api_key: int, cid: int, body: Any) -> bytes:
        # A broker groupshift has not seen yet: learn it (opening its listener) first.
        self.cluster.request_refresh()
        for _ in range(50):
            await asyncio.sleep(0.1)
            if self._all_known(api_key, body):
                break
        self._rewritten.labels(str(api_key), upstream_api_label(api_key)).inc()
        return encode_response(schema, cid, self._replace(api_key, body))

    def _all_known(self, api_key: int, body: Any) -> bool:
        try:
            self._replace(api_key, body, strict=True)
        except KeyError:
            return False
        return True

    def _endpoint_fields(self, node_id: int, strict: bool) -> dict[str, Any]:
        ep = self.listeners.get(node_id)
        if ep is None:
            if strict:
                raise KeyError(node_id)
            return {}
        return {"host": ep[0], "port": ep[1]}

    def _replace(self, api_key: int, body: Any, strict: bool = False) -> Any:
        rep = dataclasses.replace
        if api_key in LEADER_HINTS_FROM:
            endpoints = tuple(
                rep(e, **self._endpoint_fields(int(e.node_id), strict)) for e in body.node_endpoints
            )
            return rep(body, node_endpoints=endpoints)
        if api_key == FIND_COORDINATOR:
            if hasattr(body, "coordinators"):
                return rep(
                    body,
                    coordinators=tuple(
                        rep(c, **self._endpoint_fields(int(c.node_id), strict)) if c.node_id >= 0 else c
                        for c in body.coordinators
                    ),
                )
            if body.node_id < 0:
                return body
            return rep(body, **self._endpoint_fields(int(body.node_id), strict))
        brokers = tuple(rep(b, **self._endpoint_fields(_broker_id(api_key, b), strict)) for b in body.brokers)
        if api_key == METADATA and brokers:
            known = {int(b.node_id) for b in brokers}
            extra = tuple(
                rep(brokers[0], node_id=n, host=h, port=p, rack=None)
                for n, h, p in self.extra_brokers()
                if n not in known
            )
            brokers += extra
        return rep(body, brokers=brokers)

    def _notice_metadata(self, body: Any) -> None:
        """A forwarded Metadata answer shows a broker or topic change before the next refresh."""
        if {int(b.node_id) for b in body.brokers} != set(self.cluster.brokers):
            self.cluster.request_refresh()
            return
        for t in body.topics:
            known = t.error_code != 0 or t.is_internal or t.name is None
            if not known and not self.cluster.knows_topic(t.name, len(t.partitions)):
                self.cluster.request_refresh()
                return

    # -- terminated handlers -------------------------------------------------------------------

    def _coordinator_for(self, key: str) -> tuple[int, str, int] | None:
        """The broker listener clients reach a group through: spread by the key's hash like
        Kafka spreads groups over coordinators; any listener serves every group."""
        nodes = sorted(n for n in self.cluster.brokers if n in self.listeners)
        if not nodes:
            return None
        node = nodes[zlib.crc32(key.encode()) % len(nodes)]
        host, port = self.listeners[node]
        return node, host, port

    def _lister(self, list_all: Handler) -> Handler:
        """ListGroups as a Kafka broker answers it: a broker lists the groups it coordinates, and
        admin clients ask every broker and put the answers together (kafka-python concatenates
        them, so a group listed by every listener would be listed once per broker). A broker
        listener lists the groups FindCoordinator sends to it; the main listener, which is no
        broker of the metadata, lists them all.

        Scale-out (docs/scale-out.md): FindCoordinator sends every group to the fleet node that
        owns its shard, and the fleet nodes are brokers of the metadata too (their main
        listeners), so a broker listener lists nothing: otherwise an admin client would see each
        of the node's groups twice, from its main listener and from one of its broker
        listeners."""

        def handle(ctx: RequestContext, header: Any, request: Any) -> Any:
            response = list_all(ctx, header, request)
            node = self._port_to_node.get(ctx.listener[1])
            if node is None or response.error_code != 0:
                return response
            if not self.broker_listeners_coordinate:
                return dataclasses.replace(response, groups=())
            mine = []
            for g in response.groups:
                found = self._coordinator_for(g.group_id)
                if found is None or found[0] == node:
                    mine.append(g)
            return dataclasses.replace(response, groups=tuple(mine))

        return handle

    def _find_coordinator(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        key_type = int(getattr(request, "key_type", 0))

        def lookup(key: str) -> dict[str, Any]:
            if key_type != 0:
                return {
                    "error_code": ErrorCode.invalid_request,
                    "error_message": f"coordinator key type {key_type} is not supported",
                    **NO_NODE,
                }
            found = self._coordinator_for(key)
            if found is None:
                return {
                    "error_code": ErrorCode.coordinator_not_available,
                    "error_message": "the upstream cluster is not reachable yet",
                    **NO_NODE,
                }
            node, host, port = found
            return {
                "error_code": ErrorCode.none,
                "error_message": None,
                "node_id": node,
                "host": host,
                "port": port,
            }

        return find_coordinator_response(request, lookup)

    def advertised(self) -> list[tuple[int, int, int]]:
        ours = {k: (lo, hi) for k, lo, hi in self.registry.advertised()}
        upstream = self.cluster.api_versions
        out: dict[int, tuple[int, int]] = {}
        for key, (lo, hi) in ours.items():
            if key in SPLIT:
                if key not in upstream:
                    continue
                ulo, uhi = upstream[key]
                lo, hi = max(lo, ulo), min(hi, uhi)
                if lo > hi:
                    continue
            out[key] = (lo, hi)
        acls = self.acls
        for key in FORWARDED:
            if key not in upstream or (acls is not None and (key in SECURITY_APIS or not acls.checked(key))):
                continue
            lo, hi = upstream[key]
            if key in REWRITTEN or acls is not None:  # decoded: to rewrite, or to authorize
                hi = _kio_max(key, hi)
            if self.cluster.topic_ids_missing:  # gateway.upstream.topic_ids
                if key == METADATA:
                    hi = _kio_max(key, 99)  # translated to the upstream's version, ids added
                else:
                    capped = advertised_range(key, lo, hi)
                    if capped is None:
                        continue
                    lo, hi = capped
            if lo <= hi:
                out[key] = (lo, hi)
        if self.passthrough:  # the login and the tokens are the cluster's
            for key in RELAYED:
                out.pop(key, None)
                if key in upstream:
                    lo, hi = upstream[key]
                    lo = max(lo, 1) if key == SASL_HANDSHAKE else lo  # v0's raw tokens: not relayed
                    if lo <= hi:
                        out[key] = (lo, hi)
        return [(k, lo, hi) for k, (lo, hi) in sorted(out.items())]


class _UpstreamApiVersions(ApiVersionsApi):
    """ApiVersions over the union of terminated and forwarded APIs (see the module docstring)."""

    def __init__(self, registry: HandlerRegistry, proxy: UpstreamProxy) -> None:
        super().__init__(registry)
        self.proxy = proxy

    def _api_keys(self) -> list[dict[str, int]]:
        return [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in self.proxy.advertised()]

    async def handle(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        """Waits for the first upstream metadata; while the cluster cannot be reached at all the
        connection is closed (as a broker that is not up yet would refuse it) rather than
        answered with group APIs only, which clients would take as "no Produce, no Fetch"."""
        try:
            await asyncio.wait_for(self.proxy.cluster.ready.wait(), self.proxy.cluster.request_timeout)
        except TimeoutError:
            raise CloseConnection("upstream.unavailable", error="upstream cluster not reachable") from None
        return super().handle(ctx, header, request)
