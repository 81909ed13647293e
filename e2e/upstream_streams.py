"""Streams groups (KIP-1071) in upstream mode, on the wire: StreamsGroupHeartbeat through a
gateway whose cluster has no streams groups of its own (a groupshift backend here,
e2e/test_upstream_groupshift.py; the Kafka 3.9 word count is in e2e/test_upstream_kafka.py).

Checked: ApiVersions advertises 88, 89 and 93 at Kafka 4.4's versions; a member joining with a
word count's topology is told MISSING_INTERNAL_TOPICS while groupshift creates the repartition
and changelog topics on the cluster (seen there with the topology's partition count), then gets
every task; a topic the cluster refuses (an invalid config) stays missing and the status says
why; the member's OffsetCommit is answered by groupshift and mirrored to the cluster; Describe
v1 and StreamsGroupTopologyDescriptionUpdate are answered by groupshift as embedded mode
answers them."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from e2e.groups import wait_until
from e2e.harness import GatewayProcess
from e2e.java_compile import Program
from e2e.streams_wordcount import (
    LINES,
    SOURCE,
    WordCountApp,
    count_records,
    process_id,
    produce,
    three_instances_one_killed,
    three_instances_one_killed_mid_processing,
)
from e2e.upstream import Backend, upstream_offsets
from harness.kafka_dist import resolve_component
from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
from protocol.client import WireClient, make_request

MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS = 1, 3


def word_count_topology(
    source: str, repartition: str, changelog: str, changelog_configs: dict[str, str]
) -> Any:
    """A word count's topology as Kafka Streams sends it: subtopology 0 reads `source` and
    writes `repartition`, subtopology 1 reads it and keeps a store logged to `changelog`."""
    return {
        "epoch": 0,
        "subtopologies": [
            {
                "subtopology_id": "0",
                "source_topics": [source],
                "source_topic_regex": [],
                "state_changelog_topics": [],
                "repartition_sink_topics": [repartition],
                "repartition_source_topics": [],
                "copartition_groups": [],
            },
            {
                "subtopology_id": "1",
                "source_topics": [],
                "source_topic_regex": [],
                "state_changelog_topics": [
                    {
                        "name": changelog,
                        "partitions": 0,
                        "replication_factor": 0,
                        "topic_configs": [{"key": k, "value": v} for k, v in changelog_configs.items()],
                    }
                ],
                "repartition_sink_topics": [],
                "repartition_source_topics": [
                    {
                        "name": repartition,
                        "partitions": 0,
                        "replication_factor": 0,
                        "topic_configs": [{"key": "cleanup.policy", "value": "delete"}],
                    }
                ],
                "copartition_groups": [],
            },
        ],
    }


def streams_heartbeat_fields(group: str, member: str, epoch: int, **over: Any) -> dict[str, Any]:
    """The fields of a StreamsGroupHeartbeat v0: `over` set, the rest null (unchanged)."""
    body: dict[str, Any] = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "endpoint_information_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000 if epoch == 0 else -1,
        "topology": None,
        "active_tasks": None,
        "standby_tasks": None,
        "warmup_tasks": None,
        "process_id": None,
        "user_endpoint": None,
        "client_tags": None,
        "task_offsets": None,
        "task_end_offsets": None,
        "shutdown_application": False,
    }
    body.update(over)
    return body


def streams_heartbeat(client: WireClient, group: str, member: str, epoch: int, **fields: Any) -> Any:
    """StreamsGroupHeartbeat v0; unset fields null (unchanged)."""
    body = streams_heartbeat_fields(group, member, epoch, **fields)
    return client.request(make_request(88, 0, **body))


def streams_join(client: WireClient, group: str, topology: Any) -> tuple[str, Any]:
    """A new member (its id and first answer) joining with `topology`."""
    member = str(uuid.uuid4())
    r = streams_heartbeat(
        client,
        group,
        member,
        0,
        topology=topology,
        process_id=str(uuid.uuid4()),
        active_tasks=[],
        standby_tasks=[],
        warmup_tasks=[],
        client_tags=[],
    )
    assert r.error_code == 0, r
    return member, r


def run_member(
    client: WireClient, group: str, member: str, epoch: int, tasks: int, timeout: float
) -> tuple[Any, int]:
    """Heartbeats (acknowledging what was assigned) until the member owns `tasks` tasks with no
    status, or `timeout` passes: the last answer and the number of tasks owned."""
    owned: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        r = streams_heartbeat(
            client, group, member, epoch, active_tasks=owned, standby_tasks=[], warmup_tasks=[]
        )
        assert r.error_code == 0, r
        epoch = int(r.member_epoch)
        if r.active_tasks is not None:
            owned = [
                {"subtopology_id": t.subtopology_id, "partitions": list(t.partitions)} for t in r.active_tasks
            ]
        count = sum(len(t["partitions"]) for t in owned)
        if (not r.status and count == tasks) or time.monotonic() > deadline:
            return r, count
        time.sleep(0.3)


def partitions_of(bootstrap: str, topic: str, **conf: Any) -> int | None:
    """The topic's partition count on the cluster at `bootstrap` (None: no such topic)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    listed = admin.list_topics(timeout=10).topics
    found = listed.get(topic)
    return None if found is None or found.error is not None else len(found.partitions)


