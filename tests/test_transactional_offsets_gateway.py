"""`gateway.upstream.transactions` against a stand-in cluster whose shadow group behaves as
Kafka's group coordinator does (pending until the transaction ends, then the committed value or
the earlier one): commit, abort, OffsetFetch `require_stable`, and a restart in the middle of a
transaction. The real cluster is in e2e/test_upstream_kafka.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from gateway.metrics import MetricsRegistry
from gateway.upstream.transactions import UNSTABLE_OFFSET_COMMIT, TransactionalOffsets, decode_token
from protocol.client import make_request
from tests.consumer_harness import Harness
from tests.test_streams_groups import WORDS, Streams

TP = tuple[str, int]


class Shadow:
    """The cluster's view of the shadow group: committed values, and the open transactions'
    pending ones by producer id (Kafka's pendingTransactionalOffsets)."""

    def __init__(self) -> None:
        self.committed: dict[TP, tuple[int, int, str]] = {}
        self.pending: dict[int, dict[TP, tuple[int, int, str]]] = {}

    def end(self, producer_id: int, commit: bool) -> None:
        offsets = self.pending.pop(producer_id, {})
        if commit:
            self.committed.update(offsets)

    def unstable(self, tp: TP) -> bool:
        return any(tp in p for p in self.pending.values())


class FakeCluster:
    def __init__(self, shadow: Shadow) -> None:
        self.shadow = shadow
        self.api_versions = {25: (0, 4), 28: (0, 4), 9: (0, 9)}
        self.ready = asyncio.Event()
        self.ready.set()
        self.request_timeout = 5.0

    def version_for(self, api_key: int, wanted: int) -> int:
        return wanted

    def _fetch(self, topics: list[Any] | None, require_stable: bool) -> Any:
        wanted = (
            list(self.shadow.committed)
            if topics is None
            else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
        )
        by_topic: dict[str, list[Any]] = {}
        for tp in wanted:
            if require_stable and self.shadow.unstable(tp):
                part = SimpleNamespace(
                    partition_index=tp[1],
                    error_code=UNSTABLE_OFFSET_COMMIT,
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    metadata="",
                )
            else:
                o, le, md = self.shadow.committed.get(tp, (-1, -1, ""))
                part = SimpleNamespace(
                    partition_index=tp[1],
                    error_code=0,
                    committed_offset=o,
                    committed_leader_epoch=le,
                    metadata=md,
                )
            by_topic.setdefault(tp[0], []).append(part)
        return SimpleNamespace(
            error_code=0, topics=[SimpleNamespace(name=n, partitions=ps) for n, ps in by_topic.items()]
        )

    async def call(self, node: int | None, api_key: int, version: int, body: dict[str, Any]) -> Any:
        if api_key == 9:
            return self._fetch(body["topics"], body["require_stable"])
        assert api_key == 28, api_key
        assert body["generation_id"] == -1 and body["member_id"] == ""
        pending = self.shadow.pending.setdefault(body["producer_id"], {})
        topics = []
        for t in body["topics"]:
            for p in t["partitions"]:
                pending[(t["name"], p["partition_index"])] = (
                    p["committed_offset"],
                    p["committed_leader_epoch"],
                    p["committed_metadata"],
                )
            topics.append(
                SimpleNamespace(
                    name=t["name"],
                    partitions=[
                        SimpleNamespace(partition_index=p["partition_index"], error_code=0)
                        for p in t["partitions"]
                    ],
                )
            )
        return SimpleNamespace(topics=topics)


class FakeBridge:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.mirrored: dict[TP, Any] = {}

    async def coordinator(self, group_id: str) -> int:
        return 0

    def forget_coordinator(self, group_id: str) -> None:
        pass

    async def offset_fetch_all(self, node: int | None, version: int, group_id: str) -> Any:
        return self.cluster._fetch(None, False)

    def mirror(self, group_id: str, offsets: dict[TP, Any]) -> None:
        self.mirrored.update(offsets)


class FakeRuntime:
    def __init__(self, harness: Any) -> None:
        self.shard = harness.shard
        self.storage = object()
        self.harness = harness

    def run(self, op: Any) -> Any:
        self.harness.now += 1
        return op(self.shard, self.harness.now).response


class FakeService:
    def __init__(self, harness: Any) -> None:
        self.runtime = FakeRuntime(harness)
        self.image = harness.shard.image
        self.config = harness.shard.state.config

    def runtime_for(self, group_id: str) -> FakeRuntime:
        return self.runtime


def commit_request(
    producer_id: int,
    offsets: dict[int, int],
    generation: int = -1,
    member: str = "",
    group: str = "g",
    topic: str = "foo",
) -> Any:
    return make_request(
        28,
        3,
        transactional_id=f"txn-{producer_id}",
        group_id=group,
        producer_id=producer_id,
        producer_epoch=0,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "m",
                    }
                    for p, o in offsets.items()
                ],
            }
        ],
    )


