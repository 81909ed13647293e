"""Upstream mode's `passthrough` identity (issue 29, point 2): the cluster authenticates each
client and its ACLs decide, also for the group and offset APIs groupshift answers itself.

The client's SaslHandshake / SaslAuthenticate frames go to the cluster on the client
connection's own link (gateway.upstream.proxy), so the cluster sees the client's principal on
its data plane. For the APIs groupshift terminates, Kafka's rule for each (the `CHECKS` table of
gateway.authorizer.checks, the one groupshift's own authorizer uses) runs with an authorizer
whose answers are the cluster's: each (operation, resource) the rule asks is proved by a probe
on that same authenticated link and cached per connection for
`upstream.identity.passthrough.acl.cache.ms`. Kafka's `KafkaApis` authorizes before it routes
to a coordinator or a leader, so a probe works on any broker and is read as "authorization
failed, or anything else" (docs/security.md has the table):

* READ on a GROUP: Heartbeat with generation -1 and a made-up member id (no group is created
  or changed: an unknown member is UNKNOWN_MEMBER_ID);
* DESCRIBE on a GROUP: DescribeGroups;
* READ on a TOPIC: a sessionless Fetch (session id 0, epoch -1: no fetch session is created)
  of partition 0, max wait 0, max bytes 1;
* DESCRIBE on a TOPIC: Metadata of the topic without auto-creation;
* DESCRIBE on the CLUSTER: DescribeCluster's cluster-authorized operations;
* DESCRIBE_CONFIGS / ALTER_CONFIGS on a GROUP: DescribeConfigs / IncrementalAlterConfigs with
  `validate_only`;
* DELETE on a GROUP (DeleteGroups, OffsetDelete): OffsetDelete of the group with no partitions
  (authorized before the coordinator, which then deletes nothing);
* CREATE on a TOPIC (a streams group's missing internal topic, StreamsGroupHeartbeat):
  CreateTopics of that topic with `validate_only`;
* WRITE on a TRANSACTIONAL_ID (TxnOffsetCommit): TxnOffsetCommit of that transactional id for a
  made-up group and a partition of a made-up topic (the transactional id is checked first; the
  group, the topic and its existence then answer the partition before any coordinator);
* anything else: no request proves it without an effect, so it is allowed only to a principal
  the cluster allows every CLUSTER operation (a super user, or ALL on the cluster).

Once proved, groupshift does the work itself with its own credential (the shadow group's
TxnOffsetCommit and deletion, gateway/upstream/transactions.py), as it answers the other group
APIs: the client's principal needs no ACL on groupshift's shadow groups.

How a request is handled: a dry run of its rule (every question answered "yes" and recorded,
the handler not called) names what the request needs; what is not cached is probed; then the
request is handled with the cached answers. Rules that filter a handler's answer (OffsetFetch
of all topics, ListGroups, the Describe APIs) ask about names the dry run cannot know: such an
API changes nothing, so when its real run asked something unknown, that is probed and the
request handled again (at most `MAX_ROUNDS` times). A question a write API's real run asks that
its dry run did not (a regex subscription's topics, resolved by the engine) is answered "no"
for now and probed in the background, so the next heartbeat sees the answer.

A cluster without an authorizer allows every probe, so every authenticated client may use every
group, as on that cluster. A probe that cannot be answered (the link failed) closes the client
connection, as a failed forwarded request does.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import structlog
from kio.index import load_request_schema, load_response_schema

from gateway.authorizer.checks import CHECKS, Guard
from gateway.authorizer.model import AclOperation as Op
from gateway.authorizer.model import ResourceType as R
from gateway.connection import CapturingSlot, KafkaConnection, ResponseSlot
from gateway.registry import RequestContext
from gateway.upstream.forwarded_acls import UpstreamTopics
from gateway.upstream.link import UpstreamLink, UpstreamUnavailable
from protocol.codec import DecodeFailure, api_schema, decode, decode_response, encode_request, peek
from protocol.entity_builder import build

if TYPE_CHECKING:
    from gateway.upstream.cluster import UpstreamCluster

log = structlog.get_logger("upstream")

Key = tuple[int, int, str]  # (operation, resource type, name)
CACHE = "upstream.passthrough.acls"  # ctx.attributes: Key -> (allowed, expires at)
MISSES = "upstream.passthrough.misses"  # ctx.attributes: Keys asked with no answer cached
CLUSTER_NAME = "kafka-cluster"
MAX_ROUNDS = 3
CACHE_MAX = 4096  # answers kept per client connection (docs/security.md)
GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED = 30, 29
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
# Read-only terminated APIs: handled again when their real run asked something new.
READ_ONLY = frozenset({9, 10, 15, 16, 69, 32})
# The CLUSTER operations whose union stands for "allowed everything" (a super user).
ALL_CLUSTER_OPS = (
    Op.ALTER, Op.ALTER_CONFIGS, Op.CLUSTER_ACTION, Op.CREATE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS,
    Op.IDEMPOTENT_WRITE,
)  # fmt: skip
SUPER = (int(Op.ALL), int(R.CLUSTER), CLUSTER_NAME)  # the cached "every CLUSTER operation" answer
PROBE_MEMBER = "groupshift-acl-probe-" + uuid.uuid4().hex
# Names no cluster holds: the transactional-id probe's group and topic (a legal topic name).
PROBE_GROUP = PROBE_MEMBER
PROBE_TOPIC = "__groupshift-acl-probe-" + uuid.uuid4().hex


class _Recorder:
    """The dry run's authorizer: says yes, remembers the question."""

    def __init__(self) -> None:
        self.asked: set[Key] = set()

    def authorize(
        self,
        ctx: RequestContext,
        operation: Op,
        resource_type: R,
        name: str,
        *,
        api: str = "",
        log_if_denied: bool = True,
    ) -> bool:
        self.asked.add((int(operation), int(resource_type), name))
        return True

    def authorized_operations(self, ctx: RequestContext, resource_type: R, name: str) -> int:
        return 0


