"""The `upstream.` security settings without a broker: Kafka's client settings under the prefix
read into TLS and SASL (errors naming the prefixed key, secrets never shown), Kafka's JAAS
syntax for each login module, the OAUTHBEARER messages and token refresh schedule, and the
one-line reasons `groupshift serve` gives when the cluster refuses it.
e2e/test_upstream_security.py runs them against real Kafka."""

from __future__ import annotations

import base64
import json
import random
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from gateway.config import ConfigError, build_config
from gateway.upstream.security import UpstreamSecurity, describe_failure
from harness.certificates import PASSWORD, Authority
from protocol.client_security import ClientSecurity, SaslAuthenticationFailed, SaslClient, parse_jaas
from protocol.oauth_client import (
    AccessToken,
    OAuthSettings,
    OAuthTokenError,
    OAuthTokenSource,
    fetch_token,
    read_token,
    refresh_at,
)

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
BOOT = {"upstream.bootstrap.servers": "127.0.0.1:9092"}
WITH_EXTENSION = f"{OAUTH} required clientId=c clientSecret=s3cr3t extension_a=1;"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return Authority(tmp_path_factory.mktemp("certs"), "up")


def _jwt(claims: dict[str, object]) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.c2ln"


# -- settings ------------------------------------------------------------------------------------


def test_sasl_ssl_settings_under_the_upstream_prefix(ca: Authority) -> None:
    client = ca.issue("gw", "gw")
    cfg = build_config(
        BOOT
        | {
            "upstream.security.protocol": "sasl_ssl",
            "upstream.ssl.truststore.location": str(ca.p12),
            "upstream.ssl.truststore.type": "PKCS12",
            "upstream.ssl.truststore.password": PASSWORD,
            "upstream.ssl.keystore.location": str(client.pem),
            "upstream.ssl.keystore.type": "PEM",
            "upstream.sasl.mechanism": "SCRAM-SHA-512",
            "upstream.sasl.jaas.config": f'{SCRAM} required username="gw" password="pw";',
        }
    ).upstream
    assert cfg is not None and cfg.security_protocol == "SASL_SSL"
    sec = UpstreamSecurity(cfg.client_security())
    assert sec.uses_sasl and sec.mechanism == "SCRAM-SHA-512"
    assert isinstance(sec.ssl_context, ssl.SSLContext) and sec.ssl_context.check_hostname
    assert sec.client.tls is not None and sec.client.tls.cert_chain_pem  # mutual TLS
    assert "pw" not in repr(cfg) and PASSWORD not in repr(cfg)  # secrets are never shown
    assert "security" not in cfg.model_dump(by_alias=True)  # nor dumped
    rd = sec.librdkafka_config()
    assert rd["security.protocol"] == "sasl_ssl" and rd["sasl.username"] == "gw"
    off = build_config(
        BOOT
        | {
            "upstream.security.protocol": "SSL",
            "upstream.ssl.truststore.location": str(ca.pem),
            "upstream.ssl.endpoint.identification.algorithm": "",
        }
    ).upstream
    assert off is not None and not off.client_security().ssl_context.check_hostname  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"upstream.security.protocol": "SASL_SSH"}, "upstream.security.protocol=SASL_SSH is not one of"),
        (
            {"upstream.security.protocol": "SSL", "upstream.ssl.truststore.location": "/nope"},
            ("upstream.ssl.truststore.location: cannot read /nope"),
        ),
        (
            {"upstream.security.protocol": "SSL", "upstream.ssl.truststore.type": "JCEKS"},
            ("upstream.ssl.truststore.type=JCEKS is not supported"),
        ),
        (
            {"upstream.security.protocol": "SASL_PLAINTEXT", "upstream.sasl.mechanism": "PLAIN"},
            "upstream.sasl.mechanism=PLAIN needs upstream.sasl.jaas.config",
        ),
        (
            {
                "upstream.security.protocol": "SASL_PLAINTEXT",
                "upstream.sasl.mechanism": "SCRAM-SHA-256",
                "upstream.sasl.jaas.config": f'{PLAIN} required username="a" password="s3cr3t";',
            },
            f"upstream.sasl.jaas.config names {PLAIN}",
        ),
        (
            {
                "upstream.security.protocol": "SASL_PLAINTEXT",
                "upstream.sasl.mechanism": "OAUTHBEARER",
                "upstream.sasl.jaas.config": f"{OAUTH} required;",
            },
            "needs upstream.sasl.oauthbearer.token.endpoint.url",
        ),
        (
            {
                "upstream.security.protocol": "SASL_PLAINTEXT",
                "upstream.sasl.mechanism": "OAUTHBEARER",
                "upstream.sasl.jaas.config": f'{OAUTH} required clientId="c";',
                "upstream.sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/token",
            },
            "clientSecret",
        ),
        (
            {
                "upstream.security.protocol": "SASL_PLAINTEXT",
                "upstream.sasl.mechanism": "OAUTHBEARER",
                "upstream.sasl.jaas.config": f'{OAUTH} required clientId="c" clientSecret="s3cr3t";',
                "upstream.sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/token",
                "upstream.sasl.login.refresh.window.factor": "0.3",
            },
            "upstream.sasl.login.refresh.window.factor=0.3 is outside [0.5, 1]",
        ),
        (
            {
                "upstream.security.protocol": "SASL_PLAINTEXT",
                "upstream.sasl.mechanism": "OAUTHBEARER",
                "upstream.sasl.jaas.config": WITH_EXTENSION,
                "upstream.sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/token",
            },
            "SASL extensions (extension_a) are not sent",
        ),
        ({"upstream.sasl.nope": "1"}, "unknown configuration key 'upstream.sasl.nope'"),
        (
            {"upstream.sasl.login.callback.handler.class": "x.Y"},
            "unknown configuration key 'upstream.sasl.login.callback.handler.class'",
        ),
    ],
)
def test_unusable_upstream_security_names_the_key(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config(BOOT | settings)
    assert message in str(err.value)
    assert "s3cr3t" not in str(err.value)


# -- JAAS ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "options"),
    [
        (
            f'{PLAIN} required username="alice" password="a b;c\\"d";',
            {"username": "alice", "password": 'a b;c"d'},
        ),
        (f"{SCRAM} required username=bob password=x=y;", None),  # a bare value stops at '='
        (f'  {SCRAM}   REQUIRED\n username="bob"\n password="p";  ', {"username": "bob", "password": "p"}),
        (
            f'{OAUTH} required clientId="id" clientSecret="s" scope="a b";',
            {"clientId": "id", "clientSecret": "s", "scope": "a b"},
        ),
        (f'{PLAIN} required username="" password="";', {"username": "", "password": ""}),
    ],
)
def test_jaas_entries(text: str, options: dict[str, str] | None) -> None:
    if options is None:
        with pytest.raises(ValueError):
            parse_jaas(text)
        return
    module, parsed = parse_jaas(text)
    assert module in (PLAIN, SCRAM, OAUTH)
    assert parsed == options


