"""The client side of SASL/OAUTHBEARER as Kafka's clients log in (KIP-255, KIP-768): an access
token from an OAuth 2 token endpoint by the client-credentials grant, refreshed before it
expires.

What Kafka's `OAuthBearerLoginCallbackHandler` with `sasl.oauthbearer.token.endpoint.url` does,
and what this module does the same way:

* the request (Kafka's `HttpAccessTokenRetriever`): an HTTP POST to the token endpoint with
  `Authorization: Basic base64(clientId:clientSecret)` (RFC 7617's standard alphabet; the id and
  secret URL-encoded first only with `sasl.oauthbearer.header.urlencode=true`) and the form body
  `grant_type=client_credentials[&scope=...]`; the answer's `access_token`. A `file:` URL is read
  as the token itself, as Kafka reads one;
* the token is a JWT whose `exp` and subject claim (`sasl.oauthbearer.sub.claim.name`, `sub`)
  must be there (Kafka's `LoginAccessTokenValidator`; the signature is the broker's business);
* retries (`sasl.login.retry.backoff.ms`, doubling up to `sasl.login.retry.backoff.max.ms`) on
  an unreachable endpoint or a 5xx; a 4xx such as 401 is final, as Kafka's unretryable codes;
  `sasl.login.connect.timeout.ms` / `sasl.login.read.timeout.ms` bound each attempt (Kafka has no
  default for them; 10 s here, a deviation: an unbounded wait is not allowed in groupshift);
  the answer's body is read up to `MAX_TOKEN_RESPONSE_BYTES`;
* the refresh time (Kafka's `ExpiringCredentialRefreshingLogin.refreshMs`): at
  `sasl.login.refresh.window.factor` (0.8) plus up to `sasl.login.refresh.window.jitter` (0.05)
  of the token's lifetime, but no later than `sasl.login.refresh.buffer.seconds` (300) before it
  expires and no sooner than `sasl.login.refresh.min.period.seconds` (60) from now; both buffers
  are ignored when the remaining lifetime is shorter than their sum. A refresh that fails keeps
  the current token while it is valid and is retried 10 s later (Kafka's
  DELAY_SECONDS_BEFORE_NEXT_RETRY_WHEN_RELOGIN_FAILS).

`OAuthTokenSource.token()` is blocking and thread-safe; asyncio callers run it in an executor.
`start_refresher()` refreshes in a daemon thread at the refresh time, as Kafka's refresh thread
does, so connections opened later find a fresh token without waiting.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["AccessToken", "OAuthSettings", "OAuthTokenError", "OAuthTokenSource", "refresh_at"]

MAX_TOKEN_RESPONSE_BYTES = 1 << 20
RETRY_AFTER_FAILED_REFRESH_S = 10.0
DEFAULT_LOGIN_TIMEOUT_MS = 10_000
_UNRETRYABLE = {400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413, 414, 415, 501, 505}


class OAuthTokenError(ConnectionError):
    """No token: the endpoint refused the client, was unreachable, or answered no usable JWT.
    `retryable` is False for an answer that retrying cannot change (a 4xx, a malformed token)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class OAuthSettings:
    """Kafka's client settings of the client-credentials login (names without any prefix)."""

    token_endpoint_url: str
    client_id: str = ""
    client_secret: str = field(default="", repr=False)
    scope: str | None = None
    header_urlencode: bool = False
    sub_claim_name: str = "sub"
    refresh_window_factor: float = 0.8
    refresh_window_jitter: float = 0.05
    refresh_min_period_s: int = 60
    refresh_buffer_s: int = 300
    connect_timeout_ms: int = DEFAULT_LOGIN_TIMEOUT_MS
    read_timeout_ms: int = DEFAULT_LOGIN_TIMEOUT_MS
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000

    @classmethod
    def from_properties(cls, props: Mapping[str, str], options: Mapping[str, str]) -> OAuthSettings:
        """From Kafka client properties and the OAuthBearerLoginModule's JAAS options
        (`clientId`, `clientSecret`, `scope`). ValueError names the property and its range."""

        def number(name: str, default: float, lo: float, hi: float, kind: type = int) -> float:
            text = props.get(name)
            if text is None or not text.strip():
                return default
            try:
                value = kind(text.strip())
            except ValueError:
                raise ValueError(f"{name}={text!r} is not a number") from None
            if not lo <= value <= hi:
                raise ValueError(f"{name}={value} is outside [{lo:g}, {hi:g}]")
            return float(value)

        url = props.get("sasl.oauthbearer.token.endpoint.url", "").strip()
        if not url:
            raise ValueError("sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url")
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme not in ("http", "https", "file"):
            raise ValueError(
                f"sasl.oauthbearer.token.endpoint.url must be an http(s) or file URL, not {scheme!r}"
            )
        if scheme != "file" and (not options.get("clientId") or not options.get("clientSecret")):
            raise ValueError(
                'sasl.jaas.config: OAuthBearerLoginModule needs clientId="..." and clientSecret="..." '
                "for the token endpoint"
            )
        extensions = sorted(k for k in options if k.startswith("extension_"))
        if extensions:
            raise ValueError(
                f"sasl.jaas.config: SASL extensions ({', '.join(extensions)}) are not sent by groupshift"
            )
        return cls(
            token_endpoint_url=url,
            client_id=options.get("clientId", ""),
            client_secret=options.get("clientSecret", ""),
            scope=options.get("scope") or None,
            header_urlencode=props.get("sasl.oauthbearer.header.urlencode", "false").strip().lower()
            == "true",
            sub_claim_name=props.get("sasl.oauthbearer.sub.claim.name", "sub").strip() or "sub",
            refresh_window_factor=number("sasl.login.refresh.window.factor", 0.8, 0.5, 1.0, float),
            refresh_window_jitter=number("sasl.login.refresh.window.jitter", 0.05, 0.0, 0.25, float),
            refresh_min_period_s=int(number("sasl.login.refresh.min.period.seconds", 60, 0, 900)),
            refresh_buffer_s=int(number("sasl.login.refresh.buffer.seconds", 300, 0, 3600)),
            connect_timeout_ms=int(
                number("sasl.login.connect.timeout.ms", DEFAULT_LOGIN_TIMEOUT_MS, 1, 3_600_000)
            ),
            read_timeout_ms=int(number("sasl.login.read.timeout.ms", DEFAULT_LOGIN_TIMEOUT_MS, 1, 3_600_000)),
            retry_backoff_ms=int(number("sasl.login.retry.backoff.ms", 100, 0, 3_600_000)),
            retry_backoff_max_ms=int(number("sasl.login.retry.backoff.max.ms", 10_000, 0, 3_600_000)),
        )


