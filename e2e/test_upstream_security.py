"""groupshift in front of a secured Kafka 4.x (issue 29, point 1): TLS and SASL to the upstream.

One Kafka 4.x node whose client listener is SASL_SSL with StandardAuthorizer
(harness.kafka_dist.security), requiring a client certificate too
(`listener.name.sasl_ssl.ssl.client.auth=required`, so groupshift's keystore is mutual TLS),
with `connections.max.reauth.ms` short so that every upstream link must re-authenticate
(KIP-368) while the clients run, and OAUTHBEARER enabled beside PLAIN and SCRAM, validated by
Kafka's `OAuthBearerValidatorCallbackHandler` against a JWKS file this module writes. Clients
reach groupshift over PLAINTEXT (the gateway's own listeners are issue 26's); everything
groupshift sends upstream (per-broker links, metadata, offsets import and mirror) is SASL_SSL.

* a wrong password, a truststore that does not trust the broker, and no client certificate:
  `groupshift serve` exits 1 with one line naming the setting, no traceback;
* SCRAM-SHA-512 with a PKCS12 truststore and a PEM keystore: a KIP-848 consumer (librdkafka)
  and a classic one (kafka-python) consume what was produced through groupshift; the commits
  are mirrored to the cluster (read there over SASL_SSL); the links re-authenticated;
* OAUTHBEARER through a token endpoint served here (127.0.0.1; client credentials checked;
  tokens live 8 s), the gateway a one-node scale-out fleet (its shard log's librdkafka clients
  take the token through `oauth_cb`): tokens are refreshed and links re-authenticate with them,
  the group's commits go through the shard's transactional producer; when the endpoint
  starts refusing, links whose token expired fail and their clients are disconnected; once
  it answers again, new clients get through;
* a live migration with every client on SASL_SSL: groupshift (one SASL_SSL listener with
  PLAIN and its own StandardAuthorizer, the `gateway` identity) in front of this
  cluster, a rolling upgrade of a classic group (kafka-python and confluent-kafka, eager
  `range`) to KIP-848 members (confluent-kafka) and a rolling downgrade to classic members
  (aiokafka and kafka-python) while a producer writes continuously; the checkers of
  e2e/migration.py pass, and the upstream links re-authenticated meanwhile.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from e2e.conftest import Gateways
from e2e.expected import PARTITIONS
from e2e.groups import ConfluentMember, KafkaPythonMember, Ledger, produce, wait_until
from e2e.harness import GatewayProcess
from e2e.migration import UpstreamTarget, scenario
from e2e.scaleout import wait_fleet
from e2e.upstream import FAST_UPSTREAM_SETTINGS, Endpoint, create_replicated_topic, gateway_offsets, run_until
from harness.certificates import PASSWORD, Authority, Issued
from harness.kafka_dist import KafkaCluster
from harness.kafka_dist.cluster import DEFAULT_JVM_OPTS
from harness.kafka_dist.security import password_of
from tests.plugins.kafka import skip_without_tools

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parent.parent
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
ISSUER = "https://idp.example"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
TOKEN_SECONDS = 8
REAUTH_MS = 5000
ADMIN_PASSWORD = password_of("admin")


@dataclass
class TokenEndpoint:
    """A client-credentials token endpoint: RS256 JWTs for `admin`, TOKEN_SECONDS long."""

    url: str = ""
    refusing: bool = False
    issued: int = 0
    seen: list[str] = field(default_factory=list)

    def answer(self, authorization: str) -> tuple[int, bytes]:
        self.seen.append(authorization)
        if self.refusing or authorization != "Basic " + base64.b64encode(b"gw-client:gw-secret").decode():
            return 401, b'{"error":"invalid_client"}'
        now = int(time.time())
        claims = {"sub": "admin", "iat": now, "exp": now + TOKEN_SECONDS, "aud": "kafka", "iss": ISSUER}
        self.issued += 1
        token = jwt.encode(claims, KEY, algorithm="RS256", headers={"kid": "k1"})
        return 200, json.dumps({"access_token": token, "token_type": "Bearer"}).encode()


@dataclass
class Upstream:
    cluster: KafkaCluster
    ca: Authority
    gw_cert: Issued
    tokens: TokenEndpoint
    base: Path

    def settings(self, **over: str) -> list[str]:
        """groupshift's `--set` arguments: SCRAM-SHA-512 over mutual TLS as `admin`."""
        props = {
            "upstream.security.protocol": "SASL_SSL",
            "upstream.ssl.truststore.location": str(self.ca.p12),
            "upstream.ssl.truststore.type": "PKCS12",
            "upstream.ssl.truststore.password": PASSWORD,
            "upstream.ssl.keystore.location": str(self.gw_cert.pem),
            "upstream.ssl.keystore.type": "PEM",
            "upstream.sasl.mechanism": "SCRAM-SHA-512",
            "upstream.sasl.jaas.config": f'{SCRAM} required username="admin" password="{ADMIN_PASSWORD}";',
        } | over
        return [*FAST_UPSTREAM_SETTINGS, *(f"{k}={v}" for k, v in props.items() if v != "")]

    def serve(self, name: str, **over: str) -> GatewayProcess:
        sets = self.settings(**over)
        return GatewayProcess.start(
            self.base / name, sets=sets, extra_args=("--upstream", self.cluster.bootstrap)
        )


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    skip_without_tools()
    base = tmp_path_factory.mktemp("upsec")
    jwks = base / "jwks.json"
    public = jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True)
    jwks.write_text(json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    endpoint = TokenEndpoint()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status, body = endpoint.answer(self.headers.get("Authorization", ""))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    endpoint.url = f"http://127.0.0.1:{http.server_address[1]}/token"
    oauth = "listener.name.sasl_ssl.oauthbearer."
    configs = {
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1000",
        "offsets.topic.num.partitions": "4",
        "auto.create.topics.enable": "false",
        "connections.max.reauth.ms": str(REAUTH_MS),
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        f"{oauth}sasl.jaas.config": f"{OAUTH} required ;",
        f"{oauth}sasl.server.callback.handler.class": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
        ),
        f"{oauth}sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        f"{oauth}sasl.oauthbearer.expected.audience": "kafka",
        f"{oauth}sasl.oauthbearer.expected.issuer": ISSUER,
        # An expired token is refused at once (the default allows 30 s of clock skew).
        f"{oauth}sasl.oauthbearer.clock.skew.seconds": "0",
    }
    # Kafka 4.0+ reads a JWKS URL only if this JVM property lists it (CVE-2025-27817).
    saved = os.environ.get("GROUPSHIFT_KAFKA_JVM_OPTS")
    os.environ["GROUPSHIFT_KAFKA_JVM_OPTS"] = " ".join(
        [*DEFAULT_JVM_OPTS, f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks.as_uri()}"]
    )
    cluster = KafkaCluster(
        "4", configs=configs, workdir=base / "kafka", security="sasl_ssl", users=("admin",)
    )
    try:
        cluster.start()
        security = cluster.security
        assert security is not None
        gw_cert = security.ca.issue("gw", "gw")
        yield Upstream(cluster, security.ca, gw_cert, endpoint, base)
    finally:
        cluster.stop()
        http.shutdown()
        if saved is None:
            os.environ.pop("GROUPSHIFT_KAFKA_JVM_OPTS", None)
        else:
            os.environ["GROUPSHIFT_KAFKA_JVM_OPTS"] = saved


