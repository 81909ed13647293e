"""How groupshift authenticates to its upstream cluster: Kafka's client security settings under
`upstream.` (gateway/upstream/config.py), made usable by every upstream connection.

One `UpstreamSecurity` per server, shared by the per-broker links of clients, groupshift's own
links (metadata, offsets import and mirror), the scale-out fleet membership and, as librdkafka
settings, the shard log's producers and readers and the topic admin:

* TLS (SSL, SASL_SSL): one client `SSLContext` from the truststore (the system's CAs when none
  is given) and, for mutual TLS, the keystore; the broker's host name is checked unless
  `upstream.ssl.endpoint.identification.algorithm` is empty, as Kafka's clients do;
* SASL (SASL_PLAINTEXT, SASL_SSL): SaslHandshake v1 then SaslAuthenticate, the mechanism's
  messages from protocol.client_security.SaslClient (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER);
* OAUTHBEARER: one token source (protocol.oauth_client) for the whole process, refreshed in a
  thread of its own before the token expires; a link fetches a token (when one is due) in an
  executor, never on the event loop; librdkafka gets it through `oauth_cb`.

What happens when credentials stop working mid-run (docs/upstream.md, "Security"): a link whose
SASL exchange or KIP-368 re-authentication fails closes, and the client connections using it are
closed (the clients reconnect and get a new link, authenticated with the current credentials or
token); groupshift's own requests fail and are retried on their schedule.

`check_at_startup` is the start-up check: a wrong password, an unknown user, a refused token, a
mechanism the broker does not enable or a certificate the truststore does not trust is reported
in one line naming the setting, and `groupshift serve` exits non-zero.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import structlog

from protocol.client_security import ClientSecurity, SaslAuthenticationFailed, SaslClient
from protocol.oauth_client import OAuthTokenError

log = structlog.get_logger("upstream")

SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
ERROR_NAMES = {
    SASL_AUTHENTICATION_FAILED: "SASL_AUTHENTICATION_FAILED",
    UNSUPPORTED_SASL_MECHANISM: "UNSUPPORTED_SASL_MECHANISM",
    ILLEGAL_SASL_STATE: "ILLEGAL_SASL_STATE",
}


class UpstreamSecurity:
    def __init__(self, client: ClientSecurity, *, label: str | None = None) -> None:
        self.client = client
        # Where the credential came from, when not `upstream.sasl.*` (a principal's entry of
        # `upstream.identity.credentials.file`): failures name it instead.
        self.label = label

    @classmethod
    def plaintext(cls) -> UpstreamSecurity:
        return cls(ClientSecurity())

    @property
    def protocol(self) -> str:
        return self.client.protocol

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        return self.client.ssl_context

    @property
    def uses_sasl(self) -> bool:
        return self.client.uses_sasl

    @property
    def mechanism(self) -> str:
        return self.client.sasl_mechanism or "PLAIN"

    def start(self) -> None:
        if self.client.tokens is not None:
            self.client.tokens.start_refresher()

    def close(self) -> None:
        if self.client.tokens is not None:
            self.client.tokens.close()

    async def sasl_client(self) -> SaslClient:
        """The exchange for one new connection; a token fetch (when due) runs off the loop."""
        if self.client.tokens is None:
            return self.client.sasl_client()
        return await asyncio.get_running_loop().run_in_executor(None, self.client.sasl_client)

    def failure_text(self, exc: BaseException, where: str = "") -> str:
        """One line naming the setting behind an authentication failure."""
        text = describe_failure(self.client, exc, where)
        return text if self.label is None else relabel(text, self.label)

    def librdkafka_config(self) -> dict[str, Any]:
        """The same settings for confluent-kafka clients (shard log, topic admin)."""
        config: dict[str, Any] = dict(self.client.librdkafka_config())
        tokens = self.client.tokens
        if tokens is not None:

            def oauth_cb(_config: str) -> tuple[str, float]:
                token = tokens.token()
                return token.value, token.expires_at

            config["oauth_cb"] = oauth_cb
        return config


def relabel(text: str, label: str) -> str:
    """A failure text naming `label` (where a per-principal credential came from) instead of
    the `upstream.sasl.*` setting that holds groupshift's own."""
    for setting in ("upstream.sasl.jaas.config", "upstream.sasl.mechanism"):
        text = text.replace(setting, label, 1)
    return text


def describe_failure(client: ClientSecurity, exc: BaseException, where: str = "") -> str:
    """`upstream.<setting>: what went wrong` for a failed TLS handshake or SASL exchange."""
    at = f" at {where}" if where else ""
    if isinstance(exc, OAuthTokenError):
        return f"upstream.sasl.oauthbearer.token.endpoint.url: no token for {client.principal_text} ({exc})"
    if isinstance(exc, SaslAuthenticationFailed):
        code = exc.error_code
        if code == UNSUPPORTED_SASL_MECHANISM:
            return f"upstream.sasl.mechanism: the broker{at} refused it: {exc}"
        if code == ILLEGAL_SASL_STATE:
            return f"upstream.security.protocol={client.protocol}: the broker{at} has no SASL here ({exc})"
        name = ERROR_NAMES.get(code, f"error {code}" if code else "client check")
        who = client.principal_text
        return f"upstream.sasl.jaas.config: authentication failed for {who}{at} ({name}: {exc})"
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = exc.verify_message or str(exc)
        if "hostname" in reason.lower() or "ip address mismatch" in reason.lower():
            return (
                f"upstream.ssl.endpoint.identification.algorithm: the broker's certificate{at} does not "
                f"name the host it was reached at ({reason})"
            )
        return f"upstream.ssl.truststore.location: the broker's certificate{at} is not trusted ({reason})"
    if isinstance(exc, ssl.SSLError):
        reason = getattr(exc, "reason", None) or str(exc)
        if "CERTIFICATE_REQUIRED" in str(reason).upper() or "BAD_CERTIFICATE" in str(reason).upper():
            return (
                f"upstream.ssl.keystore.location: the broker{at} refused groupshift's certificate ({reason})"
            )
        return f"upstream.security.protocol={client.protocol}: TLS with the broker{at} failed ({reason})"
    return f"upstream.bootstrap.servers: {where or 'the broker'}: {exc}"


def check_at_startup(
    client: ClientSecurity, bootstrap: list[tuple[str, int]], timeout: float
) -> tuple[str | None, list[str]]:
    """Connect to the bootstrap brokers as groupshift will (TLS, SASL) until one accepts: (None,
    notes) then. A definite refusal (credentials, token, mechanism, certificate) is
    (message, notes); brokers that cannot be reached are only notes, since the gateway starts
    and keeps trying, as it does in PLAINTEXT."""
    notes: list[str] = []
    for host, port in bootstrap:
        where = f"{host}:{port}"
        try:
            wire = client.connect(host, port, timeout, client_id="groupshift")
        except (SaslAuthenticationFailed, OAuthTokenError, ssl.SSLError) as exc:
            return describe_failure(client, exc, where), notes
        except (OSError, TimeoutError, EOFError, ConnectionError) as exc:
            notes.append(f"{where}: {exc or type(exc).__name__}")
            continue
        wire.close()
        return None, notes
    return None, notes
