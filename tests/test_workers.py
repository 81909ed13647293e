"""`serve --workers N` pieces (docs/workers.md): the plan, the refusals, which requests a worker
answers itself, and two workers in one event loop over real TCP: a CreateTopics sent to worker 1
is created by worker 0 and followed by worker 1, as is a streams group's internal topic
created through `TopicFollower.create_topics`; FindCoordinator names the owner; a group API
request for a group owned by the other worker is NOT_COORDINATOR; on a second listener both
answer that listener's addresses; a SCRAM user created through worker 1 reaches worker 1's
store. (The supervisor, real
processes and real clients: e2e/test_workers.py.)"""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid
from pathlib import Path
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from gateway.config import build_config
from gateway.dataplane.plane import DataPlane, NewTopic, TopicError
from gateway.dataplane.topics import TopicInfo
from gateway.groups.routing import partition_for
from gateway.listeners import parse_listeners
from gateway.server import GatewayServer
from gateway.workers.forwarding import TopicFollower, answered_locally
from gateway.workers.plan import WorkerPlan, refusal, worker_listeners
from gateway.workers.worker import worker_extension
from protocol.codec import decode_response, encode_request, response_type_of
from protocol.entity_builder import build

SHARDS = 4
PLAIN = {"sasl.enabled.mechanisms": "SCRAM-SHA-512"}


def test_plan_ports_nodes_and_ownership(tmp_path: Path) -> None:
    plans = [WorkerPlan(i, 3, "127.0.0.1", 9092, 10, tmp_path) for i in range(3)]
    assert [p.port_of(p.index) for p in plans] == [9092, 9093, 9094]
    assert [p.node_id for p in plans] == [10, 11, 12]
    assert plans[0].data_dir == tmp_path and plans[2].data_dir == tmp_path / "workers" / "2"
    for s in range(9):
        assert [p.owns(s) for p in plans].count(True) == 1
        assert plans[s % 3].owns(s)


def test_settings_that_cannot_run_workers_are_refused() -> None:
    ok = {"advertised": None, "authorizer": False, "upstream": False}
    sasl = {"protocol_map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"}

    def refused(listeners: str, **kw: Any) -> str | None:
        pm = kw.pop("protocol_map", None)
        return refusal(parse_listeners(listeners, protocol_map=pm, settings=PLAIN), **{**ok, **kw})

    assert refused("127.0.0.1:9092") is None
    assert refused("PLAINTEXT://127.0.0.1:9092") is None
    assert refused("PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9192", **sasl) is None
    assert "PLAINTEXT listener first" in (refused("SASL_PLAINTEXT://127.0.0.1:9092", **sasl) or "")
    assert "PLAINTEXT listener first" in (
        refused("SASL_PLAINTEXT://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9092", **sasl) or ""
    )
    assert "port" in (refused("127.0.0.1:0") or "")
    zero = "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:0"
    assert "SASL_PLAINTEXT" in (refused(zero, **sasl) or "")
    assert "authorizer" in (refused("127.0.0.1:9092", authorizer=True) or "")
    assert "upstream" in (refused("127.0.0.1:9092", upstream=True) or "")
    assert "advertised" in (refused("127.0.0.1:9092", advertised="PLAINTEXT://h:1") or "")


def test_each_worker_moves_every_listener_by_its_index() -> None:
    listeners = parse_listeners(
        "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9192",
        protocol_map="PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        settings=PLAIN,
    )
    assert worker_listeners(listeners, 0) == "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9192"
    assert worker_listeners(listeners, 2) == "PLAINTEXT://127.0.0.1:9094,SASL_PLAINTEXT://127.0.0.1:9194"


def _frame(api_key: int, version: int, **values: Any) -> bytes:
    return encode_request(build(load_request_schema(api_key, version), values), correlation_id=7)[4:]


