"""One connection's SASL authentication, sans-IO: Kafka's `SaslServerAuthenticator` as a state
table (read like h11's), with KIP-368 re-authentication.

The connection glue (`gateway.sasl.gate`) turns each frame into an event and carries out the
`Verdict` it gets back; nothing here touches sockets, clocks or the loop (time is an argument),
so every rule below is unit-tested on events alone.

States and what Kafka does in each (the cells of `TRANSITIONS`; any pair not in the table closes
the connection without an answer, as Kafka's `InvalidRequestException` / `IllegalStateException`
do):

* BEFORE_HANDSHAKE: ApiVersions is answered by the normal handler (a version the server does not
  serve is answered v0 UNSUPPORTED_VERSION and may be retried), then only SaslHandshake may come
  (HANDSHAKE_REQUIRED). Any other request closes the connection: Kafka's "Unexpected Kafka
  request of type X during SASL handshake".
* SaslHandshake naming an enabled mechanism is answered with the enabled list and starts
  AUTHENTICATING; v0 means the tokens that follow are raw size-prefixed frames, v1 that each is
  a SaslAuthenticate request. An unknown mechanism is answered UNSUPPORTED_SASL_MECHANISM, and
  the connection closes.
* AUTHENTICATING: each token goes to the mechanism. A challenge is answered; success sets the
  principal (AUTHENTICATED) and, on SaslAuthenticate v1+, reports the session lifetime
  (`connections.max.reauth.ms`, capped by a credential's own lifetime). A failure is answered
  SASL_AUTHENTICATION_FAILED with the mechanism's message (or Kafka's generic "invalid
  credentials" one) and the connection closes after `connections.failed.authentication.delay.ms`
  (raw v0 tokens: closed without an answer). Any other request is answered with its error
  response carrying ILLEGAL_SASL_STATE, and the connection closes.
* AUTHENTICATED: requests go to their handlers, until the session (if it has a lifetime)
  expires: then the next request closes the connection, as Kafka's processor does. A
  SaslHandshake re-authenticates (KIP-368) when the session has a lifetime and the last
  re-authentication began at least a second ago; the same mechanism and the same principal are
  required (Kafka's messages, the connection closed otherwise). While it runs, any other request
  is refused as during a first authentication (Kafka mutes the connection; clients send nothing
  else meanwhile). Otherwise SaslHandshake and SaslAuthenticate go to their handlers, which
  answer ILLEGAL_SASL_STATE as Kafka's `KafkaApis`.
* FAILED: the connection is closing; frames are ignored.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from gateway.sasl.mechanism import SaslAuthenticationFailed, SaslInvalidCredentials, ServerMechanism

MIN_REAUTH_INTERVAL_MS = 1000  # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS


class SaslState(enum.Enum):
    BEFORE_HANDSHAKE = "before handshake"
    HANDSHAKE_REQUIRED = "handshake required"  # ApiVersions answered; SaslHandshake must follow
    AUTHENTICATING = "authenticating"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


# -- events (what the glue read) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiVersionsRequest:
    served_version: bool
    """False when the version is above what the server serves (answered v0 UNSUPPORTED_VERSION)."""


@dataclass(frozen=True, slots=True)
class HandshakeRequest:
    mechanism: str
    version: int


@dataclass(frozen=True, slots=True)
class AuthenticateRequest:
    auth_bytes: bytes
    version: int


@dataclass(frozen=True, slots=True)
class RawToken:
    token: bytes


@dataclass(frozen=True, slots=True)
class OtherRequest:
    api_key: int


Event = ApiVersionsRequest | HandshakeRequest | AuthenticateRequest | RawToken | OtherRequest


# -- answers and verdicts -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HandshakeAnswer:
    error_code: ErrorCode
    mechanisms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuthenticateAnswer:
    error_code: ErrorCode
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int = 0


@dataclass(frozen=True, slots=True)
class RawAnswer:
    token: bytes


@dataclass(frozen=True, slots=True)
class IllegalStateAnswer:
    """The request's own error response, every error code ILLEGAL_SASL_STATE."""


Answer = HandshakeAnswer | AuthenticateAnswer | RawAnswer | IllegalStateAnswer


@dataclass(frozen=True, slots=True)
class Failure:
    """An `auth.failed` audit event."""

    mechanism: str
    reason: str
    principal: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    forward: bool = False
    """Hand the request to the normal frame handler."""
    answer: Answer | None = None
    close: str | None = None
    """Close the connection (after the answer, if any) with this reason."""
    delayed: bool = False
    """Answer and close after `connections.failed.authentication.delay.ms` (a failed login)."""
    failure: Failure | None = None
    principal: str | None = None
    """Set when this event completed an authentication: the connection's principal."""
    reauthentication: bool = False
    """The completed authentication was a KIP-368 re-authentication."""


FORWARD = Verdict(forward=True)


@dataclass(frozen=True)
class SaslListenerSetup:
    """A SASL listener's mechanisms and bounds (built once per listener)."""

    enabled: tuple[str, ...]
    mechanisms: Mapping[str, Callable[[], ServerMechanism]]
    reauth_ms: Mapping[str, int] = field(default_factory=dict)
    """`connections.max.reauth.ms` per mechanism (0: sessions never expire)."""


