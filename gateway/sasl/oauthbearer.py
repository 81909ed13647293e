"""SASL/OAUTHBEARER on the server side (RFC 7628, KIP-255 and KIP-768), sans-IO.

Kafka behaviour (`org.apache.kafka.common.security.oauthbearer`):

* The client's initial response (`OAuthBearerClientInitialResponse`) is a GS2 header `n,,` or
  `n,a=<authzid>,`, then `\\x01`, then `key=value\\x01` pairs of which one is
  `auth=Bearer <token>` and the others are SASL extensions (names `[A-Za-z]+`, values
  `[\\x21-\\x7E \\t\\r\\n]+`), then a final `\\x01`. Anything else fails the exchange with the
  answer Kafka gives a `SaslException`, which says nothing of the cause.
* `OAuthBearerSaslServer`: a token the validator refuses is answered with a *challenge*, the JSON
  `{"status":"invalid_token"}` (with `"scope"` and `"openid-configuration"` members when the
  validator set them); the client replies `\\x01` and the exchange fails with that JSON as the
  error message. A valid token completes at once with an empty challenge; an authzid, if sent,
  must equal the token's principal name. Extensions are accepted (the validator handlers accept
  every extension name).
* Validation (`OAuthBearerValidatorCallbackHandler` / `ValidatorAccessTokenValidator`, jose4j's
  `JwtConsumer`): a signature by a key of the JWKS (never `alg: none`), `exp` and `iat` present,
  `exp`/`nbf` checked with `sasl.oauthbearer.clock.skew.seconds` of leeway, `exp` not before
  `iat` nor `nbf` (`iat` itself may lie in the future: jose4j does not check it), `aud` containing one
  of `sasl.oauthbearer.expected.audience`, `iss` equal to `sasl.oauthbearer.expected.issuer`.
  Kafka 4.4 refuses to start without both, unless `sasl.oauthbearer.allow.unverified.audience`
  / `...issuer` is true (then a token with any audience or none, any issuer or none, passes;
  an audience or issuer that is set is still checked); the principal is the
  trimmed string claim `sasl.oauthbearer.sub.claim.name` (default `sub`) and the scope the
  claim `sasl.oauthbearer.scope.claim.name` (a string or a list of strings, no duplicates).
* The unsecured validator (`OAuthBearerUnsecuredValidatorCallbackHandler`) takes `alg: none`
  tokens and checks only claims: the principal claim, `iat` not after now plus skew, `exp`
  after now minus skew and after `iat`, and a required scope, refused with
  `{"status":"insufficient_scope", "scope":"[...]"}`. It is Kafka's default server handler;
  here it runs only when `sasl.server.callback.handler.class` names it (docs/deviations.md).

Settings are read from a listener's mapping with Kafka's precedence
(`listener.name.<l>.oauthbearer.<k>`, then `oauthbearer.<k>`, then `listener.name.<l>.<k>`,
then `<k>`), see `parse_oauthbearer_settings`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import jwt
import structlog

from gateway.sasl.jwks import KeySource, RefreshingJwks, VerificationKey, load_jwks_file
from gateway.sasl.mechanism import SaslAuthenticationFailed, SaslInvalidCredentials, SaslStep, ServerMechanism
from gateway.sasl.setup import MechanismSetup

log = structlog.get_logger(__name__)

MECHANISM = "OAUTHBEARER"

# --- the client's initial response -----------------------------------------------------------

# The grammar of Kafka's OAuthBearerClientInitialResponse, over ASCII (Kafka decodes the bytes
# as UTF-8; a non-ASCII character never matches any of these classes). Each repetition starts
# with a character the previous one cannot contain, so matching is linear in the input.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # \x01-\x7F except ',' and '='
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_SEPARATOR = "\x01"
_CLIENT_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEPARATOR}(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEPARATOR})*){_SEPARATOR}"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)
AUTH_KEY = "auth"

MALFORMED = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
)
"""What Kafka's SaslServerAuthenticator answers for any `SaslException` (a malformed message):
nothing of the cause, which it only logs. The mechanism raises `SaslInvalidCredentials` and the
authenticator (`gateway.sasl.authenticator`) writes this text ("re-authentication" when
re-authenticating)."""


@dataclass(frozen=True, slots=True)
class ClientInitialResponse:
    """A decoded OAUTHBEARER client initial response."""

    token: str
    authzid: str = ""
    """As sent, `=2C`/`=3D` escapes included (Kafka compares it undecoded)."""
    extensions: Mapping[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The bytes a Kafka client sends (`OAuthBearerClientInitialResponse.toBytes`)."""
        authzid = f"a={self.authzid}" if self.authzid else ""
        ext = "".join(f"{_SEPARATOR}{k}={v}" for k, v in self.extensions.items())
        return f"n,{authzid},{_SEPARATOR}auth=Bearer {self.token}{ext}{_SEPARATOR}{_SEPARATOR}".encode()