# -- SASL messages -------------------------------------------------------------------------------


def test_oauthbearer_messages() -> None:
    sasl = SaslClient("OAUTHBEARER", "", "", "tok.en.x")
    assert sasl.first() == b"n,,\x01auth=Bearer tok.en.x\x01\x01"
    assert sasl.step(b"") is None  # accepted
    refused = SaslClient("OAUTHBEARER", "", "", "t")
    refused.first()
    assert refused.step(b'{"status":"invalid_token"}') == b"\x01"  # then the broker fails it
    assert refused.oauth_challenge == '{"status":"invalid_token"}'


def test_plain_and_scram_first_messages() -> None:
    assert SaslClient("PLAIN", "u", "p").first() == b"\x00u\x00p"
    first = SaslClient("SCRAM-SHA-256", "u=,", "p").first()
    assert first.startswith(b"n,,n=u=3D=2C,r=")  # RFC 5802 escaping


# -- OAuth tokens --------------------------------------------------------------------------------


def _settings(**kw: object) -> OAuthSettings:
    return OAuthSettings(token_endpoint_url="http://127.0.0.1:1/t", client_id="c", client_secret="s", **kw)  # type: ignore[arg-type]


def test_refresh_time_follows_kafka() -> None:
    rng = random.Random(1)
    s = _settings(refresh_window_jitter=0.0)
    hour = AccessToken("t", "sub", expires_at=3600.0, issued_at=0.0)
    assert refresh_at(hour, s, now=0.0, rng=rng) == pytest.approx(2880.0)  # 0.8 of the lifetime
    buffer = _settings(refresh_window_jitter=0.0, refresh_buffer_s=1000)
    assert refresh_at(hour, buffer, now=0.0, rng=rng) == pytest.approx(2600.0)  # 1000 s before expiry
    short = AccessToken("t", "sub", expires_at=100.0, issued_at=0.0)
    assert refresh_at(short, s, now=0.0, rng=rng) == pytest.approx(80.0)  # buffers ignored
    minimum = _settings(refresh_window_jitter=0.0, refresh_buffer_s=0, refresh_min_period_s=900)
    late = AccessToken("t", "sub", expires_at=3600.0, issued_at=-10_000.0)
    assert refresh_at(late, minimum, now=0.0, rng=rng) == pytest.approx(900.0)  # not sooner than 900 s
    jittered = refresh_at(hour, _settings(), now=0.0, rng=rng)
    assert 2880.0 <= jittered <= 3060.0


def test_token_claims_checked_as_kafka() -> None:
    token = read_token(_jwt({"sub": "gw", "exp": 2_000_000_000, "iat": 1_000_000_000}))
    assert (token.subject, token.expires_at, token.issued_at) == ("gw", 2e9, 1e9)
    for bad, why in [
        ("opaque", "not a JWT"),
        (_jwt({"sub": "gw"}), "exp"),
        (_jwt({"exp": 1}), "sub claim"),
    ]:
        with pytest.raises(OAuthTokenError, match=why):
            read_token(bad)


