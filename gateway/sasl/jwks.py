"""The verification keys OAUTHBEARER checks a JWT's signature with: a JWKS from a file or a URL.

Kafka behaviour (`VerificationKeyResolverFactory`, `JwksFileVerificationKeyResolver`,
`RefreshingHttpsJwks` in `org.apache.kafka.common.security.oauthbearer.internals.secured`):

* `sasl.oauthbearer.jwks.endpoint.url` is an `http`/`https` URL or a `file:` URL. A file is read
  once, at start-up. A URL is fetched once at start-up (a failure stops the broker), then again
  every `sasl.oauthbearer.jwks.endpoint.refresh.ms` (default one hour) on a background thread,
  each fetch retried with an exponential backoff from `...retry.backoff.ms` (100) to
  `...retry.backoff.max.ms` (10000); a refresh that fails keeps the keys already held.
* A token whose `kid` is not among the keys fails at once, and *expedites* a refresh on the
  background thread, so the client's next attempt can succeed after a key rotation. A given `kid`
  expedites at most one refresh per 60 s (the last 16 such ids are remembered), a `kid` longer
  than 1000 characters never does, and only one refresh runs at a time.

Beyond Kafka (docs/deviations.md): expedited refreshes are also at least
`sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms` apart whatever their `kid` (Kafka lets each
new random `kid` start one, so a client can make the broker fetch the JWKS back to back), and a
fetch is bounded in size (`sasl.oauthbearer.jwks.endpoint.max.bytes`) and time
(`sasl.oauthbearer.jwks.endpoint.timeout.ms`).

Nothing here runs on the event loop: the mechanism only reads `current()`, a tuple swapped whole by
the refresh thread, and `key_missing()` only sets an event.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import jwt
import structlog

log = structlog.get_logger(__name__)

MISSING_KID_REFRESH_INTERVAL_S = 60.0
"""Kafka's `MISSING_KEY_ID_CACHE_IN_FLIGHT_MS`: one expedited refresh per unknown `kid` per minute."""
MISSING_KID_REMEMBERED = 16
"""Kafka's `MISSING_KEY_ID_CACHE_MAX_ENTRIES`."""
MISSING_KID_MAX_CHARS = 1000
"""Kafka's `MISSING_KEY_ID_MAX_KEY_LENGTH`: a longer `kid` is taken as garbage, never refreshed for."""

# The algorithms a key may verify, by key type (RFC 7518 section 3.1). A key's own `alg` narrows
# this to one; `none` is never here: the JWKS path refuses unsecured tokens (Kafka's DISALLOW_NONE).
_RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_ALGORITHMS = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}
_HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})


class JwksError(ValueError):
    """The JWKS cannot be read or holds no usable key (a start-up error naming the source; a
    ValueError, so `groupshift serve` reports it as `gateway.start_failed` and exits 1)."""


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """One usable public (or, for `oct`, shared) key of a JWKS."""

    kid: str | None
    algorithms: frozenset[str]
    """The JWS `alg` values this key may verify."""
    key: Any
    """The key object PyJWT verifies with (a `cryptography` public key, or bytes for `oct`)."""


class KeySource(Protocol):
    """Where the validator finds keys; never blocks."""

    def current(self) -> Sequence[VerificationKey]:
        """The keys held now."""
        ...

    def key_missing(self, kid: str | None) -> None:
        """A token named a key that is not held: a hint that the set may have rotated."""
        ...


def _algorithms(jwk: dict[str, Any]) -> frozenset[str]:
    kty = jwk.get("kty")
    if kty == "RSA":
        family = _RSA_ALGORITHMS
    elif kty == "EC":
        alg = _EC_ALGORITHMS.get(str(jwk.get("crv")))
        family = frozenset({alg}) if alg else frozenset()
    elif kty == "OKP":
        family = frozenset({"EdDSA"})
    elif kty == "oct":
        family = _HMAC_ALGORITHMS
    else:
        family = frozenset()
    alg = jwk.get("alg")
    if isinstance(alg, str):
        return family & {alg}
    return family