class MalformedInitialResponse(SaslInvalidCredentials):
    """The client's message does not follow the grammar (Kafka's `SaslException`): the client
    gets only the generic text (`MALFORMED`); `str()` and `reason` say which rule failed, for
    the audit log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_initial_response(data: bytes) -> ClientInitialResponse:
    """Decode a client initial response; raises `MalformedInitialResponse` and nothing else."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise MalformedInitialResponse("Invalid OAUTHBEARER client first message") from None
    m = _CLIENT_INITIAL_RESPONSE.fullmatch(text)
    if m is None:
        raise MalformedInitialResponse("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for item in m["kvpairs"].split(_SEPARATOR):  # Kafka's Utils.parseMap: the last duplicate wins
        if item:
            key, _, value = item.partition("=")
            pairs[key] = value
    auth = pairs.pop(AUTH_KEY, None)
    if auth is None:
        raise MalformedInitialResponse("Invalid OAUTHBEARER client first message: 'auth' not specified")
    a = _AUTH.fullmatch(auth)
    if a is None:
        raise MalformedInitialResponse("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if a["scheme"].lower() != "bearer":
        raise MalformedInitialResponse("Invalid scheme in OAUTHBEARER client first message")
    return ClientInitialResponse(token=a["token"], authzid=m["authzid"] or "", extensions=pairs)


# --- token validation ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    principal: str
    """The principal name (not yet `User:`-prefixed)."""
    expires_ms: int
    """`exp` in milliseconds since the epoch."""
    scope: frozenset[str] = frozenset()


class TokenRejected(Exception):
    """The validator refused the token: the fields of Kafka's JSON error challenge, and a reason
    for the log (never sent to the client)."""

    def __init__(
        self,
        reason: str,
        *,
        status: str = "invalid_token",
        scope: str | None = None,
        openid_configuration: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope
        self.openid_configuration = openid_configuration

    def challenge(self) -> str:
        """`OAuthBearerSaslServer.jsonErrorResponse`, spaces included."""
        out = f'{{"status":"{self.status}"'
        if self.scope is not None:
            out += f', "scope":"{self.scope}"'
        if self.openid_configuration is not None:
            out += f', "openid-configuration":"{self.openid_configuration}"'
        return out + "}"


class TokenValidator(Protocol):
    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        """Validate a compact JWS; raises `TokenRejected` and nothing else."""
        ...


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _claim_string(name: str, value: object) -> str:
    """Kafka's `ClaimValidationUtils.validateString`: present, a string, not blank; trimmed."""
    if value is None:
        raise TokenRejected(f"{name} value must be non-null")
    if not isinstance(value, str):
        raise TokenRejected(f"Could not extract the '{name}' claim from the access token")
    if not value:
        raise TokenRejected(f"{name} value must be non-empty")
    if not value.strip():
        raise TokenRejected(f"{name} value must not contain only whitespace")
    return value.strip()


def _scope(name: str, raw: object) -> frozenset[str]:
    """Kafka's secured validator: a string is one scope (not split), a list its elements."""
    items: list[object] = [raw] if isinstance(raw, str) else list(raw) if isinstance(raw, list) else []
    out: set[str] = set()
    for item in items:
        s = _claim_string(name, item)
        if s in out:
            raise TokenRejected(f"{name} value must not contain duplicates - {s} already present")
        out.add(s)
    return frozenset(out)


_SAFE_HEADER = re.compile(r"[-_A-Za-z0-9]+")


def _b64url_json(section: str, what: str) -> Any:
    if not _SAFE_HEADER.fullmatch(section):
        raise TokenRejected(f"malformed Base64 URL encoded {what}")
    try:
        raw = base64.urlsafe_b64decode(section + "=" * (-len(section) % 4))
        return json.loads(raw)
    except (binascii.Error, ValueError, RecursionError):
        raise TokenRejected(f"malformed {what}") from None


class JwksTokenValidator:
    """Kafka's `OAuthBearerValidatorCallbackHandler`: signed JWTs checked against a JWKS."""

    def __init__(
        self,
        keys: KeySource,
        *,
        expected_audience: tuple[str, ...] = (),
        expected_issuer: str | None = None,
        allow_unverified_audience: bool = False,
        sub_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        clock_skew_seconds: int = 30,
    ) -> None:
        self.key_source = keys
        self.expected_audience = expected_audience
        self.expected_issuer = expected_issuer
        self.allow_unverified_audience = allow_unverified_audience
        self.sub_claim_name = sub_claim_name
        self.scope_claim_name = scope_claim_name
        self.clock_skew_seconds = clock_skew_seconds

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        sections = token.strip().split(".")
        if len(sections) != 3 or not all(s.strip() for s in sections):
            raise TokenRejected(
                "Malformed JWT provided; expected three sections (header, payload, and signature)"
            )
        header = _b64url_json(sections[0], "header")
        if not isinstance(header, dict):
            raise TokenRejected("JWS header is not a JSON object")
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg == "none":
            raise TokenRejected(f"algorithm {alg!r} is not allowed")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("kid is not a string")
        key = self._select(alg, kid)
        try:
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                options={
                    "verify_signature": True,
                    "require": [],
                    "verify_exp": False,  # checked below against the caller's clock
                    "verify_nbf": False,
                    "verify_iat": False,
                    "verify_aud": False,
                    "verify_iss": False,
                    "verify_sub": False,
                    "verify_jti": False,
                },
            )
        except Exception as e:  # PyJWT raises its errors, cryptography may raise its own
            raise TokenRejected(f"Could not validate the access token: {type(e).__name__}: {e}") from None
        return self._check_claims(claims, now_ms)

    def _select(self, alg: str, kid: str | None) -> VerificationKey:
        """jose4j's `VerificationJwkSelector`: the first key with the token's `kid` (any key when
        the token names none) that may verify the token's `alg`."""
        for k in self.key_source.current():
            if (kid is None or k.kid == kid) and alg in k.algorithms:
                return k
        if kid is not None and not any(k.kid == kid for k in self.key_source.current()):
            self.key_source.key_missing(kid)
        raise TokenRejected(f"Unable to find a suitable verification key (kid={kid!r}, alg={alg})")

    def _check_claims(self, claims: dict[str, Any], now_ms: int) -> ValidatedToken:
        now_s = now_ms // 1000
        skew = self.clock_skew_seconds
        exp, iat, nbf = claims.get("exp"), claims.get("iat"), claims.get("nbf")
        if exp is None:
            raise TokenRejected("No Expiration Time (exp) claim present.")
        if iat is None:
            raise TokenRejected("No Issued At (iat) claim present.")
        for name, v in (("exp", exp), ("iat", iat), ("nbf", nbf)):
            if v is not None and not _is_number(v):
                raise TokenRejected(f"The value of the '{name}' claim is not the expected type")
        if now_s - skew >= int(exp):
            raise TokenRejected(
                "The JWT is no longer valid - the evaluation time is on or after the Expiration Time"
            )
        if int(exp) < int(iat):
            raise TokenRejected(
                "The Expiration Time (exp) claim value cannot be before the Issued At (iat) claim value"
            )
        if nbf is not None and int(exp) < int(nbf):
            raise TokenRejected(
                "The Expiration Time (exp) claim value cannot be before the Not Before (nbf) claim value"
            )
        if nbf is not None and now_s + skew < int(nbf):
            raise TokenRejected("The JWT is not yet valid (nbf)")
        if int(exp) < 0:
            raise TokenRejected("exp value must be non-negative")
        if int(iat) < 0:
            raise TokenRejected("iat value must be null or non-negative")
        aud = claims.get("aud")
        if self.allow_unverified_audience and not self.expected_audience:
            pass  # jose4j's setSkipDefaultAudienceValidation: any aud, or none
        elif aud is not None:
            auds = [aud] if isinstance(aud, str) else aud
            if not isinstance(auds, list) or not all(isinstance(a, str) for a in auds):
                raise TokenRejected("The value of the 'aud' claim is not the expected type")
            if not set(auds) & set(self.expected_audience):
                raise TokenRejected(f"Audience (aud) claim {auds} doesn't contain an acceptable identifier")
        elif self.expected_audience:
            raise TokenRejected("No Audience (aud) claim present.")
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise TokenRejected("Issuer (iss) claim value is not the expected issuer")
        scope = _scope(self.scope_claim_name, claims.get(self.scope_claim_name))
        principal = _claim_string(self.sub_claim_name, claims.get(self.sub_claim_name))
        return ValidatedToken(principal=principal, expires_ms=int(exp) * 1000, scope=scope)


class UnsecuredTokenValidator:
    """Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler`: `alg: none` tokens, claims only.

    For development and tests; anyone can mint such a token, so it is never the default here."""

    def __init__(
        self,
        *,
        principal_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        required_scope: tuple[str, ...] = (),
        allowable_clock_skew_ms: int = 0,
    ) -> None:
        self.principal_claim_name = principal_claim_name
        self.scope_claim_name = scope_claim_name
        self.required_scope = required_scope
        self.allowable_clock_skew_ms = allowable_clock_skew_ms

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        if ".." in token:
            raise TokenRejected("Malformed compact serialization contains '..'")
        sections = token.split(".")
        if len(sections) != 3:
            raise TokenRejected("Unsecured JWS compact serializations must have 3 dot-separated values")
        header = _b64url_json(sections[0], "header")
        claims = _b64url_json(sections[1], "claims")
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise TokenRejected("malformed JSON")
        if header.get("alg") != "none":
            raise TokenRejected("Unsecured JWS must have 'none' for an algorithm")
        if sections[2]:
            raise TokenRejected("Unsecured JWS must not contain a digital signature")
        scope_raw = claims.get(self.scope_claim_name)
        if isinstance(scope_raw, str):
            scope = frozenset({scope_raw.strip()} if scope_raw.strip() else ())
        elif isinstance(scope_raw, list):
            scope = frozenset(str(s).strip() for s in scope_raw if str(s).strip())
        elif scope_raw is None:
            scope = frozenset()
        else:
            raise TokenRejected(f"The '{self.scope_claim_name}' claim was not of type List")
        exp, iat = claims.get("exp"), claims.get("iat")
        if exp is None:
            raise TokenRejected("No expiration time in JWT")
        if not _is_number(exp) or (iat is not None and not _is_number(iat)):
            raise TokenRejected("The 'exp' or 'iat' claim was not of type Number")
        principal = claims.get(self.principal_claim_name)
        if principal is None:
            raise TokenRejected(f"No principal name in JWT claim: {self.principal_claim_name}")
        if not isinstance(principal, str):
            raise TokenRejected(f"The '{self.principal_claim_name}' claim was not of type String")
        if not principal.strip():
            raise TokenRejected(f"No principal name in JWT claim: {self.principal_claim_name}")
        skew = self.allowable_clock_skew_ms
        if iat is not None and 1000 * iat > now_ms + skew:
            raise TokenRejected("The Issued At value was after the indicated time plus allowable clock skew")
        if now_ms - skew >= 1000 * exp:
            raise TokenRejected(
                "The indicated time minus allowable clock skew was on or after the Expiration Time"
            )
        if iat is not None and exp <= iat:
            raise TokenRejected("The Expiration Time time was not after the Issued At time")
        for required in self.required_scope:
            if required not in scope:
                raise TokenRejected(
                    f"The provided scope was missing a required scope ({required})",
                    status="insufficient_scope",
                    scope="[" + ", ".join(self.required_scope) + "]",  # Java's List.toString
                )
        return ValidatedToken(principal=principal, expires_ms=round(exp * 1000), scope=scope)


# --- the mechanism ---------------------------------------------------------------------------

_INT64_MAX = 2**63 - 1


class OAuthBearerMechanism:
    """One connection's OAUTHBEARER exchange (Kafka's `OAuthBearerSaslServer`).

    `clock` gives the wall-clock time in seconds (the token's `exp` is wall-clock); it is a
    parameter so that tests and the fuzz target can fix it.

    A completed step's `credential_lifetime_ms` is `exp` minus now: negative for a token that
    expired less than the clock skew ago (Kafka accepts it, and its authenticator then reports a
    session lifetime of 0, `zeroIfNegative`, with the session already expired)."""

    name = MECHANISM

    def __init__(self, validator: TokenValidator, *, clock: Callable[[], float] = time.time) -> None:
        self._validator = validator
        self._clock = clock
        self._error: str | None = None
        self._complete = False
        self.extensions: Mapping[str, str] = {}
        """The client's SASL extensions once complete (Kafka's negotiated properties)."""

    def step(self, token: bytes) -> SaslStep:
        if self._complete:
            raise SaslInvalidCredentials("OAUTHBEARER message after the exchange completed")
        if token == b"\x01" and self._error is not None:
            raise SaslAuthenticationFailed(self._error)
        self._error = None
        try:
            response = decode_initial_response(token)
        except MalformedInitialResponse as e:
            log.debug("sasl.oauthbearer.malformed", reason=e.reason)
            raise
        now_ms = int(self._clock() * 1000)
        try:
            validated = self._validator.validate(response.token, now_ms)
        except TokenRejected as e:
            log.info("sasl.oauthbearer.token_rejected", reason=str(e)[:500])
            self._error = e.challenge()
            return SaslStep(challenge=self._error.encode())
        if response.authzid and response.authzid != validated.principal:
            raise SaslAuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({response.authzid}) "
                f"that is different from the token's principal name ({validated.principal})"
            )
        self._complete = True
        self.extensions = dict(response.extensions)
        return SaslStep(
            challenge=b"",
            complete=True,
            principal=f"User:{validated.principal}",
            credential_lifetime_ms=min(validated.expires_ms - now_ms, _INT64_MAX),
        )


# --- settings --------------------------------------------------------------------------------

SECURED_HANDLERS = frozenset(
    {
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
    }
)
UNSECURED_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler"
)

