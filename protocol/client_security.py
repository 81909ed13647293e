"""The client side of a secured Kafka listener: TLS (SSL, SASL_SSL) and SASL authentication
(SASL_PLAINTEXT, SASL_SSL), as a Kafka client does it after connecting.

A Kafka client on a SASL listener may send ApiVersions first, then SaslHandshake (KIP-43; v1 says
that the mechanism's tokens travel in SaslAuthenticate requests, KIP-152) naming its mechanism,
then one SaslAuthenticate per token of the mechanism until the broker answers with no error and
the exchange is complete; any other request before that makes the broker close the connection.
PLAIN (RFC 4616) is one token, `authzid NUL username NUL password` with an empty authzid, as
Kafka's PlainSaslClient sends it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from protocol.client import WireClient, make_request

__all__ = ["ClientSecurity", "SaslAuthenticationFailed", "authenticate"]

API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
SASL_HANDSHAKE_VERSION = 1  # v1: tokens in SaslAuthenticate (v0's raw tokens are gone in Kafka 4)
SASL_AUTHENTICATE_VERSION = 1  # v1 adds the session lifetime (KIP-368); v0-2 in Kafka 2.x-4.x


class SaslAuthenticationFailed(ConnectionError):
    """The broker refused the mechanism or the credentials; the message is its answer."""


def _plain_token(username: str, password: str) -> bytes:
    return b"\x00" + username.encode() + b"\x00" + password.encode()


def authenticate(client: WireClient, mechanism: str, username: str, password: str) -> int:
    """Run the SASL exchange on a fresh connection; the session lifetime the broker granted in
    ms (0: no limit, KIP-368). Raises SaslAuthenticationFailed with the broker's answer."""
    handshake = client.request(make_request(API_SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, mechanism=mechanism))
    if handshake.error_code != 0:
        offered = ", ".join(handshake.mechanisms) or "none"
        raise SaslAuthenticationFailed(
            f"the broker does not enable SASL mechanism {mechanism} on this listener (it offers: {offered})"
        )
    if mechanism != "PLAIN":
        raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
    answer = client.request(
        make_request(
            API_SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, auth_bytes=_plain_token(username, password)
        )
    )
    if answer.error_code != 0:
        raise SaslAuthenticationFailed(answer.error_message or f"SASL error code {answer.error_code}")
    return int(answer.session_lifetime.total_seconds() * 1000)


@dataclass(frozen=True)
class ClientSecurity:
    """How to reach one listener: Kafka's `security.protocol` and what it needs (an SSL context
    for SSL / SASL_SSL; mechanism and credentials for SASL_*)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def connect(self, host: str, port: int, timeout: float = 5.0, **kw: object) -> WireClient:
        """A WireClient on `host:port`, TLS handshake and SASL exchange done."""
        client = WireClient(port, host, timeout, ssl_context=self.ssl_context, **kw)  # type: ignore[arg-type]
        if self.uses_sasl:
            try:
                authenticate(client, self.sasl_mechanism or "PLAIN", self.username or "", self.password or "")
            except BaseException:
                client.close()
                raise
        return client
