"""A bug in a handler answers UNKNOWN_SERVER_ERROR; the connection and the group live on.

Kafka's `KafkaApis.handle` answers a request whose handler throws with the request's error
response; the client retries that one request on the same connection. The gateway runs here in
process (on its own thread and event loop) so that a fault can be injected into a handler with
monkeypatch, and real client libraries talk to it over TCP:

* kafka-python's admin client: a failed CreateTopics is reported to the caller as
  UNKNOWN_SERVER_ERROR, a failed DescribeGroups (a coordinator API) as COORDINATOR_NOT_AVAILABLE,
  and the next request succeeds on the very same connection;
* confluent-kafka (librdkafka) as a KIP-848 consumer: the assignor raising in the middle of a
  ConsumerGroupHeartbeat (the crash a wrong `group.consumer.assignors` name used to cause on
  every heartbeat) costs one retried heartbeat; the member then gets every partition.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import CoordinatorNotAvailableError, UnknownError

import engine.assignors
from e2e.groups import FAST_GROUP_SETTINGS, wait_until
from gateway.config import build_config
from gateway.groups.service import install_group_layer
from gateway.server import GatewayServer


class InProcessGateway:
    """`groupshift serve` on a thread of this process: same server, handlers patchable."""

    def __init__(self, data_dir: Path, settings: dict[str, str]) -> None:
        config = build_config({"listeners": "127.0.0.1:0", "log.dirs": str(data_dir), **settings})
        self.server = GatewayServer(config, extensions=[install_group_layer])
        self.loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        async def serve() -> None:
            await self.server.start()
            self._ready.set()
            await self._stop.wait()
            await self.server.stop(grace=2.0)

        self.loop.run_until_complete(serve())
        self.loop.close()

    def __enter__(self) -> InProcessGateway:
        self._thread.start()
        assert self._ready.wait(30), "in-process gateway did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def metric(self, text: str) -> float:
        """The value of the metric line that starts with `text` (0 when absent)."""
        for line in self.server.metrics.render().splitlines():
            if line.startswith(text):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[InProcessGateway]:
    settings = dict(s.split("=", 1) for s in FAST_GROUP_SETTINGS)
    with InProcessGateway(tmp_path / "data", {**settings, "offsets.topic.num.partitions": "4"}) as gw:
        yield gw


def fail_once(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Make `owner.name(...)` raise KeyError on its first call only; count the calls."""
    original = getattr(owner, name)
    calls: list[int] = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("injected fault")
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, flaky)
    return calls


def fail_next_request(gateway: InProcessGateway, api_key: int) -> dict[str, int]:
    """Replace the handler of `api_key` by one that raises on its first request only."""
    spec = gateway.server.registry[api_key]
    original = spec.fn
    state = {"calls": 0}

    def flaky_sync(ctx: Any, header: Any, request: Any) -> Any:
        state["calls"] += 1
        if state["calls"] == 1:
            raise KeyError("injected fault")
        return original(ctx, header, request)

    async def flaky_async(ctx: Any, header: Any, request: Any) -> Any:
        state["calls"] += 1
        if state["calls"] == 1:
            raise KeyError("injected fault")
        return await original(ctx, header, request)

    # The replacement is of the handler's own kind: the registry awaits a coroutine function's
    # result and sends a plain one's (CreateTopics became async when its file work left the loop).
    flaky = flaky_async if inspect.iscoroutinefunction(original) else flaky_sync

    def install() -> None:
        gateway.server.registry.register(api_key, spec.min_version, spec.max_version, flaky, replace=True)

    gateway.loop.call_soon_threadsafe(install)
    wait_until(lambda: gateway.server.registry[api_key].fn is flaky, 5, "the patched handler")
    return state


# What a described group that does not exist gives, by the DescribeGroups version kafka-python
# picks: an error-free Dead group (v0-v5) or GROUP_ID_NOT_FOUND (v6).
NOT_FOUND_OR_NONE = (None, "[Error 69] GroupIdNotFoundError: Group g not found.")


def test_a_failed_request_is_answered_and_the_next_one_uses_the_same_connection(
    gateway: InProcessGateway,
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap, request_timeout_ms=10000)
    try:
        # the connection is up (DescribeGroups v6 answers an unknown group GROUP_ID_NOT_FOUND)
        assert admin.describe_groups(["g"])["g"]["error"] in NOT_FOUND_OR_NONE
        accepted = gateway.metric("groupshift_connections_accepted_total")

        state = fail_next_request(gateway, 19)  # CreateTopics: UNKNOWN_SERVER_ERROR per topic
        with pytest.raises(UnknownError):
            admin.create_topics([NewTopic("t1", 1, 1)])
        admin.create_topics([NewTopic("t1", 1, 1)])
        assert "t1" in admin.list_topics() and state["calls"] == 2

        state = fail_next_request(gateway, 15)  # DescribeGroups: a coordinator API
        failed = admin.describe_groups(["g"])["g"]
        assert failed["error"].startswith(str(CoordinatorNotAvailableError("")))
        assert admin.describe_groups(["g"])["g"]["error"] in NOT_FOUND_OR_NONE and state["calls"] == 2

        assert gateway.metric("groupshift_connections_accepted_total") == accepted
        assert gateway.metric('groupshift_requests_failed_total{api="CreateTopics"}') == 1
        assert gateway.metric('groupshift_requests_failed_total{api="DescribeGroups"}') == 1
        assert gateway.metric('groupshift_requests_rejected_total{reason="handler.failed"}') == 0
    finally:
        admin.close()


def test_an_assignor_that_raises_mid_heartbeat_costs_one_retry(
    gateway: InProcessGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    admin.create_topics([NewTopic("faults", 3, 1)])["faults"].result(15)
    calls = fail_once(monkeypatch, engine.assignors, "get")
    consumer = Consumer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "group.id": "faulty",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["faults"])

        def assigned() -> bool:
            consumer.poll(0.1)
            return len(consumer.assignment()) == 3

        wait_until(assigned, 30, "the consumer to get its 3 partitions")
        assert len(calls) >= 2  # the fault fired, and the assignor ran again afterwards
        assert gateway.metric('groupshift_requests_failed_total{api="ConsumerGroupHeartbeat"}') == 1
        assert gateway.metric('groupshift_requests_rejected_total{reason="handler.failed"}') == 0
    finally:
        consumer.close()
