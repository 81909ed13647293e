"""SASL mechanisms on bytes alone: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802/7677, with
RFC 7677's test vector), the JAAS entry parser and the SCRAM credential store."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from gateway.sasl.credentials import (
    CREDENTIALS_FILE,
    CredentialsFileError,
    Deletion,
    ScramCredentialStore,
    Upsertion,
)
from gateway.sasl.jaas import JaasError, parse_jaas
from gateway.sasl.mechanism import SaslAuthenticationFailed, SaslInvalidCredentials
from gateway.sasl.plain import INVALID_USER_OR_PASSWORD, PlainServer, parse_plain
from gateway.sasl.scram import (
    ScramCredential,
    ScramServer,
    credential_from_password,
    parse_client_final,
    parse_client_first,
)

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a\\"b c";'
)


# -- JAAS ---------------------------------------------------------------------------------------


def test_jaas_entry_gives_the_plain_users() -> None:
    entry = parse_jaas(PLAIN_JAAS)
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.control_flag == "required"
    assert entry.users() == {"admin": "admin-secret", "alice": 'a"b c'}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "contains 0 login modules"),
        ("a required; b required;", "contains 2 login modules"),
        ("a always;", "control flag"),
        ('a required user_x="y"', "expected ';'"),
        ('a required user_x="y', "unterminated quoted value"),
        ("a required user_x=;", "has no value"),
    ],
)
def test_bad_jaas_entries_are_refused_without_showing_the_value(text: str, message: str) -> None:
    with pytest.raises(JaasError, match=message) as err:
        parse_jaas(text)
    assert '"y' not in str(err.value)


# -- PLAIN --------------------------------------------------------------------------------------


def test_plain_authenticates_a_jaas_user() -> None:
    step = PlainServer({"alice": "secret"}).step(b"\x00alice\x00secret")
    assert step.complete and step.principal == "User:alice" and step.challenge == b""
    # An authorization id equal to the user is accepted, as Kafka does.
    assert PlainServer({"alice": "secret"}).step(b"alice\x00alice\x00secret").complete


@pytest.mark.parametrize("token", [b"\x00alice\x00wrong", b"\x00mallory\x00secret"])
def test_plain_wrong_password_and_unknown_user_get_one_answer(token: bytes) -> None:
    with pytest.raises(SaslAuthenticationFailed) as err:
        PlainServer({"alice": "secret"}).step(token)
    assert str(err.value) == INVALID_USER_OR_PASSWORD
    assert not isinstance(err.value, SaslInvalidCredentials)  # Kafka sends this message


def test_plain_other_authorization_id_is_refused_with_kafkas_message() -> None:
    with pytest.raises(SaslAuthenticationFailed, match="authorization id that is different"):
        PlainServer({"alice": "secret"}).step(b"bob\x00alice\x00secret")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (b"alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (b"\x00alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"a\x00b\x00c\x00d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"a\x00b\x00c\x00d\x00e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"\x00\x00secret", "Authentication failed: username not specified"),
        (b"\x00alice\x00", "Authentication failed: password not specified"),
    ],
)
def test_plain_malformed_messages_get_kafkas_messages(token: bytes, message: str) -> None:
    """Kafka 4.x's messages, each sent to the client (checked against a real Kafka node)."""
    with pytest.raises(SaslAuthenticationFailed) as err:
        parse_plain(token)
    assert str(err.value) == message and not isinstance(err.value, SaslInvalidCredentials)


def test_plain_invalid_utf8_names_no_user() -> None:
    with pytest.raises(SaslAuthenticationFailed, match="Invalid username or password"):
        PlainServer({"alice": "secret"}).step(b"\x00al\xffice\x00secret")


# -- SCRAM --------------------------------------------------------------------------------------

# RFC 7677, section 3.
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677_server(password: str = "pencil") -> ScramServer:
    credential = credential_from_password("SCRAM-SHA-256", password, RFC7677_SALT, 4096)
    return ScramServer(
        "SCRAM-SHA-256",
        lambda mechanism, user: credential if (mechanism, user) == ("SCRAM-SHA-256", "user") else None,
        nonce=lambda: RFC7677_SERVER_NONCE,
    )