def fetch(txn: TransactionalOffsets, require_stable: bool = True) -> Any:
    request = make_request(
        9,
        8,
        groups=[{"group_id": "g", "topics": [{"name": "foo", "partition_indexes": [0, 1]}]}],
        require_stable=require_stable,
    )
    stored = txn.service.runtime_for("g").shard.offsets

    def inner(ctx: Any, header: Any, req: Any) -> Any:  # groupshift's own OffsetFetch, simplified
        parts = []
        for p in (0, 1):
            o = stored.get("g", "foo", p)
            parts.append(Partition(p, -1 if o is None else o.offset, -1, "", 0))
        return Response((Group("g", (Topic("foo", tuple(parts)),)),))

    return txn._fetching(inner)(None, None, request)


# Frozen dataclass stand-ins for the kio response shapes `_mark_unstable` rebuilds.


@dataclass(frozen=True)
class Partition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    error_code: int


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: tuple[Any, ...]


@dataclass(frozen=True)
class Group:
    group_id: str
    topics: tuple[Topic, ...]


@dataclass(frozen=True)
class Response:
    groups: tuple[Group, ...]


async def answers(txn: TransactionalOffsets, require_stable: bool = True) -> list[tuple[int, int, int]]:
    """(partition, offset, error code) of an OffsetFetch through the wrapper."""
    response = fetch(txn, require_stable)
    if isinstance(response, asyncio.Future):
        response = await response
    return partition_answers(response)


def partition_answers(response: Any) -> list[tuple[int, int, int]]:
    return [
        (int(p.partition_index), int(p.committed_offset), int(p.error_code))
        for p in response.groups[0].topics[0].partitions
    ]


def setup(harness: Any = None) -> tuple[Shadow, TransactionalOffsets]:
    """`harness`: the shard's requests (a consumer group "g" by default)."""
    shadow = Shadow()
    cluster = FakeCluster(shadow)
    service = FakeService(Harness() if harness is None else harness)
    txn = TransactionalOffsets(service, cluster, FakeBridge(cluster), MetricsRegistry())  # type: ignore[arg-type]
    return shadow, txn


async def settled(txn: TransactionalOffsets) -> None:
    for _ in range(200):
        if not txn.pending.partitions("g"):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still pending: {txn.pending.partitions('g')}")


def test_committed_offsets_appear_only_after_the_commit_and_aborted_ones_never() -> None:
    async def scenario() -> None:
        shadow, txn = setup()
        stored = txn.service.runtime_for("g").shard.offsets
        resp = await txn.handle_commit(None, None, commit_request(7, {0: 10, 1: 20}))  # type: ignore[arg-type]
        assert [p.error_code for t in resp.topics for p in t.partitions] == [0, 0]
        token = decode_token(shadow.pending[7][("foo", 0)][2])
        assert token is not None and token.metadata == "m" and token.producer_id == 7
        # open: require_stable says UNSTABLE, a plain fetch the last committed (none)
        assert await answers(txn) == [(0, -1, UNSTABLE_OFFSET_COMMIT), (1, -1, UNSTABLE_OFFSET_COMMIT)]
        assert await answers(txn, require_stable=False) == [(0, -1, 0), (1, -1, 0)]
        await asyncio.sleep(0.1)
        assert stored.get("g", "foo", 0) is None  # still open: nothing exposed
        shadow.end(7, commit=True)
        await settled(txn)
        assert stored.get("g", "foo", 0).offset == 10 and stored.get("g", "foo", 1).offset == 20  # type: ignore[union-attr]
        assert stored.get("g", "foo", 0).metadata == "m"  # type: ignore[union-attr]
        assert txn.bridge.mirrored == {("foo", 0): (10, -1, "m"), ("foo", 1): (20, -1, "m")}  # type: ignore[attr-defined]
        # the next transaction aborts: its offsets are never exposed
        await txn.handle_commit(None, None, commit_request(7, {0: 15}))  # type: ignore[arg-type]
        shadow.end(7, commit=False)
        await settled(txn)
        assert stored.get("g", "foo", 0).offset == 10  # type: ignore[union-attr]
        assert await answers(txn) == [(0, 10, 0), (1, 20, 0)]
        txn.close()

    asyncio.run(scenario())