class SaslAuthenticator:
    """The state of one connection's authentication (see the module doc for the table)."""

    def __init__(self, setup: SaslListenerSetup) -> None:
        self.setup = setup
        self.state = SaslState.BEFORE_HANDSHAKE
        self.raw_tokens = False
        """After SaslHandshake v0: frames are raw tokens, not Kafka requests."""
        self.mechanism_name = ""
        self.principal: str | None = None
        self.session_expires_ms: float | None = None
        self._mechanism: ServerMechanism | None = None
        self._reauthenticating = False
        self._bad_mechanism: str | None = None
        self._reauth_started_ms: float | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.AUTHENTICATED

    @property
    def reauthenticating(self) -> bool:
        return self._reauthenticating and self.state is SaslState.AUTHENTICATING

    def session_expired(self, now_ms: float) -> bool:
        return self.session_expires_ms is not None and now_ms >= self.session_expires_ms

    def receive(self, event: Event, now_ms: float) -> Verdict:
        if self.state is SaslState.FAILED:
            return Verdict()
        cell = TRANSITIONS.get((self.state, type(event)))
        if cell is None:
            return self._fail_silently(event)
        return cell(self, event, now_ms)

    def timed_out(self) -> Verdict:
        """The exchange did not complete within its bound (`sasl.server.authentication.timeout.ms`)."""
        what = "re-authentication" if self._reauthenticating else "authentication"
        return self._failed(
            Failure(self.mechanism_name or "none", f"{what} did not complete in time", self._claimed()),
            close="sasl.timeout",
        )

    # -- cells ----------------------------------------------------------------------------

    def _api_versions(self, event: ApiVersionsRequest, now_ms: float) -> Verdict:
        if event.served_version:
            self.state = SaslState.HANDSHAKE_REQUIRED
        return FORWARD

    def _handshake(self, event: HandshakeRequest, now_ms: float) -> Verdict:
        enabled = self.setup.enabled
        if event.mechanism not in enabled:
            self.state = SaslState.FAILED
            return Verdict(
                answer=HandshakeAnswer(ErrorCode.unsupported_sasl_mechanism, enabled),
                close="sasl.unsupported_mechanism",
                delayed=True,
                failure=Failure(
                    event.mechanism[:64] or "none", f"Unsupported SASL mechanism {event.mechanism[:64]}"
                ),
            )
        if self._reauthenticating and event.mechanism != self.mechanism_name:
            self._bad_mechanism = (
                f"SASL mechanism '{event.mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.mechanism_name}'"
            )
        else:
            self.mechanism_name = event.mechanism
            self._mechanism = self.setup.mechanisms[event.mechanism]()
        self.raw_tokens = event.version == 0
        self.state = SaslState.AUTHENTICATING
        return Verdict(answer=HandshakeAnswer(ErrorCode.none, enabled))

    def _token(self, event: AuthenticateRequest | RawToken, now_ms: float) -> Verdict:
        raw = isinstance(event, RawToken)
        if self._bad_mechanism is not None:
            # Kafka's REAUTH_BAD_MECHANISM: the token is refused without an answer.
            return self._failed(
                Failure(self.mechanism_name, self._bad_mechanism, self._claimed()),
                close="sasl.reauth_bad_mechanism",
            )
        if isinstance(event, AuthenticateRequest) and self.raw_tokens:
            return self._fail_silently(event)
        mechanism = self._mechanism
        assert mechanism is not None
        token = event.token if isinstance(event, RawToken) else event.auth_bytes
        try:
            step = mechanism.step(token)
        except SaslInvalidCredentials as e:
            what = "re-authentication" if self._reauthenticating else "authentication"
            message = (
                f"Authentication failed during {what} due to invalid credentials with SASL mechanism "
                f"{self.mechanism_name}"
            )
            return self._login_failed(raw, message, str(e))
        except SaslAuthenticationFailed as e:
            return self._login_failed(raw, str(e), str(e))
        if not step.complete:
            if raw:
                return Verdict(answer=RawAnswer(step.challenge))
            return Verdict(answer=AuthenticateAnswer(ErrorCode.none, "", step.challenge, 0))
        principal = step.principal or "User:ANONYMOUS"
        if self._reauthenticating and principal != self.principal:
            old, new = (self.principal or "").partition(":"), principal.partition(":")
            message = (
                f"Cannot change principals during re-authentication from {old[0]}.{old[2]}: {new[0]}.{new[2]}"
            )
            return self._login_failed(raw, message, message)
        lifetime = self._session_lifetime(step.credential_lifetime_ms)
        self.session_expires_ms = None if lifetime is None else now_ms + lifetime
        self.principal = principal
        self.state = SaslState.AUTHENTICATED
        reauthentication, self._reauthenticating = self._reauthenticating, False
        self._mechanism = None
        answer: Answer = (
            RawAnswer(step.challenge)
            if raw
            else AuthenticateAnswer(ErrorCode.none, "", step.challenge, lifetime or 0)
        )
        return Verdict(answer=answer, principal=principal, reauthentication=reauthentication)

    def _illegal_during_authentication(self, event: Event, now_ms: float) -> Verdict:
        """A request other than SaslAuthenticate while authenticating (Kafka's
        IllegalSaslStateException: the request's error response, then the close)."""
        if self.raw_tokens:
            return self._fail_silently(event)
        api = event.api_key if isinstance(event, OtherRequest) else type(event).__name__
        return self._failed(
            Failure(
                self.mechanism_name,
                f"Unexpected Kafka request of type {api} during SASL authentication",
                self._claimed(),
            ),
            answer=IllegalStateAnswer(),
            close="sasl.illegal_state",
            delayed=True,
        )

    def _authenticated_handshake(self, event: HandshakeRequest, now_ms: float) -> Verdict:
        if self.session_expires_ms is None:
            return FORWARD  # no session lifetime: no re-authentication (KafkaApis answers)
        started = self._reauth_started_ms
        if started is not None and now_ms - started < MIN_REAUTH_INTERVAL_MS:
            return self._authenticated(event, now_ms)
        self._reauth_started_ms = now_ms
        self._reauthenticating = True
        self._bad_mechanism = None
        return self._handshake(event, now_ms)

    def _authenticated(self, event: Event, now_ms: float) -> Verdict:
        if self.session_expired(now_ms):
            self.state = SaslState.FAILED
            return Verdict(close="sasl.session_expired")
        return FORWARD

    # -- helpers --------------------------------------------------------------------------

    def _claimed(self) -> str:
        claimed = getattr(self._mechanism, "claimed", "") or ""
        return f"User:{claimed}" if claimed else (self.principal or "")

    def _session_lifetime(self, credential_ms: int | None) -> int | None:
        """Kafka's `calcCompletionTimesAndReturnSessionLifetimeMs`: the reauth bound, capped by
        the credential's lifetime; None when neither exists (the session never expires)."""
        max_ms = self.setup.reauth_ms.get(self.mechanism_name, 0)
        if credential_ms is None and max_ms <= 0:
            return None
        if credential_ms is None:
            return max(max_ms, 0)
        if max_ms <= 0:
            return max(credential_ms, 0)
        return max(min(credential_ms, max_ms), 0)

    def _login_failed(self, raw: bool, message: str, reason: str) -> Verdict:
        failure = Failure(self.mechanism_name, reason, self._claimed())
        if raw:
            return self._failed(failure, close="sasl.authentication_failed")
        return self._failed(
            failure,
            answer=AuthenticateAnswer(ErrorCode.sasl_authentication_failed, message, b""),
            close="sasl.authentication_failed",
            delayed=True,
        )

    def _failed(
        self, failure: Failure, *, close: str, answer: Answer | None = None, delayed: bool = False
    ) -> Verdict:
        self.state = SaslState.FAILED
        self._mechanism = None
        return Verdict(answer=answer, close=close, delayed=delayed, failure=failure)

    def _fail_silently(self, event: Event) -> Verdict:
        """Kafka closes without an answer (InvalidRequestException, IllegalStateException)."""
        what = type(event).__name__
        if isinstance(event, OtherRequest):
            what = f"request of api key {event.api_key}"
        return self._failed(
            Failure(
                self.mechanism_name or "none",
                f"unexpected {what} in state {self.state.value}",
                self._claimed(),
            ),
            close="sasl.unexpected_request",
        )


