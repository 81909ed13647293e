"""The `gateway` identity's per-principal credential map (`upstream.identity.credentials.file`,
gateway.upstream.principal_credentials): the file's forms and refusals (naming the setting and
the principal, never a secret), and the proxy's link pool keyed by credential, so a link that
authenticated as one principal is never handed to another. The map against a real secured Kafka
is e2e/test_upstream_principal_credentials.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gateway.config import ConfigError, build_config
from gateway.registry import RequestContext
from gateway.server import GatewayServer
from gateway.upstream import install_upstream_mode
from gateway.upstream.cluster import Broker
from gateway.upstream.principal_credentials import CredentialsError, parse_credentials
from gateway.upstream.proxy import UpstreamProxy, _Unmapped
from gateway.upstream.security import relabel

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
BASE = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.jaas.config": f'{SCRAM} required username="gw" password="gw-secret";',
}


def test_entries_in_either_form_inherit_the_mechanism() -> None:
    text = json.dumps(
        {
            "User:alice": {"sasl.jaas.config": f'{SCRAM} required username="alice" password="a-secret";'},
            "User:bob": {"sasl.mechanism": "PLAIN", "username": "bob-up", "password": 'b"secret'},
        }
    )
    got = parse_credentials(text, BASE)
    alice, bob = got["User:alice"], got["User:bob"]
    assert (alice.sasl_mechanism, alice.username, alice.password) == ("SCRAM-SHA-512", "alice", "a-secret")
    assert (bob.sasl_mechanism, bob.username, bob.password) == ("PLAIN", "bob-up", 'b"secret')
    assert alice.protocol == bob.protocol == "SASL_PLAINTEXT"
    assert "a-secret" not in repr(alice)


@pytest.mark.parametrize(
    ("data", "base", "message"),
    [
        ({"User:alice": {"username": "a", "password": "p"}}, {"security.protocol": "SSL"},
         r"needs upstream\.security\.protocol SASL_PLAINTEXT or SASL_SSL"),
        ({"alice": {"username": "a", "password": "p"}}, BASE, r"'alice' is not a principal"),
        ({"User:alice": {"ssl.keystore.location": "/k", "username": "a", "password": "p"}}, BASE,
         r"'User:alice': ssl\.keystore\.location cannot be set per principal"),
        ({"User:alice": {"username": "a"}}, BASE, r"username and password go together"),
        ({"User:alice": {}}, BASE, r"needs sasl\.jaas\.config, or username and password"),
        ({"User:alice": {"sasl.mechanism": "GSSAPI", "username": "a", "password": "p"}}, BASE,
         r"need PLAIN or SCRAM, not GSSAPI"),
        ({"User:alice": {"sasl.jaas.config": "PlainLoginModule required password=\"p-secret\";"}}, BASE,
         r"'User:alice'"),
        ([1], BASE, r"expected an object"),
    ],
)  # fmt: skip
def test_unusable_entries_name_the_setting_and_principal_not_the_secret(
    data: Any, base: dict[str, str], message: str
) -> None:
    with pytest.raises(CredentialsError, match=message) as caught:
        parse_credentials(json.dumps(data), base)
    assert str(caught.value).startswith("upstream.identity.credentials.file")
    assert "p-secret" not in str(caught.value)


def test_settings_check_the_file_when_loaded(tmp_path: Path) -> None:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps({"User:alice": {"username": "alice"}}))
    settings = {
        "upstream.bootstrap.servers": "h:9092",
        "upstream.security.protocol": "SASL_PLAINTEXT",
        "upstream.sasl.mechanism": "PLAIN",
        "upstream.sasl.jaas.config": f'{PLAIN} required username="gw" password="x";',
        "upstream.identity.credentials.file": str(path),
    }
    with pytest.raises(ConfigError, match=r"username and password go together"):
        build_config(settings)
    with pytest.raises(ConfigError, match=r"cannot read"):
        build_config({**settings, "upstream.identity.credentials.file": str(tmp_path / "none.json")})
    with pytest.raises(
        ConfigError, match=r"credentials\.required=true needs upstream\.identity\.credentials\.file"
    ):
        build_config(
            {"upstream.bootstrap.servers": "h:9092", "upstream.identity.credentials.required": "true"}
        )
    assert relabel(
        "upstream.sasl.jaas.config: authentication failed for user 'alice'",
        "upstream.identity.credentials.file (User:alice)",
    ).startswith("upstream.identity.credentials.file (User:alice): authentication failed")


def _proxy(tmp_path: Path, required: bool) -> tuple[GatewayServer, UpstreamProxy]:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps({"User:alice": {"username": "alice", "password": "a-secret"}}))
    config = build_config(
        {
            "upstream.bootstrap.servers": "127.0.0.1:9092",
            "upstream.security.protocol": "SASL_PLAINTEXT",
            "upstream.sasl.mechanism": "SCRAM-SHA-256",
            "upstream.sasl.jaas.config": f'{SCRAM} required username="gw" password="gw-secret";',
            "upstream.identity.credentials.file": str(path),
            "upstream.identity.credentials.required": str(required).lower(),
            "log.dirs": str(tmp_path / "data"),
            "offsets.topic.num.partitions": "1",
        }
    )
    installed: list[UpstreamProxy] = []
    server = GatewayServer(config, extensions=[lambda s: installed.append(install_upstream_mode(s))])
    return server, installed[0]


def _conn(principal: str) -> Any:
    ctx = RequestContext(1, ("127.0.0.1", 5000), ("127.0.0.1", 9092), principal=principal)
    return SimpleNamespace(ctx=ctx)


@pytest.mark.parametrize("required", [False, True])
def test_links_are_pooled_per_credential_never_across_principals(tmp_path: Path, required: bool) -> None:
    server, proxy = _proxy(tmp_path, required)

    async def run() -> None:
        # A broker that accepts and stays silent: links stay open (mid-handshake) to be pooled.
        silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        proxy.cluster.brokers[1] = Broker(1, "127.0.0.1", port, None)
        try:
            a1 = proxy._lease(_conn("User:alice"), 1)
            assert a1._security is not None and a1._security.client.username == "alice"
            alice_conn = _conn("User:alice")
            assert proxy._lease(alice_conn, 1) is not a1  # a1 is the first connection's own
            first = _conn("User:alice")
            first.ctx.attributes["upstream.links"] = {(1, "User:alice"): a1}
            proxy._release(first)  # a1 goes to alice's pool
            if required:
                with pytest.raises(_Unmapped):
                    proxy._lease(_conn("User:bob"), 1)
            else:
                bob = proxy._lease(_conn("User:bob"), 1)
                assert bob is not a1 and bob._security is proxy.cluster.security  # groupshift's own
                assert bob._security.client.username == "gw"
            assert proxy._lease(_conn("User:alice"), 1) is a1  # the pool gives alice hers
            assert "a-secret" not in repr(a1) and "a-secret" not in repr(a1._security.client)
        finally:
            silent.close()
            proxy.close()

    try:
        asyncio.run(run())
    finally:
        for hook in server.on_stop:
            hook()
        asyncio.run(server.plane.close())


# -- passthrough (gateway.upstream.passthrough) ---------------------------------------------------

PASSTHROUGH = {
    "upstream.bootstrap.servers": "127.0.0.1:9092",
    "upstream.identity": "passthrough",
    "upstream.security.protocol": "SASL_PLAINTEXT",
    "upstream.sasl.mechanism": "PLAIN",
    "upstream.sasl.jaas.config": f'{PLAIN} required username="gw" password="x";',
}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"upstream.security.protocol": "SSL"}, r"passthrough relays each client's SASL login"),
        ({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
         r"authorizer\.class\.name cannot be set with upstream\.identity=passthrough"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN} required user_a="b";'},
         r"SASL listeners cannot serve upstream\.identity=passthrough"),
    ],
)  # fmt: skip
def test_passthrough_refuses_a_second_authenticator(extra: dict[str, str], message: str) -> None:
    assert build_config(PASSTHROUGH).upstream is not None
    with pytest.raises(ConfigError, match=message):
        build_config({**PASSTHROUGH, **extra})


def test_passthrough_relays_the_login_on_an_unpooled_link_of_its_own(tmp_path: Path) -> None:
    config = build_config(
        {**PASSTHROUGH, "log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": "1"}
    )
    installed: list[UpstreamProxy] = []
    server = GatewayServer(config, extensions=[lambda s: installed.append(install_upstream_mode(s))])
    proxy = installed[0]
    proxy.cluster.api_versions.update({17: (0, 1), 36: (0, 2), 38: (0, 3), 0: (3, 11), 1: (4, 17)})
    advertised = {k: (lo, hi) for k, lo, hi in proxy.advertised()}
    assert advertised[17] == (1, 1) and advertised[36] == (0, 2) and advertised[38] == (0, 3)

    async def run() -> None:
        silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        proxy.cluster.brokers[1] = Broker(1, "127.0.0.1", port, None)
        try:
            conn = _conn("User:ANONYMOUS")
            link = proxy._lease(conn, 1)
            assert link._security is not None and not link._security.uses_sasl  # no login of ours
            conn.ctx.attributes["upstream.links"] = {(1, "\x00relay"): link}
            proxy._release(conn)
            assert link.closed and not any(proxy._idle.values())  # never pooled
        finally:
            silent.close()
            proxy.close()

    try:
        asyncio.run(run())
    finally:
        for hook in server.on_stop:
            hook()
        asyncio.run(server.plane.close())


def test_passthrough_probe_answers_are_cached_bounded_and_expire() -> None:
    """The checks' authorizer reads the cluster's cached answers; an unknown or expired one is
    "no" and recorded as a miss (to be probed); the cache keeps at most CACHE_MAX answers."""
    from gateway.authorizer.model import AclOperation, ResourceType
    from gateway.upstream import passthrough as pt

    class Probes(pt.ClusterAclProbes):
        def __init__(self) -> None:
            self.ttl = 30.0
            self.asked: list[set[pt.Key]] = []

        async def _probe(self, link: Any, key: pt.Key) -> bool:
            return key[2].startswith("ok")

    probes = Probes()
    probes.link_of = lambda conn: None  # type: ignore[assignment,return-value]
    conn = _conn("User:ANONYMOUS")
    conn.closing = False
    ctx = conn.ctx
    auth = pt.ClusterAclAuthorizer()
    read, group = AclOperation.READ, ResourceType.GROUP
    assert not auth.authorize(ctx, read, group, "ok-1")
    assert ctx.attributes[pt.MISSES] == {(int(read), int(group), "ok-1")}
    keys = {(int(read), int(group), n) for n in ("ok-1", "no-1")}
    assert asyncio.run(probes.prove(conn, keys))
    assert auth.authorize(ctx, read, group, "ok-1") and not auth.authorize(ctx, read, group, "no-1")
    assert auth.authorized_operations(ctx, group, "ok-1") == 1 << int(read)
    cache = ctx.attributes[pt.CACHE]
    cache[(int(read), int(group), "ok-1")] = (True, 0.0)  # expired
    assert not auth.authorize(ctx, read, group, "ok-1")
    many = {(int(read), int(group), f"ok-{i}") for i in range(pt.CACHE_MAX + 10)}
    assert asyncio.run(probes.prove(conn, many))
    assert len(cache) == pt.CACHE_MAX
