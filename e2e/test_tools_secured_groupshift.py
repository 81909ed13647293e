"""groupshift's own tools against groupshift's own secured listeners: `groupshift groups
--command-config` through a mutual-TLS listener (PKCS12 stores, as a Kafka client configures
them), the offsets committed by confluent-kafka with the librdkafka settings the same properties
file maps to, and without the file one clear line naming --command-config.

One groupshift; certificates made by the test. About 10 s.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from harness.certificates import PASSWORD, Authority
from protocol.client_security import ClientSecurity

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent


def groupshift(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groupshift", *args],
        cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def ports(gw: GatewayProcess) -> dict[str, int]:
    return {k: int(v) for k, v in gw.events("gateway.listening")[-1]["ports"].items()}


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def commit(bootstrap: str, security: ClientSecurity, group: str, topic: str, offset: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap} | security.librdkafka_config())
    for i in range(offset + 1):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        | security.librdkafka_config()
    )
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_groups_command_config_on_groupshifts_mutual_tls_listener(gateways: Gateways, tmp_path: Path) -> None:
    ca = Authority(tmp_path / "certs", "gs")
    server = ca.issue("server", "localhost", server=True)
    alice = ca.issue("alice", "alice")
    gw = gateways.start(
        "mtls",
        sets=[
            "listeners=MTLS://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map=MTLS:SSL,PLAINTEXT:PLAINTEXT",
            "ssl.keystore.type=PKCS12",
            f"ssl.keystore.location={server.p12}",
            f"ssl.keystore.password={PASSWORD}",
            "ssl.truststore.type=PKCS12",
            f"ssl.truststore.location={ca.p12}",
            f"ssl.truststore.password={PASSWORD}",
            "ssl.client.auth=required",
        ],
    )
    bootstrap = f"127.0.0.1:{ports(gw)['MTLS']}"
    props = write_properties(
        tmp_path / "alice.properties",
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(ca.p12),
            "ssl.truststore.password": PASSWORD,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(alice.p12),
            "ssl.keystore.password": PASSWORD,
        },
    )
    group, topic = f"mtls-{uuid.uuid4().hex[:8]}", f"mtls-t-{uuid.uuid4().hex[:8]}"
    began = time.monotonic()
    commit(bootstrap, ClientSecurity.from_file(props), group, topic, 3)

    listed = groupshift("groups", "--bootstrap-server", bootstrap, "--command-config", str(props), "list")
    assert listed.returncode == 0, listed.stderr
    assert group in listed.stdout.split(), listed.stdout
    described = groupshift(
        "groups", "--bootstrap-server", bootstrap, "describe", group, "--command-config", str(props)
    )
    assert described.returncode == 0, described.stderr
    row = next(line.split() for line in described.stdout.splitlines() if topic in line)
    assert row[:4] == [group, topic, "0", "3"], described.stdout

    bare = groupshift("groups", "--bootstrap-server", bootstrap, "--timeout", "5", "list")
    assert bare.returncode == 1, bare.stderr
    lines = bare.stderr.strip().splitlines()
    assert len(lines) == 1 and "--command-config" in lines[0] and "Traceback" not in bare.stderr, bare.stderr
    assert time.monotonic() - began < 60
