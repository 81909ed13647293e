"""SASL/PLAIN on the server (RFC 4616), as Kafka's `PlainSaslServer` with the users of
`PlainLoginModule` (`user_<name>="<password>"` options, `PlainServerCallbackHandler`).

One client message: `[authzid] NUL authcid NUL passwd`, UTF-8. The parser is strict where
RFC 4616 is: exactly two NULs, valid UTF-8, a non-empty authentication id and password (Kafka's
own split ignores anything after a third NUL; groupshift refuses such a message). Its size is
bounded by `sasl.server.max.receive.size` before it gets here. Answers and messages are Kafka's:
an unknown user and a wrong password are both "Authentication failed: Invalid username or
password"; an authorization id other than the user is refused with Kafka's message; a malformed
message gets the generic "invalid credentials" answer (`SaslInvalidCredentials`).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.sasl.mechanism import SaslAuthenticationFailed, SaslInvalidCredentials, SaslStep

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
    """RFC 4616's message; raises `SaslInvalidCredentials` (never anything else) when malformed."""
    if token.count(0) != 2:
        raise SaslInvalidCredentials(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {token.count(0) + 1}"
        )
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslInvalidCredentials("Invalid SASL/PLAIN response: not UTF-8") from None
    authzid, authcid, password = text.split("\x00")
    if not authcid:
        raise SaslInvalidCredentials("Authentication failed: username not specified")
    if not password:
        raise SaslInvalidCredentials("Authentication failed: password not specified")
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