def test_a_failed_refresh_keeps_a_valid_token() -> None:
    answers = [_jwt({"sub": "gw", "exp": time.time() + 3600})]

    def fetch(_s: OAuthSettings) -> str:
        if not answers:
            raise OAuthTokenError("the token endpoint answered HTTP 503", retryable=True)
        return answers.pop()

    source = OAuthTokenSource(_settings(), fetch)
    first = source.token()
    source._refresh_at = 0.0  # due
    assert source.token() is first and source.last_error is not None
    expired = OAuthTokenSource(_settings(), lambda _s: _jwt({"sub": "gw", "exp": time.time() - 1}))
    token = expired.token()  # accepted as given; the broker judges it
    expired._fetch = fetch
    with pytest.raises(OAuthTokenError):
        expired.token()  # an expired token is never offered again: a fetch, which fails
    assert token.subject == "gw"


@pytest.fixture()
def token_endpoint() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            seen.append({"authorization": self.headers["Authorization"], "body": body})
            if "bad" in base64.b64decode(self.headers["Authorization"].split()[1]).decode():
                self.send_response(401)
                self.end_headers()
                self.wfile.write(b'{"error":"invalid_client"}')
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(json.dumps({"access_token": _jwt({"sub": "gw", "exp": 2e9})}).encode())

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/token", seen
    server.shutdown()
    server.server_close()


def test_client_credentials_request(token_endpoint: tuple[str, list[dict[str, str]]], tmp_path: Path) -> None:
    url, seen = token_endpoint
    defaults = OAuthSettings.from_properties(
        {"sasl.oauthbearer.token.endpoint.url": url}, {"clientId": "gw", "clientSecret": "p:w"}
    )
    assert (defaults.connect_timeout_ms, defaults.read_timeout_ms) == (10_000, 10_000)  # Kafka: unbounded
    assert (defaults.refresh_window_factor, defaults.refresh_buffer_s, defaults.refresh_min_period_s) == (
        0.8,
        300,
        60,
    )
    settings = OAuthSettings(url, client_id="gw", client_secret="p:w", scope=" kafka ")
    assert read_token(fetch_token(settings)).subject == "gw"
    assert seen[0]["authorization"] == "Basic " + base64.b64encode(b"gw:p:w").decode()
    assert seen[0]["body"] == "grant_type=client_credentials&scope=kafka"
    with pytest.raises(OAuthTokenError, match=r"HTTP 401.*invalid_client") as err:
        fetch_token(OAuthSettings(url, client_id="bad", client_secret="x", retry_backoff_max_ms=50))
    assert not err.value.retryable and len(seen) == 2  # a 401 is not retried
    with pytest.raises(OAuthTokenError, match="unreachable"):
        fetch_token(
            OAuthSettings("http://127.0.0.1:1/t", "c", "s", retry_backoff_ms=10, retry_backoff_max_ms=40)
        )
    file = tmp_path / "token"
    file.write_text(_jwt({"sub": "f", "exp": 2e9}) + "\n")
    assert read_token(fetch_token(OAuthSettings(file.as_uri()))).subject == "f"


# -- start-up reasons ----------------------------------------------------------------------------


def test_refusals_name_the_setting() -> None:
    scram = ClientSecurity("SASL_SSL", None, "SCRAM-SHA-256", "alice", "pw")
    wrong = SaslAuthenticationFailed(
        "Authentication failed during authentication due to invalid credentials", 58
    )
    assert describe_failure(scram, wrong, "h:9093") == (
        "upstream.sasl.jaas.config: authentication failed for user 'alice' at h:9093 "
        "(SASL_AUTHENTICATION_FAILED: Authentication failed during authentication due to invalid credentials)"
    )
    mech = SaslAuthenticationFailed("the broker does not enable SASL mechanism X", 33)
    assert describe_failure(scram, mech).startswith("upstream.sasl.mechanism:")
    untrusted = ssl.SSLCertVerificationError(1, "certificate verify failed")
    untrusted.verify_message = "unable to get local issuer certificate"
    assert describe_failure(scram, untrusted, "h:9093") == (
        "upstream.ssl.truststore.location: the broker's certificate at h:9093 is not trusted "
        "(unable to get local issuer certificate)"
    )
    mismatch = ssl.SSLCertVerificationError(1, "x")
    mismatch.verify_message = "IP address mismatch, certificate is not valid for '127.0.0.2'."
    assert describe_failure(scram, mismatch).startswith("upstream.ssl.endpoint.identification.algorithm:")
    token = describe_failure(scram, OAuthTokenError("the token endpoint answered HTTP 401"))
    assert token.startswith("upstream.sasl.oauthbearer.token.endpoint.url: no token")