TRANSITIONS: dict[tuple[SaslState, type], Callable[..., Verdict]] = {
    (SaslState.BEFORE_HANDSHAKE, ApiVersionsRequest): SaslAuthenticator._api_versions,
    (SaslState.BEFORE_HANDSHAKE, HandshakeRequest): SaslAuthenticator._handshake,
    (SaslState.HANDSHAKE_REQUIRED, HandshakeRequest): SaslAuthenticator._handshake,
    (SaslState.AUTHENTICATING, AuthenticateRequest): SaslAuthenticator._token,
    (SaslState.AUTHENTICATING, RawToken): SaslAuthenticator._token,
    (SaslState.AUTHENTICATING, HandshakeRequest): SaslAuthenticator._illegal_during_authentication,
    (SaslState.AUTHENTICATING, ApiVersionsRequest): SaslAuthenticator._illegal_during_authentication,
    (SaslState.AUTHENTICATING, OtherRequest): SaslAuthenticator._illegal_during_authentication,
    (SaslState.AUTHENTICATED, HandshakeRequest): SaslAuthenticator._authenticated_handshake,
    (SaslState.AUTHENTICATED, ApiVersionsRequest): SaslAuthenticator._authenticated,
    (SaslState.AUTHENTICATED, AuthenticateRequest): SaslAuthenticator._authenticated,
    (SaslState.AUTHENTICATED, OtherRequest): SaslAuthenticator._authenticated,
}
"""(state, event type) -> cell; a pair missing here closes the connection without an answer."""
