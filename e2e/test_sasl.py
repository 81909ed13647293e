"""SASL_PLAINTEXT and SASL_SSL listeners with real clients (docs/security.md): PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512 with confluent-kafka (KIP-848 and classic groups), kafka-python,
aiokafka and Kafka's Java client; SCRAM users created and described with Kafka's own
`kafka-configs.sh`; KIP-368 re-authentication on a listener with a short
`connections.max.reauth.ms`; and bad input (wrong password, unknown user, a Kafka request before
authentication, an exchange that never completes, an oversized token, plaintext bytes on the
SASL_SSL port), each answered as Kafka answers it or closed, while a healthy client on the same
gateway keeps working; and the same SASL exchanges and AlterUserScramCredentials /
DescribeUserScramCredentials requests answered as a real Kafka 4.x node with the same SASL
settings answers them.

One gateway for the module; certificates are made by the test (e2e/tls_certs.py).
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.tls_certs import Authority, Issued
from harness.kafka_dist.cluster import KafkaCluster, free_port
from harness.kafka_dist.java_clients import JavaClients
from harness.kafka_dist.maven import KafkaUnavailable
from protocol.codec import decode_response, encode_request
from protocol.entity_builder import build
from tests.plugins.kafka import skip_without_tools

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parent.parent
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
USERS = {"alice": "alice-secret", "admin": "admin-secret"}
SCRAM_USER, SCRAM_PASSWORD = "scram-user", "scram-secret"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
TIMEOUT_MS = 2000  # sasl.server.authentication.timeout.ms of this gateway
REAUTH_MS = 2000  # connections.max.reauth.ms of the REAUTH listener


def plain_jaas() -> str:
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    return f'{PLAIN_MODULE} required username="admin" password="admin-secret" {users};'


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Authority, Issued]:
    ca = Authority(tmp_path_factory.mktemp("certs"), "sasl-test")
    return ca, ca.issue("server", "localhost", server=True)


@pytest.fixture(scope="module")
def gw(module_gateways: Gateways, certs: tuple[Authority, Issued]) -> Iterator[GatewayProcess]:
    _, server = certs
    sets = [
        "listeners=SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,REAUTH://127.0.0.1:0,"
        "PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
        "REAUTH:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        f"sasl.enabled.mechanisms={','.join(MECHANISMS)}",
        f"listener.name.reauth.connections.max.reauth.ms={REAUTH_MS}",
        f"sasl.server.authentication.timeout.ms={TIMEOUT_MS}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={server.pem}",
        "metrics.listen=127.0.0.1:0",
    ]
    for listener in ("sasl_plaintext", "sasl_ssl", "reauth"):
        sets.append(f"listener.name.{listener}.plain.sasl.jaas.config={plain_jaas()}")
        for scram in ("scram-sha-256", "scram-sha-512"):
            sets.append(f"listener.name.{listener}.{scram}.sasl.jaas.config={SCRAM_MODULE} required;")
    gateway = module_gateways.start("sasl", sets=sets)
    # SCRAM users for the clients below, created over the PLAINTEXT listener with Kafka's API.
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports(gateway)['PLAINTEXT']}"})
    # One request per mechanism: Kafka refuses a user altered twice in one request.
    for mechanism, iterations in ((ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)):
        info = ScramCredentialInfo(mechanism, iterations)
        upsert = UserScramCredentialUpsertion(SCRAM_USER, info, SCRAM_PASSWORD.encode())
        for f in admin.alter_user_scram_credentials([upsert]).values():
            f.result(timeout=30)
    yield gateway


def ports(gateway: GatewayProcess) -> dict[str, int]:
    return {k: int(v) for k, v in gateway.events("gateway.listening")[-1]["ports"].items()}


def credentials(mechanism: str) -> tuple[str, str]:
    return ("alice", USERS["alice"]) if mechanism == "PLAIN" else (SCRAM_USER, SCRAM_PASSWORD)


def confluent_conf(
    gateway: GatewayProcess, certs: tuple[Authority, Issued], listener: str, mechanism: str
) -> dict[str, Any]:
    user, password = credentials(mechanism)
    conf: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{ports(gateway)[listener]}",
        "security.protocol": "SASL_SSL" if listener == "SASL_SSL" else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = str(certs[0].pem)
    return conf


def confluent_roundtrip(conf: dict[str, Any], group_protocol: str, n: int = 10) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    for i in range(n):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer_conf = {**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    consumer_conf["group.protocol"] = group_protocol
    if group_protocol == "classic":
        consumer_conf["session.timeout.ms"] = 6000
    consumer = Consumer(consumer_conf)
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize(
    ("listener", "mechanism", "group_protocol"),
    [
        ("SASL_PLAINTEXT", "PLAIN", "consumer"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "classic"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512", "consumer"),
        ("SASL_SSL", "PLAIN", "classic"),
        ("SASL_SSL", "SCRAM-SHA-256", "consumer"),
        ("SASL_SSL", "SCRAM-SHA-512", "classic"),
    ],
)
def test_confluent_kafka_each_mechanism_on_both_listeners(
    gw: GatewayProcess, certs: tuple[Authority, Issued], listener: str, mechanism: str, group_protocol: str
) -> None:
    got = confluent_roundtrip(confluent_conf(gw, certs, listener, mechanism), group_protocol)
    assert got == [f"v{i}".encode() for i in range(10)]


def test_kafka_python_and_aiokafka(gw: GatewayProcess, certs: tuple[Authority, Issued]) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    p = ports(gw)
    ssl_context = ssl.create_default_context(cafile=str(certs[0].pem))
    common: dict[str, Any] = {
        "bootstrap_servers": f"127.0.0.1:{p['SASL_PLAINTEXT']}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": USERS["alice"],
    }
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**common)
    for i in range(5):
        producer.send(topic, f"k{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=15000, **common
    )
    got = [m.value for _, m in zip(range(5), consumer, strict=False)]
    consumer.close()
    assert got == [f"k{i}".encode() for i in range(5)]

    async def aio() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        conf: dict[str, Any] = {
            "bootstrap_servers": f"127.0.0.1:{p['SASL_SSL']}",
            "security_protocol": "SASL_SSL",
            "ssl_context": ssl_context,
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": SCRAM_USER,
            "sasl_plain_password": SCRAM_PASSWORD,
        }
        topic2 = f"aio-{uuid.uuid4().hex[:8]}"
        producer2 = AIOKafkaProducer(**conf)
        await producer2.start()
        try:
            for i in range(5):
                await producer2.send_and_wait(topic2, f"a{i}".encode())
        finally:
            await producer2.stop()
        consumer2 = AIOKafkaConsumer(topic2, group_id=f"g-{topic2}", auto_offset_reset="earliest", **conf)
        await consumer2.start()
        out: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for msg in consumer2:
                    assert msg.value is not None
                    out.append(msg.value)
                    if len(out) == 5:
                        break
        finally:
            await consumer2.stop()
        return out

    assert asyncio.run(aio()) == [f"a{i}".encode() for i in range(5)]


def test_java_kafka_clients_scram_over_sasl_ssl_and_plain(
    gw: GatewayProcess, certs: tuple[Authority, Issued], kafka_clients4: JavaClients
) -> None:
    """Kafka's own client: SCRAM-SHA-256 over SASL_SSL (producer, then a classic and a KIP-848
    consumer), PLAIN over SASL_PLAINTEXT (producer)."""
    p = ports(gw)
    scram = {
        "security.protocol": "SASL_SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs[0].pem),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM_MODULE} required username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";',
    }
    plain = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" password="{USERS["alice"]}";',
    }
    topic = f"java-{uuid.uuid4().hex[:6]}"
    with kafka_clients4.verifiable_producer(
        f"127.0.0.1:{p['SASL_PLAINTEXT']}", topic, 10, properties=plain
    ) as pr:
        sent = pr.events_until_exit()
    assert sum(e.get("name") == "producer_send_success" for e in sent) == 10, pr.stderr_tail()
    for protocol in ("classic", "consumer"):
        with kafka_clients4.verifiable_consumer(
            f"127.0.0.1:{p['SASL_SSL']}",
            topic,
            f"g-{topic}-{protocol}",
            group_protocol=protocol,
            max_messages=10,
            properties=scram,
        ) as consumer:
            events = consumer.events_until_exit()
        consumed = sum(int(e.get("count", 0)) for e in events if e.get("name") == "records_consumed")
        assert consumed == 10, (protocol, consumer.stderr_tail())


def groupshift(*args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groupshift", *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_kafka_configs_creates_and_describes_scram_users(
    gw: GatewayProcess, certs: tuple[Authority, Issued]
) -> None:
    """Kafka's `kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`
    and `--describe` against groupshift, then a client logs in with the new user."""
    skip_without_tools()
    admin = f"127.0.0.1:{ports(gw)['PLAINTEXT']}"
    user = f"dave-{uuid.uuid4().hex[:6]}"
    tool = (
        "kafka",
        "tool",
        "--version",
        "3.9",
        "kafka-configs",
        "--bootstrap-server",
        admin,
        "--entity-type",
        "users",
    )
    made = groupshift(*tool, "--entity-name", user, "--alter", "--add-config",
                      "SCRAM-SHA-256=[iterations=8192,password=dave-secret]")  # fmt: skip
    assert made.returncode == 0 and f"Completed updating config for user {user}" in made.stdout, made.stderr[
        -2000:
    ]
    described = groupshift(*tool, "--entity-name", user, "--describe")
    assert described.returncode == 0, described.stderr[-2000:]
    assert (
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192"
        in described.stdout
    )
    conf = confluent_conf(gw, certs, "SASL_PLAINTEXT", "SCRAM-SHA-256")
    conf.update({"sasl.username": user, "sasl.password": "dave-secret"})
    assert confluent_roundtrip(conf, "consumer", n=3) == [b"v0", b"v1", b"v2"]
    # Too many iterations is refused by the server, as Kafka refuses it (too few, by the tool).
    many = groupshift(*tool, "--entity-name", user, "--alter", "--add-config",
                     "SCRAM-SHA-256=[iterations=20000,password=x]")  # fmt: skip
    assert "Too many iterations" in many.stdout + many.stderr, many.stdout + many.stderr


def metric(gateway: GatewayProcess, name: str, **labels: str) -> float:
    total = 0.0
    for line in gateway.metrics().splitlines():
        if not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_reauthentication_with_a_short_session(gw: GatewayProcess) -> None:
    """librdkafka re-authenticates (KIP-368) before the session's 2 s lifetime ends; its
    connections are never closed as expired while it keeps consuming."""
    from confluent_kafka import Consumer, Producer

    conf: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{ports(gw)['REAUTH']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": SCRAM_USER,
        "sasl.password": SCRAM_PASSWORD,
    }
    before = metric(gw, "groupshift_sasl_authentications_total", listener="REAUTH", kind="reauthentication")
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    consumer = Consumer(
        {**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "group.protocol": "consumer"}
    )
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 3.5 * REAUTH_MS / 1000
    i = 0
    try:
        while time.monotonic() < deadline:
            producer.produce(topic, f"r{i}".encode())
            i += 1
            producer.poll(0)
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got += 1
        assert producer.flush(30) == 0
    finally:
        consumer.close()
    reauths = metric(gw, "groupshift_sasl_authentications_total", listener="REAUTH", kind="reauthentication")
    assert reauths - before >= 2
    assert got > 0
    expired = [e for e in gw.events("connection.closed") if e.get("reason") == "sasl.session_expired"]
    assert expired == []


# -- bad input ----------------------------------------------------------------------------------


def connect(port: int, tls: ssl.SSLContext | None = None) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock if tls is None else tls.wrap_socket(sock, server_hostname="localhost")


def read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame, or None when the server closed the connection."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    size = struct.unpack(">i", head)[0]
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def closed_by_server(sock: socket.socket, within: float = 10.0) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except (TimeoutError, ssl.SSLError):
        return False


def handshake(sock: socket.socket, mechanism: str = "PLAIN") -> SaslHandshakeResponse:
    sock.sendall(encode_request(SaslHandshakeRequest(mechanism=mechanism), correlation_id=1, client_id="t"))
    frame = read_frame(sock)
    assert frame is not None
    return decode_response(SaslHandshakeResponse, frame)[1]


def authenticate(sock: socket.socket, token: bytes) -> SaslAuthenticateResponse | None:
    sock.sendall(encode_request(SaslAuthenticateRequest(auth_bytes=token), correlation_id=2, client_id="t"))
    frame = read_frame(sock)
    return None if frame is None else decode_response(SaslAuthenticateResponse, frame)[1]


def healthy(port: int) -> bool:
    """A second client logs in with PLAIN and gets Metadata answered."""
    with connect(port) as sock:
        assert handshake(sock).error_code == ErrorCode.none
        answer = authenticate(sock, b"\x00alice\x00alice-secret")
        assert answer is not None and answer.error_code == ErrorCode.none
        metadata = build(MetadataRequest, {"topics": [], "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})  # fmt: skip
        sock.sendall(encode_request(metadata, correlation_id=3, client_id="t"))
        return read_frame(sock) is not None


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
        (b"\x00mallory\x00alice-secret", "Authentication failed: Invalid username or password"),
        (
            b"not a plain message",
            "Invalid SASL/PLAIN response: expected 3 tokens, got 1",
        ),
    ],
)
def test_failed_login_gets_kafkas_answer_then_the_close(
    gw: GatewayProcess, token: bytes, message: str
) -> None:
    port = ports(gw)["SASL_PLAINTEXT"]
    failures = metric(gw, "groupshift_auth_failures_total", listener="SASL_PLAINTEXT", mechanism="PLAIN")
    with connect(port) as sock:
        assert handshake(sock).error_code == ErrorCode.none
        started = time.monotonic()
        answer = authenticate(sock, token)
        assert answer is not None
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == message
        assert time.monotonic() - started >= 0.09  # connections.failed.authentication.delay.ms
        assert closed_by_server(sock)
    assert healthy(port)
    # Counted on every failure (the auth.failed log line is rate-limited per client host).
    after = metric(gw, "groupshift_auth_failures_total", listener="SASL_PLAINTEXT", mechanism="PLAIN")
    assert after == failures + 1


def test_unsupported_mechanism_is_answered_with_the_enabled_list(gw: GatewayProcess) -> None:
    port = ports(gw)["SASL_PLAINTEXT"]
    with connect(port) as sock:
        answer = handshake(sock, "GSSAPI")
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == list(MECHANISMS)
        assert closed_by_server(sock)
    assert healthy(port)


def test_kafka_request_before_authentication_closes_unanswered(gw: GatewayProcess) -> None:
    port = ports(gw)["SASL_PLAINTEXT"]
    metadata = build(MetadataRequest, {"topics": None, "allow_auto_topic_creation": True,
                                       "include_topic_authorized_operations": False})  # fmt: skip
    with connect(port) as sock:
        sock.sendall(encode_request(metadata, correlation_id=7, client_id="t"))
        assert read_frame(sock) is None
    assert healthy(port)


def test_exchange_that_never_completes_is_closed_by_the_bound(gw: GatewayProcess) -> None:
    port = ports(gw)["SASL_PLAINTEXT"]
    with connect(port) as idle, connect(port) as half:
        assert handshake(half).error_code == ErrorCode.none  # then nothing
        started = time.monotonic()
        assert closed_by_server(idle, within=TIMEOUT_MS / 1000 + 5)
        assert closed_by_server(half, within=TIMEOUT_MS / 1000 + 5)
        assert time.monotonic() - started >= TIMEOUT_MS / 1000 - 0.5
    assert healthy(port)
    timed_out = [e for e in gw.events("connection.closed") if e.get("reason") == "sasl.timeout"]
    assert len(timed_out) >= 2


def test_oversized_token_closes_the_connection(gw: GatewayProcess) -> None:
    port = ports(gw)["SASL_PLAINTEXT"]
    with connect(port) as sock:
        assert handshake(sock).error_code == ErrorCode.none
        sock.sendall(struct.pack(">i", 524288 + 1) + b"\x00" * 1024)
        assert closed_by_server(sock)
    assert healthy(port)
    assert any(e.get("reason") == "frame.oversized" for e in gw.events("connection.closed"))


def test_plaintext_bytes_on_the_sasl_ssl_port_are_closed(
    gw: GatewayProcess, certs: tuple[Authority, Issued]
) -> None:
    p = ports(gw)
    with connect(p["SASL_SSL"]) as sock:
        sock.sendall(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), correlation_id=1, client_id="t"))
        assert closed_by_server(sock)
    tls = ssl.create_default_context(cafile=str(certs[0].pem))
    with connect(p["SASL_SSL"], tls) as sock:
        assert handshake(sock).error_code == ErrorCode.none
        answer = authenticate(sock, b"\x00alice\x00alice-secret")
        assert answer is not None and answer.error_code == ErrorCode.none


def test_sasl_apis_on_a_plaintext_listener_answer_illegal_sasl_state(gw: GatewayProcess) -> None:
    with connect(ports(gw)["PLAINTEXT"]) as sock:
        assert handshake(sock).error_code == ErrorCode.illegal_sasl_state
        answer = authenticate(sock, b"x")
        assert answer is not None and answer.error_code == ErrorCode.illegal_sasl_state
        assert re.search("after successful authentication", answer.error_message or "")


# -- SCRAM credential APIs against a real Kafka ---------------------------------------------------


def call(address: str, request: Any, response_type: Any) -> Any:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(encode_request(request, correlation_id=5, client_id="diff"))
        frame = read_frame(sock)
    assert frame is not None
    return decode_response(response_type, frame)[1]


def upsertion(name: str, mechanism: int, iterations: int, salted: bytes = b"x" * 32) -> dict[str, Any]:
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": b"s",
        "salted_password": salted,
    }


SCRAM_SCENARIOS: list[tuple[str, dict[str, Any]]] = [
    ("alter", {"deletions": [], "upsertions": [upsertion("d-alice", 1, 8192)]}),
    ("alter", {"deletions": [], "upsertions": [upsertion("d-alice", 2, 4096)]}),
    (
        "alter",
        {
            "deletions": [{"name": "d-ghost", "mechanism": 1}, {"name": "d-alice", "mechanism": 1}],
            "upsertions": [
                upsertion("d-bob", 1, 1000),
                upsertion("d-carol", 1, 20000),
                upsertion("", 1, 8192),
                upsertion("d-dan", 3, 8192),
                upsertion("d-alice", 1, 8192),
                upsertion("d-eve", 0, 8192),
                upsertion("d-empty", 1, 8192, salted=b""),
            ],
        },
    ),
    (
        "alter",
        {"deletions": [{"name": "d-x", "mechanism": 1}] * 2, "upsertions": [upsertion("d-y", 1, 8192)] * 2},
    ),
    ("describe", {"users": [{"name": "d-alice"}, {"name": "d-ghost"}, {"name": "d-alice"}]}),
    ("describe", {"users": [{"name": "d-alice"}]}),
    ("alter", {"deletions": [{"name": "d-alice", "mechanism": 2}], "upsertions": []}),
    ("describe", {"users": [{"name": "d-alice"}, {"name": "d-y"}]}),
]


def scram_answers(address: str) -> list[Any]:
    from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
    from kio.schema.alter_user_scram_credentials.v0.response import AlterUserScramCredentialsResponse
    from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest
    from kio.schema.describe_user_scram_credentials.v0.response import DescribeUserScramCredentialsResponse

    out: list[Any] = []
    for kind, values in SCRAM_SCENARIOS:
        if kind == "alter":
            r = call(
                address, build(AlterUserScramCredentialsRequest, values), AlterUserScramCredentialsResponse
            )
            out.append(sorted((x.user, int(x.error_code), x.error_message) for x in r.results))
        else:
            d = call(
                address,
                build(DescribeUserScramCredentialsRequest, values),
                DescribeUserScramCredentialsResponse,
            )
            users = sorted(
                # Kafka lists a user's mechanisms in the order of a HashMap keyed by enum (it
                # varies between JVM runs): compared as a set.
                (
                    x.user,
                    int(x.error_code),
                    x.error_message,
                    sorted((int(c.mechanism), int(c.iterations)) for c in x.credential_infos),
                )
                for x in d.results
            )
            out.append((int(d.error_code), d.error_message, users))
    return out


@pytest.fixture(scope="module")
def kafka_sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, int, int]]:
    """A real Kafka 4.x node with the gateway's SASL settings on a SASL_PLAINTEXT listener and a
    REAUTH one (the harness's PLAINTEXT listener stays for the SCRAM APIs): (cluster, SASL port,
    REAUTH port)."""
    skip_without_tools()
    try:
        cluster = KafkaCluster("4", brokers=1, workdir=tmp_path_factory.mktemp("kafka-sasl"))
    except KafkaUnavailable as exc:
        if exc.tool_missing:
            pytest.skip(f"reference Kafka unavailable: {exc}")
        raise
    node, port, reauth = cluster.nodes[0], free_port(), free_port()
    configs = {
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port},"
        f"SASL_PLAINTEXT://127.0.0.1:{port},REAUTH://127.0.0.1:{reauth}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{port},"
        f"REAUTH://127.0.0.1:{reauth}",
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT"
        ),
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
    }
    for listener in ("sasl_plaintext", "reauth"):
        configs[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain_jaas()
        for scram in ("scram-sha-256", "scram-sha-512"):
            configs[f"listener.name.{listener}.{scram}.sasl.jaas.config"] = f"{SCRAM_MODULE} required;"
    cluster.configs.update(configs)
    cluster.start()
    try:
        yield cluster, port, reauth
    finally:
        cluster.stop()


def test_scram_credential_apis_answer_as_kafka(
    gw: GatewayProcess, kafka_sasl: tuple[KafkaCluster, int]
) -> None:
    """AlterUserScramCredentials / DescribeUserScramCredentials, the same requests to a real
    Kafka 4.x node and to groupshift: the same answers (codes and messages)."""
    kafka = scram_answers(kafka_sasl[0].bootstrap)
    ours = scram_answers(f"127.0.0.1:{ports(gw)['PLAINTEXT']}")
    for i, (theirs, mine) in enumerate(zip(kafka, ours, strict=True)):
        assert mine == theirs, (i, SCRAM_SCENARIOS[i])


def request(api_key: int, version: int, values: dict[str, Any]) -> tuple[int, int, Any]:
    from kio.index import load_request_schema

    return api_key, version, build(load_request_schema(api_key, version), values)


def sasl_handshake(mechanism: str, version: int = 1) -> tuple[int, int, Any]:
    return request(17, version, {"mechanism": mechanism})


def sasl_authenticate(token: bytes, version: int = 2) -> tuple[int, int, Any]:
    return request(36, version, {"auth_bytes": token})


API_VERSIONS = request(18, 3, {"client_software_name": "diff", "client_software_version": "1"})
METADATA = request(
    3, 12, {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
)
GOOD = b"\x00alice\x00alice-secret"

# Each scenario: requests sent one by one (or ("raw", token) after SaslHandshake v0).
SASL_SCENARIOS: dict[str, list[Any]] = {
    "wrong password": [sasl_handshake("PLAIN"), sasl_authenticate(b"\x00alice\x00nope")],
    "unknown user": [sasl_handshake("PLAIN"), sasl_authenticate(b"\x00mallory\x00x")],
    "no NUL": [sasl_handshake("PLAIN"), sasl_authenticate(b"garbage")],
    "empty user": [sasl_handshake("PLAIN"), sasl_authenticate(b"\x00\x00pw")],
    "empty password": [sasl_handshake("PLAIN"), sasl_authenticate(b"\x00alice\x00")],
    "five tokens": [sasl_handshake("PLAIN"), sasl_authenticate(GOOD + b"\x00x\x00y")],
    "not UTF-8": [sasl_handshake("PLAIN"), sasl_authenticate(b"\x00al\xffice\x00alice-secret")],
    "authzid differs": [sasl_handshake("PLAIN"), sasl_authenticate(b"admin" + GOOD)],
    "scram garbage": [sasl_handshake("SCRAM-SHA-256"), sasl_authenticate(b"garbage")],
    "scram unknown user": [sasl_handshake("SCRAM-SHA-512"), sasl_authenticate(b"n,,n=nobody,r=abc")],
    "metadata first": [METADATA],
    "authenticate first": [sasl_authenticate(GOOD)],
    "unsupported mechanism": [sasl_handshake("GSSAPI")],
    "api versions twice": [API_VERSIONS, API_VERSIONS],
    "api versions, login, metadata": [
        API_VERSIONS,
        sasl_handshake("PLAIN"),
        sasl_authenticate(GOOD),
        METADATA,
    ],
    "after the login": [
        sasl_handshake("PLAIN"),
        sasl_authenticate(GOOD),
        sasl_authenticate(b"x"),
        sasl_handshake("PLAIN"),
        METADATA,
    ],
    "request while authenticating": [sasl_handshake("SCRAM-SHA-256"), METADATA],
    "handshake v0, raw token": [sasl_handshake("PLAIN", 0), ("raw", GOOD), METADATA],
    "handshake v0, wrong raw token": [sasl_handshake("PLAIN", 0), ("raw", b"\x00alice\x00bad")],
    "SaslAuthenticate v0": [sasl_handshake("PLAIN"), sasl_authenticate(GOOD, 0), METADATA],
}


PAUSE = ("pause", 1.2)  # past Kafka's one re-authentication per second
EXPIRED = ("pause", REAUTH_MS / 1000 + 0.3)
ADMIN = b"\x00admin\x00admin-secret"

# On the REAUTH listener (connections.max.reauth.ms) of both servers: KIP-368.
LOGIN = [sasl_handshake("PLAIN"), sasl_authenticate(GOOD)]
REAUTH_SCENARIOS: dict[str, list[Any]] = {
    "session lifetime": [*LOGIN, METADATA],
    "a request instead of the re-authentication's token": [*LOGIN, sasl_handshake("PLAIN"), METADATA],
    "a second re-authentication within a second": [*LOGIN, PAUSE, *LOGIN, sasl_handshake("PLAIN"), METADATA],
    "re-authentication": [*LOGIN, PAUSE, *LOGIN, METADATA],
    "re-authentication as another user": [*LOGIN, PAUSE, sasl_handshake("PLAIN"), sasl_authenticate(ADMIN)],
    "re-authentication with another mechanism": [
        *LOGIN, PAUSE, sasl_handshake("SCRAM-SHA-256"), sasl_authenticate(b"n,,n=alice,r=abc"),
    ],
    "a request after the session expired": [*LOGIN, EXPIRED, METADATA],
    "re-authentication after the session expired": [*LOGIN, EXPIRED, *LOGIN, METADATA],
}  # fmt: skip


def sasl_exchange(port: int, steps: list[Any]) -> list[Any]:
    """What the server answered to each step, and whether the connection stayed open."""
    from kio.index import load_response_schema

    out: list[Any] = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for i, step in enumerate(steps):
            if step[0] == "pause":
                time.sleep(step[1])
                continue
            if step[0] == "raw":
                sock.sendall(struct.pack(">i", len(step[1])) + step[1])
            else:
                sock.sendall(encode_request(step[2], correlation_id=i + 1, client_id="diff"))
            try:
                frame = read_frame(sock)
            except ConnectionResetError:
                frame = None
            if frame is None:
                out.append("closed")
                return out
            if step[0] == "raw":
                out.append(("raw", frame))
                continue
            body = decode_response(load_response_schema(step[0], step[1]), frame)[1]
            if step[0] == 18:
                out.append(
                    ("api versions", int(body.error_code), any(k.api_key == 17 for k in body.api_keys))
                )
            elif step[0] == 3:
                out.append(("metadata", len(body.brokers)))
            else:
                fields = ("error_code", "error_message", "auth_bytes", "session_lifetime")
                answer = {f: getattr(body, f) for f in fields if hasattr(body, f)}
                if hasattr(body, "mechanisms"):  # Kafka lists them in HashSet order
                    answer["mechanisms"] = sorted(body.mechanisms)
                out.append(answer)
        out.append("open" if not closed_by_server(sock, within=1.0) else "closed")
    return out


def test_sasl_exchanges_answer_as_kafka(
    gw: GatewayProcess, kafka_sasl: tuple[KafkaCluster, int, int]
) -> None:
    """The same SASL exchanges (good and bad) on a real Kafka 4.x node's SASL_PLAINTEXT listener
    and on groupshift's: the same answers, messages and closes."""
    ours, theirs = parallel_exchanges(ports(gw)["SASL_PLAINTEXT"], kafka_sasl[1], SASL_SCENARIOS)
    for name in SASL_SCENARIOS:
        assert ours[name] == theirs[name], name


def test_reauthentication_answers_as_kafka(
    gw: GatewayProcess, kafka_sasl: tuple[KafkaCluster, int, int]
) -> None:
    """KIP-368 on both servers' REAUTH listener (2 s sessions): the session lifetime, a
    re-authentication (interrupted, a second one within a second, as another user, with another
    mechanism, after expiry) and a request after the session expired get the same answers and
    closes."""
    ours, theirs = parallel_exchanges(ports(gw)["REAUTH"], kafka_sasl[2], REAUTH_SCENARIOS)
    for name in REAUTH_SCENARIOS:
        assert ours[name] == theirs[name], name


def parallel_exchanges(
    ours: int, theirs: int, scenarios: dict[str, list[Any]]
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Every scenario on both servers at once, each on its own connection (they wait out
    session lifetimes: one after the other they would take tens of seconds)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2 * len(scenarios)) as pool:
        mine = {name: pool.submit(sasl_exchange, ours, steps) for name, steps in scenarios.items()}
        kafka = {name: pool.submit(sasl_exchange, theirs, steps) for name, steps in scenarios.items()}
        return {n: f.result() for n, f in mine.items()}, {n: f.result() for n, f in kafka.items()}
