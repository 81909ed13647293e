"""Prometheus text-format metrics, served over plain asyncio HTTP at `/metrics`, with the health
probes `/health/live` and `/health/ready` on the same endpoint (`metrics.listen`).

No client library: a counter, a gauge and a summary are a few lines each, and the hot path must
stay cheap (a request costs one dict-free `inc()` and one `observe()` on a pre-bound child).
Layers add their own series with `registry.counter/gauge/summary(...)`; the group layer will add
KIP-848's group metrics the same way. Summaries keep count and sum exactly and compute
quantiles over a bounded window of recent observations (a sliding reservoir), which is what an
operator reading p50/p99 latency needs.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import deque
from collections.abc import Callable, Iterable

Labels = tuple[str, ...]


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _label_text(names: Iterable[str], values: Iterable[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _num(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v)) if isinstance(v, float) and not v.is_integer() else str(int(v))


class CounterChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class GaugeChild:
    __slots__ = ("fn", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.fn: Callable[[], float] | None = None

    def set(self, value: float) -> None:
        self.value = value

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set_function(self, fn: Callable[[], float]) -> None:
        """Read the value at scrape time (e.g. the number of open connections)."""
        self.fn = fn

    def read(self) -> float:
        return self.fn() if self.fn is not None else self.value


class SummaryChild:
    __slots__ = ("count", "sum", "window")

    def __init__(self, window: int) -> None:
        self.count = 0
        self.sum = 0.0
        self.window: deque[float] = deque(maxlen=window)

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        self.window.append(value)

    def quantile(self, q: float) -> float:
        if not self.window:
            return math.nan
        ordered = sorted(self.window)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, labelnames: Labels) -> None:
        self.name = name
        self.help = help_text
        self.labelnames = labelnames
        self._children: dict[Labels, object] = {}

    def _new_child(self) -> object:  # pragma: no cover - overridden
        raise NotImplementedError

    def _child(self, values: Labels) -> object:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, got {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._new_child()
        return child

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]


class Counter(_Metric):
    kind = "counter"

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def labels(self, *values: str) -> CounterChild:
        child = self._child(values)
        assert isinstance(child, CounterChild)
        return child

    def inc(self, amount: float = 1.0) -> None:
        self.labels().inc(amount)

    def render(self) -> list[str]:
        lines = self.header()
        for values, child in sorted(self._children.items()):
            assert isinstance(child, CounterChild)
            lines.append(f"{self.name}{_label_text(self.labelnames, values)} {_num(child.value)}")
        return lines


class Gauge(_Metric):
    kind = "gauge"

    def _new_child(self) -> GaugeChild:
        return GaugeChild()

    def labels(self, *values: str) -> GaugeChild:
        child = self._child(values)
        assert isinstance(child, GaugeChild)
        return child

    def set(self, value: float) -> None:
        self.labels().set(value)

    def set_function(self, fn: Callable[[], float]) -> None:
        self.labels().set_function(fn)

    def collect_from(self, fn: Callable[[], dict[tuple[str, ...], float]]) -> None:
        """Label values and readings computed at scrape time (e.g. groups by type and state)."""
        self._collector = fn

    def render(self) -> list[str]:
        lines = self.header()
        for values, child in sorted(self._children.items()):
            assert isinstance(child, GaugeChild)
            lines.append(f"{self.name}{_label_text(self.labelnames, values)} {_num(child.read())}")
        collector = getattr(self, "_collector", None)
        if collector is not None:
            for values, reading in sorted(collector().items()):
                lines.append(f"{self.name}{_label_text(self.labelnames, values)} {_num(reading)}")
        return lines


class Summary(_Metric):
    kind = "summary"
    quantiles = (0.5, 0.9, 0.99)

    def __init__(self, name: str, help_text: str, labelnames: Labels, window: int) -> None:
        super().__init__(name, help_text, labelnames)
        self.window = window

    def _new_child(self) -> SummaryChild:
        return SummaryChild(self.window)

    def labels(self, *values: str) -> SummaryChild:
        child = self._child(values)
        assert isinstance(child, SummaryChild)
        return child

    def observe(self, value: float) -> None:
        self.labels().observe(value)

    def render(self) -> list[str]:
        lines = self.header()
        for values, child in sorted(self._children.items()):
            assert isinstance(child, SummaryChild)
            for q in self.quantiles:
                labels = _label_text(self.labelnames, values, f'quantile="{q}"')
                lines.append(f"{self.name}{labels} {_num(child.quantile(q))}")
            labels = _label_text(self.labelnames, values)
            lines.append(f"{self.name}_sum{labels} {_num(child.sum)}")
            lines.append(f"{self.name}_count{labels} {child.count}")
        return lines


class Collected(_Metric):
    """A family read entirely at scrape time (per-group series computed from the shards' state):
    nothing is kept between scrapes and nothing is done on the request path."""

    def __init__(
        self,
        name: str,
        help_text: str,
        labelnames: Labels,
        kind: str,
        fn: Callable[[], dict[Labels, float]],
    ) -> None:
        super().__init__(name, help_text, labelnames)
        self.kind = kind
        self.fn = fn

    def render(self) -> list[str]:
        lines = self.header()
        for values, reading in sorted(self.fn().items()):
            lines.append(f"{self.name}{_label_text(self.labelnames, values)} {_num(reading)}")
        return lines


class MetricsRegistry:
    """Named metrics of one process; `render()` is the Prometheus text exposition."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}
        # Called once at the start of every scrape, before any family renders (e.g. to compute
        # every per-group reading in one pass over the shards).
        self.before_render: list[Callable[[], None]] = []

    def _add(self, metric: _Metric) -> _Metric:
        existing = self._metrics.get(metric.name)
        if existing is not None:
            if type(existing) is not type(metric) or existing.labelnames != metric.labelnames:
                raise ValueError(f"metric {metric.name} already registered differently")
            return existing
        self._metrics[metric.name] = metric
        return metric

    def counter(self, name: str, help_text: str, labelnames: Iterable[str] = ()) -> Counter:
        m = self._add(Counter(name, help_text, tuple(labelnames)))
        assert isinstance(m, Counter)
        return m

    def gauge(self, name: str, help_text: str, labelnames: Iterable[str] = ()) -> Gauge:
        m = self._add(Gauge(name, help_text, tuple(labelnames)))
        assert isinstance(m, Gauge)
        return m

    def summary(
        self, name: str, help_text: str, labelnames: Iterable[str] = (), *, window: int = 2048
    ) -> Summary:
        m = self._add(Summary(name, help_text, tuple(labelnames), window))
        assert isinstance(m, Summary)
        return m

    def collected(
        self,
        name: str,
        help_text: str,
        labelnames: Iterable[str],
        fn: Callable[[], dict[Labels, float]],
        kind: str = "gauge",
    ) -> Collected:
        m = self._add(Collected(name, help_text, tuple(labelnames), kind, fn))
        assert isinstance(m, Collected)
        return m

    def render(self) -> str:
        for hook in self.before_render:
            hook()
        lines: list[str] = []
        for name in sorted(self._metrics):
            lines.extend(self._metrics[name].render())  # type: ignore[attr-defined]
        return "\n".join(lines) + "\n"


Readiness = Callable[[], dict[str, bool]]


async def serve_metrics(
    registry: MetricsRegistry, host: str, port: int, ready: Readiness | None = None
) -> asyncio.Server:
    """A minimal HTTP/1.0-style responder on the `metrics.listen` endpoint:

    * `GET /metrics`: the Prometheus text format;
    * `GET /health/live`: 200 as long as the event loop answers (a liveness probe);
    * `GET /health/ready`: 200 when every check of `ready()` holds (all coordinator shards
      loaded, the Kafka listener accepting), else 503; the body is the checks as JSON;
    * anything else 404."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else ""
            get = len(parts) >= 2 and parts[0] in ("GET", "HEAD")
            if get and path == "/metrics":
                body = registry.render().encode()
                status, ctype = "200 OK", "text/plain; version=0.0.4; charset=utf-8"
            elif get and path == "/health/live":
                body, status, ctype = b'{"live": true}\n', "200 OK", "application/json"
            elif get and path == "/health/ready":
                checks = ready() if ready is not None else {}
                ok = all(checks.values())
                body = (json.dumps({"ready": ok, **checks}, sort_keys=True) + "\n").encode()
                status = "200 OK" if ok else "503 Service Unavailable"
                ctype = "application/json"
            else:
                body, status, ctype = b"not found\n", "404 Not Found", "text/plain"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            if parts and parts[0] != "HEAD":
                writer.write(body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, host, port)
    return server
