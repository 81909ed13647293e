"""One worker of `serve --workers N`: the extension that makes a gateway node `plan.index` of
the cluster (docs/workers.md): static shard ownership, the group layer on it, and on workers
other than 0 the data plane forwarded to worker 0 and its topics followed. A worker whose
supervisor is gone (SIGKILLed) stops itself, so no orphan keeps the data directory locked."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import TYPE_CHECKING

import structlog

from gateway.groups.service import install_group_layer
from gateway.workers.forwarding import TopicFollower, WorkerForwarder
from gateway.workers.ownership import StaticShardOwnership
from gateway.workers.plan import WorkerPlan
from gateway.workers.supervisor import READY_FD_ENV

if TYPE_CHECKING:
    from gateway.server import Extension, GatewayServer

log = structlog.get_logger("workers")

PARENT_CHECK_SECONDS = 1.0
_watchers: set[asyncio.Task[None]] = set()  # a task the loop only holds weakly


def worker_extension(plan: WorkerPlan) -> Extension:
    def install(server: GatewayServer) -> None:
        ready_fd = os.environ.get(READY_FD_ENV)
        if ready_fd is not None and ready_fd.isdigit():
            # Not passed on to processes this worker starts (the compaction worker): the
            # supervisor sees the pipe's end of file when this worker dies before it is ready.
            with contextlib.suppress(OSError):
                os.set_inheritable(int(ready_fd), False)
        ownership = StaticShardOwnership(server, plan)
        create_topics = None
        if plan.index > 0:
            follower = TopicFollower(server.plane, plan, server.scram)
            create_topics = follower.create_topics
            follower.sync()  # before the shards load: they load against this image
            server.on_start.append(follower.start)
            server.on_stop.append(follower.close)
            server.on_start.append(WorkerForwarder(server, plan).start)
        install_group_layer(server, ownership.open_shard, create_topics=create_topics)
        ownership.install(server.registry)
        parent = os.getppid()
        server.on_start.append(lambda loop: _watch_parent(loop, parent))
        server.on_start.append(lambda loop: _tell_supervisor_ready())
        log.info(
            "workers.worker_starting",
            worker=plan.index,
            workers=plan.count,
            node_id=plan.node_id,
            shards=[s for s in range(ownership.num_shards) if plan.owns(s)],
        )

    return install


def _tell_supervisor_ready() -> None:
    """Write the supervisor's readiness byte (gateway.workers.supervisor): the listener is
    bound by the time `on_start` hooks run."""
    fd = os.environ.pop(READY_FD_ENV, None)
    if fd is None:
        return
    try:
        os.write(int(fd), b"1")
        os.close(int(fd))
    except (OSError, ValueError) as e:  # a supervisor that stopped listening: nothing to tell
        log.warning("workers.ready_not_told", error=str(e))


def _watch_parent(loop: asyncio.AbstractEventLoop, parent: int) -> None:
    async def watch() -> None:
        while os.getppid() == parent:
            await asyncio.sleep(PARENT_CHECK_SECONDS)
        log.warning("workers.supervisor_gone", supervisor_pid=parent)
        os.kill(os.getpid(), signal.SIGTERM)

    task = loop.create_task(watch())
    _watchers.add(task)
    task.add_done_callback(_watchers.discard)
