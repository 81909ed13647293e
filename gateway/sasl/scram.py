"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the server (RFC 5802, RFC 7677), as Kafka's
`ScramSaslServer` runs them.

Two round trips. client-first `n,[a=authzid],n=user,r=cnonce[,ext=value...]` (only the gs2
header `n`: no channel binding, as Kafka) is answered with server-first `r=cnonce+snonce,s=salt,
i=iterations` from the user's stored credential; client-final `c=binding,r=nonce[,ext],p=proof`
is checked against the stored key and answered with server-final `v=signature`. The message
grammar is Kafka's `ScramMessages` (ASCII names with `=2C`/`=3D` escapes, printable nonces,
strict base64), matched whole, so a decoder never reads past what the grammar allows.

Credentials hold what Kafka's `UserScramCredentialRecord` holds: salt, stored key, server key
and iterations (`gateway.sasl.credentials`), never the password. The math is the standard
library's HMAC and hashes (the credential arrives salted, so no PBKDF2 runs on the server).

Failures are Kafka's: an unknown user, a bad proof, a wrong nonce and a malformed message all
get the generic invalid-credentials answer (`SaslInvalidCredentials`, Kafka's `SaslException`),
an authorization id other than the user gets Kafka's own message. Kafka's `tokenauth`
extension (delegation tokens) is refused the same way: groupshift has no delegation tokens.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gateway.sasl.mechanism import SaslAuthenticationFailed, SaslInvalidCredentials, SaslStep

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
HASHES: dict[str, str] = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
# Kafka's `ScramMechanism.minIterations()` (both mechanisms) and the controller's maximum.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
AUTHZID_DIFFERS = (
    "Authentication failed: Client requested an authorization id that is different from username"
)

# Kafka's ScramMessages character classes, on ASCII text.
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # any 7-bit character but NUL and ','
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}),p=(?P<proof>{_B64})"
)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of a SCRAM password (Kafka's `ScramCredential`)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The stored and server keys of a salted password, as Kafka's controller derives them from
    what AlterUserScramCredentials carries (RFC 5802: StoredKey = H(HMAC(SaltedPassword,
    "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key"))."""
    digest = HASHES[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", digest)
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(digest, client_key).digest(),
        server_key=hmac.digest(salted_password, b"Server Key", digest),
        iterations=iterations,
    )


def credential_from_password(mechanism: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """The credential a client computes from a password (Hi() = PBKDF2-HMAC); for tests and
    tools that create users without Kafka's admin client."""
    salted = hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode("utf-8"), salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


@dataclass(frozen=True, slots=True)
class ClientFirst:
    authzid: str
    saslname: str
    nonce: str
    bare: str
    extensions: dict[str, str]

    @property
    def username(self) -> str:
        """The SASL name unescaped (`=2C` is ',', `=3D` is '='), as Kafka's ScramFormatter."""
        return self.saslname.replace("=2C", ",").replace("=3D", "=")


@dataclass(frozen=True, slots=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes

    @property
    def without_proof(self) -> str:
        """The part the signatures cover, as Kafka rebuilds it (extensions left out)."""
        return f"c={base64.b64encode(self.channel_binding).decode()},r={self.nonce}"


def _text(token: bytes) -> str:
    # Kafka decodes as UTF-8 with replacement; the grammar is 7-bit, so anything else fails it.
    return token.decode("utf-8", errors="replace")


def _extensions(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in text.split(",")[1:]:
        key, _, value = pair.partition("=")
        out[key] = value
    return out


def parse_client_first(token: bytes) -> ClientFirst:
    """Kafka's `ClientFirstMessage`; raises `SaslInvalidCredentials` when it does not match."""
    m = _CLIENT_FIRST.fullmatch(_text(token))
    if m is None:
        raise SaslInvalidCredentials("Invalid SCRAM client first message format")
    return ClientFirst(
        authzid=m["authzid"] or "",
        saslname=m["saslname"],
        nonce=m["nonce"],
        bare=m["bare"],
        extensions=_extensions(m["extensions"]),
    )


def parse_client_final(token: bytes) -> ClientFinal:
    """Kafka's `ClientFinalMessage`; raises `SaslInvalidCredentials` when it does not match."""
    m = _CLIENT_FINAL.fullmatch(_text(token))
    if m is None:
        raise SaslInvalidCredentials("Invalid SCRAM client final message format")
    try:
        channel = base64.b64decode(m["channel"], validate=True)
        proof = base64.b64decode(m["proof"], validate=True)
    except binascii.Error:  # pragma: no cover - the grammar admits only valid base64
        raise SaslInvalidCredentials("Invalid SCRAM client final message format") from None
    return ClientFinal(channel_binding=channel, nonce=m["nonce"], proof=proof)


CredentialLookup = Callable[[str, str], ScramCredential | None]
"""(mechanism, user name) -> the user's credential for that mechanism, or None."""


def server_nonce() -> str:
    """A random nonce of printable characters without ',' (Kafka's is 130 random bits)."""
    return secrets.token_urlsafe(24)


class ScramServer:
    """One connection's SCRAM exchange (a new instance per exchange)."""

    def __init__(
        self,
        mechanism: Literal["SCRAM-SHA-256", "SCRAM-SHA-512"] | str,
        lookup: CredentialLookup,
        *,
        nonce: Callable[[], str] = server_nonce,
    ) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.name = mechanism
        self._digest = HASHES[mechanism]
        self._lookup = lookup
        self._nonce = nonce
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._done = False
        self.claimed = ""
        """The user the client claimed (for the audit log), once its first message was read."""

    def step(self, token: bytes) -> SaslStep:
        if self._done:
            raise SaslInvalidCredentials("Unexpected challenge in Sasl server state COMPLETE")
        if self._first is None:
            return self._receive_first(token)
        try:
            return self._receive_final(token)
        finally:
            self._done = True
            self._credential = None

    def _receive_first(self, token: bytes) -> SaslStep:
        first = parse_client_first(token)
        self.claimed = first.username
        if first.extensions.get("tokenauth", "").lower() == "true":
            raise SaslInvalidCredentials(f"Token Authentication failed: Invalid tokenId : {first.username}")
        credential = self._lookup(self.name, first.username)
        if credential is None:
            raise SaslInvalidCredentials("Authentication failed: Invalid user credentials")
        if first.authzid and first.authzid != first.username:
            raise SaslAuthenticationFailed(AUTHZID_DIFFERS)
        if credential.iterations < MIN_ITERATIONS:
            raise SaslInvalidCredentials(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                f"for {self.name}"
            )
        self._first = first
        self._credential = credential
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={first.nonce}{self._nonce()},s={salt},i={credential.iterations}"
        return SaslStep(self._server_first.encode())

    def _receive_final(self, token: bytes) -> SaslStep:
        first, credential = self._first, self._credential
        assert first is not None and credential is not None
        final = parse_client_final(token)
        if final.nonce != self._server_first[2 : self._server_first.index(",")]:
            raise SaslInvalidCredentials("Invalid client nonce in the final client message.")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        client_signature = hmac.digest(credential.stored_key, auth_message, self._digest)
        if len(final.proof) != len(client_signature):
            raise SaslInvalidCredentials("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(final.proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), credential.stored_key):
            raise SaslInvalidCredentials("Invalid client credentials")
        signature = hmac.digest(credential.server_key, auth_message, self._digest)
        return SaslStep(
            b"v=" + base64.b64encode(signature), complete=True, principal=f"User:{first.username}"
        )