class ClusterAclAuthorizer:
    """The checks' authorizer in passthrough: the cluster's answers cached on the connection."""

    def authorize(
        self,
        ctx: RequestContext,
        operation: Op,
        resource_type: R,
        name: str,
        *,
        api: str = "",
        log_if_denied: bool = True,
    ) -> bool:
        key = (int(operation), int(resource_type), name)
        cache: dict[Key, tuple[bool, float]] = ctx.attributes.setdefault(CACHE, {})
        found = cache.get(key)
        if found is not None and found[1] > time.monotonic():
            return found[0]
        ctx.attributes.setdefault(MISSES, set()).add(key)
        return False

    def authorized_operations(self, ctx: RequestContext, resource_type: R, name: str) -> int:
        """KIP-430's bits: the operations already proved on the resource (probes are not sent
        for a bit field alone)."""
        now = time.monotonic()
        bits = 0
        for (op, rtype, rname), (allowed, expires) in ctx.attributes.get(CACHE, {}).items():
            if rtype == int(resource_type) and rname == name and allowed and expires > now:
                bits |= 1 << op
        return bits


def _request(api_key: int, version: int, body: dict[str, Any]) -> bytes:
    req = build(load_request_schema(api_key, version), body)
    return encode_request(req, correlation_id=0, client_id="groupshift-acl-probe")[4:]


def _response(api_key: int, version: int, frame: bytes) -> Any:
    return decode_response(load_response_schema(api_key, version), frame)[1]


