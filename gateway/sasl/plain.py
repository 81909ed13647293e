"""SASL/PLAIN on the server (RFC 4616), as Kafka's `PlainSaslServer` with the users of
`PlainLoginModule` (`user_<name>="<password>"` options, `PlainServerCallbackHandler`).

One client message: `[authzid] NUL authcid NUL passwd`, read as UTF-8 (an invalid sequence
becomes U+FFFD, as Java decodes it, and then names no user). Kafka 4.x's rules and messages,
every one sent to the client: exactly two NULs ("Invalid SASL/PLAIN response: expected 3 tokens,
got N", counting at most 4 tokens), a non-empty user and password ("username not specified",
"password not specified"), an unknown user and a wrong password alike ("Invalid username or
password"), an authorization id only if it is the user. The message's size is bounded by
`sasl.server.max.receive.size` before it gets here.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.sasl.mechanism import SaslAuthenticationFailed, SaslStep

MECHANISM = "PLAIN"
INVALID_USER_OR_PASSWORD = "Authentication failed: Invalid username or password"
AUTHZID_DIFFERS = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


@dataclass(frozen=True, slots=True)
class PlainMessage:
    authzid: str
    authcid: str
    password: str


def parse_plain(token: bytes) -> PlainMessage:
    """RFC 4616's message; raises `SaslAuthenticationFailed` (never anything else) when malformed."""
    tokens = min(token.count(0) + 1, 4)  # Kafka's split stops at four tokens
    if tokens != 3:
        raise SaslAuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {tokens}")
    authzid, authcid, password = token.decode("utf-8", errors="replace").split("\x00")
    if not authcid:
        raise SaslAuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise SaslAuthenticationFailed("Authentication failed: password not specified")
    return PlainMessage(authzid, authcid, password)


class PlainServer:
    """One connection's PLAIN exchange against the listener's JAAS users."""

    name = MECHANISM

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.claimed = ""
        """The user the client claimed (for the audit log), once its message was read."""

    def step(self, token: bytes) -> SaslStep:
        message = parse_plain(token)
        self.claimed = message.authcid
        expected = self._users.get(message.authcid)
        # Compare in constant time whether or not the user exists, as Kafka's callback does.
        ok = hmac.compare_digest(
            (expected if expected is not None else "\x00" + message.password).encode(),
            message.password.encode(),
        )
        if expected is None or not ok:
            raise SaslAuthenticationFailed(INVALID_USER_OR_PASSWORD)
        if message.authzid and message.authzid != message.authcid:
            raise SaslAuthenticationFailed(AUTHZID_DIFFERS)
        return SaslStep(b"", complete=True, principal=f"User:{message.authcid}")
