"""OAUTHBEARER's server mechanism (gateway/sasl/oauthbearer.py) against Kafka's answers.

Keys are generated here with `cryptography` and tokens signed with PyJWT; a JWKS comes from a
file or from an http.server on 127.0.0.1. Each refusal is checked for the bytes Kafka sends: the
JSON challenge `{"status":"invalid_token"}`, then the failure carrying it once the client
answers `\\x01` (`OAuthBearerSaslServer`), or for a malformed message the generic text
`SaslServerAuthenticator` gives any `SaslException`.
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from gateway.sasl.authenticator import (
    AuthenticateAnswer,
    AuthenticateRequest,
    HandshakeRequest,
    SaslAuthenticator,
    SaslListenerSetup,
)
from gateway.sasl.jwks import (
    JwksError,
    RefreshingJwks,
    StaticKeySource,
    VerificationKey,
    load_jwks_file,
    parse_jwks,
)
from gateway.sasl.mechanism import SaslAuthenticationFailed, SaslInvalidCredentials, ServerMechanism
from gateway.sasl.mechanisms import MECHANISMS
from gateway.sasl.oauthbearer import (
    MALFORMED,
    UNSECURED_HANDLER,
    ClientInitialResponse,
    JwksTokenValidator,
    MalformedInitialResponse,
    OAuthBearerConfigError,
    OAuthBearerMechanism,
    OAuthBearerServer,
    UnsecuredTokenValidator,
    decode_initial_response,
    parse_oauthbearer_settings,
)
from gateway.sasl.setup import MechanismSetup

NOW = 1_800_000_000.0  # the mechanism's fixed wall clock in these tests
INVALID = b'{"status":"invalid_token"}'

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def jwk(private: Any, kid: str) -> dict[str, Any]:
    if isinstance(private, rsa.RSAPrivateKey):
        d = jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key(), as_dict=True)
    else:
        d = jwt.algorithms.ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
    return {**d, "kid": kid, "use": "sig"}


JWKS = {"keys": [jwk(RSA_KEY, "rsa-1"), jwk(EC_KEY, "ec-1")]}


def claims(**over: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "sub": "alice",
        "iat": int(NOW) - 60,
        "exp": int(NOW) + 3600,
        "iss": "https://idp.example",
        "aud": "kafka",
        "scope": "read",
    }
    for k, v in over.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def token(key: Any = RSA_KEY, *, alg: str = "RS256", kid: str | None = "rsa-1", **over: Any) -> str:
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(claims(**over), key, algorithm=alg, headers=headers)


def first(tok: str, *, authzid: str = "", extensions: dict[str, str] | None = None) -> bytes:
    return ClientInitialResponse(tok, authzid, extensions or {}).encode()


class CountingKeys:
    """A key source that records the refresh hints it receives."""

    def __init__(self, keys: Sequence[VerificationKey]) -> None:
        self.keys = tuple(keys)
        self.missing: list[str | None] = []

    def current(self) -> Sequence[VerificationKey]:
        return self.keys

    def key_missing(self, kid: str | None) -> None:
        self.missing.append(kid)


def validator(**kw: Any) -> JwksTokenValidator:
    kw.setdefault("expected_audience", ("kafka",))
    kw.setdefault("expected_issuer", "https://idp.example")
    keys = kw.pop("keys", None) or StaticKeySource(parse_jwks(json.dumps(JWKS).encode(), source="test"))
    return JwksTokenValidator(keys, **kw)


def mechanism(v: Any = None) -> OAuthBearerMechanism:
    return OAuthBearerMechanism(v or validator(), clock=lambda: NOW)


def through_the_authenticator(
    messages: list[bytes], *, reauth_ms: int = 0, validator_: Any = None
) -> list[Any]:
    """The answers of groupshift's SASL state machine (gateway.sasl.authenticator) with this
    mechanism, as a SASL listener gives them: SaslHandshake v1, then SaslAuthenticate v2 each."""
    auth = SaslAuthenticator(
        SaslListenerSetup(
            ("OAUTHBEARER",),
            {"OAUTHBEARER": lambda: mechanism(validator_)},
            {"OAUTHBEARER": reauth_ms},
        )
    )
    auth.receive(HandshakeRequest("OAUTHBEARER", 1), 0)
    return [auth.receive(AuthenticateRequest(m, 2), 0).answer for m in messages]


def refused_with_challenge(m: OAuthBearerMechanism, data: bytes, challenge: bytes = INVALID) -> None:
    """Kafka's two-step refusal: the JSON challenge, then the failure once the client sends 0x01."""
    step = m.step(data)
    assert step.challenge == challenge and not step.complete and step.principal is None
    with pytest.raises(SaslAuthenticationFailed) as e:
        m.step(b"\x01")
    assert str(e.value) == challenge.decode()


