"""`groupshift kafka start --security ...`: a reference Kafka whose listeners need credentials,
with the StandardAuthorizer, checked with Kafka's own tools through the client properties files
it prints (`--command-config`), and refusing clients without credentials.

Also groupshift's own tools with `--command-config` (`groups list/describe`, `check`, the matrix's
confluent-kafka path), every SASL mechanism, and wrong or missing credentials answered with one
clear line. Two clusters, one after the other: SASL_SSL with SCRAM-SHA-256 on Kafka 4.4 and SSL
with mutual TLS on Kafka 3.9. About 2 minutes on a loaded 2-core machine, most of it the JVMs of
Kafka's tools (4 runs per cluster).
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from protocol.client import ConnectionClosed, WireClient, make_request
from protocol.client_security import ClientSecurity, SaslAuthenticationFailed
from tests.plugins.kafka import skip_without_tools

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Secured:
    security: str
    version: str
    bootstrap: str
    command_config: dict[str, Path]  # principal name -> properties file

    @property
    def port(self) -> int:
        return int(self.bootstrap.rpartition(":")[2])

    def properties(self, user: str) -> dict[str, str]:
        lines = self.command_config[user].read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def tool(self, name: str, *args: str, user: str | None = "admin") -> subprocess.CompletedProcess[str]:
        config = ["--command-config", str(self.command_config[user])] if user else []
        return subprocess.run(
            [sys.executable, "-m", "groupshift", "kafka", "tool", "--version", self.version, name,
             "--bootstrap-server", self.bootstrap, *config, *args],
            cwd=REPO, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
        )  # fmt: skip


@pytest.fixture(scope="module", params=[("sasl_ssl", "4.4.0"), ("ssl", "3.9.2")], ids=lambda p: p[0])
def secured(request: pytest.FixtureRequest) -> Iterator[Secured]:
    skip_without_tools()
    security, version = request.param
    proc = subprocess.Popen(
        [sys.executable, "-m", "groupshift", "kafka", "start", "--version", version, "--security", security],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        bootstrap = proc.stdout.readline().strip()
        if not bootstrap:
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"kafka start --security {security} printed no address: {err}")
        configs: dict[str, Path] = {}
        for _ in range(3):
            word, principal, path = proc.stdout.readline().split()
            assert word == "command-config" and principal.startswith("User:")
            configs[principal.removeprefix("User:")] = Path(path)
        assert set(configs) == {"admin", "alice", "bob"}
        yield Secured(security, version, bootstrap, configs)
    finally:
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err


def test_properties_files_name_the_protocol_and_credentials(secured: Secured) -> None:
    props = secured.properties("alice")
    assert props["security.protocol"] == secured.security.upper()
    assert Path(props["ssl.truststore.location"]).exists()
    if secured.security == "ssl":
        assert Path(props["ssl.keystore.location"]).exists()
        assert "sasl.mechanism" not in props
    else:
        assert props["sasl.mechanism"] == "SCRAM-SHA-256"
        assert 'username="alice"' in props["sasl.jaas.config"]


def test_kafka_tools_with_command_config_and_acls(secured: Secured) -> None:
    """The super user creates a topic; alice sees it only once an ACL lets her DESCRIBE it."""
    topic = f"secured-{uuid.uuid4().hex[:8]}"
    made = secured.tool("kafka-topics", "--create", "--topic", topic)
    assert made.returncode == 0, made.stderr
    # allow.everyone.if.no.acl.found=false: alice's Metadata leaves the topic out (a JVM spared)
    alice = ClientSecurity.from_file(secured.command_config["alice"])
    with alice.connect("127.0.0.1", secured.port, 10) as client:
        assert topic not in {t.name for t in _metadata(client).topics}  # type: ignore[attr-defined]
    added = secured.tool("kafka-acls", "--add", "--allow-principal", "User:alice", "--operation", "Describe",
                         "--topic", topic)  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = secured.tool("kafka-acls", "--list", "--topic", topic)
    assert "principal=User:alice" in listed.stdout and "operation=DESCRIBE" in listed.stdout, listed.stdout
    after = secured.tool("kafka-topics", "--list", user="alice")
    assert topic in after.stdout.split(), (after.stdout, after.stderr)


def _trusting(secured: Secured) -> ssl.SSLContext:
    props = secured.properties("admin")
    ca = Path(props["ssl.truststore.location"]).with_name("kafka-ca.pem")
    return ssl.create_default_context(cafile=str(ca))


def _metadata(client: WireClient) -> object:
    return client.request(make_request(3, 1, topics=None))


def test_no_credentials_no_answer(secured: Secured) -> None:
    """Plain bytes on the TLS port are not answered; TLS without the client certificate (SSL) or
    without a SASL exchange (SASL_SSL) gets no Metadata; a wrong password is refused."""
    with WireClient(secured.port, timeout=10) as plain, pytest.raises(ConnectionClosed):
        _metadata(plain)
    context = _trusting(secured)
    if secured.security == "ssl":
        # the handshake itself or the first read fails, whichever side notices first
        with (
            pytest.raises((ssl.SSLError, ConnectionError)),
            WireClient(secured.port, timeout=10, ssl_context=context) as tls,
        ):
            _metadata(tls)
    else:
        with (
            WireClient(secured.port, timeout=10, ssl_context=context) as tls,
            pytest.raises(ConnectionClosed),
        ):
            _metadata(tls)
        wrong = ClientSecurity("SASL_SSL", context, "PLAIN", "alice", "not-her-password")
        with pytest.raises(SaslAuthenticationFailed, match=r"[Aa]uthentication failed"):
            wrong.connect("127.0.0.1", secured.port, 10).close()
        right = ClientSecurity("SASL_SSL", context, "PLAIN", "alice", "alice-secret")
        with right.connect("127.0.0.1", secured.port, 10) as client:
            assert _metadata(client).brokers  # type: ignore[attr-defined]


# --- groupshift's own tools through --command-config --------------------------------------------


def groupshift(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groupshift", *args],
        cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture(scope="module")
def committed_group(secured: Secured) -> tuple[str, str]:
    """A group with a committed offset, made by confluent-kafka as the super user with the
    librdkafka settings `ClientSecurity` maps the admin's properties to (the matrix's path)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    from harness.matrix.backends import create_topic

    security = ClientSecurity.from_file(secured.command_config["admin"])
    group, topic = f"sec-group-{uuid.uuid4().hex[:8]}", f"sec-topic-{uuid.uuid4().hex[:8]}"
    create_topic(secured.bootstrap, topic, 2, security=security)
    consumer = Consumer(
        {"bootstrap.servers": secured.bootstrap, "group.id": group, "enable.auto.commit": False}
        | security.librdkafka_config()
    )
    deadline = time.monotonic() + 60
    try:
        while True:  # a fresh cluster creates __consumer_offsets on the first FindCoordinator
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
                break
            except KafkaException as exc:
                coordinator_moving = {
                    KafkaError.NOT_COORDINATOR,
                    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                    KafkaError.COORDINATOR_NOT_AVAILABLE,
                }
                if not exc.args[0].retriable() and exc.args[0].code() not in coordinator_moving:
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()
    return group, topic


