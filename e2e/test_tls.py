"""SSL listeners with real clients (docs/security.md): confluent-kafka (classic and KIP-848
groups), kafka-python and aiokafka over TLS and mutual TLS; bad input (an untrusted or expired
client certificate, no certificate where one is required, plaintext bytes on a TLS port) closes
that connection and disturbs nothing else; a keystore update without a restart.

Every certificate is made by the test (e2e/tls_certs.py), never committed.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.tls_certs import PASSWORD, Authority, Issued
from harness.kafka_dist.java_clients import JavaClients

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Certs:
    ca: Authority
    server: Issued
    server_next: Issued  # the keystore rotated in without a restart
    alice: Issued  # a client of the trusted CA
    expired: Issued
    rogue: Issued  # a client of a CA the server does not trust
    rogue_ca: Authority


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    d = tmp_path_factory.mktemp("certs")
    ca = Authority(d, "test")
    rogue_ca = Authority(d / "rogue", "rogue")
    return Certs(
        ca=ca,
        server=ca.issue("server", "localhost", server=True),
        server_next=ca.issue("server-next", "localhost", server=True),
        alice=ca.issue("alice", "alice", ou="eng"),
        expired=ca.issue("expired", "old", ou="eng", expired=True),
        rogue=rogue_ca.issue("mallory", "mallory", ou="eng"),
        rogue_ca=rogue_ca,
    )


def tls_sets(certs: Certs) -> list[str]:
    """An SSL listener (PEM keystore, no client auth), a mutual-TLS one (PKCS12 stores,
    `ssl.client.auth=required`, a mapping rule) and a loopback PLAINTEXT one."""
    mtls = "listener.name.mtls."
    return [
        "listeners=SSL://127.0.0.1:0,MTLS://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map=SSL:SSL,MTLS:SSL,PLAINTEXT:PLAINTEXT",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={certs.server.pem}",
        f"{mtls}ssl.keystore.type=PKCS12",
        f"{mtls}ssl.keystore.location={certs.server.p12}",
        f"{mtls}ssl.keystore.password={PASSWORD}",
        f"{mtls}ssl.truststore.type=PKCS12",
        f"{mtls}ssl.truststore.location={certs.ca.p12}",
        f"{mtls}ssl.truststore.password={PASSWORD}",
        f"{mtls}ssl.client.auth=required",
        f"{mtls}ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L,DEFAULT",
        "ssl.enabled.protocols=TLSv1.2,TLSv1.3",
    ]


def ports(gw: GatewayProcess) -> dict[str, int]:
    return {k: int(v) for k, v in gw.events("gateway.listening")[-1]["ports"].items()}


@pytest.fixture
def tls_gw(gateways: Gateways, certs: Certs) -> Iterator[GatewayProcess]:
    yield gateways.start("tls", sets=tls_sets(certs))


def confluent_tls(certs: Certs, client: Issued | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca.pem)}
    if client is not None:
        conf["ssl.certificate.location"] = str(client.cert)
        conf["ssl.key.location"] = str(client.key)
    return conf


def confluent_roundtrip(bootstrap: str, tls: dict[str, Any], group_protocol: str, n: int = 20) -> list[bytes]:
    """Produce n records, then consume them in a group: the values read, in order."""
    from confluent_kafka import Consumer, Producer

    topic = f"tls-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, **tls})
    for i in range(n):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"g-{topic}",
        "auto.offset.reset": "earliest",
        "group.protocol": group_protocol,
        **tls,
    }
    if group_protocol == "classic":
        conf["session.timeout.ms"] = 6000
    consumer = Consumer(conf)
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_confluent_kafka_over_ssl_and_mutual_tls(
    tls_gw: GatewayProcess, certs: Certs, group_protocol: str
) -> None:
    p = ports(tls_gw)
    want = [f"v{i}".encode() for i in range(20)]
    assert confluent_roundtrip(f"127.0.0.1:{p['SSL']}", confluent_tls(certs, None), group_protocol) == want
    assert (
        confluent_roundtrip(f"127.0.0.1:{p['MTLS']}", confluent_tls(certs, certs.alice), group_protocol)
        == want
    )


def test_each_listener_answers_with_its_own_advertised_address(tls_gw: GatewayProcess, certs: Certs) -> None:
    from confluent_kafka.admin import AdminClient

    p = ports(tls_gw)
    for name, tls in (
        ("SSL", confluent_tls(certs, None)),
        ("MTLS", confluent_tls(certs, certs.alice)),
        ("PLAINTEXT", {}),
    ):
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{p[name]}", **tls})
        brokers = admin.list_topics(timeout=20).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", p[name])], name
        cluster = admin.describe_cluster().result(20)
        assert [(n.host, n.port) for n in cluster.nodes] == [("127.0.0.1", p[name])], name


def test_kafka_python_and_aiokafka_over_ssl(tls_gw: GatewayProcess, certs: Certs) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    bootstrap = f"127.0.0.1:{ports(tls_gw)['SSL']}"
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    tls = {"security_protocol": "SSL", "ssl_cafile": str(certs.ca.pem)}
    producer = KafkaProducer(bootstrap_servers=bootstrap, **tls)
    for i in range(5):
        producer.send(topic, f"k{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
        **tls,
    )
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == 5:
            break
    consumer.commit()
    consumer.close()
    assert got == [f"k{i}".encode() for i in range(5)]

    async def aio() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.helpers import create_ssl_context

        ctx = create_ssl_context(cafile=str(certs.ca.pem))
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=ctx)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic + "-aio", f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic + "-aio",
            bootstrap_servers=bootstrap,
            group_id=f"g-{topic}-aio",
            auto_offset_reset="earliest",
            security_protocol="SSL",
            ssl_context=ctx,
        )
        await consumer.start()
        out: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for record in consumer:
                    out.append(record.value)
                    if len(out) == 5:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return out

    assert asyncio.run(aio()) == [f"a{i}".encode() for i in range(5)]


# ApiVersions v0: api key 18, version 0, correlation id 1, a null client id, an empty body.
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, -1)


def api_versions_frame() -> bytes:
    body = API_VERSIONS_V0
    return struct.pack(">i", len(body)) + body


def tls_exchange(port: int, certs: Certs, client: Issued | None) -> bytes:
    """Handshake, send ApiVersions and read: the bytes answered (b"" if the server closed).
    Raises ssl.SSLError / OSError when the server refuses the handshake."""
    ctx = ssl.create_default_context(cafile=str(certs.ca.pem))
    if client is not None:
        ctx.load_cert_chain(str(client.cert), str(client.key))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as s,
    ):
        s.sendall(api_versions_frame())
        return s.recv(4)


def refused(port: int, certs: Certs, client: Issued | None) -> bool:
    try:
        return tls_exchange(port, certs, client) == b""
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True


def test_bad_tls_input_closes_that_connection_and_disturbs_nothing_else(
    tls_gw: GatewayProcess, certs: Certs
) -> None:
    from confluent_kafka import Producer

    p = ports(tls_gw)
    # A client that stays connected through all of it.
    steady = Producer({"bootstrap.servers": f"127.0.0.1:{p['MTLS']}", **confluent_tls(certs, certs.alice)})
    steady.produce("steady", b"before")
    assert steady.flush(30) == 0

    assert len(tls_exchange(p["MTLS"], certs, certs.alice)) == 4  # the good client is answered
    assert refused(p["MTLS"], certs, certs.rogue)  # untrusted CA
    assert refused(p["MTLS"], certs, certs.expired)  # expired certificate
    assert refused(p["MTLS"], certs, None)  # no certificate where one is required
    # Plaintext Kafka bytes on a TLS port: no handshake, no Kafka answer (at most a TLS alert
    # record, type 21), and the socket is closed.
    for port in (p["SSL"], p["MTLS"]):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(api_versions_frame())
            answered = bytearray()
            try:
                while chunk := s.recv(4096):
                    answered += chunk
            except ConnectionResetError:
                pass
            assert not answered or answered[0] == 21, bytes(answered)
    # A client that connects and never handshakes is not a problem for the others either.
    idle = socket.create_connection(("127.0.0.1", p["SSL"]), timeout=10)
    try:
        steady.produce("steady", b"after")
        assert steady.flush(30) == 0
        assert len(tls_exchange(p["SSL"], certs, None)) == 4
    finally:
        idle.close()
    assert tls_gw.alive()


def server_serial(port: int, certs: Certs) -> int:
    ctx = ssl.create_default_context(cafile=str(certs.ca.pem))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as s,
    ):
        der = s.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def test_keystore_update_without_restart(tls_gw: GatewayProcess, certs: Certs, tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    p = ports(tls_gw)
    assert server_serial(p["SSL"], certs) == certs.server.serial
    before = Producer({"bootstrap.servers": f"127.0.0.1:{p['SSL']}", **confluent_tls(certs, None)})
    before.produce("rotate", b"1")
    assert before.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{p['PLAINTEXT']}"})

    def alter(name: str, value: str) -> None:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(20)

    # A keystore that does not load is refused, and the listener keeps its certificate.
    (tmp_path / "junk.pem").write_text("not a key\n")
    with pytest.raises(Exception, match="SSLFactory"):
        alter("listener.name.ssl.ssl.keystore.location", str(tmp_path / "junk.pem"))
    assert server_serial(p["SSL"], certs) == certs.server.serial
    alter("listener.name.ssl.ssl.keystore.location", str(certs.server_next.pem))
    assert server_serial(p["SSL"], certs) == certs.server_next.serial  # new connections
    before.produce("rotate", b"2")  # a connection opened before keeps working
    assert before.flush(30) == 0
    assert server_serial(p["MTLS"], certs) == certs.server.serial  # the other listener is untouched
    # A truststore update replaces the CAs: the old one's clients are refused from then on.
    alter("listener.name.mtls.ssl.truststore.location", str(certs.rogue_ca.p12))
    assert refused(p["MTLS"], certs, certs.alice)
    assert len(tls_exchange(p["MTLS"], certs, certs.rogue)) == 4
    assert any(e.get("listener") == "SSL" for e in tls_gw.events("gateway.keystore_reloaded"))


def test_an_advertised_meta_address_stops_the_start_with_kafkas_message(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "groupshift",
            "serve",
            "--data-dir",
            str(tmp_path / "d"),
            "--set",
            "listeners=PLAINTEXT://0.0.0.0:0",
            "--set",
            "advertised.listeners=PLAINTEXT://0.0.0.0:9092",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode != 0
    assert (
        "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."
        in out.stdout + out.stderr
    )


def test_java_kafka_clients_over_ssl_and_mutual_tls(
    tls_gw: GatewayProcess, certs: Certs, kafka_clients4: JavaClients
) -> None:
    """Kafka's own Java client (VerifiableProducer / VerifiableConsumer, newest 4.x), with the
    PEM truststore and, on the mutual-TLS listener, a PKCS12 keystore."""
    p = ports(tls_gw)
    trust = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca.pem),
    }
    mutual = {
        **trust,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs.alice.p12),
        "ssl.keystore.password": PASSWORD,
    }
    for listener, props in (("SSL", trust), ("MTLS", mutual)):
        bootstrap = f"127.0.0.1:{p[listener]}"
        topic = f"java-{listener.lower()}-{uuid.uuid4().hex[:6]}"
        with kafka_clients4.verifiable_producer(bootstrap, topic, 10, properties=props) as producer:
            sent = producer.events_until_exit()
        assert sum(e.get("name") == "producer_send_success" for e in sent) == 10, producer.stderr_tail()
        for protocol in ("classic", "consumer"):
            with kafka_clients4.verifiable_consumer(
                bootstrap,
                topic,
                f"g-{topic}-{protocol}",
                group_protocol=protocol,
                max_messages=10,
                properties=props,
            ) as consumer:
                events = consumer.events_until_exit()
            consumed = sum(int(e.get("count", 0)) for e in events if e.get("name") == "records_consumed")
            assert consumed == 10, (listener, protocol, consumer.stderr_tail())
