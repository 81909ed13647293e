"""The matrix's verifiable consumer prints `shutdown_requested` when SIGTERM arrives, even while
its main thread waits inside a client library.

Client libraries wait in C (librdkafka's synchronous commit and close wait on a condition
variable); a `signal.signal` handler runs only once the main thread is back in Python, so the
event came out as late as the wait ended, and the cell's checks counted the closing member as
owning its partitions for that long. The sibling that runs the real libraries is the matrix smoke
grid (e2e/test_matrix_smoke.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # starts child processes

CLIENTS = Path(__file__).resolve().parent.parent / "harness" / "matrix" / "clients"

# The main thread waits 3 s on a condition variable, as librdkafka does: pthread_cond_timedwait
# does not return early for a signal, so only a thread that waits for SIGTERM can report it.
_BLOCKED_MAIN = f"""
import ctypes, json, sys, time
sys.path.insert(0, {str(CLIENTS)!r})
import verifiable_consumer as vc

vc.take_sigterm_in_a_thread()
libc = ctypes.CDLL(None, use_errno=True)
mutex, cond = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
libc.pthread_mutex_lock(mutex)
class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
deadline = Timespec(int(time.time()) + 4, 0)
print("ready", flush=True)
libc.pthread_cond_timedwait(cond, mutex, ctypes.byref(deadline))
print(json.dumps({{"name": "main_thread_back", "timestamp": int(time.time() * 1000)}}), flush=True)
"""


def test_shutdown_requested_is_printed_while_the_main_thread_waits_in_c() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _BLOCKED_MAIN], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        sent = time.time()
        os.kill(proc.pid, signal.SIGTERM)
        first = json.loads(proc.stdout.readline())
        second = json.loads(proc.stdout.readline())
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert first["name"] == "shutdown_requested", first
    assert second["name"] == "main_thread_back", second
    # printed when the signal came, not when the wait ended (about 3 s later)
    assert first["timestamp"] / 1000 - sent < 1.0
    assert second["timestamp"] - first["timestamp"] > 1500


def test_a_second_sigterm_prints_nothing_more() -> None:
    script = f"""
import sys, time
sys.path.insert(0, {str(CLIENTS)!r})
import verifiable_consumer as vc
vc.take_sigterm_in_a_thread()
print("ready", flush=True)
while not vc._stop.wait(0.05):
    pass
time.sleep(1.0)
print("done", flush=True)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGTERM)
        assert json.loads(proc.stdout.readline())["name"] == "shutdown_requested"
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.stdout.readline().strip() == "done"
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
