"""The `gateway` identity's per-principal credential map (issue 29, point 2): a mapped client's
forwarded traffic reaches the cluster as that client, so the cluster's ACLs apply as well.

One Kafka 4.4 node with a SASL_SSL listener and StandardAuthorizer (e2e/secured_pair.py,
`super.users=User:admin`, PLAIN and SCRAM users admin, alice, bob, carol). In front of it a
groupshift with a SASL_SSL listener of its own and its own ACLs, which allow alice and bob to
write and read both topics of the test; towards the cluster groupshift is `admin` (PLAIN), and
`upstream.identity.credentials.file` maps `User:alice` to the cluster's SCRAM-SHA-512 user alice.
The cluster allows alice to write and read `open` only.

* alice's Produce to `open` goes through; to `closed` the *cluster* refuses it
  (TOPIC_AUTHORIZATION_FAILED) although groupshift's ACLs allow it;
* alice's KIP-848 consumer reads `open`, and its fetches of `closed` are refused by the cluster;
* bob, not in the map, uses groupshift's own credential: his Produce to `closed` goes through;
* a wrong password in the map stops `groupshift serve` (exit 1) with the file and the principal
  named, the password not shown.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.librdkafka_polling import poll_records
from e2e.secured_pair import sasl_groupshift_sets, start_kafka
from e2e.tls_certs import Authority
from e2e.upstream import FAST_UPSTREAM_SETTINGS
from harness.kafka_dist.cluster import KafkaCluster
from harness.kafka_dist.security import password_of

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parent.parent
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
ADMIN_PASSWORD = password_of("admin")


@dataclass(frozen=True)
class Setup:
    cluster: KafkaCluster
    ca: Authority
    groupshift: GatewayProcess
    base: Path
    open: str
    closed: str

    def upstream_sets(self, credentials: Path) -> list[str]:
        props = {
            "upstream.security.protocol": "SASL_SSL",
            "upstream.ssl.truststore.location": str(self.ca.pem),
            "upstream.ssl.truststore.type": "PEM",
            "upstream.sasl.mechanism": "PLAIN",
            "upstream.sasl.jaas.config": f'{PLAIN} required username="admin" password="{ADMIN_PASSWORD}";',
            "upstream.identity.credentials.file": str(credentials),
        }
        return [*FAST_UPSTREAM_SETTINGS, *(f"{k}={v}" for k, v in props.items())]


def _credentials(path: Path, password: str) -> Path:
    path.write_text(
        json.dumps(
            {"User:alice": {"sasl.mechanism": "SCRAM-SHA-512", "username": "alice", "password": password}}
        )
    )
    return path


def _allow(admin: Any, principal: str, rtype: Any, name: str, *ops: Any) -> None:
    from confluent_kafka.admin import AclBinding, AclPermissionType, ResourcePatternType

    acls = [
        AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW)
        for op in ops
    ]
    for f in admin.create_acls(acls).values():
        f.result(timeout=30)


def _conf(bootstrap: str, ca: Authority, user: str, mechanism: str = "PLAIN") -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca.pem),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password_of(user),
    }


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

    base = Path(tmp_path_factory.mktemp("upstream-credentials"))
    cluster = start_kafka(base / "upstream")
    gateways = Gateways(base / "groupshift")
    try:
        assert cluster.security is not None
        ca = cluster.security.ca
        suffix = uuid.uuid4().hex[:6]
        t_open, t_closed = f"open-{suffix}", f"closed-{suffix}"
        direct = AdminClient(_conf(cluster.bootstrap, ca, "admin", "SCRAM-SHA-512"))
        for f in direct.create_topics([NewTopic(t, 2, 1) for t in (t_open, t_closed)]).values():
            f.result(timeout=60)
        # the cluster's ACLs: alice may write and read `open`, only see `closed`
        _allow(direct, "User:alice", ResourceType.TOPIC, t_open, AclOperation.WRITE, AclOperation.READ)
        _allow(direct, "User:alice", ResourceType.TOPIC, t_closed, AclOperation.DESCRIBE)
        seed = Producer(_conf(cluster.bootstrap, ca, "admin", "SCRAM-SHA-512"))
        for t in (t_open, t_closed):
            for i in range(6):
                seed.produce(t, f"{t}-{i}".encode())
        assert seed.flush(30) == 0

        server = ca.issue("groupshift", "localhost", server=True)
        probe = Setup(cluster, ca, None, base, t_open, t_closed)  # type: ignore[arg-type]
        sets = [*probe.upstream_sets(_credentials(base / "creds.json", password_of("alice")))]
        sets += sasl_groupshift_sets(ca, server)
        gw = GatewayProcess.start(
            gateways.base / "gw", sets=tuple(sets), extra_args=("--upstream", cluster.bootstrap)
        )
        gateways.started.append(gw)
        # groupshift's ACLs: alice and bob may write and read both topics; alice reads her group
        ours = AdminClient(_conf(gw.bootstrap, ca, "admin"))
        for user in ("User:alice", "User:bob"):
            for t in (t_open, t_closed):
                _allow(ours, user, ResourceType.TOPIC, t, AclOperation.WRITE, AclOperation.READ)
        _allow(ours, "User:alice", ResourceType.GROUP, f"alice-{suffix}", AclOperation.READ)
        yield Setup(cluster, ca, gw, base, t_open, t_closed)
    finally:
        cluster.stop()
        problems = gateways.finish()
        if problems:
            raise AssertionError("\n\n".join(problems))


def _produce(s: Setup, user: str, topic: str) -> list[str]:
    """The delivery errors of one record produced through groupshift as `user` ([] = delivered)."""
    from confluent_kafka import Producer

    results: list[str] = []
    p = Producer({**_conf(s.groupshift.bootstrap, s.ca, user), "message.timeout.ms": 10000})
    p.produce(topic, b"x", on_delivery=lambda err, msg: results.append("" if err is None else err.name()))
    p.flush(20)
    return [r for r in results if r] if results else ["NOT_DELIVERED"]


def _consume(s: Setup, topic: str, want: int, seconds: float) -> tuple[int, list[str]]:
    from confluent_kafka import Consumer

    group = f"alice-{s.open.split('-', 1)[1]}"
    c = Consumer(
        {
            **_conf(s.groupshift.bootstrap, s.ca, "alice"),
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    try:
        return poll_records(c, want, seconds, max_errors=10)
    finally:
        c.close()


def test_a_mapped_principal_reaches_the_cluster_as_itself(setup: Setup) -> None:
    assert _produce(setup, "alice", setup.open) == []
    assert _produce(setup, "alice", setup.closed) == ["TOPIC_AUTHORIZATION_FAILED"]  # the cluster's ACLs
    assert _produce(setup, "bob", setup.closed) == []  # bob: groupshift's own credential
    read, errors = _consume(setup, setup.closed, 1, 8)
    assert read == 0 and "TOPIC_AUTHORIZATION_FAILED" in errors, errors
    read, errors = _consume(setup, setup.open, 7, 40)  # 6 seeded + alice's own
    assert read == 7, (read, errors)
    logged = json.dumps(setup.groupshift.events())
    assert password_of("alice") not in logged and password_of("admin") not in logged


def test_a_wrong_mapped_password_stops_the_start(setup: Setup) -> None:
    creds = _credentials(setup.base / "wrong.json", "not-alices-password")
    args = [sys.executable, "-m", "groupshift", "serve", "--listen", "127.0.0.1:0"]
    args += ["--data-dir", str(setup.base / "refused"), "--upstream", setup.cluster.bootstrap]
    for s in setup.upstream_sets(creds):
        args += ["--set", s]
    done = subprocess.run(
        args, cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 1, done.stderr
    assert (
        "upstream.identity.credentials.file (User:alice): authentication failed for user 'alice'"
        in done.stderr
    )
    assert "not-alices-password" not in done.stderr and "Traceback" not in done.stderr