def test_a_worker_answers_group_apis_and_forwards_the_data_plane() -> None:
    assert answered_locally(_frame(18, 3, client_software_name="x", client_software_version="1"))
    assert answered_locally(
        _frame(12, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    )
    assert answered_locally(_frame(10, 4, key_type=0, coordinator_keys=["g"]))
    assert not answered_locally(
        _frame(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    )
    group = {"resource_type": 32, "resource_name": "g", "configuration_keys": None}
    topic = {"resource_type": 2, "resource_name": "t", "configuration_keys": None}
    describe = {"include_synonyms": False, "include_documentation": False}
    assert answered_locally(_frame(32, 4, resources=[group], **describe))
    assert not answered_locally(_frame(32, 4, resources=[topic], **describe))
    assert answered_locally(b"\x00")  # not even a header: the dispatcher refuses it


def test_following_topics_reports_each_difference(tmp_path: Path) -> None:
    async def scenario() -> None:
        plane = DataPlane(tmp_path, num_partitions=1)
        seen: list[list[str]] = []
        plane.subscribe_batches(
            lambda changes, image: seen.append([f"{c.kind}:{c.topic.name}" for c in changes])
        )
        a, b = TopicInfo("a", uuid.uuid4(), 2), TopicInfo("b", uuid.uuid4(), 1)
        plane.follow([a, b])
        plane.follow([TopicInfo("a", a.topic_id, 3), b])
        plane.follow([TopicInfo("a", a.topic_id, 3)])
        assert plane.follow([TopicInfo("a", a.topic_id, 3)]) == []
        assert seen == [["created:a", "created:b"], ["partitions_added:a"], ["deleted:b"]]
        image = plane.metadata_image()
        assert image.topic("a") is not None and image.topic("b") is None
        await plane.close()

    asyncio.run(scenario())


def _free_port_pair() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        try:
            with socket.socket() as s2:
                s2.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue


async def _call(port: int, api_key: int, version: int, **values: Any) -> Any:
    request = build(load_request_schema(api_key, version), values)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_request(request, correlation_id=1, client_id="test"))
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    raw = await reader.readexactly(size)
    writer.close()
    return decode_response(response_type_of(request), raw)[1]


def test_two_workers_in_one_loop(tmp_path: Path) -> None:
    port = _free_port_pair()
    external = _free_port_pair()  # a second listener, EXTERNAL, at its own port + i
    plans = [WorkerPlan(i, 2, "127.0.0.1", port, 0, tmp_path) for i in range(2)]

    def server(plan: WorkerPlan) -> GatewayServer:
        cfg = build_config(
            {
                "log.dirs": str(plan.data_dir),
                "listeners": f"PLAINTEXT://127.0.0.1:{plan.port_of(plan.index)},"
                f"EXTERNAL://127.0.0.1:{external + plan.index}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
                "node.id": str(plan.node_id),
                "offsets.topic.num.partitions": str(SHARDS),
            }
        )
        return GatewayServer(cfg, extensions=[worker_extension(plan)])

    async def scenario() -> None:
        w0, w1 = server(plans[0]), server(plans[1])
        await w0.start()
        await w1.start()
        try:
            # CreateTopics at worker 1 is created by worker 0 and followed by worker 1.
            created = await _call(
                port + 1,
                19,
                5,
                topics=[
                    {
                        "name": "t",
                        "num_partitions": 3,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                timeout=10000,
                validate_only=False,
            )
            assert created.topics[0].error_code == ErrorCode.none
            assert w0.plane.topic("t") is not None
            for _ in range(50):
                if w1.plane.metadata_image().topic("t") is not None:
                    break
                await asyncio.sleep(0.05)
            assert w1.plane.metadata_image().topic("t") is not None
            # Metadata at worker 1 (forwarded): both brokers, worker 0 leads and controls.
            md = await _call(
                port + 1,
                3,
                12,
                topics=[{"topic_id": None, "name": "t"}],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            assert sorted((b.node_id, b.port) for b in md.brokers) == [(0, port), (1, port + 1)]
            assert md.controller_id == 0 and {p.leader_id for p in md.topics[0].partitions} == {0}
            # A streams group's internal topic, created from worker 1 through worker 0.
            follower = TopicFollower(w1.plane, plans[1])
            [made, dup] = [
                *(await follower.create_topics([NewTopic("app-repartition", 2)])),
                *(await follower.create_topics([NewTopic("app-repartition", 2)])),
            ]
            assert isinstance(made, TopicInfo) and made.partitions == 2
            assert isinstance(dup, TopicError) and dup.code == ErrorCode.topic_already_exists
            assert w0.plane.topic("app-repartition") is not None
            # FindCoordinator names the owner; the other worker refuses the group.
            groups = {
                w: next(f"g{i}" for i in range(100) if partition_for(f"g{i}", SHARDS) % 2 == w)
                for w in (0, 1)
            }
            for asked in (port, port + 1):
                found = await _call(asked, 10, 4, key_type=0, coordinator_keys=[groups[0], groups[1]])
                assert [(c.node_id, c.port) for c in found.coordinators] == [(0, port), (1, port + 1)]
            refused = await _call(
                port, 12, 4, group_id=groups[1], generation_id=1, member_id="m", group_instance_id=None
            )
            assert refused.error_code == ErrorCode.not_coordinator
            served = await _call(
                port + 1, 12, 4, group_id=groups[1], generation_id=1, member_id="m", group_instance_id=None
            )
            assert served.error_code != ErrorCode.not_coordinator
            # On the second listener, the brokers and the coordinators are that listener's
            # addresses, also in a Metadata answer worker 1 forwarded (worker 0 answered it on
            # its first listener).
            for asked in (external, external + 1):
                md = await _call(
                    asked,
                    3,
                    12,
                    topics=[],
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
                assert sorted((b.node_id, b.port) for b in md.brokers) == [(0, external), (1, external + 1)]
                found = await _call(asked, 10, 4, key_type=0, coordinator_keys=[groups[0], groups[1]])
                assert [(c.node_id, c.port) for c in found.coordinators] == [(0, external), (1, external + 1)]
            # A SCRAM user created through worker 1 (forwarded: worker 0 writes it) is
            # followed by worker 1, whose SASL listeners check logins against it.
            assert w1.scram.users() == []
            altered = await _call(
                port + 1,
                51,
                0,
                deletions=[],
                upsertions=[
                    {
                        "name": "alice",
                        "mechanism": 2,
                        "iterations": 4096,
                        "salt": b"salt",
                        "salted_password": b"x" * 64,
                    }
                ],
            )
            assert [r.error_code for r in altered.results] == [ErrorCode.none]
            assert w0.scram.users() == ["alice"]
            for _ in range(50):
                if w1.scram.users() == ["alice"]:
                    break
                await asyncio.sleep(0.05)
            assert w1.scram.users() == ["alice"]
        finally:
            await w1.stop(1.0)
            await w0.stop(1.0)

    asyncio.run(scenario())