def check_streams_group_on_upstream(
    gw: GatewayProcess, backend: Backend, prefix: str, validates_configs: bool = True
) -> None:
    """The module's checks; `validates_configs`: the cluster refuses a topic with an invalid
    config (Kafka, groupshift; Tansu 0.6 creates it)."""
    source = f"{prefix}-in"
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    admin.create_topics([NewTopic(source, 3, 1)])[source].result(30)
    with WireClient(gw.port, timeout=15) as client:
        versions = client.request(
            make_request(18, 3, client_software_name="e2e", client_software_version="1")
        )
        keys = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in versions.api_keys}
        # Kafka 4.4's versions, whatever the cluster serves
        assert (keys.get(88), keys.get(89), keys.get(93)) == ((0, 1), (0, 1), (0, 0)), keys

        # A topology whose internal topics the cluster creates.
        group = f"{prefix}-app"
        repartition, changelog = f"{group}-counts-repartition", f"{group}-counts-changelog"
        member, r = streams_join(
            client, group, word_count_topology(source, repartition, changelog, {"cleanup.policy": "compact"})
        )
        # The source topic reaches groupshift's image with the next metadata refresh, which
        # the CreateTopics answer asked for: until then the source is missing.
        deadline = time.monotonic() + 10
        while [int(s.status_code) for s in r.status or ()] == [MISSING_SOURCE_TOPICS]:
            assert time.monotonic() < deadline, r
            time.sleep(0.2)
            r = streams_heartbeat(
                client, group, member, int(r.member_epoch), active_tasks=[], standby_tasks=[], warmup_tasks=[]
            )
        assert [int(s.status_code) for s in r.status or ()] == [MISSING_INTERNAL_TOPICS], r
        r, owned = run_member(client, group, member, int(r.member_epoch), 6, 30)
        assert not r.status and owned == 6, (r, gw.log_tail())
        epoch = int(r.member_epoch)
        # v1 of Describe and StreamsGroupTopologyDescriptionUpdate, terminated here as well
        (described,) = client.request(
            make_request(
                89,
                1,
                group_ids=[group],
                include_authorized_operations=False,
                include_topology_description=True,
            )
        ).groups
        assert (described.group_state, described.topology_description_status, described.assignor_name) == (
            "Stable",
            1,
            "sticky",
        ), described
        push = client.request(
            make_request(
                93,
                0,
                group_id=group,
                member_id=member,
                topology_epoch=0,
                topology_description={"subtopologies": [], "global_stores": []},
            )
        )
        assert (int(push.error_code), push.error_message) == (
            35,
            "The broker has no streams group topology description plugin configured.",
        ), push
        # On the cluster itself, with the source topic's partition count.
        assert partitions_of(backend.bootstrap, repartition) == 3
        assert partitions_of(backend.bootstrap, changelog) == 3

        # The member's commit is groupshift's, and mirrored to the cluster.
        commit = client.request(
            make_request(
                8,
                9,
                group_id=group,
                generation_id_or_member_epoch=epoch,
                member_id=member,
                group_instance_id=None,
                topics=[
                    {
                        "name": source,
                        "partitions": [
                            {
                                "partition_index": p,
                                "committed_offset": 10 + p,
                                "committed_leader_epoch": -1,
                                "committed_metadata": None,
                            }
                            for p in range(3)
                        ],
                    }
                ],
            )
        )
        assert all(int(p.error_code) == 0 for t in commit.topics for p in t.partitions), commit
        want = {p: 10 + p for p in range(3)}
        wait_until(
            lambda: upstream_offsets(backend, group, source) == want,
            20,
            "streams commit mirrored",
            interval=0.5,
        )

        if not validates_configs:
            return
        # A changelog the cluster refuses (an invalid config): missing, and the status says why.
        bad = f"{prefix}-bad"
        bad_changelog = f"{bad}-counts-changelog"
        member, r = streams_join(
            client,
            bad,
            word_count_topology(
                source, f"{bad}-counts-repartition", bad_changelog, {"cleanup.policy": "bogus"}
            ),
        )
        epoch = int(r.member_epoch)
        details: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("refused" in d for d in details):
            time.sleep(0.3)
            r = streams_heartbeat(
                client, bad, member, epoch, active_tasks=[], standby_tasks=[], warmup_tasks=[]
            )
            epoch = int(r.member_epoch)
            details = [
                s.status_detail for s in r.status or () if int(s.status_code) == MISSING_INTERNAL_TOPICS
            ]
        assert any(bad_changelog in d and "INVALID_CONFIG" in d for d in details), (r, gw.log_tail())
        assert partitions_of(backend.bootstrap, bad_changelog) is None
        assert r.active_tasks in (None, ()) or not any(t.partitions for t in r.active_tasks)


