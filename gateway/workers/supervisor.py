"""The supervisor of `serve --workers N` (docs/workers.md): N `groupshift serve` processes.

It starts the workers one at a time, worker 0 first, each once the previous one said it serves
(a byte on a pipe, `READY_FD_ENV`): worker 0 creates the data directory's `meta.properties` and
takes its `.lock`, and a fresh directory holding anything else first would be refused as
foreign. A worker that fails before it ever
listened stops the whole start-up (exit 1: the same mistake would fail every restart, as a
second server on a locked data directory does). After that a worker that exits is started again
with exponential backoff (`RESTART_BACKOFF_MIN_SECONDS` doubling up to
`RESTART_BACKOFF_MAX_SECONDS`, back to the minimum once a worker stayed up
`RESTART_BACKOFF_RESET_SECONDS`), while the others keep serving; the restarted worker reloads its
shards from their logs. SIGTERM or SIGINT is passed to every worker, which stops gracefully;
one still running after `STOP_GRACE_SECONDS` is killed.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

import structlog

log = structlog.get_logger("workers")

START_TIMEOUT_SECONDS = 120.0
RESTART_BACKOFF_MIN_SECONDS = 0.5
RESTART_BACKOFF_MAX_SECONDS = 10.0
RESTART_BACKOFF_RESET_SECONDS = 30.0
STOP_GRACE_SECONDS = 30.0
POLL_SECONDS = 0.05


@dataclass
class _Worker:
    index: int
    port: int
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    backoff: float = RESTART_BACKOFF_MIN_SECONDS
    restart_at: float | None = None
    restarts: int = 0
    exits: list[int] = field(default_factory=list)
    ready_pipe: int | None = None


# A worker is told, in this environment variable, a pipe to write one byte to once its
# listener is bound and its shards are starting (`gateway.workers.worker`): a port that accepts
# connections might be someone else's, the byte can only come from the worker.
READY_FD_ENV = "GROUPSHIFT_WORKER_READY_FD"


class Supervisor:
    def __init__(self, command_of: Callable[[int], Sequence[str]], host: str, ports: Sequence[int]) -> None:
        self.command_of = command_of
        self.host = host
        self.workers = [_Worker(i, p) for i, p in enumerate(ports)]
        self.stopping = False

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def _spawn(self, w: _Worker) -> None:
        read_end, write_end = os.pipe()
        try:
            w.process = subprocess.Popen(
                list(self.command_of(w.index)),
                pass_fds=(write_end,),
                env={**os.environ, READY_FD_ENV: str(write_end)},
            )
        finally:
            os.close(write_end)
        if w.ready_pipe is not None:
            os.close(w.ready_pipe)
        w.ready_pipe = read_end
        w.started_at = time.monotonic()
        w.restart_at = None
        log.info(
            "workers.worker_started", worker=w.index, pid=w.process.pid, port=w.port, restarts=w.restarts
        )

    def _wait_ready(self, w: _Worker) -> bool:
        """Whether the worker said it serves (False: it exited first, or took too long)."""
        assert w.ready_pipe is not None
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self.stopping and time.monotonic() < deadline:
            readable, _, _ = select.select([w.ready_pipe], [], [], 0.1)
            if readable:
                # One byte: ready; end of file: the worker exited without saying so.
                return os.read(w.ready_pipe, 1) == b"1"
        return False

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        failed: int | None = None
        for w in self.workers:  # worker 0 first, alone: it makes a new data directory
            self._spawn(w)
            if not self._wait_ready(w):
                failed = w.index
                break
        if failed is not None:
            if not self.stopping:
                log.error(
                    "workers.start_failed",
                    worker=failed,
                    reason="the worker exited, or did not serve within the start timeout",
                )
            self._stop_all()
            return 0 if self.stopping else 1
        log.info("workers.serving", workers=len(self.workers), ports=[w.port for w in self.workers])
        while not self.stopping:
            now = time.monotonic()
            for w in self.workers:
                self._check(w, now)
            time.sleep(POLL_SECONDS)
        self._stop_all()
        return 0

    def _check(self, w: _Worker, now: float) -> None:
        if w.restart_at is not None:
            if now >= w.restart_at:
                w.restarts += 1
                self._spawn(w)
            return
        assert w.process is not None
        code = w.process.poll()
        if code is None:
            return
        if now - w.started_at >= RESTART_BACKOFF_RESET_SECONDS:
            w.backoff = RESTART_BACKOFF_MIN_SECONDS
        w.exits.append(code)
        w.restart_at = now + w.backoff
        log.warning(
            "workers.worker_exited",
            worker=w.index,
            pid=w.process.pid,
            exit_code=code,
            restart_in_seconds=w.backoff,
        )
        w.backoff = min(w.backoff * 2, RESTART_BACKOFF_MAX_SECONDS)

    def _stop_all(self) -> None:
        running = [w.process for w in self.workers if w.process is not None and w.process.poll() is None]
        for p in running:
            p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for p in running:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("workers.worker_killed", pid=p.pid, reason="still running after the grace period")
                p.kill()
                p.wait()
        for w in self.workers:
            if w.ready_pipe is not None:
                os.close(w.ready_pipe)
                w.ready_pipe = None
        log.info("workers.stopped")