def test_groups_list_and_describe_with_command_config(
    secured: Secured, committed_group: tuple[str, str]
) -> None:
    group, topic = committed_group
    base = ["groups", "--bootstrap-server", secured.bootstrap]
    listed = groupshift(*base, "--command-config", str(secured.command_config["admin"]), "list")
    assert listed.returncode == 0, listed.stderr
    assert group in listed.stdout.split(), listed.stdout
    described = groupshift(*base, "describe", group, "--command-config", str(secured.command_config["admin"]))
    assert described.returncode == 0, described.stderr
    row = next(line.split() for line in described.stdout.splitlines() if topic in line)
    assert row[:4] == [group, topic, "0", "7"], described.stdout
    # alice has no ACL on the group: ListGroups leaves it out (StandardAuthorizer at work)
    alice = groupshift(*base, "list", "--command-config", str(secured.command_config["alice"]))
    assert alice.returncode == 0, alice.stderr
    assert group not in alice.stdout.split(), alice.stdout
    # the server-side checks of `check` connect the same way
    checked = groupshift("check", "upgrade", "--bootstrap-server", secured.bootstrap, group,
                         "--command-config", str(secured.command_config["admin"]))  # fmt: skip
    assert checked.returncode in (0, 1), checked.stdout + checked.stderr
    assert group in checked.stdout


