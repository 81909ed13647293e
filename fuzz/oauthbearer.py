"""Target `oauthbearer`: SASL/OAUTHBEARER's client initial response, as a listener's mechanism
reads it (`gateway.sasl.oauthbearer`: the GS2 header, `auth=Bearer`, extensions, then the JWT).

An input is one SaslAuthenticate `auth_bytes` fed to a fresh `OAuthBearerMechanism` whose
validator holds an EC and an RSA key (a fixed clock, so a run reproduces); when the mechanism
answers with a challenge, the client's `\\x01` reply follows, as Kafka's clients send it.

Clean: `SaslAuthenticationFailed` (Kafka's SASL_AUTHENTICATION_FAILED answer). Asserted
(Kafka's `OAuthBearerSaslServer`):
* a completed step names `User:<sub>` of a token signed by a held key, with `exp - now` as the
  credential lifetime, and an empty challenge;
* an incomplete step's challenge is Kafka's JSON error, and the `\\x01` reply fails with exactly
  that text;
* a malformed message fails as `SaslInvalidCredentials`, which the authenticator answers with
  Kafka's generic text, never naming the cause.
"""

from __future__ import annotations

import json

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from fuzz.common import Target
from gateway.sasl.jwks import StaticKeySource, parse_jwks
from gateway.sasl.mechanism import SaslAuthenticationFailed, SaslInvalidCredentials
from gateway.sasl.oauthbearer import (
    ClientInitialResponse,
    JwksTokenValidator,
    OAuthBearerMechanism,
)

NOW = 1_800_000_000.0
_EC = ec.generate_private_key(ec.SECP256R1())
_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_JWKS = {
    "keys": [
        {**jwt.algorithms.ECAlgorithm.to_jwk(_EC.public_key(), as_dict=True), "kid": "ec"},
        {**jwt.algorithms.RSAAlgorithm.to_jwk(_RSA.public_key(), as_dict=True), "kid": "rsa"},
    ]
}
_VALIDATOR = JwksTokenValidator(
    StaticKeySource(parse_jwks(json.dumps(_JWKS).encode(), source="fuzz")),
    expected_audience=("kafka",),
    expected_issuer="idp",
)
_CHALLENGE_PREFIX = b'{"status":"'


def one_input(data: bytes) -> None:
    m = OAuthBearerMechanism(_VALIDATOR, clock=lambda: NOW)
    try:
        step = m.step(data)
    except SaslAuthenticationFailed as e:
        # a malformed message: the authenticator sends Kafka's generic text (`MALFORMED`)
        assert isinstance(e, SaslInvalidCredentials) or str(e).startswith(
            "Authentication failed: Client requested"
        ), str(e)
        raise
    if step.complete:
        assert step.challenge == b"" and step.principal is not None and step.principal.startswith("User:")
        assert step.credential_lifetime_ms is not None
        return
    assert step.challenge.startswith(_CHALLENGE_PREFIX) and step.challenge.endswith(b"}"), step.challenge
    try:
        m.step(b"\x01")
    except SaslAuthenticationFailed as e:
        assert str(e).encode() == step.challenge
    else:
        raise AssertionError("the 0x01 reply to a challenge did not fail")


def _token(key: object, alg: str, kid: str, **claims: object) -> str:
    body = {"sub": "alice", "iat": int(NOW), "exp": int(NOW) + 3600, "aud": "kafka", "iss": "idp", **claims}
    return jwt.encode(body, key, algorithm=alg, headers={"kid": kid})  # type: ignore[arg-type]


def seeds() -> list[bytes]:
    good_ec = _token(_EC, "ES256", "ec")
    good_rsa = _token(_RSA, "RS256", "rsa", scope=["a", "b"])
    expired = _token(_EC, "ES256", "ec", exp=int(NOW) - 3600)
    unknown_kid = _token(_EC, "ES256", "other")
    return [
        ClientInitialResponse(good_ec).encode(),
        ClientInitialResponse(good_rsa, "alice", {"traceId": "x y", "a": "b=c"}).encode(),
        ClientInitialResponse(expired).encode(),
        ClientInitialResponse(unknown_kid, "", {"k": "v"}).encode(),
        ClientInitialResponse("abc.def.ghi").encode(),
        b"n,a=al=2Cice,\x01auth=Bearer x\x01\x01",
    ]


TARGET = Target(
    name="oauthbearer",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(SaslAuthenticationFailed,),
    instrument=("gateway.sasl.oauthbearer",),
)