def test_scram_sha_256_rfc7677_test_vector() -> None:
    server = rfc7677_server()
    first = server.step(RFC7677_CLIENT_FIRST)
    assert first.challenge == RFC7677_SERVER_FIRST and not first.complete
    final = server.step(RFC7677_CLIENT_FINAL)
    assert final.challenge == RFC7677_SERVER_FINAL
    assert final.complete and final.principal == "User:user"


def test_scram_wrong_password_is_invalid_credentials() -> None:
    server = rfc7677_server(password="not-pencil")
    server.step(RFC7677_CLIENT_FIRST)
    with pytest.raises(SaslInvalidCredentials):
        server.step(RFC7677_CLIENT_FINAL)


def test_scram_unknown_user_wrong_nonce_and_replay_fail() -> None:
    with pytest.raises(SaslInvalidCredentials, match="Invalid user credentials"):
        rfc7677_server().step(b"n,,n=nobody,r=abc")
    server = rfc7677_server()
    server.step(RFC7677_CLIENT_FIRST)
    with pytest.raises(SaslInvalidCredentials, match="nonce"):
        server.step(RFC7677_CLIENT_FINAL.replace(b"k0,", b"k1,"))
    with pytest.raises(SaslInvalidCredentials):
        server.step(RFC7677_CLIENT_FINAL)  # the exchange is over after a final message


def test_scram_other_authorization_id_gets_kafkas_message() -> None:
    with pytest.raises(SaslAuthenticationFailed, match="authorization id that is different") as err:
        rfc7677_server().step(b"n,a=admin,n=user,r=abc")
    assert not isinstance(err.value, SaslInvalidCredentials)


def test_scram_token_authentication_is_refused() -> None:
    with pytest.raises(SaslInvalidCredentials, match="Token"):
        rfc7677_server().step(b"n,,n=user,r=abc,tokenauth=true")


def scram_client(mechanism: str, user: str, password: str, server: ScramServer) -> bytes:
    """A client per RFC 5802 run against `server`: the server-final message."""
    digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    bare = f"n={user},r=clientnonce"
    server_first = server.step(f"n,,{bare}".encode()).challenge.decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    client_key = hmac.digest(salted, b"Client Key", digest)
    signature = hmac.digest(hashlib.new(digest, client_key).digest(), auth, digest)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    final = server.step(f"{without_proof},p={proof}".encode())
    assert final.complete
    expected = hmac.digest(hmac.digest(salted, b"Server Key", digest), auth, digest)
    assert final.challenge == b"v=" + base64.b64encode(expected)
    return final.challenge


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_both_mechanisms_with_an_escaped_user_name(mechanism: str) -> None:
    credential = credential_from_password(mechanism, "pw", b"salt", 4096)
    server = ScramServer(mechanism, lambda m, u: credential if u == "a,b=c" else None)
    scram_client(mechanism, "a=2Cb=3Dc", "pw", server)


def test_scram_credential_below_minimum_iterations_is_refused() -> None:
    credential = credential_from_password("SCRAM-SHA-256", "pw", b"salt", 1024)
    with pytest.raises(SaslInvalidCredentials, match="less than the minimum"):
        ScramServer("SCRAM-SHA-256", lambda m, u: credential).step(b"n,,n=u,r=abc")


@pytest.mark.parametrize(
    "token",
    [
        b"",
        b"y,,n=user,r=abc",  # channel binding not supported (gs2 'y'/'p')
        b"n,,n=,r=abc",
        b"n,,n=user,r=",
        b"n,,n=us=er,r=abc",  # '=' must be escaped
        b"n,,n=user,r=a,bc",
        b"n,,n=\xc3\xa9,r=abc",  # Kafka's grammar is 7-bit
    ],
)
def test_scram_client_first_grammar_is_strict(token: bytes) -> None:
    with pytest.raises(SaslInvalidCredentials):
        parse_client_first(token)


