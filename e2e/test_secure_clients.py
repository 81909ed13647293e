"""Clients the other security modules leave out, on every secured listener type (docs/security.md,
"Tested clients"): franz-go (the matrix's Go verifiable consumer, harness/matrix/clients/go) over
SSL, mutual TLS, SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, in
KIP-848 and classic groups; kafka-python and aiokafka with a client certificate on mutual TLS;
Kafka's Java consumer on SASL_PLAINTEXT (SCRAM-SHA-256) and with PLAIN on SASL_SSL; Kafka's own
`kafka-consumer-groups.sh --command-config` (list, describe, reset-offsets --dry-run) and
`kafka-acls.sh --command-config` on SASL_SSL with SCRAM (e2e/test_acls.py has kafka-acls.sh on mutual
TLS).

e2e/test_tls.py and e2e/test_sasl.py cover the rest of confluent-kafka, kafka-python, aiokafka and
the Java client. One gateway for the module, with all four listener types; certificates made by
the test. About 60 s (most of it the JVM tools).
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
from e2e.groups import FAST_GROUP_SETTINGS, create_topic
from e2e.harness import GatewayProcess
from e2e.test_matrix_go import GoMember, go_binary
from harness.certificates import PASSWORD, Authority, Issued
from harness.kafka_dist.java_clients import JavaClients
from tests.plugins.kafka import skip_without_tools

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parent.parent
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-secret"
SCRAM_USER, SCRAM_PASSWORD = "scram-user", "scram-secret"
PARTITIONS = 3
RECORDS = 30


class Certs:
    def __init__(self, directory: Path) -> None:
        self.ca = Authority(directory, "secure-clients")
        self.server: Issued = self.ca.issue("server", "localhost", server=True)
        self.client: Issued = self.ca.issue("alice", "alice", ou="eng")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def gw(module_gateways: Gateways, certs: Certs) -> Iterator[GatewayProcess]:
    mtls = "listener.name.mtls."
    sets = [
        *FAST_GROUP_SETTINGS,
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,"
        "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={certs.server.pem}",
        f"{mtls}ssl.truststore.type=PKCS12",
        f"{mtls}ssl.truststore.location={certs.ca.p12}",
        f"{mtls}ssl.truststore.password={PASSWORD}",
        f"{mtls}ssl.client.auth=required",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        # Authorization on but open where no ACL applies, so only the kafka-acls.sh test's topic
        # is guarded; the SCRAM user is the super user that manages ACLs.
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=true",
        f"super.users=User:{SCRAM_USER}",
    ]
    for listener in ("sasl_plaintext", "sasl_ssl"):
        sets.append(
            f"listener.name.{listener}.plain.sasl.jaas.config={PLAIN_MODULE} required "
            f'user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
        )
        for scram in ("scram-sha-256", "scram-sha-512"):
            sets.append(f"listener.name.{listener}.{scram}.sasl.jaas.config={SCRAM_MODULE} required;")
    gateway = module_gateways.start("secure-clients", sets=sets)
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upsert = UserScramCredentialUpsertion(
            SCRAM_USER, ScramCredentialInfo(mechanism, 4096), SCRAM_PASSWORD.encode()
        )
        for f in admin.alter_user_scram_credentials([upsert]).values():
            f.result(timeout=30)
    yield gateway


def ports(gateway: GatewayProcess) -> dict[str, int]:
    return {k: int(v) for k, v in gateway.events("gateway.listening")[-1]["ports"].items()}


def client_properties(certs: Certs, listener: str, mechanism: str | None) -> dict[str, str]:
    """Kafka client properties (the Java names, PEM stores) for `listener`."""
    props = {"security.protocol": "SSL" if listener == "MTLS" else listener}
    if listener in ("SSL", "MTLS", "SASL_SSL"):
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca.pem)})
    if listener == "MTLS":
        props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.client.pem)})
    if mechanism is not None:
        module, user, password = (
            (PLAIN_MODULE, PLAIN_USER, PLAIN_PASSWORD)
            if mechanism == "PLAIN"
            else (SCRAM_MODULE, SCRAM_USER, SCRAM_PASSWORD)
        )
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    return props


def produce(gw: GatewayProcess, topic: str, n: int) -> None:
    """n records over the PLAINTEXT listener, spread over the topic's partitions."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": gw.bootstrap, "acks": "all"})
    for i in range(n):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS if n > 5 else 0)
    assert producer.flush(30) == 0


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


#: (listener, SASL mechanism, group protocol): each listener type in both protocols, each
#: mechanism at least once on each SASL listener type.
FRANZ_GO_CASES = [
    ("SSL", None, "classic"),
    ("SSL", None, "consumer"),
    ("MTLS", None, "classic"),
    ("MTLS", None, "consumer"),
    ("SASL_PLAINTEXT", "PLAIN", "classic"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "consumer"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "classic"),
    ("SASL_SSL", "PLAIN", "consumer"),
    ("SASL_SSL", "SCRAM-SHA-256", "classic"),
    ("SASL_SSL", "SCRAM-SHA-512", "consumer"),
]


