"""A worker process for compaction's two passes (Kafka runs its log cleaner on threads of its
own; a Python server needs a heap of its own as well).

Passes 1 and 2 of a compaction (`records.compaction.clean_to_file`) allocate a key and an
offset for every distinct key of the log and a tuple for every record read, for as long as
the compaction lasts. In a thread of the server those small objects land in the same
interpreter pools as the state the event loop allocates meanwhile; when the compaction ends
they are freed, but the pools stay pinned by their long-lived neighbours, so compactions leave
holes and the server's RSS climbs until the holes fit the next one (docs/robustness.md,
"Compaction in a worker process"). In a process of its own the cleaner allocates and frees
in a heap that holds nothing else.

The worker is `python -m records.compaction_worker PARENT_PID`, started with the server and kept:
a plain child process, not `multiprocessing` (which re-runs the parent's main script in the
child and adds a resource-tracker process). Tasks and answers are pickles with a 4-byte length
on its stdin and stdout, one task at a time. It exits when its stdin closes, and a watchdog
thread ends it when its parent is gone (a server killed with SIGKILL must not leave a cleaner
writing a `.cleaned` file that its restarted self is about to write again). A worker that dies
raises `WorkerDied` for the task it had, and the next task starts a new one.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
from typing import IO, Any

from records.compaction import CompactionTask, clean_to_file
from records.errors import CompactionError

__all__ = ["WorkerDied", "clean_in_worker", "shutdown_worker", "start_worker", "worker_pid"]

_LEN = struct.Struct(">I")


class WorkerDied(CompactionError):
    """The worker process ended before answering; the compaction is abandoned."""


class _Worker:
    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "records.compaction_worker", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
        )

    def run(self, task: CompactionTask) -> tuple[int, int, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            _send(self.proc.stdin, task)
            ok, value = _receive(self.proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as e:
            self.stop()
            code = self.proc.returncode
            raise WorkerDied(f"compaction worker {self.proc.pid} died: exit code {code}") from e
        if not ok:
            raise value if isinstance(value, BaseException) else CompactionError(str(value))
        before, kept, dropped = value
        return int(before), int(kept), int(dropped)

    def stop(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_lock = threading.Lock()
_worker: _Worker | None = None


def clean_in_worker(task: CompactionTask) -> tuple[int, int, int]:
    """Run `clean_to_file(task)` in the worker and wait for its answer (a
    `records.compaction.Cleaner`). Its OSError or CompactionError is raised here."""
    global _worker
    with _lock:
        worker = _running()
        try:
            return worker.run(task)
        except WorkerDied:
            _worker = None
            raise


def _running() -> _Worker:
    global _worker
    if _worker is None or _worker.proc.poll() is not None:
        _worker = _Worker()
    return _worker


def start_worker() -> None:
    """Start the worker ahead of the first task (server start-up), so that the first
    compaction does not wait for an interpreter to start."""
    with _lock:
        _running()


def worker_pid() -> int | None:
    """The worker's PID while one runs (memory reports, tests)."""
    w = _worker
    return w.proc.pid if w is not None and w.proc.poll() is None else None


def shutdown_worker() -> None:
    """Stop the worker (it exits when its stdin closes); the next task starts a new one."""
    global _worker
    with _lock:
        w, _worker = _worker, None
    if w is not None:
        w.stop()


def _send(pipe: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(_LEN.pack(len(data)) + data)
    pipe.flush()


def _read_exactly(pipe: IO[bytes], n: int) -> bytes:
    data = pipe.read(n)
    if data is None or len(data) != n:
        raise EOFError("pipe closed")
    return data


def _receive(pipe: IO[bytes]) -> Any:
    (n,) = _LEN.unpack(_read_exactly(pipe, _LEN.size))
    return pickle.loads(_read_exactly(pipe, n))


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(1)


def _serve(parent: int) -> None:
    """The worker's loop: one task in, one answer out, until stdin closes.

    SIGINT is ignored: Ctrl-C in a terminal reaches the whole foreground process group, and
    the worker's life is its parent's to end (stdin closed at shutdown, or the watchdog)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but answers on the pipe
    while True:
        try:
            task = _receive(stdin)
        except EOFError:
            return
        try:
            answer: tuple[bool, Any] = (True, clean_to_file(task))
        except (OSError, CompactionError) as e:
            answer = (False, e)
        except Exception as e:  # pragma: no cover - a bug: report it, keep serving
            answer = (False, f"{type(e).__name__}: {e}")
        _send(stdout, answer)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
