"""The server side of one SASL mechanism, sans-IO: tokens in, challenges and a verdict out.

Kafka runs a `javax.security.sasl.SaslServer` per connection and feeds it the bytes of each
SaslAuthenticate request (or, for SaslHandshake v0 clients, raw size-prefixed tokens); the
mechanism answers with a challenge, and once `isComplete()` the authorization id becomes the
connection's principal. A mechanism here has the same shape, with no sockets and no clock of its
own, so it can be fuzzed and unit-tested on bytes alone; the connection-level state machine
(handshake, re-authentication, timeouts, the principal on the request context) is elsewhere in
`gateway.sasl`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class SaslAuthenticationFailed(Exception):
    """The exchange failed (bad password, unknown user, bad token, malformed message).

    `str(exc)` is what goes into SaslAuthenticate's `error_message`, so it must say no more than
    Kafka says (Kafka answers PLAIN's wrong password and unknown user alike: "Authentication
    failed: Invalid username or password").
    """


@dataclass(frozen=True, slots=True)
class SaslStep:
    """One answer of a mechanism to one client token."""

    challenge: bytes
    """Bytes for SaslAuthenticate's `auth_bytes` (empty when the mechanism has nothing to say)."""
    complete: bool = False
    """True once the client is authenticated; `principal` is then set."""
    principal: str | None = None
    """Kafka's principal string, `User:<authorization id>`."""
    credential_lifetime_ms: int | None = None
    """How long the credential stays valid from now (an OAUTHBEARER token's `exp`), which caps
    the session lifetime KIP-368 reports; None for password mechanisms."""


class ServerMechanism(Protocol):
    """One connection's server side of one mechanism (a new instance per exchange)."""

    name: str
    """The mechanism's IANA name as Kafka spells it: PLAIN, SCRAM-SHA-256, OAUTHBEARER."""

    def step(self, token: bytes) -> SaslStep:
        """Consume one client token; raises `SaslAuthenticationFailed` on any failure."""
        ...


class SaslInvalidCredentials(SaslAuthenticationFailed):
    """A failure whose detail must not reach the client (Kafka's `SaslException`): a malformed
    message, an unknown SCRAM user, a wrong proof.

    Kafka answers all of these with one message that reveals nothing (not even whether the user
    exists): "Authentication failed during authentication due to invalid credentials with SASL
    mechanism <name>" ("re-authentication" when re-authenticating); the authenticator writes
    that, and `str(exc)` goes only to the audit log's `reason`.
    """