def test_franz_go_on_every_listener_and_mechanism(gw: GatewayProcess, certs: Certs, tmp_path: Path) -> None:
    """One franz-go consumer per case, all at once, each in its own group: every record read and
    committed, and the gateway saw each group join with the protocol asked for (franz-go falls
    back to classic silently, so the log is the proof KIP-848 was spoken)."""
    binary = go_binary("franz-go")
    topic = f"franz-{uuid.uuid4().hex[:6]}"
    create_topic(gw, topic, PARTITIONS)
    produce(gw, topic, RECORDS)
    p = ports(gw)
    members: dict[str, GoMember] = {}
    try:
        for listener, mechanism, protocol in FRANZ_GO_CASES:
            case = f"{listener}-{mechanism or 'tls'}-{protocol}".lower()
            config = write_properties(
                tmp_path / f"{case}.properties", client_properties(certs, listener, mechanism)
            )
            args = [
                "--bootstrap-server", f"127.0.0.1:{p[listener]}", "--topic", topic,
                "--group-id", f"g-{topic}-{case}", "--group-protocol", protocol,
                "--max-messages", str(RECORDS), "--consumer.config", str(config),
                "--session-timeout", "6000", "--heartbeat-interval", "250",
            ]  # fmt: skip
            members[case] = GoMember(binary, args, tmp_path / f"{case}.stderr")
        deadline = time.monotonic() + 90
        for m in members.values():
            while m.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        codes = {case: m.stop() for case, m in members.items()}
    tails = {case: m.stderr_tail() for case, m in members.items()}
    assert codes == dict.fromkeys(members, 0), tails
    for (_, _, protocol), (case, m) in zip(FRANZ_GO_CASES, members.items(), strict=True):
        names = [e["name"] for e in m.events]
        assert m.bad_lines == [] and names[0] == "startup_complete" and names[-1] == "shutdown_complete", (
            names
        )
        consumed = sum(e["count"] for e in m.events if e["name"] == "records_consumed")
        assert consumed == RECORDS, (case, tails[case])
        assert sum(m.committed().values()) == RECORDS, (case, m.events[-5:])
        joined = {e["protocol"] for e in gw.events("member.joined") if e.get("group") == f"g-{topic}-{case}"}
        assert joined == {protocol}, case


def kafka_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groupshift", "kafka", "tool", "--version", "4", *args],
        cwd=REPO, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_kafka_consumer_groups_command_config_on_sasl_ssl(
    gw: GatewayProcess, certs: Certs, tmp_path: Path
) -> None:
    """`kafka-consumer-groups.sh --command-config` with SCRAM-SHA-512 over SASL_SSL: the group a
    confluent-kafka consumer committed on the same listener is listed, described with its
    offsets, and its reset previewed (--dry-run changes nothing)."""
    skip_without_tools()
    from confluent_kafka import Consumer, TopicPartition

    topic, group = f"cg-{uuid.uuid4().hex[:6]}", f"cg-group-{uuid.uuid4().hex[:6]}"
    create_topic(gw, topic, 1)
    produce(gw, topic, 5)
    bootstrap = f"127.0.0.1:{ports(gw)['SASL_SSL']}"
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs.ca.pem),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": SCRAM_USER,
        "sasl.password": SCRAM_PASSWORD,
        "group.id": group,
    }
    consumer = Consumer(conf)
    consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    consumer.close()

    config = write_properties(
        tmp_path / "scram.properties", client_properties(certs, "SASL_SSL", "SCRAM-SHA-512")
    )
    tool = ("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--command-config", str(config))
    listed = kafka_tool(*tool, "--list")
    assert listed.returncode == 0 and group in listed.stdout.split(), listed.stdout + listed.stderr[-2000:]
    described = kafka_tool(*tool, "--describe", "--group", group)
    assert described.returncode == 0, described.stderr[-2000:]
    row = next(line.split() for line in described.stdout.splitlines() if line.startswith(group))
    assert row[1:5] == [topic, "0", "4", "5"], described.stdout  # GROUP TOPIC PARTITION CURRENT END
    reset = kafka_tool(
        *tool, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run"
    )
    assert reset.returncode == 0, reset.stderr[-2000:]
    preview = next(line.split() for line in reset.stdout.splitlines() if line.startswith(group))
    assert preview[1:4] == [topic, "0", "0"], reset.stdout  # GROUP TOPIC PARTITION NEW-OFFSET
    again = kafka_tool(*tool, "--describe", "--group", group)
    assert next(line.split() for line in again.stdout.splitlines() if line.startswith(group))[3] == "4"


