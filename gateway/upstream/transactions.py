"""Transactional offset commits in upstream mode (KIP-98 `sendOffsetsToTransaction`, KIP-447
fencing by group metadata; docs/transactions.md).

The producer's transaction lives in the cluster: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, Produce and EndTxn are forwarded, so the cluster's transaction coordinator adds
the `__consumer_offsets` partition of the group (AddOffsetsToTxn) to the transaction and writes
its markers there at EndTxn. The group lives in groupshift, so TxnOffsetCommit comes here
(FindCoordinator for a group answers groupshift). For each one groupshift

1. checks the member as Kafka's group coordinator does (`engine.offsets.transactional`:
   generation / member epoch / member id / group instance id of its own classic, consumer or
   streams group, an older epoch per partition or task) and the
   producer epoch against the ones it already accepted;
2. writes the offsets into the producer's transaction upstream, as a TxnOffsetCommit of the
   same producer id and epoch for the group's *shadow group* (`shadow_group`: a fixed prefix
   whose Java `String.hashCode` is 0, so the shadow maps to the same `__consumer_offsets`
   partition, the one AddOffsetsToTxn added; generation -1, so Kafka takes it as a simple
   group's commit). The metadata carries a token (`Token`: when and under which producer the
   commit was accepted, and the client's metadata). Kafka validates the producer epoch and that
   the partition is in the transaction there (KIP-890), and fences zombies;
3. answers the client only once the cluster accepted it, and keeps the offsets PENDING;
4. learns the outcome from the cluster: OffsetFetch of the shadow group with `require_stable`
   answers UNSTABLE_OFFSET_COMMIT while any transaction holds a partition, and once none does,
   the committed value there is the one Kafka's markers left (committed transactions only, the
   last by log order). groupshift then commits that value into its own log (materialization;
   the offsets mirror copies it to the real group upstream) and resolves every offset that was
   pending before the read. An aborted transaction leaves no token, so its offsets are never
   exposed.

OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for partitions with pending
offsets, as Kafka does. Pending offsets live in memory only: after a restart, the first
TxnOffsetCommit or stable OffsetFetch of a group reads the shadow group (`_recover`): committed
tokens newer than groupshift's stored offset are materialized, and partitions the cluster still
reports unstable are pending until their outcome is read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import structlog

from engine.errors import CoordinatorError
from engine.offsets.store import OffsetAndMetadata
from engine.offsets.transactional import PendingTransactionalOffsets, validate_transactional_commit
from gateway.registry import CloseConnection, HandlerRegistry, RequestContext
from gateway.upstream.cluster import UpstreamCluster
from gateway.upstream.link import UpstreamUnavailable
from protocol.codec import DecodeFailure, response_type_of
from protocol.entity_builder import build

if TYPE_CHECKING:
    from gateway.groups.service import GroupCoordinatorService
    from gateway.metrics import MetricsRegistry
    from gateway.upstream.offsets import OffsetBridge

log = structlog.get_logger("upstream")

ADD_OFFSETS_TO_TXN, TXN_OFFSET_COMMIT, OFFSET_FETCH, DELETE_GROUPS, OFFSET_DELETE = 25, 28, 9, 42, 47
NONE, UNKNOWN_TOPIC_OR_PARTITION, COORDINATOR_NOT_AVAILABLE, OFFSET_METADATA_TOO_LARGE = 0, 3, 15, 12
UNSTABLE_OFFSET_COMMIT, UNSUPPORTED_VERSION = 88, 35
RETRY_COORDINATOR = frozenset({14, 15, 16})
# Java String.hashCode of this prefix is 0: prefix + group id hashes as the group id does, so
# the shadow group's `__consumer_offsets` partition is the group's on any partition count.
SHADOW_PREFIX = "__groupshift-txn.hb3ckup."
TOKEN_PREFIX = "gs-txn1;"
POLL_FIRST_SECONDS = 0.02
POLL_MAX_SECONDS = 1.0

TopicPartition = tuple[str, int]
Shadowed = tuple[int, int, str | None]  # offset, leader epoch, metadata in the shadow group


def java_string_hash(s: str) -> int:
    """Java's `String.hashCode` (over UTF-16 code units, wrapping at 32 bits), unsigned."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (h * 31 + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def shadow_group(group_id: str) -> str:
    return SHADOW_PREFIX + group_id


