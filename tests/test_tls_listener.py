"""An in-process SSL listener (gateway.server, gateway.tls): the principal a connection carries
(mapped from the client certificate by `ssl.principal.mapping.rules`, ANONYMOUS without one and
on PLAINTEXT), and the listener name Metadata answers by."""

from __future__ import annotations

import asyncio
import re
import ssl
import struct
from pathlib import Path

import pytest

from e2e.tls_certs import PASSWORD, Authority
from gateway.config import build_config
from gateway.server import GatewayServer
from gateway.tls import TlsConfigError

API_VERSIONS = struct.pack(">hhih", 18, 0, 7, -1)


async def exchange(port: int, ctx: ssl.SSLContext | None) -> int:
    """Send ApiVersions v0, read the answer: its correlation id."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ctx, server_hostname="localhost" if ctx else None
    )
    writer.write(struct.pack(">i", len(API_VERSIONS)) + API_VERSIONS)
    await writer.drain()
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    body = await reader.readexactly(size)
    writer.close()
    return int(struct.unpack(">i", body[:4])[0])


def test_the_principal_and_listener_of_each_connection(tmp_path: Path) -> None:
    ca = Authority(tmp_path / "certs", "t")
    server_cert = ca.issue("server", "localhost", server=True)
    alice = ca.issue("alice", "Alice", ou="Eng")
    bob = ca.issue("bob", "bob")  # no OU: the rule does not apply, DEFAULT keeps the name
    config = build_config(
        {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "MTLS://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map": "MTLS:SSL,PLAINTEXT:PLAINTEXT",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(server_cert.p12),
            "ssl.keystore.password": PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.pem),
            "ssl.client.auth": "requested",
            "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L,DEFAULT",
        }
    )

    async def run() -> dict[str, list[tuple[str, str]]]:
        server = GatewayServer(config)
        await server.start()
        seen: dict[str, list[tuple[str, str]]] = {}
        try:
            tls_port, plain_port = server._bound_ports
            for who, cert in (("alice", alice), ("bob", bob), ("nobody", None)):
                ctx = ssl.create_default_context(cafile=str(ca.pem))
                if cert is not None:
                    ctx.load_cert_chain(str(cert.cert), str(cert.key))
                assert await exchange(tls_port, ctx) == 7
                seen[who] = [(c.ctx.listener_name, c.ctx.principal) for c in server._connections]
                for _ in range(200):  # the closed connection leaves the set
                    if not server._connections:
                        break
                    await asyncio.sleep(0.01)
            assert await exchange(plain_port, None) == 7
            seen["plain"] = [(c.ctx.listener_name, c.ctx.principal) for c in server._connections]
        finally:
            await server.stop(grace=1)
        return seen

    seen = asyncio.run(run())
    assert seen["alice"] == [("MTLS", "User:alice@eng")]
    assert seen["bob"] == [("MTLS", "User:CN=bob,O=Example")]
    assert seen["nobody"] == [("MTLS", "User:ANONYMOUS")]  # requested, not required
    assert seen["plain"] == [("PLAINTEXT", "User:ANONYMOUS")]


def test_enabled_protocols_and_cipher_suites_bound_the_handshake(tmp_path: Path) -> None:
    """`ssl.enabled.protocols` and `ssl.cipher.suites` (IANA names, as Kafka takes them)."""
    ca = Authority(tmp_path / "certs", "t")
    server_cert = ca.issue("server", "localhost", server=True)  # an EC key: ECDSA suites

    def serve_with(**settings: str) -> GatewayServer:
        return GatewayServer(
            build_config(
                {
                    "log.dirs": str(tmp_path / f"data-{len(settings)}-{sorted(settings)[0]}"),
                    "listeners": "SSL://127.0.0.1:0",
                    "ssl.keystore.type": "PEM",
                    "ssl.keystore.location": str(server_cert.pem),
                    **settings,
                }
            )
        )

    def client(version: ssl.TLSVersion, ciphers: str | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(ca.pem))
        ctx.minimum_version = ctx.maximum_version = version
        if ciphers:
            ctx.set_ciphers(ciphers)
        return ctx

    async def handshakes(server: GatewayServer, clients: list[ssl.SSLContext]) -> list[bool]:
        await server.start()
        out = []
        try:
            for ctx in clients:
                try:
                    out.append(await exchange(server.port, ctx) == 7)
                except (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError):
                    out.append(False)
        finally:
            await server.stop(grace=1)
        return out

    tls13_only = serve_with(**{"ssl.enabled.protocols": "TLSv1.3"})
    assert asyncio.run(
        handshakes(tls13_only, [client(ssl.TLSVersion.TLSv1_3), client(ssl.TLSVersion.TLSv1_2)])
    ) == [True, False]
    one_suite = serve_with(
        **{
            "ssl.enabled.protocols": "TLSv1.2",
            "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        }
    )
    assert asyncio.run(
        handshakes(
            one_suite,
            [
                client(ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-GCM-SHA256"),
                client(ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES256-GCM-SHA384"),
            ],
        )
    ) == [True, False]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ssl.keystore.location": "/k.jks"}, "ssl.keystore.type=JKS is not supported"),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"},
            "cannot read /nonexistent.pem",
        ),
        ({"ssl.keystore.type": "PEM", "ssl.client.auth": "sometimes"}, "ssl.client.auth: expected none"),
        ({"ssl.keystore.type": "PEM", "ssl.enabled.protocols": "TLSv1"}, "supported are TLSv1.2 and TLSv1.3"),
        ({"ssl.keystore.type": "PEM", "ssl.principal.mapping.rules": "RULE:^(.*$/$1/"}, "invalid pattern"),
    ],
)
def test_bad_tls_settings_stop_the_start(tmp_path: Path, settings: dict[str, str], message: str) -> None:
    ca = Authority(tmp_path / "certs", "t")
    pem = str(ca.issue("server", "localhost", server=True).pem)
    config = build_config(
        {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "SSL://127.0.0.1:0",
            "ssl.keystore.location": pem,
            **settings,
        }
    )
    with pytest.raises(TlsConfigError, match=re.escape(message)):
        GatewayServer(config)