@dataclass(frozen=True)
class AccessToken:
    """A token and what the client reads of it: its subject and its lifetime (epoch seconds)."""

    value: str = field(repr=False)
    subject: str
    expires_at: float
    issued_at: float


def _jwt_claims(token: str) -> dict[str, object]:
    parts = token.split(".")
    if len(parts) != 3:
        raise OAuthTokenError(f"the access token is not a JWT (expected three sections, got {len(parts)})")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, UnicodeDecodeError) as exc:
        raise OAuthTokenError(f"the access token's payload is not base64url JSON: {exc}") from None
    if not isinstance(claims, dict):
        raise OAuthTokenError("the access token's payload is not a JSON object")
    return claims


def read_token(value: str, sub_claim_name: str = "sub", now: float | None = None) -> AccessToken:
    """The token's subject and expiry, checked as Kafka's LoginAccessTokenValidator checks."""
    value = value.strip()
    claims = _jwt_claims(value)
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise OAuthTokenError("the access token has no numeric exp claim")
    subject = claims.get(sub_claim_name)
    if not isinstance(subject, str) or not subject.strip():
        raise OAuthTokenError(f"the access token has no {sub_claim_name} claim")
    iat = claims.get("iat")
    issued = float(iat) if isinstance(iat, int | float) and not isinstance(iat, bool) else None
    return AccessToken(value, subject, float(exp), issued if issued is not None else (now or time.time()))


def refresh_at(
    token: AccessToken, settings: OAuthSettings, now: float, rng: random.Random | None = None
) -> float:
    """When to fetch the next token (epoch seconds), by Kafka's rule (module docstring)."""
    expires = token.expires_at
    if now > expires:
        return now + RETRY_AFTER_FAILED_REFRESH_S
    pct = settings.refresh_window_factor + settings.refresh_window_jitter * (rng or random).random()
    if now + settings.refresh_min_period_s + settings.refresh_buffer_s > expires:
        return now + (expires - now) * pct
    start = min(token.issued_at, now)
    proposed = start + (expires - start) * pct
    if proposed > expires - settings.refresh_buffer_s:
        return expires - settings.refresh_buffer_s
    return max(proposed, now + settings.refresh_min_period_s)


Fetcher = Callable[[OAuthSettings], str]