def test_a_restart_mid_transaction_recovers_from_the_shadow_group() -> None:
    async def scenario() -> None:
        shadow, before = setup()
        await before.handle_commit(None, None, commit_request(7, {0: 10}))  # type: ignore[arg-type]
        shadow.end(7, commit=True)  # committed while groupshift is down
        await before.handle_commit(None, None, commit_request(8, {1: 30}))  # type: ignore[arg-type]
        before.close()  # groupshift dies with both pending in memory; nothing was materialized
        stored = before.service.runtime_for("g").shard.offsets
        assert stored.get("g", "foo", 0) is None
        # restarted: same log (the harness' shard), empty memory, the same cluster
        after = TransactionalOffsets(before.service, before.cluster, before.bridge, MetricsRegistry())
        seen = await answers(after)
        assert seen == [(0, 10, 0), (1, -1, UNSTABLE_OFFSET_COMMIT)]  # recovered / still open
        shadow.end(8, commit=True)
        await settled(after)
        assert await answers(after) == [(0, 10, 0), (1, 30, 0)]
        after.close()

    asyncio.run(scenario())


def test_a_zombie_member_is_refused_before_anything_reaches_the_cluster() -> None:
    async def scenario() -> None:
        shadow, txn = setup()
        h = txn.service.runtime_for("g").harness  # type: ignore[attr-defined]
        h.ack("m1", h.join("m1"))
        epoch = h.member("m1").member_epoch
        resp = await txn.handle_commit(None, None, commit_request(7, {0: 5}, epoch, "gone"))  # type: ignore[arg-type]
        assert {p.error_code for t in resp.topics for p in t.partitions} == {25}  # UNKNOWN_MEMBER_ID
        resp = await txn.handle_commit(None, None, commit_request(7, {0: 5}, epoch - 1, "m1"))  # type: ignore[arg-type]
        assert {p.error_code for t in resp.topics for p in t.partitions} == {22}  # ILLEGAL_GENERATION
        assert shadow.pending == {}
        resp = await txn.handle_commit(None, None, commit_request(7, {0: 5}, epoch, "m1"))  # type: ignore[arg-type]
        assert {p.error_code for t in resp.topics for p in t.partitions} == {0}
        txn.close()

    asyncio.run(scenario())


def test_a_streams_members_transactional_commit_is_served_and_its_zombie_refused() -> None:
    """A Kafka Streams `exactly_once_v2` producer commits with its consumer's streams-group
    metadata (member id, member epoch): forwarded into its transaction upstream and
    materialized once it commits. After the instance is killed and its member leaves the group
    (session expiry), a commit of its still-running producer (a zombie) is refused with
    UNKNOWN_MEMBER_ID before anything reaches the cluster, as Kafka 4.4 refuses it. groupshift
    answered every streams group GROUP_ID_NOT_FOUND before (issue 31)."""

    async def scenario() -> None:
        h = Streams()
        h.join("m1")
        h.join("m2")
        h.converge("m1", "m2")
        shadow, txn = setup(h)
        epoch = h.epochs["m1"]
        mine = sorted(p for t in h.owned["m1"] if t.subtopology_id == "0" for p in t.partitions)
        offsets = {p: 10 + p for p in mine}
        resp = await txn.handle_commit(
            None,  # type: ignore[arg-type]
            None,
            commit_request(7, offsets, epoch, "m1", group="app", topic=WORDS),
        )
        assert {p.error_code for t in resp.topics for p in t.partitions} == {0}
        assert set(shadow.pending[7]) == {(WORDS, p) for p in mine}
        shadow.end(7, commit=True)
        for _ in range(200):
            if not txn.pending.partitions("app"):
                break
            await asyncio.sleep(0.01)
        stored = h.shard.offsets
        assert {p: stored.get("app", WORDS, p).offset for p in mine} == offsets  # type: ignore[union-attr]

        h.hb(member_id="m1", member_epoch=-1)  # m1 is gone (its session expired)
        resp = await txn.handle_commit(
            None,  # type: ignore[arg-type]
            None,
            commit_request(7, {mine[0]: 99}, epoch, "m1", group="app", topic=WORDS),
        )
        assert {p.error_code for t in resp.topics for p in t.partitions} == {25}  # UNKNOWN_MEMBER_ID
        m2 = h.epochs["m2"]
        resp = await txn.handle_commit(
            None,  # type: ignore[arg-type]
            None,
            commit_request(8, {0: 5}, m2 + 1, "m2", group="app", topic=WORDS),
        )
        assert {p.error_code for t in resp.topics for p in t.partitions} == {22}  # ILLEGAL_GENERATION
        assert shadow.pending == {}
        assert stored.get("app", WORDS, mine[0]).offset == offsets[mine[0]]  # type: ignore[union-attr]
        txn.close()

    asyncio.run(scenario())