DEFAULT_JWKS_REFRESH_MS = 3_600_000
DEFAULT_JWKS_RETRY_BACKOFF_MS = 100
DEFAULT_JWKS_RETRY_BACKOFF_MAX_MS = 10_000
DEFAULT_JWKS_TIMEOUT_MS = 10_000
DEFAULT_JWKS_MAX_BYTES = 1_048_576
_INT32_MAX = 2**31 - 1

SETTING_NAMES = (
    "sasl.server.callback.handler.class",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.allow.unverified.audience",
    "sasl.oauthbearer.allow.unverified.issuer",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "sasl.oauthbearer.jwks.endpoint.timeout.ms",  # groupshift's bound
    "sasl.oauthbearer.jwks.endpoint.max.bytes",  # groupshift's bound
)
"""What `parse_oauthbearer_settings` reads (each also under the listener and mechanism prefixes)."""

UNSECURED_OPTIONS = (
    "unsecuredValidatorPrincipalClaimName",
    "unsecuredValidatorScopeClaimName",
    "unsecuredValidatorRequiredScope",
    "unsecuredValidatorAllowableClockSkewMs",
)
_SCOPE_ITEM = re.compile(r"[\x23-\x5b\x5d-\x7e\x21]+")


class OAuthBearerConfigError(ValueError):
    """An OAUTHBEARER setting is missing or invalid; the message names the key."""


