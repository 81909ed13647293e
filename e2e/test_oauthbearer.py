"""SASL/OAUTHBEARER on a groupshift SASL_PLAINTEXT listener with real clients (docs/security.md):
confluent-kafka (`oauth_cb`, classic and KIP-848 groups) and kafka-python
(`sasl_oauth_token_provider`) authenticate with tokens this module signs, validated against a
JWKS file; a token signed by another key is refused with Kafka's answer and nothing else is
disturbed.

Keys are generated here (`cryptography`), tokens signed with PyJWT; nothing is committed.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from protocol.client import WireClient, make_request

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ISSUER = "https://idp.example"
KEY = ec.generate_private_key(ec.SECP256R1())
ROGUE = ec.generate_private_key(ec.SECP256R1())


def sign(key: Any = KEY, sub: str = "alice", kid: str = "k1") -> str:
    now = int(time.time())
    claims = {"sub": sub, "iat": now, "exp": now + 3600, "aud": "kafka", "iss": ISSUER}
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": kid})


@dataclass
class Oauth:
    gw: GatewayProcess
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def oauth(module_gateways: Gateways, tmp_path_factory: pytest.TempPathFactory) -> Oauth:
    d: Path = tmp_path_factory.mktemp("oauth")
    jwks = d / "jwks.json"
    public = jwt.algorithms.ECAlgorithm.to_jwk(KEY.public_key(), as_dict=True)
    jwks.write_text(json.dumps({"keys": [{**public, "kid": "k1", "use": "sig"}]}))
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    gw = module_gateways.start(
        "oauth",
        sets=[
            "listeners=SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms=OAUTHBEARER",
            f"{prefix}sasl.oauthbearer.jwks.endpoint.url={jwks.as_uri()}",
            f"{prefix}sasl.oauthbearer.expected.audience=kafka",
            f"{prefix}sasl.oauthbearer.expected.issuer={ISSUER}",
        ],
    )
    port = int(gw.events("gateway.listening")[-1]["ports"]["SASL_PLAINTEXT"])
    return Oauth(gw, port)


def confluent_conf(oauth: Oauth, token: Callable[[], str]) -> dict[str, Any]:
    def cb(_config: str) -> tuple[str, float]:
        return token(), time.time() + 3600

    return {
        "bootstrap.servers": oauth.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "oauth_cb": cb,
    }


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_confluent_kafka_with_a_signed_token(oauth: Oauth, group_protocol: str) -> None:
    from confluent_kafka import Consumer, Producer

    conf = confluent_conf(oauth, sign)
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    for i in range(10):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer_conf: dict[str, Any] = {
        **conf,
        "group.id": f"g-{topic}",
        "auto.offset.reset": "earliest",
        "group.protocol": group_protocol,
    }
    if group_protocol == "classic":
        consumer_conf["session.timeout.ms"] = 6000
    consumer = Consumer(consumer_conf)
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(10)]


def test_kafka_python_with_a_token_provider(oauth: Oauth) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return sign()

    sasl = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": Provider(),
    }
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=oauth.bootstrap, **sasl)
    for i in range(5):
        producer.send(topic, f"k{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=oauth.bootstrap,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
        **sasl,
    )
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == 5:
            break
    consumer.close()
    assert got == [f"k{i}".encode() for i in range(5)]


def test_a_wrongly_signed_token_is_refused_with_kafkas_answer(oauth: Oauth) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    # on the wire: the JSON challenge, then SASL_AUTHENTICATION_FAILED carrying it, then a close
    with WireClient(oauth.port, timeout=10.0) as c:
        assert c.request(make_request(17, 1, mechanism="OAUTHBEARER")).error_code == 0
        initial = f"n,,\x01auth=Bearer {sign(ROGUE)}\x01\x01".encode()
        r = c.request(make_request(36, 2, auth_bytes=initial))
        assert (r.error_code, bytes(r.auth_bytes)) == (0, b'{"status":"invalid_token"}')
        r = c.request(make_request(36, 2, auth_bytes=b"\x01"))
        assert (r.error_code, r.error_message) == (58, '{"status":"invalid_token"}')
        assert c.closed_by_server()
    # a real client reports Kafka's authentication error (librdkafka's error callback), and a
    # good client on the same listener is served meanwhile
    errors: list[Any] = []
    conf = {
        **confluent_conf(oauth, lambda: sign(ROGUE)),
        "error_cb": errors.append,
        "reconnect.backoff.ms": 2000,
    }
    admin = AdminClient(conf)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        admin.poll(0.5)  # serves the error callback
    del admin
    assert any(
        e.code() == KafkaError._AUTHENTICATION and '{"status":"invalid_token"}' in e.str() for e in errors
    ), [e.str() for e in errors]
    good = AdminClient(confluent_conf(oauth, sign))
    assert [b.port for b in good.list_topics(timeout=20).brokers.values()] == [oauth.port]
    failed = [e for e in oauth.gw.events("auth.failed") if e.get("mechanism") == "OAUTHBEARER"]
    assert failed, oauth.gw.events("auth.failed")
