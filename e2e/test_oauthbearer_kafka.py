"""OAUTHBEARER answers, Kafka 4.x against groupshift's mechanism, message by message.

One Kafka 4.x node gets a SASL_PLAINTEXT listener `OAUTH` with OAUTHBEARER validated by Kafka's
`OAuthBearerValidatorCallbackHandler` against a JWKS file this module writes (keys generated
here, tokens signed with PyJWT). Each case is a fresh connection: SaslHandshake v1, then the
case's SaslAuthenticate v2 messages; Kafka's answers (error code, error message, auth bytes,
session lifetime, or a closed connection) are compared with what groupshift's SASL state
machine answers with the OAUTHBEARER mechanism of its table, the listener's settings resolved
from the very properties Kafka was started with.

This pins the claims of gateway/sasl/oauthbearer.py (the JSON challenge byte for byte, the
`\\x01` reply, the generic text for a malformed message, the authzid rule, the credential
lifetime) on the real broker, and the one measured deviation: a scheme other than Bearer, which
Kafka answers by closing the connection.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from gateway.listeners import listener_sasl_settings
from gateway.sasl.authenticator import (
    AuthenticateAnswer,
    AuthenticateRequest,
    HandshakeRequest,
    SaslAuthenticator,
    SaslListenerSetup,
)
from gateway.sasl.jaas import parse_jaas
from gateway.sasl.mechanisms import MECHANISMS
from gateway.sasl.oauthbearer import ClientInitialResponse, parse_oauthbearer_settings
from gateway.sasl.setup import MechanismSetup
from harness.kafka_dist import KafkaCluster
from harness.kafka_dist.cluster import DEFAULT_JVM_OPTS, free_port
from protocol.client import WireClient, make_request
from tests.plugins.kafka import skip_without_tools

pytestmark = pytest.mark.e2e

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
ISSUER = "https://idp.example"
FAILED = 58  # SASL_AUTHENTICATION_FAILED


def _jwk(private: Any, kid: str) -> dict[str, Any]:
    algorithm = (
        jwt.algorithms.RSAAlgorithm if isinstance(private, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
    )
    return {**algorithm.to_jwk(private.public_key(), as_dict=True), "kid": kid, "use": "sig"}


@dataclass
class Broker:
    port: int
    settings: dict[str, str]
    ports: dict[str, int]
    """Every OAUTHBEARER listener: OAUTH (audience and issuer expected), LAX (both opted out:
    `sasl.oauthbearer.allow.unverified.*`), BOTH (audience expected and opted out)."""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    skip_without_tools()
    base = tmp_path_factory.mktemp("oauth-kafka")
    jwks = base / "jwks.json"
    jwks.write_text(json.dumps({"keys": [_jwk(RSA_KEY, "rsa-1"), _jwk(EC_KEY, "ec-1")]}))
    settings: dict[str, str] = {}
    own = {
        "OAUTH": {"expected.audience": "kafka", "expected.issuer": ISSUER},
        "LAX": {"allow.unverified.audience": "true", "allow.unverified.issuer": "true"},
        "BOTH": {
            "expected.audience": "kafka",
            "allow.unverified.audience": "true",
            "expected.issuer": ISSUER,
        },
    }
    for name, extra in own.items():
        prefix = f"listener.name.{name.lower()}."
        settings |= {
            f"{prefix}sasl.enabled.mechanisms": "OAUTHBEARER",
            f"{prefix}oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
            ),
            f"{prefix}oauthbearer.sasl.server.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            ),
            f"{prefix}oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
            **{f"{prefix}oauthbearer.sasl.oauthbearer.{k}": v for k, v in extra.items()},
        }
    # Kafka 4.0+ reads a JWKS URL only if this JVM property lists it (CVE-2025-27817).
    saved = os.environ.get("GROUPSHIFT_KAFKA_JVM_OPTS")
    os.environ["GROUPSHIFT_KAFKA_JVM_OPTS"] = " ".join(
        [*DEFAULT_JVM_OPTS, f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks.as_uri()}"]
    )
    try:
        cluster = KafkaCluster("4", workdir=base / "kafka")
        node = cluster.nodes[0]
        ports = {name: free_port() for name in own}
        extra_listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
        cluster.configs.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port},"
                + extra_listeners,
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},{extra_listeners}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                + ",".join(f"{n}:SASL_PLAINTEXT" for n in own),
                **settings,
                # Kafka delays the answer to a failed authentication by 100 ms; hundreds of cases fail here
                "connection.failed.authentication.delay.ms": "0",
            }
        )
        with cluster:
            cluster.start()
            yield Broker(ports["OAUTH"], settings, ports)
    finally:
        if saved is None:
            os.environ.pop("GROUPSHIFT_KAFKA_JVM_OPTS", None)
        else:
            os.environ["GROUPSHIFT_KAFKA_JVM_OPTS"] = saved


Answer = tuple[int, str | None, bytes, int] | str  # (code, message, auth bytes, lifetime) or "closed"


def kafka_answers(port: int, messages: list[bytes]) -> list[Answer]:
    out: list[Answer] = []
    with WireClient(port, timeout=20.0) as c:
        hs = c.request(make_request(17, 1, mechanism="OAUTHBEARER"))
        assert hs.error_code == 0, hs
        for m in messages:
            try:
                r = c.request(make_request(36, 2, auth_bytes=m))
            except ConnectionError:
                out.append("closed")
                break
            # a null and an empty error message are alike to clients; the mechanism sets none on success
            out.append(
                (int(r.error_code), r.error_message or None, bytes(r.auth_bytes), _ms(r.session_lifetime))
            )
            if r.error_code:
                break
    return out


def _ms(v: Any) -> int:
    """kio gives session_lifetime_ms as a timedelta."""
    return int(v.total_seconds() * 1000) if hasattr(v, "total_seconds") else int(v)


def our_answers(settings: dict[str, str], messages: list[bytes], listener: str = "OAUTH") -> list[Answer]:
    """groupshift's answers to the same messages: the listener's settings as the server resolves
    them, the OAUTHBEARER factory of the mechanism table, and the SASL state machine."""
    sasl = listener_sasl_settings(listener, settings)
    jaas = sasl.get("oauthbearer.sasl.jaas.config")
    setup = MechanismSetup(listener, "OAUTHBEARER", sasl, None if jaas is None else parse_jaas(jaas), None)
    auth = SaslAuthenticator(
        SaslListenerSetup(("OAUTHBEARER",), {"OAUTHBEARER": MECHANISMS["OAUTHBEARER"](setup)}, {})
    )
    auth.receive(HandshakeRequest("OAUTHBEARER", 1), 0)
    out: list[Answer] = []
    for data in messages:
        answer = auth.receive(AuthenticateRequest(data, 2), 0).answer
        if not isinstance(answer, AuthenticateAnswer):
            out.append("closed")
            break
        out.append(
            (
                int(answer.error_code),
                answer.error_message or None,
                answer.auth_bytes,
                answer.session_lifetime_ms,
            )
        )
        if answer.error_code:
            break
    return out


def _token(key: Any = RSA_KEY, *, alg: str = "RS256", kid: str | None = "rsa-1", **over: Any) -> str:
    now = int(time.time())
    claims: dict[str, Any] = {
        "sub": "alice",
        "iat": now - 5,
        "exp": now + 3600,
        "aud": "kafka",
        "iss": ISSUER,
    }
    claims.update(over)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid} if kid else {})


def _hs256_with_public_key() -> str:
    """The algorithm-confusion forgery: HMAC keyed with the RSA key's public PEM."""
    pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = jwt.utils.base64url_encode(b'{"alg":"HS256","kid":"rsa-1","typ":"JWT"}').decode()
    now = int(time.time())
    body = {"sub": "alice", "iat": now, "exp": now + 60, "aud": "kafka", "iss": ISSUER}
    payload = jwt.utils.base64url_encode(json.dumps(body).encode()).decode()
    mac = hmac.new(pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{jwt.utils.base64url_encode(mac).decode()}"


def first(tok: str, authzid: str = "", **ext: str) -> bytes:
    return ClientInitialResponse(tok, authzid, ext).encode()


def cases() -> dict[str, list[bytes]]:
    now = int(time.time())
    return {
        "valid": [first(_token())],
        "valid EC, extensions, authzid": [
            first(_token(EC_KEY, alg="ES256", kid="ec-1"), "alice", traceId="t 1")
        ],
        "expired": [first(_token(exp=now - 120)), b"\x01"],
        "not yet valid": [first(_token(nbf=now + 600)), b"\x01"],
        "wrong signature": [first(_token(OTHER_KEY)), b"\x01"],
        "wrong audience": [first(_token(aud="other")), b"\x01"],
        "no audience": [first(_token(aud=None)), b"\x01"],
        "wrong issuer": [first(_token(iss="https://evil.example")), b"\x01"],
        "unknown kid": [first(_token(kid="rsa-9")), b"\x01"],
        "alg none": [
            first(jwt.encode({"sub": "alice", "exp": now + 60, "iat": now}, None, algorithm="none")),
            b"\x01",
        ],
        "no sub": [first(_token(sub=None)), b"\x01"],
        "no iat": [first(_token(iat=None)), b"\x01"],
        "authzid mismatch": [first(_token(), "bob")],
        "no kid": [first(_token(EC_KEY, alg="ES256", kid=None))],
        "expired within the clock skew": [first(_token(exp=now - 10, iat=now - 60))],
        "exp before iat": [first(_token(exp=now + 60, iat=now + 120)), b"\x01"],
        "exp before nbf": [first(_token(exp=now + 20, nbf=now + 25, iat=now - 5)), b"\x01"],
        "exp equal to iat": [first(_token(exp=now + 60, iat=now + 60))],
        "iat in the future": [first(_token(iat=now + 600))],
        "duplicate scopes": [first(_token(scope=["read", "read"])), b"\x01"],
        "scope as a number": [first(_token(scope=7))],
        "sub as a number": [first(_token(sub=7)), b"\x01"],
        "HS256 keyed with the RSA public key": [first(_hs256_with_public_key()), b"\x01"],
        "extension value with a tab": [first(_token(), traceId="a\tb")],
        "retry after a challenge": [first(_token(aud="other")), first(_token())],
        "0x01 first": [b"\x01"],
        "GS2 flag y": [b"y,,\x01auth=Bearer " + _token().encode() + b"\x01\x01"],
        "no terminator": [first(_token())[:-1]],
        "bad extension name": [first(_token())[:-1] + b"1x=v\x01\x01"],
        "empty": [b""],
    }


def _same(ours: list[Answer], kafka: list[Answer]) -> bool:
    if len(ours) != len(kafka):
        return False
    for o, k in zip(ours, kafka, strict=True):
        if isinstance(o, str) or isinstance(k, str):
            if o != k:
                return False
            continue
        if o[:3] != k[:3] or abs(o[3] - k[3]) > 10_000:  # the lifetimes: exp - now, seconds apart
            return False
    return True


def test_every_answer_is_kafkas(broker: Broker) -> None:
    mismatches = {}
    for name, messages in cases().items():
        kafka = kafka_answers(broker.port, messages)
        ours = our_answers(broker.settings, messages)
        if not _same(ours, kafka):
            mismatches[name] = {"kafka": kafka, "groupshift": ours}
    assert mismatches == {}, json.dumps(mismatches, default=repr, indent=1)


def test_a_scheme_other_than_bearer_closes_kafkas_connection(broker: Broker) -> None:
    """The declared deviation (docs/deviations.md): Kafka throws IllegalArgumentException from
    its own error message and closes without an answer; groupshift answers the generic text."""
    data = b"n,,\x01auth=Basic " + _token().encode() + b"\x01\x01"
    assert kafka_answers(broker.port, [data]) == ["closed"]
    ours = our_answers(broker.settings, [data])
    assert ours[0][:2] == (FAILED, "Authentication failed during authentication due to invalid credentials "  # type: ignore[index]
                           "with SASL mechanism OAUTHBEARER")  # fmt: skip


def test_settings_parse_kafkas_broker_properties(broker: Broker, tmp_path: Path) -> None:
    s = parse_oauthbearer_settings(broker.settings, listener="OAUTH")
    assert (s.expected_audience, s.expected_issuer, s.unsecured) == (("kafka",), ISSUER, False)
    assert s.jwks_file is not None and s.jwks_file.exists()


def _grammar_probes(n: int = 400) -> list[bytes]:
    """Initial responses around the grammar's edges: hand-picked ones, then `n` mutations (the
    fuzz targets' mutator, fixed seed) of a small well-formed message whose token is junk, so
    each answer says only whether the message parsed."""
    import random

    from fuzz.common import mutate

    base = [
        b"n,,\x01auth=Bearer abc\x01\x01",
        b"n,a=al=2Cice,\x01auth=Bearer a.b.c==\x01k=v w\t\x01\x01",
        b"n,a=x\x01y,\x01auth=Bearer t\x01\x01",  # \x01 inside the authzid (Kafka's SASLNAME allows it)
        b"n,a=x=3D,\x01auth=Bearer t\x01\x01",
        b"n,,\x01auth=bearer  t\x01\x01",
        b"n,,\x01auth=Bearer t=\x01\x01",
        b"n,,\x01auth=Bearer t=x\x01\x01",
        b"n,,\x01auth=Bearer\tt\x01\x01",
        b"n,,\x01k=\r\n\x01auth=Bearer t\x01\x01",
        b"n,,\x01K=v\x01auth=Bearer t\x01\x01",
        b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01",
        b"n,,\x01auth=Bearer t\x01k=a=b\x01\x01",
        b"n,,\x01auth=Bearer t\x01k=\x7f\x01\x01",
        b"n,,\x01auth=Bearer t\x01k=~\x01\x01",
        b"n,,\x01AUTH=Bearer t\x01\x01",
        b"n,,\x01auth=Bearer_x t\x01\x01",
    ]
    rng = random.Random(26)
    return base + [mutate(rng, rng.choice(base), base) for _ in range(n)]


def test_the_grammar_accepts_and_refuses_what_kafka_does(broker: Broker) -> None:
    """Parsed (a junk token: the invalid_token challenge) or not (the generic failure), message
    by message. Where Kafka closes the connection instead, ours must be the declared deviation:
    a scheme other than Bearer."""
    from gateway.sasl.oauthbearer import MalformedInitialResponse, decode_initial_response

    mismatches = []
    parsed = refused = 0
    for data in _grammar_probes():
        kafka = kafka_answers(broker.port, [data])
        ours = our_answers(broker.settings, [data])
        parsed += kafka[0] != "closed" and kafka[0][0] == 0
        refused += kafka[0] == "closed" or kafka[0][0] == FAILED
        if kafka == ["closed"]:
            try:
                decode_initial_response(data)
            except MalformedInitialResponse as e:
                if e.reason == "Invalid scheme in OAUTHBEARER client first message":
                    continue
            mismatches.append((data, kafka, ours))
        elif not _same(ours, kafka):
            mismatches.append((data, kafka, ours))
    assert mismatches == [], mismatches[:5]
    assert parsed >= 15 and refused >= 300, (parsed, refused)  # both sides of the grammar were probed


def test_unverified_audience_and_issuer_as_kafka_4_4_takes_them(broker: Broker) -> None:
    """`sasl.oauthbearer.allow.unverified.audience` / `...issuer` (Kafka 4.4): with nothing
    expected any audience and issuer pass, none too; an audience that is expected is still checked.
    Both listeners must also refuse something (else the comparison proves little)."""
    cases = {
        "valid": first(_token()),
        "wrong issuer": first(_token(iss="https://evil.example")),
        "any audience and issuer": first(_token(aud="other", iss="https://evil.example")),
        "no audience, no issuer": first(_token(aud=None, iss=None)),
        "audience list": first(_token(aud=["x", "y"])),
        "wrong signature": first(_token(OTHER_KEY)),
        "expired": first(_token(exp=int(time.time()) - 300)),
    }
    mismatches = {}
    outcomes: set[tuple[str, bool]] = set()  # (listener, accepted)
    for listener in ("LAX", "BOTH"):
        for name, data in cases.items():
            ours = our_answers(broker.settings, [data], listener)
            messages = [data, b"\x01"] if ours[0][2] else [data]  # type: ignore[index]  # the client's reply
            kafka = kafka_answers(broker.ports[listener], messages)
            ours = our_answers(broker.settings, messages, listener)
            if not _same(ours, kafka):
                mismatches[f"{listener}: {name}"] = {"kafka": kafka, "groupshift": ours}
            outcomes.add((listener, len(kafka) == 1))
    assert mismatches == {}, json.dumps(mismatches, default=repr, indent=1)
    assert outcomes == {("LAX", True), ("LAX", False), ("BOTH", True), ("BOTH", False)}, outcomes
