"""groupshift's own tools against groupshift's own secured listeners: `groupshift groups
--command-config` through a mutual-TLS listener (PKCS12 stores, as a Kafka client configures
them) and a SASL_SSL listener (PLAIN, SCRAM-SHA-512), the offsets committed by confluent-kafka
with the librdkafka settings a properties file maps to, and a wrong password or no file answered
with one clear line.

One groupshift; certificates made by the test. About 30 s on a loaded 2-core machine.
"""

from __future__ import annotations

import subprocess
import sys
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


PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_JAAS = f'{PLAIN_MODULE} required user_carol="carol-secret";'  # the listener's PLAIN users


def create_scram_user(bootstrap: str, user: str, password: str) -> None:
    """A SCRAM-SHA-512 user made with Kafka's AlterUserScramCredentials (confluent-kafka)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
    )
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(timeout=30)


def test_groups_command_config_on_groupshifts_tls_and_sasl_listeners(
    gateways: Gateways, tmp_path: Path
) -> None:
    """One groupshift with a mutual-TLS listener and a SASL_SSL listener (PLAIN, SCRAM-SHA-512):
    `groups list/describe --command-config` through each, a wrong password and no file refused
    with one line."""
    ca = Authority(tmp_path / "certs", "gs")
    server = ca.issue("server", "localhost", server=True)
    alice = ca.issue("alice", "alice")
    gw = gateways.start(
        "secured",
        sets=[
            "listeners=MTLS://127.0.0.1:0,SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map=MTLS:SSL,SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT",
            "ssl.keystore.type=PKCS12",
            f"ssl.keystore.location={server.p12}",
            f"ssl.keystore.password={PASSWORD}",
            "ssl.truststore.type=PKCS12",
            f"ssl.truststore.location={ca.p12}",
            f"ssl.truststore.password={PASSWORD}",
            "listener.name.mtls.ssl.client.auth=required",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}",
            f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_MODULE} required;",
        ],
    )
    listening = ports(gw)
    mtls, sasl = f"127.0.0.1:{listening['MTLS']}", f"127.0.0.1:{listening['SASL_SSL']}"
    create_scram_user(f"127.0.0.1:{listening['PLAINTEXT']}", "dave", "dave-secret")
    trust = {
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(ca.p12),
        "ssl.truststore.password": PASSWORD,
    }
    configs = {
        "mtls": (
            mtls,
            {"security.protocol": "SSL", **trust, "ssl.keystore.type": "PKCS12",
             "ssl.keystore.location": str(alice.p12), "ssl.keystore.password": PASSWORD},
        ),
        "plain": (
            sasl,
            {"security.protocol": "SASL_SSL", **trust, "sasl.mechanism": "PLAIN",
             "sasl.jaas.config": f'{PLAIN_MODULE} required username="carol" password="carol-secret";'},
        ),
        "scram": (
            sasl,
            {"security.protocol": "SASL_SSL", **trust, "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.jaas.config": f'{SCRAM_MODULE} required username="dave" password="dave-secret";'},
        ),
    }  # fmt: skip
    files = {
        name: write_properties(tmp_path / f"{name}.properties", props) for name, (_, props) in configs.items()
    }
    group, topic = f"sec-{uuid.uuid4().hex[:8]}", f"sec-t-{uuid.uuid4().hex[:8]}"
    commit(sasl, ClientSecurity.from_file(files["scram"]), group, topic, 3)  # librdkafka over SASL_SSL

    for name, (bootstrap, _) in configs.items():
        listed = groupshift(
            "groups", "--bootstrap-server", bootstrap, "--command-config", str(files[name]), "list"
        )
        assert listed.returncode == 0, (name, listed.stderr)
        assert group in listed.stdout.split(), (name, listed.stdout)
        described = groupshift(
            "groups", "--bootstrap-server", bootstrap, "describe", group, "--command-config", str(files[name])
        )
        assert described.returncode == 0, (name, described.stderr)
        row = next(line.split() for line in described.stdout.splitlines() if topic in line)
        assert row[:4] == [group, topic, "0", "3"], (name, described.stdout)

    for bootstrap in (mtls, sasl):
        bare = groupshift("groups", "--bootstrap-server", bootstrap, "--timeout", "5", "list")
        assert bare.returncode == 1, bare.stderr
        lines = bare.stderr.strip().splitlines()
        assert len(lines) == 1 and "--command-config" in lines[0] and "Traceback" not in bare.stderr, (
            bare.stderr
        )
    wrong = configs["scram"][1] | {
        "sasl.jaas.config": f'{SCRAM_MODULE} required username="dave" password="not-dave";'
    }
    refused = groupshift("groups", "--bootstrap-server", sasl, "--command-config",
                         str(write_properties(tmp_path / "wrong.properties", wrong)), "list")  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.count("\n") == 1 and "SASL authentication failed" in refused.stderr, refused.stderr