def test_groups_without_or_with_wrong_credentials_say_so(secured: Secured, tmp_path: Path) -> None:
    base = ["groups", "--bootstrap-server", secured.bootstrap, "--timeout", "5", "list"]
    bare = groupshift(*base)
    assert bare.returncode == 1, bare.stderr
    assert "Traceback" not in bare.stderr and len(bare.stderr.strip().splitlines()) == 1, bare.stderr
    assert "--command-config" in bare.stderr, bare.stderr
    props = secured.properties("alice")
    if secured.security == "ssl":  # a certificate from a CA the broker does not trust
        from harness.certificates import PASSWORD, Authority

        rogue = Authority(tmp_path, "rogue").issue("alice", "alice")
        props |= {"ssl.keystore.location": str(rogue.p12), "ssl.keystore.password": PASSWORD}
    else:
        props["sasl.jaas.config"] = props["sasl.jaas.config"].replace("alice-secret", "wrong")
    wrong = tmp_path / "wrong.properties"
    wrong.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    refused = groupshift(*base, "--command-config", str(wrong))
    assert refused.returncode == 1, refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    if secured.security != "ssl":
        assert "SASL authentication failed" in refused.stderr, refused.stderr


def test_every_mechanism_authenticates(secured: Secured) -> None:
    """SASL_SSL: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 against Kafka's own SASL server.
    SSL: each principal's keystore (PKCS12) is accepted by the broker's mutual TLS."""
    props = secured.properties("bob")
    if secured.security == "ssl":
        variants = [secured.properties(user) for user in ("admin", "alice", "bob")]
    else:
        variants = [
            props
            | {
                "sasl.mechanism": mechanism,
                "sasl.jaas.config": f'{module} required username="bob" password="bob-secret";',
            }
            for mechanism, module in (
                ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
                ("SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule"),
                ("SCRAM-SHA-512", "org.apache.kafka.common.security.scram.ScramLoginModule"),
            )
        ]
    for variant in variants:
        security = ClientSecurity.from_properties(variant)
        with security.connect("127.0.0.1", secured.port, 10) as client:
            assert _metadata(client).brokers, variant  # type: ignore[attr-defined]


def test_acls_command_adds_lists_and_removes(secured: Secured, committed_group: tuple[str, str]) -> None:
    """`groupshift acls` (CreateAcls / DescribeAcls / DeleteAcls) on Kafka's StandardAuthorizer:
    the ACL it adds lets alice see the group, removing it hides the group again; alice herself
    may not add ACLs."""
    group, _ = committed_group
    admin = [
        "--bootstrap-server",
        secured.bootstrap,
        "--command-config",
        str(secured.command_config["admin"]),
    ]
    alice_list = ["groups", "--bootstrap-server", secured.bootstrap, "list"]
    alice_list += ["--command-config", str(secured.command_config["alice"])]
    added = groupshift("acls", *admin, "--add", "--allow-principal", "User:alice", "--operation", "Describe",
                       "--group", group)  # fmt: skip
    assert added.returncode == 0, added.stderr
    acl = "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)"
    assert (
        f"Current ACLs for resource `ResourcePattern(resourceType=GROUP, name={group}, patternType=LITERAL)`"
        in (added.stdout)
    ), added.stdout
    assert acl in added.stdout
    listed = groupshift("acls", *admin, "--list", "--principal", "User:alice")
    assert listed.returncode == 0 and acl in listed.stdout, (listed.stdout, listed.stderr)
    seen = groupshift(*alice_list)
    assert group in seen.stdout.split(), (seen.stdout, seen.stderr)
    removed = groupshift("acls", *admin, "--remove", "--force", "--group", group)
    assert removed.returncode == 0, removed.stderr
    assert acl not in removed.stdout.split("Removing", 1)[1], removed.stdout
    hidden = groupshift(*alice_list)
    assert hidden.returncode == 0 and group not in hidden.stdout.split(), hidden.stdout
    refused = groupshift("acls", "--bootstrap-server", secured.bootstrap, "--command-config",
                         str(secured.command_config["alice"]), "--add", "--allow-principal", "User:alice",
                         "--group", group)  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr
