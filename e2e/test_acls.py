"""Authorization end to end (docs/security.md): groupshift with a mutual-TLS listener and Kafka's
StandardAuthorizer, ACLs managed with Kafka's own `kafka-acls.sh` (through `groupshift kafka
tool`), real clients allowed and refused by them (confluent-kafka with both group protocols,
kafka-python), and the ACLs kept across a restart, a SIGKILL, and refused when damaged.

One groupshift per module (plus one for the restart test); Kafka 4.4's tools for kafka-acls.sh.
About 2 minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.secured_pair import Certs, make_certs, start_mtls_groupshift
from e2e.tls_certs import PASSWORD
from protocol.client import WireClient, make_request
from tests.plugins.kafka import skip_without_tools

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parent.parent
TOOLS_VERSION = "4.4"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("acl-certs"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[GatewayProcess]:
    gateways = Gateways(tmp_path_factory.mktemp("acl-e2e"))
    yield start_mtls_groupshift(gateways, certs)
    problems = gateways.finish()
    if problems:
        pytest.fail("\n\n".join(problems))


def command_config(certs: Certs, user: str, directory: Path) -> Path:
    """Kafka client properties for `--command-config`: SSL with `user`'s PKCS12 keystore."""
    path = directory / f"{user}.properties"
    path.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.type=PKCS12\nssl.truststore.location={certs.ca.p12}\nssl.truststore.password={PASSWORD}\n"
        f"ssl.keystore.type=PKCS12\nssl.keystore.location={certs.users[user].p12}\n"
        f"ssl.keystore.password={PASSWORD}\nssl.key.password={PASSWORD}\n"
    )
    return path


def kafka_acls(gw: GatewayProcess, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groupshift", "kafka", "tool", "--version", TOOLS_VERSION, "kafka-acls",
         "--bootstrap-server", gw.bootstrap, "--command-config", str(config), *args],
        cwd=REPO, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def confluent_tls(certs: Certs, user: str) -> dict[str, Any]:
    u = certs.users[user]
    return {
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca.pem),
        "ssl.certificate.location": str(u.cert),
        "ssl.key.location": str(u.key),
    }


def produce(bootstrap: str, tls: dict[str, Any], topic: str, n: int = 5) -> list[str]:
    """Errors of the delivery reports ("" for each record delivered)."""
    from confluent_kafka import Producer

    results: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, **tls})
    for i in range(n):
        producer.produce(
            topic, f"v{i}".encode(), on_delivery=lambda err, msg: results.append(err.name() if err else "")
        )
    producer.flush(30)
    return results


def consume(
    bootstrap: str, tls: dict[str, Any], topic: str, group: str, protocol: str, n: int
) -> tuple[int, set[str]]:
    """(records read, error names seen) of a group consumer, until n records or 20 s."""
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "group.protocol": protocol,
        **tls,
    }
    if protocol == "classic":
        conf["session.timeout.ms"] = 6000
    consumer = Consumer(conf)
    consumer.subscribe([topic])
    read, errors = 0, set()
    deadline = time.monotonic() + 20
    try:
        while read < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.add(msg.error().name())
                if "AUTHORIZATION" in msg.error().name():
                    break
                continue
            read += 1
    finally:
        consumer.close()
    return read, errors


def test_kafka_acls_tool_and_confluent_clients(secured: GatewayProcess, certs: Certs, tmp_path: Path) -> None:
    """ACLs made with kafka-acls.sh let alice produce and consume in both group protocols and
    refuse bob; alice may not change ACLs; removed ACLs refuse alice again."""
    skip_without_tools()
    run = uuid.uuid4().hex[:8]
    topic = f"orders-{run}"
    admin = command_config(certs, "admin", tmp_path)
    bs = secured.bootstrap

    assert produce(bs, confluent_tls(certs, "alice"), topic, 1) == ["TOPIC_AUTHORIZATION_FAILED"]
    added = kafka_acls(
        secured, admin, "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic
    )
    assert added.returncode == 0, added.stderr
    added = kafka_acls(secured, admin, "--add", "--allow-principal", "User:alice", "--consumer",
                       "--topic", topic, "--group", "app-",
                       "--resource-pattern-type", "prefixed")  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = kafka_acls(secured, admin, "--list", "--topic", topic)
    assert listed.returncode == 0, listed.stderr
    assert "principal=User:alice" in listed.stdout and "operation=WRITE" in listed.stdout, listed.stdout

    assert produce(bs, confluent_tls(certs, "alice"), topic) == [""] * 5
    for protocol in ("classic", "consumer"):
        group = f"app-{protocol}-{run}"
        assert consume(bs, confluent_tls(certs, "alice"), topic, group, protocol, 5) == (5, set()), protocol
        read, errors = consume(bs, confluent_tls(certs, "bob"), topic, group, protocol, 5)
        assert read == 0 and errors & {"GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"}, errors

    alice = command_config(certs, "alice", tmp_path)
    denied = kafka_acls(
        secured, alice, "--add", "--allow-principal", "User:alice", "--operation", "All", "--cluster"
    )
    assert "ClusterAuthorizationException" in denied.stdout + denied.stderr, denied.stdout + denied.stderr
    removed = kafka_acls(secured, admin, "--remove", "--force", "--topic", topic)
    assert removed.returncode == 0, removed.stderr
    assert produce(bs, confluent_tls(certs, "alice"), topic, 1) == ["TOPIC_AUTHORIZATION_FAILED"]