def test_scram_client_first_fields() -> None:
    first = parse_client_first(b"n,a=u,m=x,n=u,r=n0nce,ext=1,tokenauth=true")
    assert (first.authzid, first.username, first.nonce) == ("u", "u", "n0nce")
    assert first.extensions == {"ext": "1", "tokenauth": "true"}


@pytest.mark.parametrize(
    "token",
    [b"", b"c=biws,r=abc", b"c=biws,r=abc,p=abc", b"c=bi,r=abc,p=AAAA", b"r=abc,c=biws,p=AAAA"],
)
def test_scram_client_final_grammar_is_strict(token: bytes) -> None:
    with pytest.raises(SaslInvalidCredentials):
        parse_client_final(token)


# -- credential store ---------------------------------------------------------------------------


def upsert(name: str, mechanism: int = 1, iterations: int = 8192) -> Upsertion:
    return Upsertion(name, mechanism, iterations, b"salt", b"s" * 32)


def test_store_alters_durably_and_keeps_no_salted_password(tmp_path: Path) -> None:
    store = ScramCredentialStore.load(tmp_path)
    results, users = store.plan([], [upsert("alice"), upsert("bob", mechanism=2, iterations=4096)])
    assert [(r.user, r.error_code) for r in results] == [("alice", ErrorCode.none), ("bob", ErrorCode.none)]
    assert users is not None
    store.write(users)
    raw = (tmp_path / CREDENTIALS_FILE).read_text()
    assert base64.b64encode(b"s" * 32).decode() not in raw
    again = ScramCredentialStore.load(tmp_path)
    assert again.users() == ["alice", "bob"]
    credential = again.lookup("SCRAM-SHA-512", "bob")
    assert isinstance(credential, ScramCredential) and credential.iterations == 4096
    described = {d.user: d for d in again.describe(None)}
    assert described["alice"].credentials == ((1, 8192),)


def test_store_refuses_as_kafka_does(tmp_path: Path) -> None:
    store = ScramCredentialStore.load(tmp_path)
    results, users = store.plan(
        [Deletion("ghost", 1), Deletion("twice", 1)],
        [
            upsert("few", iterations=4095),
            upsert("many", iterations=16385),
            upsert("", iterations=8192),
            upsert("odd", mechanism=3),
            upsert("twice"),
        ],
    )
    assert users is None
    got = {r.user: (r.error_code, r.error_message) for r in results}
    assert got == {
        "ghost": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "twice": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "few": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "many": (ErrorCode.unacceptable_credential, "Too many iterations"),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "odd": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
    }
    results, users = store.plan([], [Upsertion("empty", 1, 8192, b"salt", b"")])
    assert [(r.user, r.error_code, r.error_message) for r in results] == [
        ("empty", ErrorCode.unknown_server_error, None)
    ]
    _, users = store.plan([], [upsert("a")])
    assert users is not None
    store.write(users)
    results, users = store.plan([Deletion("a", 1)], [upsert("a")])
    assert [(r.user, r.error_code) for r in results] == [("a", ErrorCode.duplicate_resource)]
    assert users is None
    described = store.describe(["a", "nobody", "a"])
    assert [(d.user, d.error_code) for d in described] == [
        ("a", ErrorCode.duplicate_resource),
        ("nobody", ErrorCode.resource_not_found),
    ]
    assert described[1].error_message == "Attempt to describe a user credential that does not exist: nobody"


@pytest.mark.parametrize(
    "content",
    [
        b"{",
        b"[]",
        b'{"version": 2, "users": {}}',
        json.dumps({"version": 1, "users": {"a": {"MD5": {}}}}).encode(),
    ],
)
def test_damaged_credentials_file_is_refused_with_its_name(tmp_path: Path, content: bytes) -> None:
    (tmp_path / CREDENTIALS_FILE).write_bytes(content)
    with pytest.raises(CredentialsFileError, match=CREDENTIALS_FILE):
        ScramCredentialStore.load(tmp_path)
