"""Prometheus text exposition of the gateway's metrics."""

from __future__ import annotations

import asyncio
import math

from gateway.metrics import MetricsRegistry, serve_metrics


def test_counters_gauges_and_summaries_render_in_text_format() -> None:
    m = MetricsRegistry()
    requests = m.counter("groupshift_requests_total", "Requests", ("api", "version"))
    requests.labels("Fetch", "12").inc()
    requests.labels("Fetch", "12").inc(2)
    m.gauge("groupshift_connections", "Open").set_function(lambda: 3)
    latency = m.summary("groupshift_request_latency_seconds", "Latency", ("api",), window=100)
    for i in range(1, 101):
        latency.labels("Fetch").observe(i / 1000)
    text = m.render()
    assert "# TYPE groupshift_requests_total counter" in text
    assert 'groupshift_requests_total{api="Fetch",version="12"} 3' in text
    assert "groupshift_connections 3" in text
    assert 'groupshift_request_latency_seconds{api="Fetch",quantile="0.99"} 0.1' in text
    assert 'groupshift_request_latency_seconds_count{api="Fetch"} 100' in text
    assert m.counter("groupshift_requests_total", "Requests", ("api", "version")) is requests
    assert math.isnan(m.summary("empty", "x").labels().quantile(0.5))


def test_metrics_are_served_over_http() -> None:
    async def scenario() -> tuple[bytes, bytes]:
        m = MetricsRegistry()
        m.counter("hits_total", "Hits").inc()
        server = await serve_metrics(m, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        answers = []
        for path in ("/metrics", "/other"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            answers.append(await reader.read())
            writer.close()
        server.close()
        return answers[0], answers[1]

    ok, missing = asyncio.run(scenario())
    assert ok.startswith(b"HTTP/1.1 200 OK") and b"hits_total 1" in ok
    assert missing.startswith(b"HTTP/1.1 404")


def test_health_probes_answer_live_and_ready_from_the_checks() -> None:
    """`/health/ready` is 503 while any readiness check fails (a shard reloading, the listener
    not yet accepting) and names the checks; `/health/live` needs nothing but the loop."""
    checks = {"listener_accepting": True, "coordinator_shards_loaded": False}

    async def scenario() -> list[bytes]:
        server = await serve_metrics(MetricsRegistry(), "127.0.0.1", 0, ready=lambda: dict(checks))
        port = server.sockets[0].getsockname()[1]
        answers = []
        for path in ("/health/live", "/health/ready", "/health/ready"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            answers.append(await reader.read())
            writer.close()
            checks["coordinator_shards_loaded"] = len(answers) == 2  # loaded after the 1st ready
        server.close()
        return answers

    live, not_ready, ready = asyncio.run(scenario())
    assert live.startswith(b"HTTP/1.1 200 OK") and live.endswith(b'{"live": true}\n')
    assert not_ready.startswith(b"HTTP/1.1 503")
    assert b'"coordinator_shards_loaded": false' in not_ready and b'"ready": false' in not_ready
    assert ready.startswith(b"HTTP/1.1 200 OK") and b'"ready": true' in ready


def test_collected_families_are_computed_once_per_scrape() -> None:
    m = MetricsRegistry()
    scrapes: list[int] = []
    readings: dict[tuple[str, ...], float] = {}

    def refresh() -> None:
        scrapes.append(1)
        readings.clear()
        readings[("g1", "classic")] = len(scrapes)

    m.before_render.append(refresh)
    m.collected("groupshift_group_members", "Members", ("group", "protocol"), lambda: readings)
    m.collected("groupshift_x_total", "X", ("group",), lambda: {("g1",): 2.0}, kind="counter")
    text = m.render()
    assert 'groupshift_group_members{group="g1",protocol="classic"} 1' in text
    assert "# TYPE groupshift_x_total counter" in text and 'groupshift_x_total{group="g1"} 2' in text
    assert 'groupshift_group_members{group="g1",protocol="classic"} 2' in m.render()
    assert len(scrapes) == 2