@dataclass(frozen=True)
class OAuthBearerSettings:
    """A listener's validated OAUTHBEARER settings."""

    unsecured: bool = False
    jwks_url: str | None = None
    jwks_file: Path | None = None
    """Set when `jwks_url` is a `file:` URL."""
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    allow_unverified_audience: bool = False
    allow_unverified_issuer: bool = False
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_seconds: int = 30
    jwks_refresh_ms: int = DEFAULT_JWKS_REFRESH_MS
    jwks_retry_backoff_ms: int = DEFAULT_JWKS_RETRY_BACKOFF_MS
    jwks_retry_backoff_max_ms: int = DEFAULT_JWKS_RETRY_BACKOFF_MAX_MS
    jwks_timeout_ms: int = DEFAULT_JWKS_TIMEOUT_MS
    jwks_max_bytes: int = DEFAULT_JWKS_MAX_BYTES
    unsecured_principal_claim_name: str = "sub"
    unsecured_scope_claim_name: str = "scope"
    unsecured_required_scope: tuple[str, ...] = ()
    unsecured_clock_skew_ms: int = 0


def _lookup(settings: Mapping[str, str], listener: str | None) -> Callable[[str], tuple[str, str] | None]:
    """Kafka's precedence for a SASL setting of one listener and mechanism: the listener prefix
    overrides key by key (`valuesWithPrefixOverride`), then the mechanism-prefixed key wins
    (`ConfigurationUtils.get`). Returns (key as written, value) or None."""
    lp = f"listener.name.{listener.lower()}." if listener else None
    mp = "oauthbearer."

    def get(name: str) -> tuple[str, str] | None:
        candidates = [f"{lp}{mp}{name}", f"{mp}{name}", f"{lp}{name}", name] if lp else [f"{mp}{name}", name]
        for key in candidates:
            value = settings.get(key)
            if value is not None:
                return key, value
        return None

    return get