def test_kafka_python_and_aiokafka_over_mutual_tls(gw: GatewayProcess, certs: Certs) -> None:
    """kafka-python and aiokafka present a client certificate on the mutual-TLS listener
    (e2e/test_tls.py has them on one-way SSL only): each reads back what was produced."""
    import asyncio
    import ssl

    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaConsumer

    topic = f"mtls-py-{uuid.uuid4().hex[:6]}"
    create_topic(gw, topic, 1)
    produce(gw, topic, 5)
    want = [f"v{i}".encode() for i in range(5)]
    bootstrap = f"127.0.0.1:{ports(gw)['MTLS']}"
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{topic}-kp",
        auto_offset_reset="earliest",
        consumer_timeout_ms=15000,
        security_protocol="SSL",
        ssl_cafile=str(certs.ca.pem),
        ssl_certfile=str(certs.client.cert),
        ssl_keyfile=str(certs.client.key),
    )
    got = [m.value for _, m in zip(range(5), consumer, strict=False)]
    consumer.close()
    assert got == want

    async def aio() -> list[bytes]:
        ctx = ssl.create_default_context(cafile=str(certs.ca.pem))
        ctx.load_cert_chain(str(certs.client.cert), str(certs.client.key))
        aio_consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"g-{topic}-aio",
            auto_offset_reset="earliest",
            security_protocol="SSL",
            ssl_context=ctx,
        )
        await aio_consumer.start()
        try:
            return [(await asyncio.wait_for(aio_consumer.getone(), 15)).value for _ in range(5)]
        finally:
            await aio_consumer.stop()

    assert asyncio.run(aio()) == want


def test_java_consumers_on_sasl_plaintext_and_with_plain_on_sasl_ssl(
    gw: GatewayProcess, certs: Certs, kafka_clients4: JavaClients
) -> None:
    """Kafka's Java consumer where e2e/test_sasl.py has none: a classic group with SCRAM-SHA-256
    over SASL_PLAINTEXT, a KIP-848 group with PLAIN over SASL_SSL."""
    topic = f"java-sasl-{uuid.uuid4().hex[:6]}"
    create_topic(gw, topic, PARTITIONS)
    produce(gw, topic, RECORDS)
    p = ports(gw)
    for listener, mechanism, protocol in (
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "classic"),
        ("SASL_SSL", "PLAIN", "consumer"),
    ):
        group = f"g-{topic}-{protocol}"
        with kafka_clients4.verifiable_consumer(
            f"127.0.0.1:{p[listener]}",
            topic,
            group,
            group_protocol=protocol,
            max_messages=RECORDS,
            properties=client_properties(certs, listener, mechanism),
        ) as consumer:
            events = []
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                event = consumer.next_event(deadline - time.monotonic())
                if event is None:
                    break
                events.append(event)
                if event.get("name") == "shutdown_complete":
                    break
        consumed = sum(int(e.get("count", 0)) for e in events if e.get("name") == "records_consumed")
        assert consumed == RECORDS, (listener, mechanism, consumer.stderr_tail())
        joined = {e["protocol"] for e in gw.events("member.joined") if e.get("group") == group}
        assert joined == {protocol}, (listener, mechanism)


def produce_errors(conf: dict[str, Any], topic: str) -> list[str]:
    """One record produced with `conf`: its delivery error's name, "" when delivered."""
    from confluent_kafka import Producer

    outcomes: list[str] = []
    producer = Producer({**conf, "message.timeout.ms": 10000})
    producer.produce(topic, b"x", on_delivery=lambda err, _m: outcomes.append(err.name() if err else ""))
    producer.flush(15)
    return outcomes


def test_kafka_acls_command_config_on_sasl_ssl(gw: GatewayProcess, certs: Certs, tmp_path: Path) -> None:
    """`kafka-acls.sh --command-config` as the SCRAM super user over SASL_SSL: an ACL added on a
    topic for that user is listed and shuts alice (PLAIN, SASL_PLAINTEXT) out of the topic; once
    removed, alice writes again."""
    skip_without_tools()
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    create_topic(gw, topic, 1)
    alice = {
        "bootstrap.servers": f"127.0.0.1:{ports(gw)['SASL_PLAINTEXT']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": PLAIN_USER,
        "sasl.password": PLAIN_PASSWORD,
    }
    assert produce_errors(alice, topic) == [""]
    config = write_properties(
        tmp_path / "scram.properties", client_properties(certs, "SASL_SSL", "SCRAM-SHA-512")
    )
    tool = (
        "kafka-acls",
        "--bootstrap-server",
        f"127.0.0.1:{ports(gw)['SASL_SSL']}",
        "--command-config",
        str(config),
    )
    added = kafka_tool(
        *tool, "--add", "--allow-principal", f"User:{SCRAM_USER}", "--operation", "Read", "--topic", topic
    )
    assert added.returncode == 0, added.stdout + added.stderr[-2000:]
    listed = kafka_tool(*tool, "--list", "--topic", topic)
    assert f"principal=User:{SCRAM_USER}" in listed.stdout and "operation=READ" in listed.stdout, (
        listed.stdout
    )
    assert produce_errors(alice, topic) == ["TOPIC_AUTHORIZATION_FAILED"]
    removed = kafka_tool(*tool, "--remove", "--force", "--topic", topic)
    assert removed.returncode == 0, removed.stdout + removed.stderr[-2000:]
    assert produce_errors(alice, topic) == [""]
