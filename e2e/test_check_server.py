"""Proof that `groupshift check upgrade` and `groups migration` know the server in front of them
(tools.groups.capabilities): a classic group on a server that does not serve the KIP-848
consumer protocol is NOT-READY (exit 1) with the reason and the two ways out, whatever the group;
on one that does, READY (exit 0).

- Kafka 3.9 with the default `group.coordinator.rebalance.protocols` (classic): it lists
  ConsumerGroupHeartbeat all the same, and answers the KIP-848 APIs UNSUPPORTED_VERSION;
  the same cluster behind `groupshift serve --upstream` (the second way out) is READY;
- Kafka 3.9 with `classic,consumer`: READY;
- Kafka 4.4 formatted with `--feature group.version=0`: lists the API, serves none: NOT-READY;
- groupshift (consumer protocol on by default): READY;
- Tansu (a non-Apache broker; no ConsumerGroupHeartbeat in ApiVersions, and a ListGroups that
  answers no group): `--all` finds no group yet exits 1 with the server's reason, and the group
  named on the command line is NOT-READY.

One Kafka node at a time, each started and stopped by its own test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from e2e.differential import Session
from e2e.differential_classic import coordinator_loaded, join, sync
from e2e.harness import REPO, GatewayProcess
from harness.kafka_dist import KafkaCluster
from tests.plugins.kafka import skip_without_tools
from translation.embedded_protocol import Subscription, serialize_assignment, serialize_subscription

pytestmark = pytest.mark.e2e

SESSION_MS = 120_000  # the raw member never heartbeats: it must outlive the test
BASE = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "2",
    "group.initial.rebalance.delay.ms": "0",
}


@contextmanager
def kafka(
    version: str, tmp: Path, configs: dict[str, str], format_args: tuple[str, ...] = ()
) -> Iterator[str]:
    skip_without_tools()
    with KafkaCluster(
        version, configs={**BASE, **configs}, workdir=tmp / "kafka", format_args=format_args
    ) as c:
        c.start()
        yield c.bootstrap


def classic_group(bootstrap: str) -> str:
    """A classic consumer group with one member that joined and synced (never heartbeats)."""
    s = Session("server", bootstrap, {"run": uuid.uuid4().hex[:6]})
    try:
        gid, topic = s.group("classic"), s.topic("orders")
        coordinator_loaded(s, gid)
        over: dict[str, Any] = {
            "group_id": gid,
            "protocols": [{"name": "range", "metadata": serialize_subscription(Subscription(1, (topic,)))}],
            "session_timeout": SESSION_MS,
        }
        r = join(s, **over)
        if r.error_code.name == "member_id_required":
            r = join(s, member_id=r.member_id, **over)
        assert r.error_code.name == "none", r
        data = serialize_assignment({topic: [0]}, 1)
        sr = sync(
            s,
            r.generation_id,
            r.member_id,
            group_id=gid,
            assignments=[{"member_id": r.member_id, "assignment": data}],
        )
        assert sr.error_code.name == "none", sr
        return gid
    finally:
        s.close()


def groupshift(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groupshift", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def check_upgrade(bootstrap: str) -> tuple[int, dict[str, Any], str]:
    """(exit status, the --json document, the text output) of `check upgrade --all`."""
    r = groupshift("check", "upgrade", "--bootstrap-server", bootstrap, "--all", "--json")
    assert r.returncode in (0, 1), (r.returncode, r.stdout, r.stderr)
    text = groupshift("check", "upgrade", "--bootstrap-server", bootstrap, "--all")
    assert text.returncode == r.returncode, (text.stdout, text.stderr)
    return r.returncode, json.loads(r.stdout), text.stdout


def migration(bootstrap: str, group: str) -> dict[str, Any]:
    r = groupshift("groups", "--bootstrap-server", bootstrap, "migration", group, "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def assert_not_ready(bootstrap: str, group: str, because: str) -> None:
    status, doc, text = check_upgrade(bootstrap)
    assert status == 1, doc
    (v,) = [v for v in doc["groups"] if v["group"] == group]
    assert v["verdict"] == "NOT-READY", v
    assert because in v["reason"], v
    assert doc["server"]["serves_consumer_protocol"] is False, doc["server"]
    way_out = f"groupshift serve --upstream {bootstrap}"
    assert any(way_out in w for w in doc["server"]["ways_out"]), doc["server"]
    assert way_out in v["fix"] and "Kafka 4.0+" in v["fix"], v
    assert "does not serve the KIP-848 consumer protocol" in text and way_out in text, text
    rep = migration(bootstrap, group)
    assert rep["conversion"]["allowed"] is False, rep
    assert rep["next_step"].startswith("Do not start group.protocol=consumer members"), rep["next_step"]
    assert way_out in rep["next_step"], rep["next_step"]


def assert_ready(bootstrap: str, group: str) -> None:
    status, doc, _text = check_upgrade(bootstrap)
    assert status == 0, doc
    (v,) = [v for v in doc["groups"] if v["group"] == group]
    assert v["verdict"] == "READY", v
    assert doc["server"]["serves_consumer_protocol"] is True, doc["server"]
    rep = migration(bootstrap, group)
    assert rep["conversion"]["allowed"] is True, rep
    assert "group.protocol=consumer" in rep["next_step"], rep["next_step"]


def test_kafka_3_9_classic_only_is_not_ready(tmp_path: Path) -> None:
    with kafka("3.9", tmp_path, {}) as bootstrap:
        group = classic_group(bootstrap)
        assert_not_ready(bootstrap, group, "group.coordinator.rebalance.protocols does not include consumer")
        # The second way out, carried out: groupshift in front of the same cluster serves it.
        gw = GatewayProcess.start(tmp_path / "gw", extra_args=("--upstream", bootstrap))
        try:
            assert_ready(gw.bootstrap, classic_group(gw.bootstrap))
        finally:
            gw.stop()


def test_kafka_3_9_with_the_consumer_protocol_is_ready(tmp_path: Path) -> None:
    with kafka("3.9", tmp_path, {"group.coordinator.rebalance.protocols": "classic,consumer"}) as bootstrap:
        assert_ready(bootstrap, classic_group(bootstrap))


def test_kafka_4_4_with_group_version_0_is_not_ready(tmp_path: Path) -> None:
    configs = {"group.coordinator.rebalance.protocols": "classic,consumer"}
    with kafka("4.4", tmp_path, configs, ("--feature", "group.version=0")) as bootstrap:
        assert_not_ready(bootstrap, classic_group(bootstrap), "the group.version feature is 0")


def test_groupshift_is_ready(tmp_path: Path) -> None:
    gw = GatewayProcess.start(tmp_path / "gw", sets=("group.initial.rebalance.delay.ms=0",))
    try:
        assert_ready(gw.bootstrap, classic_group(gw.bootstrap))
    finally:
        gw.stop()


def test_tansu_is_not_ready_even_when_it_lists_no_group(tansu_factory: Any) -> None:
    broker = tansu_factory("check-tansu")
    bootstrap = broker.bootstrap
    group = classic_group(bootstrap)
    status, doc, text = check_upgrade(bootstrap)
    assert status == 1, doc
    assert doc["groups"] == [] and doc["server"]["serves_consumer_protocol"] is False, doc
    assert "ConsumerGroupHeartbeat (API 68)" in doc["server"]["reason"], doc["server"]
    assert f"groupshift serve --upstream {bootstrap}" in text and "No groups." in text, text
    named = groupshift("check", "upgrade", "--bootstrap-server", bootstrap, group, "--json")
    assert named.returncode == 1, (named.stdout, named.stderr)
    (v,) = json.loads(named.stdout)["groups"]
    assert (v["group"], v["verdict"]) == (group, "NOT-READY"), v
    rep = migration(bootstrap, group)
    assert rep["conversion"]["allowed"] is False, rep
    assert rep["next_step"].startswith("Do not start group.protocol=consumer members"), rep["next_step"]