def fetch_token(settings: OAuthSettings) -> str:
    """One client-credentials request (retried as Kafka retries); the raw access token."""
    url = settings.token_endpoint_url
    if urllib.parse.urlsplit(url).scheme.lower() == "file":
        path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
        try:
            return Path(path).read_text(encoding="utf-8")[:MAX_TOKEN_RESPONSE_BYTES].strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise OAuthTokenError(f"cannot read the token file {path}: {exc}") from None
    delay = settings.retry_backoff_ms / 1000
    waited = 0.0
    while True:
        try:
            return _post(settings)
        except OAuthTokenError as exc:
            if not exc.retryable or waited + delay > settings.retry_backoff_max_ms / 1000:
                raise
        time.sleep(delay)
        waited += delay
        delay = min(delay * 2, settings.retry_backoff_max_ms / 1000) or 0.001


def _post(settings: OAuthSettings) -> str:
    client_id, secret = settings.client_id, settings.client_secret
    if settings.header_urlencode:
        client_id, secret = urllib.parse.quote_plus(client_id), urllib.parse.quote_plus(secret)
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    form = {"grant_type": "client_credentials"}
    if settings.scope and settings.scope.strip():
        form["scope"] = settings.scope.strip()
    request = urllib.request.Request(
        settings.token_endpoint_url,
        data=urllib.parse.urlencode(form).encode(),
        headers={
            "Authorization": f"Basic {basic}",
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
            "Cache-Control": "no-cache",
        },
        method="POST",
    )
    # urllib has one timeout for connect and each read: the larger of Kafka's two.
    timeout = max(settings.connect_timeout_ms, settings.read_timeout_ms) / 1000
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read(MAX_TOKEN_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        snippet = exc.read(1000).decode(errors="replace") if exc.fp is not None else ""
        raise OAuthTokenError(
            f"the token endpoint answered HTTP {exc.code}: {snippet.strip()[:200] or exc.reason}",
            retryable=exc.code not in _UNRETRYABLE,
        ) from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise OAuthTokenError(f"the token endpoint is unreachable: {reason}", retryable=True) from None
    if len(body) > MAX_TOKEN_RESPONSE_BYTES:
        raise OAuthTokenError(f"the token endpoint's answer exceeds {MAX_TOKEN_RESPONSE_BYTES} bytes")
    try:
        answer_json = json.loads(body)
    except ValueError:
        raise OAuthTokenError("the token endpoint's answer is not JSON") from None
    token = answer_json.get("access_token") if isinstance(answer_json, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise OAuthTokenError("the token endpoint's answer has no access_token")
    return token


class OAuthTokenSource:
    """The current access token, fetched on first use and refreshed at Kafka's refresh time.
    Thread-safe: the event loop's executor, the fleet thread and librdkafka's callback share it."""

    def __init__(self, settings: OAuthSettings, fetch: Fetcher = fetch_token) -> None:
        self.settings = settings
        self._fetch = fetch
        self._lock = threading.Lock()
        self._token: AccessToken | None = None
        self._refresh_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fetches = 0
        self.last_error: str | None = None

    def token(self) -> AccessToken:
        """A valid token; fetches one when none is held, the refresh time has passed or the token
        expired. A failed refresh keeps a token that has not expired (OAuthTokenError when there
        is none: an expired token is never offered)."""
        with self._lock:
            now = time.time()
            current = self._token
            if current is not None and now < self._refresh_at and now < current.expires_at:
                return current
            try:
                fresh = read_token(self._fetch(self.settings), self.settings.sub_claim_name, now)
            except OAuthTokenError as exc:
                self.last_error = str(exc)
                if current is not None and now < current.expires_at:
                    self._refresh_at = now + RETRY_AFTER_FAILED_REFRESH_S
                    return current
                raise
            self.fetches += 1
            self.last_error = None
            self._token = fresh
            self._refresh_at = refresh_at(fresh, self.settings, time.time())
            return fresh

    @property
    def refresh_time(self) -> float:
        return self._refresh_at

    def start_refresher(self) -> None:
        """Refresh in a daemon thread at each refresh time (Kafka's refresh thread)."""
        if self._thread is not None:
            return

        def run() -> None:
            while not self._stop.wait(max(0.05, self._refresh_at - time.time())):
                try:
                    self.token()
                except OAuthTokenError:
                    with self._lock:
                        self._refresh_at = time.time() + RETRY_AFTER_FAILED_REFRESH_S

        self._thread = threading.Thread(target=run, name="oauth-token-refresh", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
