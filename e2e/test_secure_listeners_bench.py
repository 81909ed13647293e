"""`bench.secure_listeners` against a real groupshift with an SSL listener (mutual TLS) and a
SASL_SSL one (PLAIN), with the benchmark's own settings and the certificates
`harness.kafka_dist.security` makes for Kafka: the new-connections loop and the heartbeat load
generator run over each for a moment and every answer is checked, so the benchmark cannot rot.
The long comparison with Kafka is opt-in: `python -m bench.secure_listeners` (docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench import heartbeats as hb
from bench.secure_listeners import MECHANISM, SecuredClient, connection_rate, groupshift_sets
from e2e.harness import GatewayProcess
from harness.kafka_dist.security import KafkaSecurity

pytestmark = pytest.mark.e2e


def _per_listener(name: str, sets: list[str]) -> list[str]:
    """`groupshift_sets` of one listener type as `listener.name.<name>.` settings, so that two
    listener types (one with client certificates required, one without) share a server."""
    return [
        f"listener.name.{name}.{s}" if not s.startswith(("listeners=", "listener.name.")) else s for s in sets
    ]


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GatewayProcess, dict[str, SecuredClient]]]:
    tmp = tmp_path_factory.mktemp("secbench")
    ssl_side = KafkaSecurity("ssl", tmp / "ssl")
    sasl_side = KafkaSecurity("sasl_ssl", tmp / "sasl", mechanism=MECHANISM)
    sets = [
        *hb.SETTINGS,
        *_per_listener("ssl", groupshift_sets("ssl", ssl_side)[1:]),
        *_per_listener("sasl_ssl", groupshift_sets("sasl_ssl", sasl_side)[1:]),
        "listeners=SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
    ]
    gw = GatewayProcess.start(tmp / "gs", sets=sets)
    try:
        yield (
            gw,
            {
                "SSL": SecuredClient(ssl_side.client_security("admin")),
                "SASL_SSL": SecuredClient(sasl_side.client_security("admin")),
            },
        )
    finally:
        gw.stop(timeout=30)


def _port(gw: GatewayProcess, name: str) -> int:
    return int(gw.events("gateway.listening")[-1]["ports"][name])


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_new_connections_are_counted_and_answered(
    gateway: tuple[GatewayProcess, dict[str, SecuredClient]], listener: str
) -> None:
    gw, clients = gateway
    port, client = _port(gw, listener), clients[listener]
    assert client.negotiated(port).startswith("TLSv1.")
    r = connection_rate(client, port, workers=2, seconds=1.0, server_pid=gw.proc.pid)
    assert r.connections_per_s > 0
    assert r.server_cpu_share is not None and r.server_cpu_share > 0
    assert r.load_cpu_share > 0


def test_heartbeat_load_runs_over_sasl_ssl(gateway: tuple[GatewayProcess, dict[str, SecuredClient]]) -> None:
    """TLS, the SASL login, then the connection handed to the load generator's protocol (the
    setup's groups and topic exist once per server: one listener type here)."""
    gw, clients = gateway
    port, client = _port(gw, "SASL_SSL"), clients["SASL_SSL"]
    steady = hb.setup(port, "ConsumerGroupHeartbeat", 2, 20, connect=client)
    assert len(steady) == 20
    r = hb.run_load(port, "CGH", steady, 2, 4, 2, 0.5, warmup=0.2, gateway_pid=gw.proc.pid, connect=client)
    assert r.requests_per_s > 0 and r.errors == 0


def test_a_plaintext_client_gets_no_answer_from_the_ssl_listener(
    gateway: tuple[GatewayProcess, dict[str, SecuredClient]],
) -> None:
    gw, _ = gateway
    with pytest.raises(EOFError):  # closed unanswered (asyncio.IncompleteReadError)
        connection_rate(SecuredClient(), _port(gw, "SSL"), workers=1, seconds=0.3)


def test_streams_heartbeat_load_runs(gateway: tuple[GatewayProcess, dict[str, SecuredClient]]) -> None:
    """bench.heartbeats' StreamsGroupHeartbeat kind (bench.versus_kafka's streams rows): the
    members join, get one task each once their source topic exists, and heartbeat steadily with
    every answer checked."""
    gw, clients = gateway
    port, client = _port(gw, "SASL_SSL"), clients["SASL_SSL"]
    steady = hb.setup(port, "StreamsGroupHeartbeat", 2, 20, connect=client)
    assert len(steady) == 20 and {r.group_id for r in steady} == set(hb.streams_group_ids(2))
    assert all(r.member_epoch > 0 and r.topology is None for r in steady)
    r = hb.run_load(port, "SGH", steady, 2, 4, 2, 0.5, warmup=0.2, gateway_pid=gw.proc.pid, connect=client)
    assert r.requests_per_s > 0 and r.errors == 0