def _serve_refused(up: Upstream, name: str, **over: str) -> tuple[int, str]:
    args = [sys.executable, "-m", "groupshift", "serve", "--listen", "127.0.0.1:0"]
    args += ["--data-dir", str(up.base / name), "--upstream", up.cluster.bootstrap]
    for s in up.settings(**over):
        args += ["--set", s]
    done = subprocess.run(
        args, cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    return done.returncode, done.stderr


def test_refused_credentials_stop_the_start(upstream: Upstream) -> None:
    other = Authority(upstream.base / "other-ca", "other")
    cases = {
        "wrong-password": (
            {"upstream.sasl.jaas.config": f'{SCRAM} required username="admin" password="nope";'},
            "groupshift serve: error: upstream.sasl.jaas.config: authentication failed for user 'admin' at "
            f"{upstream.cluster.bootstrap} (SASL_AUTHENTICATION_FAILED: Authentication failed during "
            "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
        ),
        "untrusted": (
            {"upstream.ssl.truststore.location": str(other.pem), "upstream.ssl.truststore.type": "PEM"},
            "groupshift serve: error: upstream.ssl.truststore.location: the broker's certificate at "
            f"{upstream.cluster.bootstrap} is not trusted",
        ),
        "no-client-certificate": (
            {"upstream.ssl.keystore.location": "", "upstream.ssl.keystore.type": ""},
            "groupshift serve: error: upstream.ssl.keystore.location: the broker at "
            f"{upstream.cluster.bootstrap} refused groupshift's certificate",
        ),
    }
    for name, (over, line) in cases.items():
        code, stderr = _serve_refused(upstream, name, **over)
        assert code == 1, (name, stderr[-2000:])
        assert line in stderr, (name, stderr[-2000:])
        assert "Traceback" not in stderr, name
        assert "nope" not in stderr and password_of("admin") not in stderr  # secrets never shown


def _mirrored(up: Upstream, group: str, topic: str) -> dict[int, int]:
    """The group's offsets on the cluster itself, read over SASL_SSL with kafka-python."""
    from kafka.admin import KafkaAdminClient

    broker = up.cluster.security.broker_cert  # type: ignore[union-attr]
    admin = KafkaAdminClient(
        bootstrap_servers=up.cluster.bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=str(up.ca.pem),
        ssl_certfile=str(broker.cert),
        ssl_keyfile=str(broker.key),
        sasl_mechanism="PLAIN",
        sasl_plain_username="admin",
        sasl_plain_password=password_of("admin"),
        request_timeout_ms=10000,
    )
    try:
        offsets = admin.list_group_offsets({group: None})
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.get(group, {}).items() if tp.topic == topic}