# --- valid tokens ------------------------------------------------------------------------------


def test_valid_token_authenticates_as_the_sub_with_the_token_lifetime() -> None:
    m: ServerMechanism = mechanism()
    step = m.step(first(token()))
    assert step.complete and step.challenge == b""
    assert step.principal == "User:alice"
    assert step.credential_lifetime_ms == 3600 * 1000


def test_ec_key_and_list_audience_and_authzid_equal_to_the_principal() -> None:
    m = mechanism()
    tok = token(EC_KEY, alg="ES256", kid="ec-1", aud=["other", "kafka"])
    step = m.step(first(tok, authzid="alice", extensions={"traceId": "abc 123", "x": "y=z"}))
    assert step.principal == "User:alice"
    assert m.extensions == {"traceId": "abc 123", "x": "y=z"}


def test_token_without_kid_uses_a_key_that_fits_its_algorithm() -> None:
    assert mechanism().step(first(token(EC_KEY, alg="ES256", kid=None))).principal == "User:alice"


def test_sub_and_scope_claim_names_are_settings() -> None:
    v = validator(sub_claim_name="client_id", scope_claim_name="scp")
    tok = token(client_id=" svc-1 ", sub=None, scp=["a", "b"])
    assert mechanism(v).step(first(tok)).principal == "User:svc-1"  # trimmed, as Kafka
    refused_with_challenge(mechanism(v), first(token(scp=["a", "a"])))  # duplicate scope


def test_clock_skew_lets_a_just_expired_token_in_with_a_negative_lifetime() -> None:
    step = mechanism().step(first(token(exp=int(NOW) - 10)))
    assert step.complete and step.credential_lifetime_ms == -10_000
    assert mechanism().step(first(token(nbf=int(NOW) + 20))).complete


# --- refused tokens: challenge, then failure ---------------------------------------------------