@dataclasses.dataclass(frozen=True, slots=True)
class Token:
    """What a shadow offset's metadata carries: when groupshift accepted the commit (its
    materialized commit timestamp), its number, the producer, and the client's metadata."""

    accepted_ms: int
    seq: int
    producer_id: int
    producer_epoch: int
    metadata: str | None

    def encode(self) -> str:
        tail = "-" if self.metadata is None else "+" + self.metadata
        return f"{TOKEN_PREFIX}{self.accepted_ms};{self.seq};{self.producer_id};{self.producer_epoch};{tail}"


def decode_token(metadata: str | None) -> Token | None:
    """The token in a shadow offset's metadata; None for anything groupshift did not write."""
    if metadata is None or not metadata.startswith(TOKEN_PREFIX):
        return None
    parts = metadata[len(TOKEN_PREFIX) :].split(";", 4)
    if len(parts) != 5 or not parts[4] or parts[4][0] not in "-+":
        return None
    try:
        accepted, seq, pid, epoch = (int(x) for x in parts[:4])
    except ValueError:
        return None
    meta = None if parts[4] == "-" else parts[4][1:]
    return Token(accepted, seq, pid, epoch, meta)


def committed_value(shadowed: Shadowed, stored: OffsetAndMetadata | None) -> OffsetAndMetadata | None:
    """The value to materialize from a shadow partition's committed offset: None when it is not
    groupshift's, or when groupshift already stores it or a commit newer than it."""
    offset, leader_epoch, metadata = shadowed
    token = decode_token(metadata)
    if token is None or offset < 0:
        return None
    value = OffsetAndMetadata(offset, leader_epoch, token.metadata or "", token.accepted_ms)
    if stored is not None:
        if stored.commit_timestamp > token.accepted_ms:
            return None
        if (stored.offset, stored.leader_epoch, stored.metadata, stored.commit_timestamp) == (
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
        ):
            return None
    return value


