"""`groupshift kafka start --security ...`: a reference Kafka whose listeners need credentials,
with the StandardAuthorizer, checked with Kafka's own tools through the client properties files
it prints (`--command-config`), and refusing clients without credentials.

Two clusters, one after the other: SASL_SSL with SCRAM-SHA-256 on Kafka 4.4 and SSL with mutual
TLS on Kafka 3.9 (the two lines the harness supports). About 60 s.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
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
    before = secured.tool("kafka-topics", "--list", user="alice")
    assert before.returncode == 0, before.stderr
    assert topic not in before.stdout.split(), before.stdout  # allow.everyone.if.no.acl.found=false
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