def _bool(key: str, text: str) -> bool:
    """Kafka's ConfigDef BOOLEAN: `true` or `false`, any case."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise OAuthBearerConfigError(f"{key}: {text.strip()[:80]!r} is not true or false")
    return value == "true"


def _int(key: str, text: str, *, minimum: int, maximum: int = 2**63 - 1) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise OAuthBearerConfigError(f"{key}: {text.strip()[:80]!r} is not an integer") from None
    if not minimum <= value <= maximum:
        raise OAuthBearerConfigError(f"{key}: {value} is not within [{minimum}, {maximum}]")
    return value


def parse_oauthbearer_settings(
    settings: Mapping[str, str],
    *,
    listener: str | None = None,
    jaas_options: Mapping[str, str] | None = None,
) -> OAuthBearerSettings:
    """Validate the OAUTHBEARER settings of one listener.

    `settings` is the server's flat `{name: value}` map (with `listener` naming the listener, so
    `listener.name.<listener>.oauthbearer.<k>` and `listener.name.<listener>.<k>` apply), or a
    listener's map with those prefixes already resolved (`listener=None`). `jaas_options` are the
    options of the listener's `oauthbearer.sasl.jaas.config` login module, read only for the
    unsecured validator's `unsecuredValidator*` options.

    Refused: no `sasl.oauthbearer.jwks.endpoint.url` unless the unsecured handler is named, a
    URL that is not http/https/file, a `file:` JWKS that is missing or a directory, another
    callback handler class, and numbers out of range; each error names the key as written.
    """
    get = _lookup(settings, listener)

    def text(name: str) -> tuple[str, str] | None:
        found = get(name)
        if found is None or not found[1].strip():
            return None
        return found[0], found[1].strip()

    def number(name: str, default: int, *, minimum: int, maximum: int = 2**63 - 1) -> int:
        found = text(name)
        return default if found is None else _int(found[0], found[1], minimum=minimum, maximum=maximum)

    handler = text("sasl.server.callback.handler.class")
    unsecured = handler is not None and handler[1] == UNSECURED_HANDLER
    if handler is not None and not unsecured and handler[1] not in SECURED_HANDLERS:
        raise OAuthBearerConfigError(
            f"{handler[0]}: {handler[1][:200]!r} is not a handler groupshift has; it takes "
            f"{sorted(SECURED_HANDLERS)[0]} (JWKS) or {UNSECURED_HANDLER}"
        )
    out: dict[str, Any] = {"unsecured": unsecured}
    if unsecured:
        opts = dict(jaas_options or {})
        for name, attr in (
            ("unsecuredValidatorPrincipalClaimName", "unsecured_principal_claim_name"),
            ("unsecuredValidatorScopeClaimName", "unsecured_scope_claim_name"),
        ):
            if opts.get(name, "").strip():
                out[attr] = opts[name].strip()
        required = opts.get("unsecuredValidatorRequiredScope", "").strip()
        for item in required.split(" "):
            if item and not _SCOPE_ITEM.fullmatch(item):
                raise OAuthBearerConfigError(f"unsecuredValidatorRequiredScope: invalid scope value {item!r}")
        out["unsecured_required_scope"] = tuple(i for i in required.split(" ") if i)
        skew = opts.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
        if skew:
            out["unsecured_clock_skew_ms"] = _int(
                "unsecuredValidatorAllowableClockSkewMs", skew, minimum=0, maximum=_INT32_MAX
            )
        return OAuthBearerSettings(**out)

    url = text("sasl.oauthbearer.jwks.endpoint.url")
    if url is None:
        raise OAuthBearerConfigError(
            "sasl.oauthbearer.jwks.endpoint.url must be set for OAUTHBEARER (a JWKS https://, http:// "
            "or file: URL); unsecured tokens are accepted only with "
            f"sasl.server.callback.handler.class={UNSECURED_HANDLER}"
        )
    key, value = url
    parts = urlsplit(value)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https", "file"):
        raise OAuthBearerConfigError(
            f"{key}: {value[:200]!r} has the protocol {scheme!r}; "
            'only "http", "https", and "file" are supported'
        )
    if scheme == "file":
        path = Path(unquote(parts.path)).absolute()
        if not path.exists():
            raise OAuthBearerConfigError(f"{key}: the file {path} doesn't exist")
        if path.is_dir():
            raise OAuthBearerConfigError(f"{key}: {path} is a directory, not a file")
        out["jwks_file"] = path
    elif not parts.hostname:
        raise OAuthBearerConfigError(f"{key}: {value[:200]!r} has no host")
    out["jwks_url"] = value
    audience = text("sasl.oauthbearer.expected.audience")
    if audience is not None:
        out["expected_audience"] = tuple(a.strip() for a in audience[1].split(",") if a.strip())
    issuer = text("sasl.oauthbearer.expected.issuer")
    if issuer is not None:
        out["expected_issuer"] = issuer[1]
    for name, attr, required in (
        ("sasl.oauthbearer.allow.unverified.audience", "allow_unverified_audience", "expected_audience"),
        ("sasl.oauthbearer.allow.unverified.issuer", "allow_unverified_issuer", "expected_issuer"),
    ):
        found = text(name)
        allowed = found is not None and _bool(found[0], found[1])
        out[attr] = allowed
        if not out.get(required) and not allowed:  # Kafka 4.4's BrokerJwtValidator refuses to start
            key = "sasl.oauthbearer." + required.replace("_", ".")
            raise OAuthBearerConfigError(
                f"{key} must be set when sasl.oauthbearer.jwks.endpoint.url is (or {name}=true, "
                "which accepts tokens meant for anyone: insecure)"
            )
        if allowed and not out.get(required):
            log.warning("sasl.oauthbearer.unverified", setting=name, listener=listener)
    for name, attr in (("sasl.oauthbearer.sub.claim.name", "sub_claim_name"),
                       ("sasl.oauthbearer.scope.claim.name", "scope_claim_name")):  # fmt: skip
        found = text(name)
        if found is not None:
            out[attr] = found[1]
    out["clock_skew_seconds"] = number(
        "sasl.oauthbearer.clock.skew.seconds", 30, minimum=0, maximum=_INT32_MAX
    )
    out["jwks_refresh_ms"] = number(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms", DEFAULT_JWKS_REFRESH_MS, minimum=1
    )
    out["jwks_retry_backoff_ms"] = number(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", DEFAULT_JWKS_RETRY_BACKOFF_MS, minimum=0
    )
    out["jwks_retry_backoff_max_ms"] = number(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", DEFAULT_JWKS_RETRY_BACKOFF_MAX_MS, minimum=0
    )
    out["jwks_timeout_ms"] = number(
        "sasl.oauthbearer.jwks.endpoint.timeout.ms", DEFAULT_JWKS_TIMEOUT_MS, minimum=1, maximum=_INT32_MAX
    )
    out["jwks_max_bytes"] = number(
        "sasl.oauthbearer.jwks.endpoint.max.bytes", DEFAULT_JWKS_MAX_BYTES, minimum=2, maximum=_INT32_MAX
    )
    return OAuthBearerSettings(**out)


class OAuthBearerServer:
    """A listener's OAUTHBEARER: its validator and key source, built once, and a new mechanism
    per exchange (`new_mechanism` is what the mechanism table's factory calls)."""

    def __init__(self, settings: OAuthBearerSettings, *, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self._clock = clock
        self._refreshing: RefreshingJwks | None = None
        self.validator: TokenValidator
        if settings.unsecured:
            self.validator = UnsecuredTokenValidator(
                principal_claim_name=settings.unsecured_principal_claim_name,
                scope_claim_name=settings.unsecured_scope_claim_name,
                required_scope=settings.unsecured_required_scope,
                allowable_clock_skew_ms=settings.unsecured_clock_skew_ms,
            )
            return
        keys: KeySource
        if settings.jwks_file is not None:
            keys = load_jwks_file(settings.jwks_file, max_bytes=settings.jwks_max_bytes)
        else:
            assert settings.jwks_url is not None
            self._refreshing = RefreshingJwks(
                settings.jwks_url,
                refresh_ms=settings.jwks_refresh_ms,
                retry_backoff_ms=settings.jwks_retry_backoff_ms,
                retry_backoff_max_ms=settings.jwks_retry_backoff_max_ms,
                timeout_ms=settings.jwks_timeout_ms,
                max_bytes=settings.jwks_max_bytes,
            )
            keys = self._refreshing
        self.validator = JwksTokenValidator(
            keys,
            expected_audience=settings.expected_audience,
            expected_issuer=settings.expected_issuer,
            allow_unverified_audience=settings.allow_unverified_audience,
            sub_claim_name=settings.sub_claim_name,
            scope_claim_name=settings.scope_claim_name,
            clock_skew_seconds=settings.clock_skew_seconds,
        )

    def start(self) -> None:
        """Fetch a JWKS URL's keys (blocking, at start-up, off the event loop: `await
        asyncio.to_thread(server.start)`); a `JwksError` stops the server as Kafka stops."""
        if self._refreshing is not None:
            self._refreshing.start()

    def close(self) -> None:
        if self._refreshing is not None:
            self._refreshing.close()

    def new_mechanism(self) -> OAuthBearerMechanism:
        return OAuthBearerMechanism(self.validator, clock=self._clock)


def oauthbearer_factory(setup: MechanismSetup) -> Callable[[], ServerMechanism]:
    """The OAUTHBEARER entry of `gateway.sasl.mechanisms.MECHANISMS`: validate the listener's
    settings and load its keys at start-up, before any listener opens (a JWKS URL is fetched
    here, so its first fetch never runs on the event loop; one that fails stops the start as
    Kafka's does). The errors are `ValueError`s naming the listener and the key."""
    jaas = None if setup.jaas is None else setup.jaas.options
    try:
        server = OAuthBearerServer(parse_oauthbearer_settings(setup.settings, jaas_options=jaas))
        server.start()
    except ValueError as e:
        raise ValueError(f"listener {setup.listener_name}, OAUTHBEARER: {e}") from None
    return server.new_mechanism
