"""A zygote for the SIGKILL tests (tests/test_coordinator_crash.py, tests/test_log_crash.py):
one process imports a crash child's module once and forks a child per run.

Why: each test kills 50 children at random moments, and a child started with `python -m` spent
most of its life importing (the coordinator child imports the engine and the storage layer:
about a second of CPU on a CI machine, 50 times over); the part under test, the writes and the
kill, took a fraction of that. A forked child is a real process all the same: its own memory,
its own file descriptors, killed with SIGKILL by the test and reaped by the zygote.

Usage: python -m tests.crash_zygote MODULE FD

FD is the zygote's end of a UNIX SOCK_SEQPACKET socket pair (the test keeps the other, `Zygote`
below). On it: `start ARG...` with two file descriptors attached (the child's stdout and
stderr): the zygote forks, the child makes them its fd 1 and 2 and runs `MODULE.main()` with
`sys.argv` = [MODULE, ARG...]; the answer is `pid N`. `wait N` waits for that child and answers
`exit CODE` (as `subprocess` reports it: -9 for a SIGKILL). End of file on the socket ends the
zygote.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import subprocess
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import IO


def _run_child(module: ModuleType, sock: socket.socket, args: list[str], fds: list[int]) -> None:
    """In the forked child: never returns (os._exit, so the zygote's own state is not unwound)."""
    code = 1
    try:
        sock.close()
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        sys.argv = [module.__name__, *args]
        module.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def serve(module_name: str, fd: int) -> None:
    module = importlib.import_module(module_name)
    sock = socket.socket(fileno=fd)
    while True:
        msg, fds, _flags, _addr = socket.recv_fds(sock, 65536, 2)
        if not msg:
            return
        word, _, rest = msg.decode().partition(" ")
        if word == "start":
            pid = os.fork()
            if pid == 0:
                _run_child(module, sock, rest.split("\0"), fds)
            for f in fds:
                os.close(f)
            sock.sendall(f"pid {pid}".encode())
        elif word == "wait":
            _, status = os.waitpid(int(rest), 0)
            sock.sendall(f"exit {os.waitstatus_to_exitcode(status)}".encode())
        else:
            raise ValueError(f"unknown request {msg!r}")


class Zygote:
    """The test's side: starts the zygote and asks it for children."""

    def __init__(self, module: str, cwd: Path) -> None:
        # SOCK_SEQPACKET: every request and answer is one message, never split or merged
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.crash_zygote", module, str(theirs.fileno())],
            cwd=cwd,
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        self.sock = ours

    def _ask(self, msg: str, fds: list[int], timeout: float) -> str:
        self.sock.settimeout(timeout)
        socket.send_fds(self.sock, [msg.encode()], fds)
        reply = self.sock.recv(4096).decode()
        if not reply:
            raise RuntimeError(f"the zygote exited ({self.proc.wait(10)})")
        return reply

    def start(self, args: list[str], stderr: IO[str], timeout: float = 60.0) -> tuple[int, IO[str]]:
        """A child running MODULE.main() with `args`: its pid and its stdout (text, by lines)."""
        r, w = os.pipe()
        try:
            reply = self._ask("start " + "\0".join(args), [w, stderr.fileno()], timeout)
        finally:
            os.close(w)
        word, _, pid = reply.partition(" ")
        assert word == "pid", reply
        return int(pid), os.fdopen(r, "r")

    def wait(self, pid: int, timeout: float = 30.0) -> int:
        """The child's exit code, as subprocess reports it (-9: killed by SIGKILL)."""
        word, _, code = self._ask(f"wait {pid}", [], timeout).partition(" ")
        assert word == "exit", (word, code)
        return int(code)

    def close(self) -> None:
        self.sock.close()
        self.proc.wait(30)

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