def test_kafka_python_is_refused_then_allowed(secured: GatewayProcess, certs: Certs) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    run = uuid.uuid4().hex[:8]
    topic = f"kp-{run}"
    carol = certs.users["carol"]
    tls = {
        "security_protocol": "SSL",
        "ssl_cafile": str(certs.ca.pem),
        "ssl_certfile": str(carol.cert),
        "ssl_keyfile": str(carol.key),
    }
    producer = KafkaProducer(bootstrap_servers=secured.bootstrap, max_block_ms=5000, **tls)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(topic, b"x").get(timeout=10)
    finally:
        producer.close()
    grant(secured, certs, [(2, topic, "User:carol", 2)])  # ALL on the topic
    grant(secured, certs, [(3, f"kpg-{run}", "User:carol", 3)])  # READ on the group
    producer = KafkaProducer(bootstrap_servers=secured.bootstrap, **tls)
    producer.send(topic, b"hello").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=secured.bootstrap, group_id=f"kpg-{run}", auto_offset_reset="earliest",
        consumer_timeout_ms=15000, **tls,
    )  # fmt: skip
    try:
        assert [m.value for m in consumer][:1] == [b"hello"]
        consumer.commit()
    finally:
        consumer.close()


def admin_client(gw: GatewayProcess, certs: Certs) -> WireClient:
    host, port = gw.bootstrap.rsplit(":", 1)
    return WireClient(int(port), host=host, timeout=10.0, ssl_context=certs.context("admin"))


def grant(gw: GatewayProcess, certs: Certs, acls: list[tuple[int, str, str, int]]) -> None:
    c = admin_client(gw, certs)
    try:
        r = c.request(
            make_request(
                30,
                3,
                creations=[
                    {"resource_type": t, "resource_name": n, "resource_pattern_type": 3, "principal": p,
                     "host": "*", "operation": op, "permission_type": 3}
                    for t, n, p, op in acls
                ],
            )
        )  # fmt: skip
        assert all(x.error_code == 0 for x in r.results), r
    finally:
        c.close()


def described(gw: GatewayProcess, certs: Certs) -> list[tuple[int, str, str, int]]:
    c = admin_client(gw, certs)
    try:
        r = c.request(
            make_request(29, 3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                         principal_filter=None, host_filter=None, operation=1, permission_type=1)
        )  # fmt: skip
    finally:
        c.close()
    return sorted(
        (x.resource_type, x.resource_name, a.principal, a.operation) for x in r.resources for a in x.acls
    )


def test_acls_survive_a_restart_and_a_sigkill_and_a_damaged_file_stops_the_start(
    tmp_path: Path, certs: Certs
) -> None:
    gateways = Gateways(tmp_path)
    gw = start_mtls_groupshift(gateways, certs, "durable")
    want = [(3, "durable-g", "User:alice", 3), (2, "durable-t", "User:bob", 4)]
    grant(gw, certs, want)
    assert described(gw, certs) == sorted(want)
    gw.stop()
    gw = gateways.restart(gw)
    assert described(gw, certs) == sorted(want)
    grant(gw, certs, [(3, "after-restart", "User:carol", 8)])
    gw.kill()  # SIGKILL right after the answer: the ACL was durable before it was answered
    gw = gateways.restart(gw)
    assert described(gw, certs) == sorted([*want, (3, "after-restart", "User:carol", 8)])
    gw.stop()
    acls = gw.data_dir / "acls.json"
    acls.write_text(acls.read_text().replace("durable-g", "tampered"))
    sets = [arg for s in gw.sets for arg in ("--set", s)]
    failed = subprocess.run(
        [sys.executable, "-m", "groupshift", "serve", "--listen", "127.0.0.1:0",
         "--data-dir", str(gw.data_dir), *sets],
        cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert failed.returncode != 0
    assert "acls.json is damaged (checksum mismatch)" in failed.stdout + failed.stderr
    assert "Traceback" not in failed.stdout + failed.stderr


def test_groupshift_acls_command_against_groupshift(
    secured: GatewayProcess, certs: Certs, tmp_path: Path
) -> None:
    """`groupshift acls` (kafka-acls.sh's verbs) adds, lists and removes groupshift's ACLs; a
    principal that may not ALTER the cluster is refused with CLUSTER_AUTHORIZATION_FAILED."""
    group = f"cmd-{uuid.uuid4().hex[:8]}"
    admin = command_config(certs, "admin", tmp_path)

    def acls(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "groupshift", "acls", "--bootstrap-server", secured.bootstrap,
             "--command-config", str(config), *args],
            cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    added = acls(admin, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--group", group)
    assert added.returncode == 0, added.stdout + added.stderr
    assert (3, group, "User:bob", 3) in described(secured, certs)  # GROUP, READ
    listed = acls(admin, "--list", "--group", group)
    assert listed.returncode == 0 and "User:bob" in listed.stdout, listed.stdout + listed.stderr
    refused = acls(command_config(certs, "alice", tmp_path), "--add", "--allow-principal", "User:alice",
                   "--operation", "Read", "--group", group)  # fmt: skip
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stdout + refused.stderr
    removed = acls(admin, "--remove", "--force", "--group", group)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert all(n != group for _, n, _, _ in described(secured, certs))