@pytest.mark.parametrize(
    "over",
    [
        {"exp": int(NOW) - 30},  # now - skew >= exp
        {"exp": int(NOW) - 3600},
        {"nbf": int(NOW) + 31},
        {"aud": "other"},
        {"aud": ["a", "b"]},
        {"aud": None},  # an audience is expected
        {"iss": "https://evil.example"},
        {"iss": None},
        {"sub": None},
        {"sub": "   "},
        {"sub": 42},
        {"exp": None},
        {"iat": None},
        {"exp": "tomorrow"},
        {"exp": -5, "iat": -10, "nbf": -20},
        {"scope": ["read", ""]},
        {"exp": int(NOW) + 60, "iat": int(NOW) + 61},  # jose4j: exp before iat
        {"exp": int(NOW) + 20, "nbf": int(NOW) + 25},  # jose4j: exp before nbf
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_invalid_claims_get_kafkas_challenge(over: dict[str, Any]) -> None:
    refused_with_challenge(mechanism(), first(token(**over)))


def test_audience_present_but_none_expected_is_refused_as_jose4j_does() -> None:
    v = validator(expected_audience=())
    refused_with_challenge(mechanism(v), first(token()))
    assert mechanism(v).step(first(token(aud=None))).complete


def test_wrong_signature_is_refused() -> None:
    refused_with_challenge(mechanism(), first(token(OTHER_RSA_KEY)))  # same kid, other key
    tok = token()
    head, body, sig = tok.split(".")
    forged = jwt.utils.base64url_encode(json.dumps(claims(sub="root")).encode()).decode()
    refused_with_challenge(mechanism(), first(f"{head}.{forged}.{sig}"))


def test_unknown_kid_is_refused_and_hints_a_refresh() -> None:
    keys = CountingKeys(parse_jwks(json.dumps(JWKS).encode(), source="test"))
    refused_with_challenge(mechanism(validator(keys=keys)), first(token(kid="rotated-2")))
    assert keys.missing == ["rotated-2"]
    # a known kid whose key does not fit the algorithm is no reason to refresh
    refused_with_challenge(mechanism(validator(keys=keys)), first(token(EC_KEY, alg="ES256", kid="rsa-1")))
    assert keys.missing == ["rotated-2"]


def test_alg_none_is_refused_by_the_jwks_validator() -> None:
    unsigned = jwt.encode(claims(), None, algorithm="none", headers={"kid": "rsa-1"})
    assert unsigned.endswith(".")
    refused_with_challenge(mechanism(), first(unsigned))
    refused_with_challenge(mechanism(), first(unsigned + "c2ln"))


def test_hmac_with_the_rsa_public_key_as_secret_is_refused() -> None:
    """The classic algorithm confusion: an RSA key verifies only RS*/PS* tokens."""
    pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = jwt.utils.base64url_encode(b'{"alg":"HS256","kid":"rsa-1","typ":"JWT"}').decode()
    payload = jwt.utils.base64url_encode(json.dumps(claims()).encode()).decode()
    mac = hmac.new(pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    forged = f"{header}.{payload}.{jwt.utils.base64url_encode(mac).decode()}"
    refused_with_challenge(mechanism(), first(forged))


def test_authzid_other_than_the_principal_fails_with_kafkas_message() -> None:
    with pytest.raises(SaslAuthenticationFailed) as e:
        mechanism().step(first(token(), authzid="bob"))
    assert str(e.value) == (
        "Authentication failed: Client requested an authorization id (bob) that is different "
        "from the token's principal name (alice)"
    )


def test_a_new_initial_response_after_a_challenge_is_evaluated_afresh() -> None:
    """Kafka clears the pending error on anything but 0x01 and evaluates it as a first message."""
    m = mechanism()
    assert m.step(first(token(aud="other"))).challenge == INVALID
    assert m.step(first(token())).principal == "User:alice"
    with pytest.raises(SaslAuthenticationFailed):
        m.step(b"\x01")  # nothing after completion


def test_0x01_without_a_pending_error_is_a_malformed_message() -> None:
    with pytest.raises(SaslInvalidCredentials):
        mechanism().step(b"\x01")


def test_answers_through_the_sasl_listener_state_machine() -> None:
    """Kafka's bytes once the authenticator wraps the mechanism: a challenge is answered with
    error code 0, the 0x01 reply fails with the JSON, a good token's session lifetime is its
    credential lifetime (capped by connections.max.reauth.ms)."""
    assert through_the_authenticator([first(token(aud="x")), b"\x01"]) == [
        AuthenticateAnswer(ErrorCode.none, "", INVALID, 0),
        AuthenticateAnswer(ErrorCode.sasl_authentication_failed, INVALID.decode(), b""),
    ]
    assert through_the_authenticator([first(token())]) == [
        AuthenticateAnswer(ErrorCode.none, "", b"", 3600_000)
    ]
    assert through_the_authenticator([first(token())], reauth_ms=60_000)[0].session_lifetime_ms == 60_000
    expired_in_skew = through_the_authenticator([first(token(exp=int(NOW) - 5))])[0]
    assert expired_in_skew.session_lifetime_ms == 0  # Kafka's zeroIfNegative


def test_oauthbearer_is_in_the_mechanism_table(jwks_file: Path) -> None:
    factory = MECHANISMS["OAUTHBEARER"]
    setup = MechanismSetup(
        listener_name="EXTERNAL",
        mechanism="OAUTHBEARER",
        settings={
            "oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": "https://idp.example",
        },
        jaas=None,
        scram=None,
    )
    new = factory(setup)
    tok = jwt.encode(
        {
            "sub": "alice",
            "iat": int(time.time()),
            "exp": int(time.time()) + 60,
            "aud": "kafka",
            "iss": "https://idp.example",
        },
        RSA_KEY,
        algorithm="RS256",
        headers={"kid": "rsa-1"},
    )
    assert new().step(first(tok)).principal == "User:alice"
    with pytest.raises(
        ValueError, match=r"^listener EXTERNAL, OAUTHBEARER: sasl\.oauthbearer\.expected\.issuer"
    ):
        factory(
            MechanismSetup(
                "EXTERNAL",
                "OAUTHBEARER",
                {
                    "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
                    "sasl.oauthbearer.expected.audience": "a",
                },
                None,
                None,
            )
        )


# --- the GS2 header and extensions -------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"n,,",
        b"y,,\x01auth=Bearer abc\x01\x01",  # channel binding flag other than n
        b"p=tls-unique,,\x01auth=Bearer abc\x01\x01",
        b"n,a=,\x01auth=Bearer abc\x01\x01",  # empty authzid
        b"n,a=al,ce,\x01auth=Bearer abc\x01\x01",  # a raw comma in the authzid
        b"n,a=al=2Xce,\x01auth=Bearer abc\x01\x01",  # a bad escape
        b"n,,auth=Bearer abc\x01\x01",  # no separator after the header
        b"n,,\x01auth=Bearer abc\x01",  # no terminator
        b"n,,\x01auth=Bearer abc\x01\x01\x01",
        b"n,,\x01\x01",  # no auth
        b"n,,\x01foo=bar\x01\x01",
        b"n,,\x01auth=Basic abc\x01\x01",  # not Bearer
        b"n,,\x01auth=Bearer\x01\x01",
        b"n,,\x01auth=Bearer a b\x01\x01",  # a space inside the token
        b"n,,\x01auth=Bearer a=b\x01\x01",  # '=' only as trailing padding
        b"n,,\x01auth=Bearer abc\x011x=v\x01\x01",  # extension name not [A-Za-z]+
        b"n,,\x01auth=Bearer abc\x01k_y=v\x01\x01",
        b"n,,\x01auth=Bearer abc\x01k=\x01\x01",  # empty value
        b"n,,\x01auth=Bearer abc\x01k=a\x00b\x01\x01",  # control character in the value
        b"n,,\x01auth=Bearer abc\x01=v\x01\x01",
        "n,,\x01auth=Bearer abc\x01k=caf\u00e9\x01\x01".encode(),  # not ASCII
        b"n,,\x01auth=Bearer abc\x01k=\xff\x01\x01",  # not UTF-8 at all
    ],
)
def test_malformed_initial_responses_fail_with_kafkas_generic_answer(data: bytes) -> None:
    with pytest.raises(MalformedInitialResponse):
        decode_initial_response(data)
    with pytest.raises(SaslInvalidCredentials):  # the authenticator answers Kafka's generic text
        mechanism().step(data)
    answers = through_the_authenticator([data])
    assert answers[-1] == AuthenticateAnswer(ErrorCode.sasl_authentication_failed, MALFORMED, b"")


def test_decoder_accepts_what_kafka_accepts() -> None:
    r = decode_initial_response(b"n,a=a=2Cb=3D,\x01k=v 1\t\x01auth=bEaReR  abc.def-_~+/x==\x01k=w\x01\x01")
    assert r.token == "abc.def-_~+/x=="
    assert r.authzid == "a=2Cb=3D"  # compared undecoded, as Kafka does
    assert r.extensions == {"k": "w"}  # the last duplicate wins (Utils.parseMap)
    r = decode_initial_response(b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01")
    assert r.token == "u" and r.extensions == {}


_SASLNAME_CHAR = st.sampled_from([chr(c) for c in range(1, 128) if chr(c) not in ",="] + ["=2C", "=3D"])
_KEY = st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"), min_size=1)
_VALUE = st.text(
    alphabet=st.sampled_from([chr(c) for c in range(0x21, 0x7F)] + [" ", "\t", "\r", "\n"]), min_size=1
)
_TOKEN = st.from_regex(r"[-_~+/.a-zA-Z0-9]+=*", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(
    token=_TOKEN,
    authzid=st.lists(_SASLNAME_CHAR, max_size=12).map("".join),
    extensions=st.dictionaries(_KEY.filter(lambda k: k != "auth"), _VALUE, max_size=4),
)
def test_gs2_decoder_round_trips_what_a_kafka_client_encodes(
    token: str, authzid: str, extensions: dict[str, str]
) -> None:
    r = decode_initial_response(ClientInitialResponse(token, authzid, extensions).encode())
    assert (r.token, r.authzid, dict(r.extensions)) == (token, authzid, extensions)


@settings(max_examples=500, deadline=None)
@given(
    data=st.one_of(
        st.binary(max_size=200),
        st.lists(
            st.sampled_from(
                [b"n", b",", b"a=", b"=2C", b"\x01", b"auth", b"=", b"Bearer ", b"x", b"k", b" ", b"\xff"]
            ),
            max_size=30,
        ).map(b"".join),
    )
)
def test_gs2_decoder_never_raises_anything_else(data: bytes) -> None:
    try:
        r = decode_initial_response(data)
    except MalformedInitialResponse as e:
        assert isinstance(e, SaslInvalidCredentials) and e.reason
        return
    assert data.startswith(b"n,") and data.endswith(b"\x01\x01")
    assert r.token and all(k.isalpha() and k != "auth" for k in r.extensions)
    with pytest.raises(SaslAuthenticationFailed):  # never a traceback from the whole mechanism
        m = mechanism()
        m.step(data)
        m.step(b"\x01")


# --- the unsecured validator, only when named ---------------------------------------------------


def unsecured_token(**over: Any) -> str:
    return jwt.encode(claims(**over), None, algorithm="none")


def test_unsecured_tokens_only_with_kafkas_unsecured_handler_named() -> None:
    s = parse_oauthbearer_settings(
        {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": UNSECURED_HANDLER},
        listener="SASL_PLAINTEXT",
        jaas_options={
            "unsecuredValidatorRequiredScope": "read write",
            "unsecuredValidatorAllowableClockSkewMs": "1000",
        },
    )
    assert s.unsecured and s.unsecured_required_scope == ("read", "write")
    server = OAuthBearerServer(s, clock=lambda: NOW)
    ok = server.new_mechanism().step(first(unsecured_token(scope=["read", "write"])))
    assert ok.principal == "User:alice" and ok.credential_lifetime_ms == 3600_000
    refused_with_challenge(
        server.new_mechanism(),
        first(unsecured_token(scope="read")),
        b'{"status":"insufficient_scope", "scope":"[read, write]"}',
    )
    refused_with_challenge(server.new_mechanism(), first(token()))  # a signed token is not unsecured
    refused_with_challenge(
        OAuthBearerMechanism(UnsecuredTokenValidator(), clock=lambda: NOW),
        first(unsecured_token(iat=int(NOW) + 5)),
    )


def test_without_a_jwks_url_the_unsecured_default_is_refused_at_start_up() -> None:
    with pytest.raises(OAuthBearerConfigError, match=r"sasl\.oauthbearer\.jwks\.endpoint\.url must be set"):
        parse_oauthbearer_settings({})


# --- settings ------------------------------------------------------------------------------------


@pytest.fixture
def jwks_file(tmp_path: Path) -> Path:
    p = tmp_path / "jwks.json"
    p.write_text(json.dumps(JWKS))
    return p


def test_settings_follow_kafkas_listener_and_mechanism_precedence(jwks_file: Path) -> None:
    base = {
        "sasl.oauthbearer.jwks.endpoint.url": "https://unused.example/jwks",
        "listener.name.external.sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "sasl.oauthbearer.expected.audience": "x",
        "listener.name.external.oauthbearer.sasl.oauthbearer.expected.audience": " kafka , other ,",
        "sasl.oauthbearer.expected.issuer": "https://idp.example",
        "listener.name.internal.oauthbearer.sasl.oauthbearer.expected.issuer": "https://internal.example",
        "oauthbearer.sasl.oauthbearer.clock.skew.seconds": "5",
        "listener.name.external.sasl.oauthbearer.clock.skew.seconds": "7",
    }
    s = parse_oauthbearer_settings(base, listener="EXTERNAL")
    assert s.jwks_file == jwks_file and s.jwks_url == jwks_file.as_uri()
    assert s.expected_audience == ("kafka", "other")
    assert s.expected_issuer == "https://idp.example"
    assert s.clock_skew_seconds == 5  # the mechanism-prefixed key beats the listener-prefixed one
    assert (s.sub_claim_name, s.scope_claim_name, s.jwks_refresh_ms) == ("sub", "scope", 3_600_000)
    resolved = parse_oauthbearer_settings(
        {
            "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
            "sasl.oauthbearer.allow.unverified.audience": "TRUE",
            "sasl.oauthbearer.expected.issuer": "i",
        }
    )
    assert resolved.jwks_file == jwks_file and resolved.expected_audience == ()
    assert resolved.allow_unverified_audience and not resolved.allow_unverified_issuer


EXPECTED = {"sasl.oauthbearer.expected.audience": "kafka", "sasl.oauthbearer.expected.issuer": "i"}


@pytest.mark.parametrize(
    ("settings_", "message"),
    [
        ({"sasl.oauthbearer.jwks.endpoint.url": "ftp://x/jwks"}, r"protocol 'ftp'"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "https:///jwks"}, r"has no host"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks.json"}, r"doesn't exist"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "file:///tmp"}, r"is a directory"),
        (
            {
                "sasl.oauthbearer.jwks.endpoint.url": "https://x/j",
                "sasl.oauthbearer.clock.skew.seconds": "-1",
                **EXPECTED,
            },
            r"^sasl\.oauthbearer\.clock\.skew\.seconds: -1 is not within",
        ),
        (
            {
                "sasl.oauthbearer.jwks.endpoint.url": "https://x/j",
                "listener.name.l.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms": "soon",
                **EXPECTED,
            },
            r"^listener\.name\.l\.oauthbearer\.sasl\.oauthbearer\.jwks\.endpoint\.refresh\.ms: 'soon' "
            "is not an integer",
        ),
        (
            {
                "sasl.oauthbearer.jwks.endpoint.url": "https://x/j",
                "sasl.server.callback.handler.class": "com.Mine",
            },
            r"is not a handler groupshift has",
        ),
    ],
)
def test_settings_errors_name_the_key(settings_: dict[str, str], message: str) -> None:
    with pytest.raises(OAuthBearerConfigError, match=message):
        parse_oauthbearer_settings(settings_, listener="L")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"sasl.oauthbearer.expected.issuer": "i"}, r"^sasl\.oauthbearer\.expected\.audience must be set"),
        ({"sasl.oauthbearer.expected.audience": "a"}, r"^sasl\.oauthbearer\.expected\.issuer must be set"),
        (
            {"sasl.oauthbearer.expected.audience": "a", "sasl.oauthbearer.allow.unverified.issuer": "yes"},
            r"^sasl\.oauthbearer\.allow\.unverified\.issuer: 'yes' is not true or false",
        ),
    ],
)
def test_kafka_4_4_requires_an_audience_and_an_issuer_or_an_explicit_opt_out(
    jwks_file: Path, extra: dict[str, str], message: str
) -> None:
    with pytest.raises(OAuthBearerConfigError, match=message):
        parse_oauthbearer_settings({"sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(), **extra})


def test_unverified_audience_and_issuer_accept_any_or_none(jwks_file: Path) -> None:
    s = parse_oauthbearer_settings(
        {
            "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
            "sasl.oauthbearer.allow.unverified.audience": "true",
            "sasl.oauthbearer.allow.unverified.issuer": "true",
        }
    )
    server = OAuthBearerServer(s, clock=lambda: NOW)
    for over in ({}, {"aud": None, "iss": None}, {"aud": ["x", 3]}, {"iss": "https://evil.example"}):
        assert server.new_mechanism().step(first(token(**over))).complete, over
    # an audience that is set is still checked, opt-out or not
    both = parse_oauthbearer_settings(
        {
            "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.allow.unverified.audience": "true",
            "sasl.oauthbearer.allow.unverified.issuer": "true",
        }
    )
    refused_with_challenge(OAuthBearerServer(both, clock=lambda: NOW).new_mechanism(), first(token(aud="x")))


def test_jwks_file_through_the_server(jwks_file: Path) -> None:
    s = parse_oauthbearer_settings(
        {
            "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": "https://idp.example",
        }
    )
    server = OAuthBearerServer(s, clock=lambda: NOW)
    server.start()
    assert server.new_mechanism().step(first(token())).principal == "User:alice"
    refused_with_challenge(server.new_mechanism(), first(token(OTHER_RSA_KEY)))
    refused_with_challenge(server.new_mechanism(), first(token(kid="nope")))


def test_jwks_documents_without_a_usable_key_are_refused(tmp_path: Path) -> None:
    for doc in (b"{", b"[]", b'{"keys": {}}', b'{"keys": [{"kty": "XYZ"}, 3, {"kty": "RSA", "n": "!"}]}'):
        with pytest.raises(JwksError):
            parse_jwks(doc, source="t")
    mixed = {"keys": [{"kty": "XYZ"}, {**jwk(RSA_KEY, "enc"), "use": "enc"}, jwk(EC_KEY, "ok")]}
    assert [k.kid for k in parse_jwks(json.dumps(mixed).encode(), source="t")] == ["ok"]
    big = tmp_path / "big.json"
    big.write_text(json.dumps(JWKS))
    with pytest.raises(JwksError, match="larger than"):
        load_jwks_file(big, max_bytes=100)


# --- a JWKS URL on 127.0.0.1 ---------------------------------------------------------------------


class JwksServer:
    """An http.server on 127.0.0.1 serving whatever `body` holds, counting GETs."""

    def __init__(self) -> None:
        self.body = json.dumps(JWKS).encode()
        self.gets = 0
        self.delay = 0.0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.gets += 1
                time.sleep(outer.delay)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(outer.body)))
                    self.end_headers()
                    self.wfile.write(outer.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the fetcher gave up (the size and time bounds under test)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def jwks_server() -> Iterator[JwksServer]:
    s = JwksServer()
    yield s
    s.close()


def wait_for(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_jwks_url_rotation_refreshes_once_per_unknown_kid(jwks_server: JwksServer) -> None:
    s = parse_oauthbearer_settings(
        {
            "sasl.oauthbearer.jwks.endpoint.url": jwks_server.url,
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": "https://idp.example",
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "1000",
        }
    )
    server = OAuthBearerServer(s, clock=lambda: NOW)
    server.start()
    try:
        assert jwks_server.gets == 1
        assert server.new_mechanism().step(first(token())).complete
        # the IdP rotates to a new key: the first token with the new kid fails and expedites one refresh
        jwks_server.body = json.dumps({"keys": [jwk(OTHER_RSA_KEY, "rsa-2")]}).encode()
        rotated = first(token(OTHER_RSA_KEY, kid="rsa-2"))
        refused_with_challenge(server.new_mechanism(), rotated)
        wait_for(lambda: jwks_server.gets == 2)
        wait_for(lambda: server.new_mechanism().step(rotated).complete)
        # unknown kids: the same one refreshes at most once a minute, others at most every 1000 ms
        # (the tokens are signed beforehand, so a loaded machine cannot stretch a burst past it)
        ghost = first(token(kid="ghost"))
        new_kids = [first(token(kid=f"ghost-{i}")) for i in range(20)]
        time.sleep(1.1)
        for _ in range(20):
            refused_with_challenge(server.new_mechanism(), ghost)
        time.sleep(0.5)
        assert jwks_server.gets == 3
        refused_with_challenge(server.new_mechanism(), ghost)
        time.sleep(0.7)
        assert jwks_server.gets == 3
        for response in new_kids:  # twenty new kids within 1000 ms: one refresh
            refused_with_challenge(server.new_mechanism(), response)
        time.sleep(0.5)
        assert jwks_server.gets == 4
    finally:
        server.close()


def test_jwks_url_fetch_is_bounded_in_size_and_time(jwks_server: JwksServer) -> None:
    common = {"refresh_ms": 3_600_000, "retry_backoff_ms": 10, "retry_backoff_max_ms": 0}
    small = RefreshingJwks(jwks_server.url, timeout_ms=5000, max_bytes=100, **common)
    with pytest.raises(JwksError, match="larger than"):
        small.start()
    jwks_server.delay = 2.0
    slow = RefreshingJwks(jwks_server.url, timeout_ms=300, max_bytes=1 << 20, **common)
    started = time.monotonic()
    with pytest.raises(JwksError):
        slow.start()
    assert time.monotonic() - started < 1.5


def test_a_failed_refresh_keeps_the_keys_held() -> None:
    answers = [json.dumps(JWKS).encode(), b"not json"]
    calls = []

    def fetch() -> bytes:
        calls.append(1)
        return answers[min(len(calls) - 1, 1)]

    r = RefreshingJwks("http://idp", refresh_ms=20, retry_backoff_ms=1, retry_backoff_max_ms=0,
                       timeout_ms=1000, max_bytes=1 << 20, fetch=fetch)  # fmt: skip
    r.start()
    try:
        wait_for(lambda: len(calls) >= 3)
        assert [k.kid for k in r.current()] == ["rsa-1", "ec-1"] and r.refreshes == 1
    finally:
        r.close()


# --- a real client's side of the exchange, in process ---------------------------------------------


def test_kafka_python_mechanism_drives_the_exchange() -> None:
    """kafka-python's own OAUTHBEARER client mechanism against ours, bytes handed across by hand:
    its initial response (with extensions) decodes, and after our challenge it sends the 0x01
    that ends the exchange with Kafka's failure."""
    from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def __init__(self, tok: str) -> None:
            self.tok = tok

        def token(self) -> str:
            return self.tok

        def extensions(self) -> dict[str, str]:
            return {"traceId": "t-1"}

    client = SaslMechanismOAuth(sasl_oauth_token_provider=Provider(token()))
    server = mechanism()
    step = server.step(client.auth_bytes())
    client.receive(step.challenge)
    assert client.is_done() and client.is_authenticated()
    assert step.principal == "User:alice" and server.extensions == {"traceId": "t-1"}

    client = SaslMechanismOAuth(sasl_oauth_token_provider=Provider(token(OTHER_RSA_KEY)))
    server = mechanism()
    step = server.step(client.auth_bytes())
    assert step.challenge == INVALID
    client.receive(step.challenge)
    with pytest.raises(SaslAuthenticationFailed) as e:
        server.step(client.auth_bytes())
    assert str(e.value) == INVALID.decode()
