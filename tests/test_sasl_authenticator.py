"""The per-connection SASL state machine (gateway.sasl.authenticator) on events alone: Kafka's
SaslServerAuthenticator rules, KIP-368 re-authentication and the session's expiry."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from gateway.sasl.authenticator import (
    ApiVersionsRequest,
    AuthenticateAnswer,
    AuthenticateRequest,
    HandshakeAnswer,
    HandshakeRequest,
    IllegalStateAnswer,
    OtherRequest,
    RawAnswer,
    RawToken,
    SaslAuthenticator,
    SaslListenerSetup,
    SaslState,
)
from gateway.sasl.plain import PlainServer
from gateway.sasl.scram import ScramServer, credential_from_password

USERS = {"alice": "secret", "bob": "pw"}


def authenticator(reauth_ms: int = 0) -> SaslAuthenticator:
    return SaslAuthenticator(
        SaslListenerSetup(("PLAIN",), {"PLAIN": lambda: PlainServer(USERS)}, {"PLAIN": reauth_ms})
    )


def login(auth: SaslAuthenticator, user: str = "alice", password: str = "secret", now: float = 0) -> None:
    assert auth.receive(HandshakeRequest("PLAIN", 1), now).answer == HandshakeAnswer(
        ErrorCode.none, ("PLAIN",)
    )
    verdict = auth.receive(AuthenticateRequest(f"\x00{user}\x00{password}".encode(), 2), now)
    assert verdict.principal == f"User:{user}", verdict


def test_api_versions_then_handshake_then_authenticate() -> None:
    auth = authenticator()
    assert auth.receive(ApiVersionsRequest(served_version=True), 0).forward
    assert auth.state is SaslState.HANDSHAKE_REQUIRED
    login(auth)
    assert auth.authenticated and auth.principal == "User:alice" and auth.session_expires_ms is None
    # Authenticated: every request goes to its handler, SaslHandshake too (no session lifetime,
    # so no re-authentication: KafkaApis answers ILLEGAL_SASL_STATE).
    assert auth.receive(OtherRequest(3), 10**9).forward
    assert auth.receive(HandshakeRequest("PLAIN", 1), 10**9).forward


def test_unsupported_api_versions_may_be_retried_but_not_repeated() -> None:
    auth = authenticator()
    assert auth.receive(ApiVersionsRequest(served_version=False), 0).forward
    assert auth.state is SaslState.BEFORE_HANDSHAKE
    assert auth.receive(ApiVersionsRequest(served_version=True), 0).forward
    second = auth.receive(ApiVersionsRequest(served_version=True), 0)
    assert second.close == "sasl.unexpected_request" and second.answer is None


@pytest.mark.parametrize("state_setup", ["fresh", "after_api_versions"])
def test_a_kafka_request_before_the_handshake_closes_without_an_answer(state_setup: str) -> None:
    auth = authenticator()
    if state_setup == "after_api_versions":
        auth.receive(ApiVersionsRequest(served_version=True), 0)
    verdict = auth.receive(OtherRequest(3), 0)
    assert verdict.close and verdict.answer is None and not verdict.forward
    assert verdict.failure is not None
    assert auth.receive(OtherRequest(3), 0).close is None  # failed: nothing more happens


def test_unsupported_mechanism_is_answered_then_closed() -> None:
    verdict = authenticator().receive(HandshakeRequest("GSSAPI", 1), 0)
    assert verdict.answer == HandshakeAnswer(ErrorCode.unsupported_sasl_mechanism, ("PLAIN",))
    assert verdict.close == "sasl.unsupported_mechanism" and verdict.delayed


def test_wrong_password_is_answered_with_kafkas_message_then_closed() -> None:
    auth = authenticator()
    auth.receive(HandshakeRequest("PLAIN", 1), 0)
    verdict = auth.receive(AuthenticateRequest(b"\x00alice\x00nope", 1), 0)
    assert verdict.answer == AuthenticateAnswer(
        ErrorCode.sasl_authentication_failed, "Authentication failed: Invalid username or password", b""
    )
    assert verdict.close and verdict.delayed
    assert verdict.failure is not None and verdict.failure.principal == "User:alice"
    assert auth.state is SaslState.FAILED


def test_invalid_credentials_get_the_generic_message() -> None:
    store = {"user": credential_from_password("SCRAM-SHA-256", "pw", b"salt", 4096)}
    auth = SaslAuthenticator(
        SaslListenerSetup(
            ("SCRAM-SHA-256",),
            {"SCRAM-SHA-256": lambda: ScramServer("SCRAM-SHA-256", lambda m, u: store.get(u))},
        )
    )
    auth.receive(HandshakeRequest("SCRAM-SHA-256", 1), 0)
    verdict = auth.receive(AuthenticateRequest(b"n,,n=nobody,r=abc", 1), 0)
    assert isinstance(verdict.answer, AuthenticateAnswer)
    assert verdict.answer.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    assert (
        verdict.failure is not None
        and verdict.failure.reason == "Authentication failed: Invalid user credentials"
    )


def test_other_request_while_authenticating_gets_illegal_sasl_state() -> None:
    auth = authenticator()
    auth.receive(HandshakeRequest("PLAIN", 1), 0)
    verdict = auth.receive(OtherRequest(3), 0)
    assert verdict.answer == IllegalStateAnswer() and verdict.close == "sasl.illegal_state"


def test_handshake_v0_takes_raw_tokens() -> None:
    auth = authenticator()
    auth.receive(HandshakeRequest("PLAIN", 0), 0)
    assert auth.raw_tokens
    verdict = auth.receive(RawToken(b"\x00bob\x00pw"), 0)
    assert verdict.answer == RawAnswer(b"") and verdict.principal == "User:bob"
    bad = authenticator()
    bad.receive(HandshakeRequest("PLAIN", 0), 0)
    failed = bad.receive(RawToken(b"\x00bob\x00nope"), 0)
    assert failed.close and failed.answer is None  # raw tokens: closed without an answer


def test_session_lifetime_and_expiry() -> None:
    auth = authenticator(reauth_ms=5000)
    auth.receive(HandshakeRequest("PLAIN", 1), 1000)
    verdict = auth.receive(AuthenticateRequest(b"\x00alice\x00secret", 1), 1000)
    assert isinstance(verdict.answer, AuthenticateAnswer) and verdict.answer.session_lifetime_ms == 5000
    assert auth.receive(OtherRequest(3), 5999).forward
    expired = auth.receive(OtherRequest(3), 6000)
    assert expired.close == "sasl.session_expired" and not expired.forward


def test_reauthentication_same_mechanism_and_principal() -> None:
    auth = authenticator(reauth_ms=5000)
    login(auth, now=0)
    # An expired session may still re-authenticate (Kafka checks the handshake first).
    login(auth, now=7000)
    assert auth.session_expires_ms == 12000
    assert auth.receive(OtherRequest(3), 11000).forward


def test_reauthentication_cannot_change_principal() -> None:
    auth = authenticator(reauth_ms=5000)
    login(auth, now=0)
    auth.receive(HandshakeRequest("PLAIN", 1), 2000)
    verdict = auth.receive(AuthenticateRequest(b"\x00bob\x00pw", 2), 2000)
    assert isinstance(verdict.answer, AuthenticateAnswer)
    assert (
        verdict.answer.error_message
        == "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    assert verdict.close


def test_reauthentication_cannot_change_mechanism() -> None:
    auth = SaslAuthenticator(
        SaslListenerSetup(
            ("PLAIN", "OTHER"),
            {"PLAIN": lambda: PlainServer(USERS), "OTHER": lambda: PlainServer(USERS)},
            {"PLAIN": 5000},
        )
    )
    login_verdict = auth.receive(HandshakeRequest("PLAIN", 1), 0)
    assert login_verdict.answer is not None
    auth.receive(AuthenticateRequest(b"\x00alice\x00secret", 2), 0)
    assert auth.receive(HandshakeRequest("OTHER", 1), 2000).answer == HandshakeAnswer(
        ErrorCode.none, ("PLAIN", "OTHER")
    )
    verdict = auth.receive(AuthenticateRequest(b"\x00alice\x00secret", 2), 2000)
    assert verdict.close == "sasl.reauth_bad_mechanism" and verdict.answer is None
    assert verdict.failure is not None and "not supported for re-authentication" in verdict.failure.reason


def test_reauthentication_at_most_once_a_second() -> None:
    auth = authenticator(reauth_ms=5000)
    login(auth, now=0)
    login(auth, now=1500)
    # Within a second of the last re-authentication: the handshake goes to KafkaApis.
    assert auth.receive(HandshakeRequest("PLAIN", 1), 2000).forward


def test_timeout_fails_the_exchange() -> None:
    auth = authenticator()
    auth.receive(HandshakeRequest("PLAIN", 1), 0)
    verdict = auth.timed_out()
    assert verdict.close == "sasl.timeout" and verdict.failure is not None
    assert auth.state is SaslState.FAILED
