"""`bench.secure_listeners` against a real groupshift with an SSL listener (mutual TLS, the
certificates `harness.kafka_dist.security` makes for Kafka): the new-connections loop and the
heartbeat load generator over TLS run for a moment and every answer is checked, so the
benchmark cannot rot. The long comparison with Kafka is opt-in:
`python -m bench.secure_listeners` (docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench import heartbeats as hb
from bench.secure_listeners import SecuredClient, connection_rate, groupshift_sets
from e2e.harness import GatewayProcess
from harness.kafka_dist.security import KafkaSecurity

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def ssl_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, SecuredClient]]:
    tmp = tmp_path_factory.mktemp("secbench")
    security = KafkaSecurity("ssl", tmp / "certs")
    gw = GatewayProcess.start(tmp / "gs", sets=[*hb.SETTINGS, *groupshift_sets("ssl", security)])
    try:
        yield gw, SecuredClient(security.client_security("admin"))
    finally:
        gw.stop(timeout=30)


def _port(gw: GatewayProcess, name: str) -> int:
    return int(gw.events("gateway.listening")[-1]["ports"][name])


def test_new_connections_over_mutual_tls_are_counted_and_answered(
    ssl_gateway: tuple[GatewayProcess, SecuredClient],
) -> None:
    gw, client = ssl_gateway
    port = _port(gw, "SSL")
    assert client.negotiated(port).startswith("TLSv1.")
    r = connection_rate(client, port, workers=2, seconds=1.0, server_pid=gw.proc.pid)
    assert r.connections_per_s > 0
    assert r.server_cpu_share is not None and r.server_cpu_share > 0
    assert r.load_cpu_share > 0


def test_heartbeat_load_runs_over_tls(ssl_gateway: tuple[GatewayProcess, SecuredClient]) -> None:
    gw, client = ssl_gateway
    port = _port(gw, "SSL")
    steady = hb.setup(port, "ConsumerGroupHeartbeat", 2, 20, connect=client)
    assert len(steady) == 20
    r = hb.run_load(port, "CGH", steady, 2, 4, 2, 0.5, warmup=0.2, gateway_pid=gw.proc.pid, connect=client)
    assert r.requests_per_s > 0 and r.errors == 0


def test_a_plaintext_client_gets_no_answer_from_the_ssl_listener(
    ssl_gateway: tuple[GatewayProcess, SecuredClient],
) -> None:
    gw, _ = ssl_gateway
    with pytest.raises(EOFError):  # closed unanswered (asyncio.IncompleteReadError)
        connection_rate(SecuredClient(), _port(gw, "SSL"), workers=1, seconds=0.3)