def check_streams_word_count(gw: GatewayProcess, backend: Backend, base: Path, prefix: str) -> None:
    """Issue 31's real application on a cluster without streams groups: the Kafka Streams 4.4
    word count (`group.protocol=streams`) through the gateway, three instances, one SIGKILLed
    and restarted on its state directory, the output counts equal to the truth at every step
    (e2e/streams_wordcount.py's `three_instances_one_killed`); the repartition and changelog
    topics exist on the cluster itself (asked there directly: partitions, the changelog
    compacted), the application's commits are mirrored to the cluster's `__consumer_offsets`,
    and Kafka's `kafka-streams-groups.sh` describes the three members through the gateway."""
    dist = resolve_component("4.4.0", "streams")
    program = Program(SOURCE, dist.classpath, dist.home, base / "classes")
    app, source, output = f"{prefix}-wordcount", f"{prefix}-words-in", f"{prefix}-counts-out"
    replicas = min(backend.brokers, 3)
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    for f in admin.create_topics([NewTopic(source, 4, replicas), NewTopic(output, 2, replicas)]).values():
        f.result(30)
    produce(gw.bootstrap, source, LINES, "first")

    wc = WordCountApp(program.classpath(), gw.bootstrap, base, app, source, output)
    try:
        produced = three_instances_one_killed(wc, list(LINES), gw.log_tail)

        # The internal topics are the cluster's, created by groupshift: asked there directly.
        cluster = AdminClient({"bootstrap.servers": backend.bootstrap})
        listed = cluster.list_topics(timeout=10).topics
        repartition, changelog = f"{app}-words-repartition", f"{app}-counts-changelog"
        assert len(listed[repartition].partitions) == 4
        assert len(listed[changelog].partitions) == 4
        resource = ConfigResource(ConfigResource.Type.TOPIC, changelog)
        configs = cluster.describe_configs([resource])[resource].result(30)
        assert configs["cleanup.policy"].value == "compact"

        # The application's commits, answered by groupshift, mirrored to the cluster: every
        # input line, the ones counted after the kill and the restart included.
        wait_until(
            lambda: sum(upstream_offsets(backend, app, source).values()) == len(produced),
            30,
            f"{app}'s commits mirrored to the cluster",
            interval=0.5,
        )

        # Kafka's own tool, through the gateway, sees the three members groupshift serves, the
        # restarted one under the process id its state directory keeps.
        described = subprocess.run(
            [
                "java",
                *TOOL_JVM_OPTS,
                "-cp",
                dist.classpath,
                "org.apache.kafka.tools.streams.StreamsGroupCommand",
                "--bootstrap-server",
                gw.bootstrap,
                "--describe",
                "--group",
                app,
                "--members",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert described.returncode == 0, described.stderr[-2000:]
        rows = [line.split() for line in described.stdout.splitlines() if line.startswith(app)]
        assert len(rows) == 3 and all("ACTIVE:" in row for row in rows), described.stdout
        assert process_id(wc.state_dir(1), app) in described.stdout, described.stdout
    finally:
        wc.stop()


def check_streams_word_count_exactly_once(
    gw: GatewayProcess, backend: Backend, base: Path, prefix: str, protocol: str = "streams"
) -> dict[str, object]:
    """Issue 31's exactly-once word count: the Kafka Streams 4.4 word count with
    `processing.guarantee=exactly_once_v2` (its transactions the cluster's, its group and
    transactional offset commits groupshift's, docs/transactions.md) and `group.protocol` =
    `protocol`, three instances, one SIGKILLed in the middle of processing (one of its
    transactions open with records of its counts) and restarted
    (e2e/streams_wordcount.py's `three_instances_one_killed_mid_processing`): every count read
    committed equals the truth, and the cut transaction was aborted by the cluster. The
    committed transactional offsets of every input line are groupshift's (materialized, then
    mirrored to the cluster). Returns what the kill cut: the open transactions and how many
    records of the output and changelog topics only read uncommitted sees (aborted)."""
    dist = resolve_component("4.4.0", "streams")
    program = Program(SOURCE, dist.classpath, dist.home, base / "classes")
    app, source, output = f"{prefix}-wordcount", f"{prefix}-words-in", f"{prefix}-counts-out"
    replicas = min(backend.brokers, 3)
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    for f in admin.create_topics([NewTopic(source, 4, replicas), NewTopic(output, 2, replicas)]).values():
        f.result(30)
    produce(gw.bootstrap, source, LINES, "first")
    # The cut transaction blocks the takeover until the cluster aborts it (its offsets are
    # pending in groupshift, its records hold the last stable offset): at its timeout, 5 s
    # here instead of Kafka Streams' 10 s.
    settings = [
        "processing.guarantee=exactly_once_v2",
        f"group.protocol={protocol}",
        "producer.transaction.timeout.ms=5000",
    ]
    if protocol == "classic":
        # The classic protocol's consumers keep a killed instance's tasks for their session
        # (45 s by default): 6 s, as the streams group's session on the gateway.
        settings += ["consumer.session.timeout.ms=6000", "consumer.heartbeat.interval.ms=2000"]
    wc = WordCountApp(program.classpath(), gw.bootstrap, base, app, source, output, tuple(settings))
    try:
        produced, cut = three_instances_one_killed_mid_processing(
            wc, backend.bootstrap, list(LINES), gw.log_tail
        )
        changelog = f"{app}-counts-changelog"
        aborted = {
            topic: count_records(backend.bootstrap, topic, n, "read_uncommitted")
            - count_records(backend.bootstrap, topic, n, "read_committed")
            for topic, n in ((output, 2), (changelog, 4))
        }
        wait_until(
            lambda: sum(upstream_offsets(backend, app, source).values()) == len(produced),
            30,
            f"{app}'s transactional commits materialized and mirrored to the cluster",
            interval=0.5,
        )
        return {"cut": cut, "aborted": aborted}
    finally:
        wc.stop()