def _consume(gw: GatewayProcess, topic: str, count: int, members: dict[str, Any]) -> None:
    for name, make in members.items():
        group = f"{topic}-{name}"
        ledger = Ledger(topic)
        member = make(ledger, group).start()
        try:
            run_until([member], ledger, count, 90)
            ledger.check_consumed(range(count))
        finally:
            member.stop()
        assert gateway_offsets(gw, group, topic) == {p: count // PARTITIONS for p in range(PARTITIONS)}


def test_scram_over_mutual_tls_kip848_and_classic(upstream: Upstream) -> None:
    gw = upstream.serve("gw-scram")
    try:
        topic = "sec-scram"
        create_replicated_topic(gw.bootstrap, topic, 1)
        count = 300
        produce(Endpoint(gw.bootstrap), topic, range(count))  # type: ignore[arg-type]
        _consume(
            gw,
            topic,
            count,
            {
                "kip848": lambda led, g: ConfluentMember(
                    "ck848", led, gw.bootstrap, g, **{"group.protocol": "consumer"}
                ),
                "classic": lambda led, g: KafkaPythonMember("kp", led, gw.bootstrap, g),
            },
        )
        expected = {p: count // PARTITIONS for p in range(PARTITIONS)}
        wait_until(lambda: _mirrored(upstream, f"{topic}-kip848", topic) == expected, 30, "commits mirrored")
        # The links outlived connections.max.reauth.ms: they re-authenticated, none failed.
        wait_until(
            lambda: gw.events("upstream.reauthenticated"), REAUTH_MS / 1000 + 10, "a re-authentication"
        )
        assert not gw.events("upstream.authentication_failed")
    finally:
        assert gw.stop() == 0


def test_oauthbearer_token_refresh_and_refusal(upstream: Upstream) -> None:
    tokens = upstream.tokens
    gw = upstream.serve(
        "gw-oauth",
        **{
            "upstream.sasl.mechanism": "OAUTHBEARER",
            "upstream.sasl.jaas.config": (
                f'{OAUTH} required clientId="gw-client" clientSecret="gw-secret" scope="kafka";'
            ),
            "upstream.sasl.oauthbearer.token.endpoint.url": tokens.url,
            # A one-node scale-out fleet: its membership, shard producer and reader (librdkafka,
            # with the token through oauth_cb) authenticate with the same tokens.
            "node.id": "1001",
            "upstream.coordinator.storage": "kafka",
            "upstream.coordinator.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "upstream.coordinator.fleet.session.timeout.ms": "3000",
            "upstream.coordinator.fleet.heartbeat.interval.ms": "300",
        },
    )
    try:
        wait_fleet([gw], [1001], 4, timeout=60)
        topic = "sec-oauth"
        create_replicated_topic(gw.bootstrap, topic, 1)
        produce(Endpoint(gw.bootstrap), topic, range(120))  # type: ignore[arg-type]
        first = tokens.issued
        # Tokens live 8 s: refreshed in the background, and links re-authenticate with them.
        wait_until(lambda: tokens.issued >= first + 2, 3 * TOKEN_SECONDS, "tokens refreshed")
        wait_until(lambda: gw.events("upstream.reauthenticated"), 2 * TOKEN_SECONDS, "a re-authentication")
        _consume(
            gw,
            topic,
            120,
            {
                "kip848": lambda led, g: ConfluentMember(
                    "oc", led, gw.bootstrap, g, **{"group.protocol": "consumer"}
                )
            },
        )
        assert not gw.events("upstream.authentication_failed")
        # The endpoint refuses: the last token expires, a link's next SASL exchange fails.
        tokens.refusing = True

        def refused() -> list[dict[str, Any]]:
            failed = gw.events("upstream.authentication_failed")
            return [e for e in failed if "the token endpoint answered HTTP 401" in e["error"]]

        # The last token expires: a link's exchange fails (the broker refuses the token, or a
        # new one cannot be had), and once it has, a token is asked for and refused.
        wait_until(refused, 4 * TOKEN_SECONDS, "a link refused for want of a token")
        assert refused()[0]["error"].startswith(
            "upstream.sasl.oauthbearer.token.endpoint.url: no token for client 'gw-client' "
        )
        for event in gw.events("upstream.authentication_failed"):
            assert event["error"].startswith("upstream.sasl."), event
        # It answers again: new clients get through.
        tokens.refusing = False
        _consume(gw, topic, 120, {"classic": lambda led, g: KafkaPythonMember("ok", led, gw.bootstrap, g)})
    finally:
        assert gw.stop() == 0


def test_live_migration_with_every_client_on_sasl_ssl(upstream: Upstream, gateways: Gateways) -> None:
    """Issue 29: a rolling upgrade then downgrade through groupshift, SASL_SSL on both legs."""
    target = UpstreamTarget(
        upstream.cluster.bootstrap, tuple(s for s in upstream.settings() if s.startswith("upstream."))
    )
    with scenario(gateways, "upsec-mig", ["metrics.listen=127.0.0.1:0"], secured=True, upstream=target) as sc:
        cast = sc.cast
        classic = [cast.classic("kafka-python-range"), cast.classic("confluent-range")]
        sc.step("classic", "two classic range members")
        upgraded = []
        for i, old in enumerate(classic):
            upgraded.append(cast.confluent("consumer"))
            sc.step("consumer", f"upgrade {i + 1}/2: {upgraded[-1].name} joined")
            old.stop()
            sc.step("consumer", f"upgrade {i + 1}/2: {old.name} left")
        downgraded = []
        for i, (old, kind) in enumerate(zip(upgraded, ("aiokafka-range", "kafka-python-range"), strict=True)):
            downgraded.append(cast.classic(kind))
            sc.step("consumer", f"downgrade {i + 1}/2: {downgraded[-1].name} joined")
            old.stop()
            sc.step("classic" if i == 1 else "consumer", f"downgrade {i + 1}/2: {old.name} left")
        assert sc.conversions() == [("classic", "consumer"), ("consumer", "classic")]
        report = sc.finish()
        print(f"SASL_SSL upstream rolling upgrade and downgrade: {report}")
        assert report.handovers >= 8
        metrics = sc.gw.metrics()
        logins = sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("groupshift_sasl_authentications_total{") and 'listener="SASL_SSL"' in line
        )
        assert logins >= 7, metrics  # the producer, six members and the observers
        assert not sc.gw.events("upstream.authentication_failed")
        # The run outlived connections.max.reauth.ms: a link re-authenticates (KIP-368) once
        # nothing is in flight on it, which a link busy to the end of the run does just after.
        wait_until(
            lambda: sc.gw.events("upstream.reauthenticated"), REAUTH_MS / 1000 + 10, "a re-authentication"
        )