def parse_jwks(document: bytes, *, source: str) -> tuple[VerificationKey, ...]:
    """The signing keys of a JWKS document (RFC 7517 section 5).

    A key this server cannot use (an unknown `kty` or curve, `use` other than `sig`, a broken
    member) is skipped and logged, as jose4j skips it; a document with no usable key at all, or
    that is not a JWKS, is a `JwksError`.
    """
    try:
        doc = json.loads(document)
    except (ValueError, RecursionError) as e:
        raise JwksError(f"{source}: not a JSON document ({type(e).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise JwksError(f'{source}: not a JWKS (a JSON object with a "keys" array)')
    out: list[VerificationKey] = []
    for i, jwk in enumerate(doc["keys"]):
        if not isinstance(jwk, dict):
            log.warning("jwks.key_skipped", source=source, index=i, reason="not an object")
            continue
        if jwk.get("use", "sig") != "sig":
            continue
        algorithms = _algorithms(jwk)
        if not algorithms:
            log.warning("jwks.key_skipped", source=source, index=i, reason="unsupported kty/crv/alg")
            continue
        try:
            key = jwt.PyJWK(jwk, algorithm=min(algorithms)).key
        except Exception as e:  # PyJWT and cryptography raise several kinds for a broken member
            log.warning("jwks.key_skipped", source=source, index=i, reason=f"{type(e).__name__}: {e}")
            continue
        kid = jwk.get("kid")
        out.append(VerificationKey(kid if isinstance(kid, str) else None, algorithms, key))
    if not out:
        raise JwksError(f"{source}: no usable signing key")
    return tuple(out)


class StaticKeySource:
    """Keys read once (a `file:` JWKS, as Kafka's `JwksFileVerificationKeyResolver`, or a test's)."""

    def __init__(self, keys: Sequence[VerificationKey]) -> None:
        self._keys = tuple(keys)

    def current(self) -> Sequence[VerificationKey]:
        return self._keys

    def key_missing(self, kid: str | None) -> None:
        """A file is not re-read (Kafka neither): a rotated key needs a restart."""


def load_jwks_file(path: Path, *, max_bytes: int) -> StaticKeySource:
    """Read a JWKS file at start-up."""
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise JwksError(f"{path}: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise JwksError(f"{path}: larger than sasl.oauthbearer.jwks.endpoint.max.bytes={max_bytes}")
    return StaticKeySource(parse_jwks(data, source=str(path)))


def fetch_url(url: str, *, timeout_s: float, max_bytes: int) -> bytes:
    """GET a JWKS, bounded: at most `max_bytes`, and `timeout_s` for the whole exchange."""
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        if response.status != 200:
            raise JwksError(f"{url}: HTTP {response.status}")
        body = bytearray()
        while True:
            if time.monotonic() > deadline:
                raise JwksError(f"{url}: not read within {timeout_s:g} s")
            chunk = response.read(65536)
            if not chunk:
                return bytes(body)
            body += chunk
            if len(body) > max_bytes:
                raise JwksError(f"{url}: larger than sasl.oauthbearer.jwks.endpoint.max.bytes={max_bytes}")


class RefreshingJwks:
    """A JWKS URL's keys, fetched at start-up and refreshed on a daemon thread (Kafka's
    `RefreshingHttpsJwks`). `fetch` and `clock` are injectable so tests need no network."""

    def __init__(
        self,
        url: str,
        *,
        refresh_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        timeout_ms: int,
        max_bytes: int,
        fetch: Callable[[], bytes] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self._refresh_s = refresh_ms / 1000
        self._backoff_s = retry_backoff_ms / 1000
        self._backoff_max_s = retry_backoff_max_ms / 1000
        self._fetch = fetch or (lambda: fetch_url(url, timeout_s=timeout_ms / 1000, max_bytes=max_bytes))
        self._clock = clock
        self._keys: tuple[VerificationKey, ...] = ()
        self._lock = threading.Lock()
        self._missing: OrderedDict[str, float] = OrderedDict()
        self._last_expedited = float("-inf")
        self._expedite = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refreshes = 0
        """Completed fetches (start-up included): what tests and the log count."""

    def start(self) -> None:
        """The first fetch (blocking: call it before the listener opens, off the event loop),
        then the refresh thread. A first fetch that fails is a `JwksError`, as Kafka's `init()`
        failing stops the broker."""
        try:
            self._keys = self._fetch_with_retries()
        except Exception as e:
            raise JwksError(f"{self.url}: {type(e).__name__}: {e}") from None
        self.refreshes += 1
        self._thread = threading.Thread(target=self._run, name="jwks-refresh", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._expedite.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def current(self) -> Sequence[VerificationKey]:
        return self._keys

    def key_missing(self, kid: str | None) -> None:
        """Expedite a refresh for an unknown `kid`, within Kafka's per-`kid` limit and ours."""
        if kid is None or len(kid) > MISSING_KID_MAX_CHARS:
            return
        now = self._clock()
        with self._lock:
            next_check = self._missing.get(kid)
            if next_check is not None and next_check > now:
                return
            if now - self._last_expedited < self._backoff_max_s:
                return
            self._missing[kid] = now + MISSING_KID_REFRESH_INTERVAL_S
            self._missing.move_to_end(kid)
            while len(self._missing) > MISSING_KID_REMEMBERED:
                self._missing.popitem(last=False)
            self._last_expedited = now
        self._expedite.set()

    def _fetch_with_retries(self) -> tuple[VerificationKey, ...]:
        """Kafka's `Retry`: waits of backoff, 2 x backoff, ... while their sum stays within the max."""
        wait, waited = self._backoff_s, 0.0
        while True:
            try:
                return parse_jwks(self._fetch(), source=self.url)
            except Exception:
                if self._stop.is_set() or waited + wait > self._backoff_max_s:
                    raise
                self._stop.wait(wait)
                waited += wait
                wait *= 2

    def _run(self) -> None:
        while not self._stop.is_set():
            self._expedite.wait(self._refresh_s)
            self._expedite.clear()
            if self._stop.is_set():
                return
            try:
                keys = self._fetch_with_retries()
            except Exception as e:
                log.warning("jwks.refresh_failed", url=self.url, error=f"{type(e).__name__}: {e}")
                continue
            with self._lock:
                for k in keys:
                    if k.kid is not None:
                        self._missing.pop(k.kid, None)
            self._keys = keys
            self.refreshes += 1
            log.info("jwks.refreshed", url=self.url, keys=len(keys))
