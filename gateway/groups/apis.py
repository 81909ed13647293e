"""What the group API handlers share: the service interface they use and small helpers.

The handlers depend on `GroupService`, the part of `gateway.groups.service` they call, so the
service module can import and register them without an import cycle (tests/test_import_graph.py).

A handler decodes nothing itself (the dispatcher hands it the kio request of the negotiated
version), turns the request into the engine's request, runs it on the owning shard's runtime and
builds the versioned kio response. A shard answers inline when nothing waits for durability (the
common heartbeat), else with a future; `then` maps either the same way.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from engine.binding import REFUSED_EVENT
from engine.config import CoordinatorConfig, GroupConfig
from engine.context import RequestContext as EngineContext
from engine.metadata import MetadataImage
from gateway.audit import AuditLog
from gateway.groups.runtime import ShardRuntime
from gateway.registry import RequestContext

T = TypeVar("T")
MS = datetime.timedelta(milliseconds=1)


class GroupService(Protocol):
    """The group coordinator service as the API handlers see it."""

    @property
    def config(self) -> CoordinatorConfig: ...

    @property
    def runtimes(self) -> Sequence[ShardRuntime]: ...

    @property
    def group_configs(self) -> dict[str, GroupConfig]: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def audit(self) -> AuditLog:
        """The server's audit sink (member-binding refusals are `acl.denied`)."""
        ...

    def runtime_for(self, group_id: str) -> ShardRuntime: ...

    def by_shard(self, group_ids: Iterable[str]) -> dict[int, list[str]]: ...

    def set_group_config(
        self, group_id: str, values: dict[str, int | str | None], *, apply: bool = True
    ) -> None: ...

    def effective_group_config(self, group_id: str) -> dict[str, int | str]: ...


def millis(value: Any) -> int:
    """kio's i32Timedelta fields as Kafka's int milliseconds (-1 stays -1)."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return value // MS
    return int(value)


def engine_ctx(ctx: RequestContext, version: int) -> EngineContext:
    """Kafka's client host is the peer address with a leading slash (`InetAddress.toString`)."""
    cache: dict[int, EngineContext] | None = ctx.attributes.get("groups.ctx")
    if cache is None:
        cache = ctx.attributes["groups.ctx"] = {}
    ec = cache.get(version)
    if ec is None or ec.client_id != ctx.client_id or ec.principal != ctx.principal:
        ec = cache[version] = EngineContext(
            ctx.client_id or "",
            "/" + ctx.client_host,
            version,
            ctx.principal,
            ctx.attributes.get("authorizer.topic_filter"),
        )
    return ec


ShardCall = Callable[[Any, int], Any]


def audited(service: GroupService, ctx: RequestContext, call: ShardCall) -> ShardCall:
    """`call` (a shard operation for `ShardRuntime.run`), with each member-binding refusal in its
    outcome reported to the server's audit log as `acl.denied` (`engine.binding`: the engine
    refuses, the gateway knows the connection). A steady request has no events: one check."""

    def run(shard: Any, now: int) -> Any:
        out = call(shard, now)
        if out.events:
            for name, fields in out.events:
                if name == REFUSED_EVENT:
                    service.audit.acl_denied(
                        ctx,
                        api=fields["api"],
                        resource_type="GROUP",
                        resource_name=fields["group"],
                        operation="READ",
                        reason=fields["reason"],
                    )
        return out

    return run


def then(result: Any, fn: Callable[[Any], T]) -> T | asyncio.Future[T]:
    """Apply `fn` to a shard's answer, now or when its future resolves."""
    if not isinstance(result, asyncio.Future):
        return fn(result)
    out: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def done(f: asyncio.Future[Any]) -> None:
        if out.done():
            return
        exc = f.exception()
        if exc is not None:
            out.set_exception(exc)
        else:
            try:
                out.set_result(fn(f.result()))
            except Exception as e:
                out.set_exception(e)

    result.add_done_callback(done)
    return out


def gather(results: Iterable[Any], fn: Callable[[list[Any]], T]) -> T | asyncio.Future[T]:
    """Combine the answers of several shards (some inline, some futures)."""
    items = list(results)
    if not any(isinstance(r, asyncio.Future) for r in items):
        return fn(items)

    async def wait() -> T:
        values = [await r if isinstance(r, asyncio.Future) else r for r in items]
        return fn(values)

    return asyncio.ensure_future(wait())