class TransactionalOffsets:
    def __init__(
        self,
        service: GroupCoordinatorService,
        cluster: UpstreamCluster,
        bridge: OffsetBridge,
        metrics: MetricsRegistry,
    ) -> None:
        self.service = service
        self.cluster = cluster
        self.bridge = bridge
        self.pending = PendingTransactionalOffsets()
        self._seq = 0
        self._locks: dict[str, asyncio.Lock] = {}
        self._resolvers: dict[str, asyncio.Task[None]] = {}
        # group -> id of the shard storage it was recovered for: a shard reopened (scale-out: a
        # shard lost and regained) is recovered again, from the shadow group.
        self._recovered: dict[str, int] = {}
        self._recovering: dict[str, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._outcomes = metrics.counter(
            "groupshift_txn_offsets_resolved_total",
            "Pending transactional partition offsets resolved, by outcome (materialized: a "
            "committed transaction's offset written to groupshift's log; ended: no newer commit)",
            ("outcome",),
        )
        metrics.gauge(
            "groupshift_txn_offsets_pending", "Partition offsets of open transactions (pending)"
        ).set_function(lambda: len(self.pending))

    # -- installation --------------------------------------------------------------------------

    def served(self) -> bool:
        """Advertised once the upstream serves AddOffsetsToTxn and TxnOffsetCommit."""
        versions = self.cluster.api_versions
        return ADD_OFFSETS_TO_TXN in versions and TXN_OFFSET_COMMIT in versions

    def install(self, registry: HandlerRegistry, max_version: int) -> None:
        registry.register(
            TXN_OFFSET_COMMIT, 0, max_version, self.handle_commit, enabled=self.served, replace=True
        )
        spec = registry.get(OFFSET_FETCH)
        if spec is not None:
            registry.register(
                OFFSET_FETCH,
                spec.min_version,
                spec.max_version,
                self._fetching(spec.fn),
                enabled=spec.enabled,
                replace=True,
            )
        for key, wrapper in ((DELETE_GROUPS, self._deleting), (OFFSET_DELETE, self._offsets_deleting)):
            spec = registry.get(key)
            if spec is not None:
                registry.register(
                    key,
                    spec.min_version,
                    spec.max_version,
                    wrapper(spec.fn),
                    enabled=spec.enabled,
                    replace=True,
                )

    def close(self) -> None:
        for task in [*self._resolvers.values(), *self._tasks]:
            task.cancel()

    # -- TxnOffsetCommit -----------------------------------------------------------------------

    def handle_commit(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        return asyncio.ensure_future(self._commit(req))

    async def _commit(self, req: Any) -> Any:
        rtype = response_type_of(req)
        gid = req.group_id
        codes: dict[TopicPartition, int] = {}

        def answer() -> Any:
            topics: dict[str, list[dict[str, int]]] = {}
            for t in req.topics:
                for p in t.partitions:
                    code = codes.get((t.name, p.partition_index), NONE)
                    topics.setdefault(t.name, []).append(
                        {"partition_index": p.partition_index, "error_code": code}
                    )
            return build(
                rtype,
                {"throttle_time": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]},
            )

        def fail_all(code: int) -> Any:
            for t in req.topics:
                for p in t.partitions:
                    codes.setdefault((t.name, p.partition_index), code)
            return answer()

        if not self.served():  # not advertised; a client sending it anyway is told so
            return fail_all(UNSUPPORTED_VERSION)
        try:
            await self._recover(gid)
        except (UpstreamUnavailable, OSError, TimeoutError, DecodeFailure):
            return fail_all(COORDINATOR_NOT_AVAILABLE)
        image = self.service.image
        max_bytes = self.service.config.offset_metadata_max_bytes
        wanted: dict[TopicPartition, Any] = {}
        for t in req.topics:
            ti = image.topic(t.name)
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if ti is None or not 0 <= p.partition_index < ti.num_partitions:
                    codes[tp] = UNKNOWN_TOPIC_OR_PARTITION  # Kafka's KafkaApis answers these first
                elif p.committed_metadata is not None and len(p.committed_metadata) > max_bytes:
                    codes[tp] = OFFSET_METADATA_TOO_LARGE
                else:
                    wanted[tp] = p
        if not wanted:
            return answer()
        shard = self.service.runtime_for(gid).shard
        try:
            validate_transactional_commit(
                shard.state,
                gid,
                int(getattr(req, "generation_id", -1)),
                getattr(req, "member_id", "") or "",
                getattr(req, "group_instance_id", None),
                wanted,
            )
            self.pending.check_epoch(int(req.producer_id), int(req.producer_epoch))
        except CoordinatorError as e:
            log.info("txn_offset_commit.refused", group_id=gid, error=e.code.name, reason=e.message)
            return fail_all(int(e.code))
        now = int(time.time() * 1000)
        self._seq += 1
        seq = self._seq
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), p in wanted.items():
            token = Token(now, seq, int(req.producer_id), int(req.producer_epoch), p.committed_metadata)
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": p.committed_offset,
                    "committed_leader_epoch": getattr(p, "committed_leader_epoch", -1),
                    "committed_metadata": token.encode(),
                }
            )
        version = self.cluster.version_for(TXN_OFFSET_COMMIT, 3)
        body = {
            "transactional_id": req.transactional_id,
            "group_id": shadow_group(gid),
            "producer_id": req.producer_id,
            "producer_epoch": req.producer_epoch,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        try:
            async with self._lock(gid):
                node = await self.bridge.coordinator(shadow_group(gid))
                resp = await self.cluster.call(node, TXN_OFFSET_COMMIT, version, body)
        except (UpstreamUnavailable, OSError, TimeoutError, DecodeFailure) as e:
            log.warning("txn_offset_commit.upstream_failed", group_id=gid, error=str(e))
            return fail_all(COORDINATOR_NOT_AVAILABLE)
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for t in resp.topics:
            for rp in t.partitions:
                tp = (t.name, int(rp.partition_index))
                code = int(rp.error_code)
                if code in RETRY_COORDINATOR:
                    self.bridge.forget_coordinator(shadow_group(gid))
                if tp not in wanted:
                    continue
                codes[tp] = code
                if code == NONE:
                    p = wanted[tp]
                    accepted[tp] = OffsetAndMetadata(
                        int(p.committed_offset),
                        int(getattr(p, "committed_leader_epoch", -1)),
                        p.committed_metadata or "",
                        now,
                    )
        if accepted:
            try:
                self.pending.add(seq, int(req.producer_id), int(req.producer_epoch), gid, accepted)
            except CoordinatorError as e:  # a newer epoch was accepted meanwhile
                for tp in accepted:
                    codes[tp] = int(e.code)
            else:
                log.debug("txn_offset_commit.pending", group_id=gid, producer_id=req.producer_id, seq=seq)
                self._resolve_soon(gid)
        return answer()

    def _lock(self, group_id: str) -> asyncio.Lock:
        lock = self._locks.get(group_id)
        if lock is None:
            lock = self._locks[group_id] = asyncio.Lock()
        return lock

    # -- learning the outcome ------------------------------------------------------------------

    def _resolve_soon(self, group_id: str) -> None:
        task = self._resolvers.get(group_id)
        if task is None or task.done():
            self._resolvers[group_id] = asyncio.ensure_future(self._resolve(group_id))

    async def _shadow_fetch(
        self, group_id: str, topics: Iterable[str] | None, require_stable: bool
    ) -> dict[TopicPartition, tuple[int, Shadowed]]:
        """(error code, shadowed value) per partition of the shadow group upstream."""
        shadow = shadow_group(group_id)
        version = self.cluster.version_for(OFFSET_FETCH, 7)
        if topics is None:
            resp = await self.bridge.offset_fetch_all(await self.bridge.coordinator(shadow), version, shadow)
        else:
            image = self.service.image
            named = []
            for name in sorted(set(topics)):
                ti = image.topic(name)
                if ti is not None:
                    named.append({"name": name, "partition_indexes": list(range(ti.num_partitions))})
            if not named:
                return {}
            node = await self.bridge.coordinator(shadow)
            body = {"group_id": shadow, "topics": named, "require_stable": require_stable}
            resp = await self.cluster.call(node, OFFSET_FETCH, version, body)
        if int(resp.error_code) in RETRY_COORDINATOR:
            self.bridge.forget_coordinator(shadow)
            raise UpstreamUnavailable(f"shadow group coordinator moved (error {int(resp.error_code)})")
        out: dict[TopicPartition, tuple[int, Shadowed]] = {}
        for t in resp.topics:
            for p in t.partitions:
                out[(t.name, int(p.partition_index))] = (
                    int(p.error_code),
                    (int(p.committed_offset), int(getattr(p, "committed_leader_epoch", -1)), p.metadata),
                )
        return out

    async def _resolve(self, group_id: str) -> None:
        delay = POLL_FIRST_SECONDS
        while self.pending.partitions(group_id):
            await asyncio.sleep(delay)
            if group_id in self._recovered and not self._is_recovered(group_id):
                # The shard was reopened (scale-out): whoever serves it now recovers the group
                # from the shadow group; what is pending here is forgotten.
                self._recovered.pop(group_id, None)
                self.pending.drop_partitions(group_id, list(self.pending.partitions(group_id)))
                break
            snapshot = self.pending.partitions(group_id)
            try:
                async with self._lock(group_id):
                    read = await self._shadow_fetch(group_id, {t for t, _ in snapshot}, require_stable=True)
            except (UpstreamUnavailable, OSError, TimeoutError, DecodeFailure) as e:
                log.info("txn_offsets.outcome_unreadable", group_id=group_id, error=str(e))
                delay = min(max(delay * 2, 0.2), POLL_MAX_SECONDS)
                continue
            stable = {tp: v for tp, (code, v) in read.items() if tp in snapshot and code == NONE}
            if not stable or not await self._settle(group_id, stable, snapshot):
                delay = min(delay * 2, POLL_MAX_SECONDS)
                continue
            delay = POLL_FIRST_SECONDS
        self._resolvers.pop(group_id, None)
        lock = self._locks.get(group_id)
        if lock is not None and not lock.locked():
            del self._locks[group_id]  # nothing pending: no per-group state is kept

    async def _settle(
        self, group_id: str, stable: dict[TopicPartition, Shadowed], snapshot: dict[TopicPartition, list[int]]
    ) -> bool:
        """Materialize the committed values of partitions no transaction holds any more, then
        resolve the offsets that were pending on them. False when groupshift's log refused."""
        runtime = self.service.runtime_for(group_id)
        store = runtime.shard.offsets
        values: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, shadowed in stable.items():
            value = committed_value(shadowed, store.get(group_id, *tp))
            if value is not None:
                values[tp] = value
        if values:
            result = runtime.run(lambda c, now: c.commit_transactional_offsets(group_id, values, now))
            if isinstance(result, asyncio.Future):
                result = await result
            if result is None:
                return False
            self.bridge.mirror(
                group_id,
                {tp: (v.offset, v.leader_epoch, v.metadata) for tp, v in values.items() if tp in result},
            )
            self._outcomes.labels("materialized").inc(len(result))
            log.info("txn_offsets.committed", group_id=group_id, partitions=len(result))
        for tp in stable:
            self.pending.resolve(group_id, tp, snapshot[tp])
        self._outcomes.labels("ended").inc(len(stable) - len(values))
        return True

    # -- restart: re-derived from the shadow group ---------------------------------------------

    def _storage_id(self, group_id: str) -> int:
        return id(self.service.runtime_for(group_id).storage)

    def _is_recovered(self, group_id: str) -> bool:
        return self._recovered.get(group_id) == self._storage_id(group_id)

    async def _recover(self, group_id: str) -> None:
        if self._is_recovered(group_id):
            return
        fut = self._recovering.get(group_id)
        if fut is None:
            fut = self._recovering[group_id] = asyncio.ensure_future(self._do_recover(group_id))
            fut.add_done_callback(lambda _: self._recovering.pop(group_id, None))
        await asyncio.shield(fut)

    async def _do_recover(self, group_id: str) -> None:
        await asyncio.wait_for(self.cluster.ready.wait(), self.cluster.request_timeout)
        async with self._lock(group_id):
            committed = await self._shadow_fetch(group_id, None, require_stable=False)
            topics = {t for t, _ in committed} | set(
                self.service.runtime_for(group_id).shard.offsets.group(group_id)
            )
            stable = await self._shadow_fetch(group_id, topics, require_stable=True)
        found: dict[TopicPartition, Shadowed] = {}
        snapshot: dict[TopicPartition, list[int]] = {}
        for tp, (code, v) in stable.items():
            if code == UNSTABLE_OFFSET_COMMIT:
                self._seq += 1
                self.pending.mark_unknown(self._seq, group_id, tp)
            elif code == NONE and tp in committed:
                found[tp] = v
                snapshot[tp] = []
        if found and not await self._settle(group_id, found, snapshot):
            raise UpstreamUnavailable("groupshift's log refused the recovered transactional offsets")
        self._recovered[group_id] = self._storage_id(group_id)
        if self.pending.partitions(group_id):
            log.info(
                "txn_offsets.recovered_pending",
                group_id=group_id,
                partitions=len(self.pending.partitions(group_id)),
            )
            self._resolve_soon(group_id)

    # -- OffsetFetch require_stable, DeleteGroups ----------------------------------------------

    def _fetching(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def handler(ctx: RequestContext, header: Any, req: Any) -> Any:
            if not getattr(req, "require_stable", False):
                return fn(ctx, header, req)
            groups = [g.group_id for g in req.groups] if hasattr(req, "groups") else [req.group_id]
            if all(self._is_recovered(g) for g in groups):
                return self._mark_unstable(req, fn(ctx, header, req))
            return asyncio.ensure_future(self._recover_then_fetch(groups, fn, ctx, header, req))

        return handler

    async def _recover_then_fetch(
        self, groups: list[str], fn: Callable[..., Any], ctx: RequestContext, header: Any, req: Any
    ) -> Any:
        for g in groups:
            try:
                await self._recover(g)
            except (UpstreamUnavailable, OSError, TimeoutError, DecodeFailure) as e:
                raise CloseConnection(
                    "upstream.txn_offsets_recovery_failed", group_id=g, error=str(e)
                ) from None
        result = fn(ctx, header, req)
        if isinstance(result, asyncio.Future):
            result = await result
        return self._mark_unstable(req, result)

    def _mark_unstable(self, req: Any, response: Any) -> Any:
        """Kafka `fetchOffsets` with `require_stable`: UNSTABLE_OFFSET_COMMIT (offset -1) for each
        partition with pending transactional offsets."""
        if isinstance(response, asyncio.Future | bytes | bytearray):
            return response
        rep = dataclasses.replace

        def topics(group_id: str, ts: Any) -> tuple[Any, ...]:
            return tuple(
                rep(
                    t,
                    partitions=tuple(
                        rep(
                            p,
                            committed_offset=-1,
                            committed_leader_epoch=-1,
                            metadata="",
                            error_code=UNSTABLE_OFFSET_COMMIT,
                        )
                        if int(p.error_code) == 0
                        and self.pending.has_pending(group_id, t.name, int(p.partition_index))
                        else p
                        for p in t.partitions
                    ),
                )
                for t in ts
            )

        if hasattr(response, "groups"):
            return rep(
                response, groups=tuple(rep(g, topics=topics(g.group_id, g.topics)) for g in response.groups)
            )
        return rep(response, topics=topics(req.group_id, response.topics))

    def _deleting(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """A group deleted through groupshift loses its shadow group too, so that a restart does
        not recover a deleted group's transactional offsets from it."""
        return _after_success(fn, lambda req, response: self._deleted(response))

    def _offsets_deleting(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """OffsetDelete: as Kafka's tombstone drops pending transactional offsets of the
        partition, groupshift drops its pending ones and deletes the shadow's (best effort)."""
        return _after_success(fn, self._offsets_deleted)

    def _offsets_deleted(self, req: Any, response: Any) -> None:
        if int(response.error_code) != 0:
            return
        gone = [
            (t.name, int(p.partition_index))
            for t in response.topics
            for p in t.partitions
            if int(p.error_code) == 0
        ]
        if not gone:
            return
        self.pending.drop_partitions(req.group_id, gone)
        task = asyncio.ensure_future(self._delete_shadow_offsets(req.group_id, gone))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _delete_shadow_offsets(self, group_id: str, partitions: list[TopicPartition]) -> None:
        shadow = shadow_group(group_id)
        by_topic: dict[str, list[dict[str, int]]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append({"partition_index": partition})
        body = {"group_id": shadow, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        try:
            async with self._lock(group_id):
                node = await self.bridge.coordinator(shadow)
                resp = await self.cluster.call(node, OFFSET_DELETE, 0, body)
        except (UpstreamUnavailable, OSError, TimeoutError, DecodeFailure) as e:
            log.warning("upstream.shadow_offsets_delete_failed", group_id=group_id, error=str(e))
            return
        if int(resp.error_code) not in (0, 69):
            log.warning(
                "upstream.shadow_offsets_delete_failed", group_id=group_id, error_code=int(resp.error_code)
            )

    def _deleted(self, response: Any) -> None:
        gone = [r.group_id for r in response.results if int(r.error_code) == 0]
        for gid in gone:
            for tp in list(self.pending.partitions(gid)):
                self.pending.drop_partitions(gid, [tp])
            task = asyncio.ensure_future(self._delete_shadow(gid))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _delete_shadow(self, group_id: str) -> None:
        shadow = shadow_group(group_id)
        try:
            node = await self.bridge.coordinator(shadow)
            version = self.cluster.version_for(DELETE_GROUPS, 2)
            resp = await self.cluster.call(node, DELETE_GROUPS, version, {"groups_names": [shadow]})
            code = int(resp.results[0].error_code)
        except (UpstreamUnavailable, OSError, TimeoutError, DecodeFailure) as e:
            log.warning("upstream.shadow_group_delete_failed", group_id=group_id, error=str(e))
            return
        if code not in (0, 69):  # GROUP_ID_NOT_FOUND: no transactional commit was ever made
            log.warning("upstream.shadow_group_delete_failed", group_id=group_id, error_code=code)


def _after_success(fn: Callable[..., Any], then: Callable[[Any, Any], None]) -> Callable[..., Any]:
    """`fn`, with `then(request, response)` run once it answered (a failure is left alone)."""

    def handler(ctx: RequestContext, header: Any, req: Any) -> Any:
        result = fn(ctx, header, req)
        if isinstance(result, asyncio.Future):
            result.add_done_callback(
                lambda f: None if f.cancelled() or f.exception() else then(req, f.result())
            )
        elif not isinstance(result, bytes | bytearray):
            then(req, result)
        return result

    return handler