class ClusterAclProbes:
    """Proves (operation, resource) pairs with requests on a client's own upstream link."""

    def __init__(
        self,
        cluster: UpstreamCluster,
        ttl_ms: int,
        link_of: Callable[[KafkaConnection], UpstreamLink],
        inner: Callable[[KafkaConnection, bytes, ResponseSlot], None],
    ) -> None:
        self.cluster = cluster
        self.ttl = ttl_ms / 1000
        self.link_of = link_of
        self.inner = inner
        self.authorizer = ClusterAclAuthorizer()
        self.topics = UpstreamTopics(cluster)
        self._dry = Guard(_Recorder(), self.topics)  # type: ignore[arg-type]
        self.probes = 0
        self._background_tasks: set[asyncio.Future[bool]] = set()

    # -- the terminated path -----------------------------------------------------------------

    def on_frame(self, conn: KafkaConnection, frame: bytes, slot: ResponseSlot) -> None:
        """A frame groupshift answers itself: prove what its rule asks, then hand it on."""
        try:
            api_key, version, _ = peek(frame)
        except DecodeFailure:
            self.inner(conn, frame, slot)
            return
        entry = CHECKS.get(api_key)
        schema = api_schema(api_key, version)
        if entry is None or schema is None:
            self.inner(conn, frame, slot)  # ApiVersions, or refused by the dispatcher
            return
        try:
            _, request = decode(schema, frame)
        except DecodeFailure:
            self.inner(conn, frame, slot)  # the dispatcher answers it as Kafka does
            return
        recorder = self._dry.authorizer
        assert isinstance(recorder, _Recorder)
        recorder.asked.clear()
        never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        # On a copy of the context: a rule may leave state there (the regex topic filter),
        # which must be the real authorizer's, not the dry run's.
        dry_ctx = dataclasses.replace(conn.ctx, attributes=dict(conn.ctx.attributes))
        # A rule that needs a real answer to go on raises here: the real run asks again.
        with contextlib.suppress(Exception):
            entry[1](self._dry, dry_ctx, request, lambda r: never)
        needs = set(recorder.asked)
        missing = self._missing(conn.ctx, needs)
        if not missing:
            self._handle(conn, frame, slot, api_key, 1)
            return
        slot.task = asyncio.ensure_future(self._prove_then_handle(conn, frame, slot, api_key, missing))

    async def _prove_then_handle(
        self, conn: KafkaConnection, frame: bytes, slot: ResponseSlot, api_key: int, keys: set[Key]
    ) -> None:
        if not await self.prove(conn, keys):
            return
        self._handle(conn, frame, slot, api_key, 1)

    def _handle(
        self, conn: KafkaConnection, frame: bytes, slot: ResponseSlot, api_key: int, round_: int
    ) -> None:
        self._background(conn)  # questions asked since the last request (an async handler's)
        if api_key not in READ_ONLY or round_ >= MAX_ROUNDS:
            self.inner(conn, frame, slot)
            self._background(conn)
            return

        def answered(data: bytes | None) -> None:
            misses: set[Key] = conn.ctx.attributes.pop(MISSES, set())
            if not misses or conn.closing:
                slot.complete(data)
                return

            async def again() -> None:
                if await self.prove(conn, misses):
                    self._handle(conn, frame, slot, api_key, round_ + 1)

            slot.task = asyncio.ensure_future(again())

        self.inner(conn, frame, CapturingSlot(conn, answered))

    def _background(self, conn: KafkaConnection) -> None:
        """Questions asked outside a request's dry run (a regex subscription's topics): proved
        for next time."""
        misses: set[Key] = conn.ctx.attributes.pop(MISSES, set())
        if misses and not conn.closing:
            task = asyncio.ensure_future(self.prove(conn, misses))
            self._background_tasks.add(task)
            task.add_done_callback(self._background_tasks.discard)

    def _missing(self, ctx: RequestContext, keys: Iterable[Key]) -> set[Key]:
        cache: dict[Key, tuple[bool, float]] = ctx.attributes.get(CACHE, {})
        now = time.monotonic()
        return {k for k in keys if k not in cache or cache[k][1] <= now}

    # -- probes ------------------------------------------------------------------------------

    async def prove(self, conn: KafkaConnection, keys: set[Key]) -> bool:
        """Probe `keys` on the connection's link and cache the answers; False (the connection
        closed) when the link cannot answer."""
        try:
            link = self.link_of(conn)
            results = await asyncio.gather(*(self._probe(link, k) for k in sorted(keys)))
        except (TimeoutError, UpstreamUnavailable) as e:
            conn.close("upstream.unavailable", error=f"ACL probe failed: {e}")
            return False
        except Exception as e:  # an answer not in Kafka's shape: nothing is allowed on it
            log.warning("upstream.acl_probe_failed", connection_id=conn.connection_id, error=repr(e))
            conn.close("upstream.acl_probe_failed")
            return False
        expires = time.monotonic() + self.ttl
        cache: dict[Key, tuple[bool, float]] = conn.ctx.attributes.setdefault(CACHE, {})
        for key, allowed in zip(sorted(keys), results, strict=True):
            cache.pop(key, None)  # re-inserted last: the dict's order is the answers' age
            cache[key] = (allowed, expires)
        if len(cache) > CACHE_MAX:  # expired answers go first, then the oldest
            now = time.monotonic()
            for k in [k for k, (_, at) in cache.items() if at <= now]:
                del cache[k]
            for k in list(cache)[: max(0, len(cache) - CACHE_MAX)]:
                del cache[k]
        return True

    def _version(self, api_key: int, want: int) -> int:
        lo, hi = self.cluster.api_versions.get(api_key, (want, want))
        version = min(hi, want)
        if version < lo:
            raise UpstreamUnavailable(f"the cluster serves API {api_key} only from v{lo}")
        return version

    async def _call(self, link: UpstreamLink, api_key: int, want: int, body: dict[str, Any]) -> Any:
        version = self._version(api_key, want)
        self.probes += 1
        frame = await link.request(_request(api_key, version, body))
        return _response(api_key, version, frame)

    async def _probe(self, link: UpstreamLink, key: Key) -> bool:
        op, rtype, name = key
        if rtype == R.GROUP and op == Op.READ:
            body = {
                "group_id": name,
                "generation_id": -1,
                "member_id": PROBE_MEMBER,
                "group_instance_id": None,
            }
            r = await self._call(link, 12, 4, body)
            return int(r.error_code) != GROUP_AUTHORIZATION_FAILED
        if rtype == R.GROUP and op == Op.DESCRIBE:
            r = await self._call(link, 15, 5, {"groups": [name], "include_authorized_operations": False})
            return all(int(g.error_code) != GROUP_AUTHORIZATION_FAILED for g in r.groups)
        if rtype == R.TOPIC and op == Op.READ:
            return await self._probe_fetch(link, name)
        if rtype == R.TOPIC and op == Op.DESCRIBE:
            r = await self._call(
                link,
                3,
                12,
                {
                    "topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False,
                },
            )
            return all(int(t.error_code) != TOPIC_AUTHORIZATION_FAILED for t in r.topics)
        if rtype == R.CLUSTER:
            bits = await self._cluster_ops(link)
            wanted = ALL_CLUSTER_OPS if op == Op.ALL else (Op(op),)
            return all(bits & (1 << int(o)) for o in wanted)
        if rtype == R.GROUP and op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
            resource = {"resource_type": 32, "resource_name": name}
            if op == Op.DESCRIBE_CONFIGS:
                r = await self._call(
                    link,
                    32,
                    4,
                    {
                        "resources": [{**resource, "configuration_keys": []}],
                        "include_synonyms": False,
                        "include_documentation": False,
                    },
                )
                return all(int(x.error_code) != GROUP_AUTHORIZATION_FAILED for x in r.results)
            r = await self._call(
                link, 44, 1, {"resources": [{**resource, "configs": []}], "validate_only": True}
            )
            return all(int(x.error_code) != GROUP_AUTHORIZATION_FAILED for x in r.responses)
        if rtype == R.GROUP and op == Op.DELETE:
            # OffsetDelete of no partition: DELETE on the group is checked first; when allowed,
            # the coordinator deletes nothing (or knows no such group, or is elsewhere).
            r = await self._call(link, 47, 0, {"group_id": name, "topics": []})
            return int(r.error_code) != GROUP_AUTHORIZATION_FAILED
        if rtype == R.TRANSACTIONAL_ID and op == Op.WRITE:
            return await self._probe_txn_write(link, name)
        if rtype == R.TOPIC and op == Op.CREATE:
            # CreateTopics with validate_only: Kafka filters the topics the principal may not
            # create (CREATE on the CLUSTER or the TOPIC) before anything is validated, and a
            # validated topic is not created.
            r = await self._call(
                link,
                19,
                5,
                {
                    "topics": [
                        {
                            "name": name,
                            "num_partitions": 1,
                            "replication_factor": -1,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    "timeout": int(self.cluster.request_timeout * 1000),
                    "validate_only": True,
                },
            )
            return all(int(t.error_code) != TOPIC_AUTHORIZATION_FAILED for t in r.topics)
        # Anything else: no probe without an effect proves it; a principal allowed every
        # CLUSTER operation is allowed it.
        bits = await self._cluster_ops(link)
        return all(bits & (1 << int(o)) for o in ALL_CLUSTER_OPS)

    async def _probe_txn_write(self, link: UpstreamLink, name: str) -> bool:
        """WRITE on transactional id `name`: a TxnOffsetCommit of it for a made-up group and
        one partition of a made-up topic. Kafka checks WRITE on the transactional id first
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition); past it, READ on the group,
        READ on the topic and the topic's existence each answer the partition before the
        coordinator, so nothing is committed and no transaction is touched."""
        body = {
            "transactional_id": name,
            "group_id": PROBE_GROUP,
            "producer_id": -1,
            "producer_epoch": -1,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": PROBE_TOPIC, "partitions": [_TXN_PARTITION]}],
        }
        r = await self._call(link, 28, 3, body)
        return all(
            int(p.error_code) != TRANSACTIONAL_ID_AUTHORIZATION_FAILED for t in r.topics for p in t.partitions
        )

    async def _cluster_ops(self, link: UpstreamLink) -> int:
        r = await self._call(link, 60, 0, {"include_cluster_authorized_operations": True})
        return int(r.cluster_authorized_operations)

    async def _probe_fetch(self, link: UpstreamLink, name: str) -> bool:
        version = self._version(1, 12)
        topic: dict[str, Any] = {"partitions": [_FETCH_PARTITION]}
        if version >= 13:  # topics by id: groupshift's metadata knows it
            found = self.cluster.image.topic(name)
            if found is None:
                return False  # not in the metadata: nothing to fetch, nothing allowed
            topic["topic_id"] = found.topic_id
        else:
            topic["topic"] = name
        body = {
            "cluster_id": None,
            "replica_id": -1,
            "replica_state": {"replica_id": -1, "replica_epoch": -1},
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [topic],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        self.probes += 1
        frame = await link.request(_request(1, version, body))
        r = _response(1, version, frame)
        if int(r.error_code) == TOPIC_AUTHORIZATION_FAILED:
            return False
        return all(int(p.error_code) != TOPIC_AUTHORIZATION_FAILED for t in r.responses for p in t.partitions)


_TXN_PARTITION = {
    "partition_index": 0,
    "committed_offset": 0,
    "committed_leader_epoch": -1,
    "committed_metadata": None,
}
_FETCH_PARTITION = {
    "partition": 0,
    "current_leader_epoch": -1,
    "fetch_offset": 0,
    "last_fetched_epoch": -1,
    "log_start_offset": -1,
    "partition_max_bytes": 1,
}
