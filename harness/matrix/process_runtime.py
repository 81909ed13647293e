"""The `process` runtime: each client is a local child process.

Python libraries run `harness/matrix/clients/verifiable_consumer.py` with the interpreter of the
library version's own virtualenv, created once from PyPI under
`~/.cache/groupshift/matrix/venvs/<library>-<version>` (an exclusive file lock makes concurrent
runners build it once; a `.ready` marker is written only after pip succeeded). The version
`installed` means the runner's own interpreter and whatever it has installed (no network: what
CI's smoke grid uses). Java clients run Kafka's own `VerifiableConsumer` of that release
(`harness.kafka_dist.java_clients`, jars cached from Maven Central). Kafka Streams clients run
`harness/matrix/clients/VerifiableStreams.java`, compiled once against that release's
kafka-streams jars (harness/matrix/streams_clients.py). Kafka Connect clients are that release's
worker jars (`connect-runtime`, `connect-file`), which the Connect cell starts itself
(harness/matrix/connect_scenario.py).

`spawn(client, argv, env)`: for Python clients `argv[0]` is a script path relative to the
repository root; for Java clients `argv[0]` is a tool name ("VerifiableConsumer") and the rest
its arguments. The runtime supplies the interpreter or the `java -cp ... MainClass` prefix.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from harness.matrix.clients import CONNECT_LIBRARY, STREAMS_LIBRARY
from harness.matrix.go_clients import GO_LIBRARIES, PINNED, go_client_binary, go_command
from harness.matrix.runtime import ClientNotInstalled, ClientSpec
from harness.matrix.streams_clients import StreamsProgram, streams_program

REPO = Path(__file__).resolve().parent.parent.parent
PYTHON_LIBRARIES = ("kafka-python", "aiokafka", "confluent-kafka")
#: The module each Python library is imported as.
PYTHON_MODULES = {"kafka-python": "kafka", "aiokafka": "aiokafka", "confluent-kafka": "confluent_kafka"}


def cache_dir() -> Path:
    base = os.environ.get("GROUPSHIFT_MATRIX_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "groupshift" / "matrix"


def pip_requirement(client: ClientSpec) -> str:
    """`2.0.2` pins exactly, `2.2` or `2.2.x` takes the newest 2.2 release, `newest` the newest."""
    v = client.version
    if v == "newest":
        return client.library
    if v.endswith(".x"):
        v = v[:-2]
    if v.count(".") >= 2:
        return f"{client.library}=={v}"
    return f"{client.library}=={v}.*"


class ProcessHandle:
    """A client child process; stdout is read line by line, stderr goes to a file."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str], stderr_path: Path) -> None:
        stderr_path.parent.mkdir(parents=True, exist_ok=True)
        self._stderr: IO[bytes] = open(stderr_path, "wb")  # noqa: SIM115 - closed in wait()
        self.stderr_path = stderr_path
        self.proc = subprocess.Popen(
            list(command),
            cwd=REPO,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def lines(self) -> Iterator[str]:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            yield raw.decode("utf-8", "replace").rstrip("\n")

    def _signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"pid {self.proc.pid} still running after {timeout:.0f}s") from None
        self._stderr.close()
        return int(code)


class ProcessRuntime:
    """Clients as local processes (see the module docstring)."""

    name = "process"

    def __init__(self, workdir: Path | None = None) -> None:
        self.workdir = workdir or cache_dir() / "work"
        self._lock = threading.Lock()
        self._pythons: dict[str, str] = {}
        self._java: dict[str, Any] = {}
        self._streams: dict[str, StreamsProgram] = {}
        self._connect: dict[str, Any] = {}
        self._handles: list[ProcessHandle] = []
        self._n = 0

    # -- preparing clients -------------------------------------------------------------------

    def prepare(self, client: ClientSpec) -> None:
        if client.library == "java":
            self._java_clients(client)
        elif client.library == STREAMS_LIBRARY:
            self._streams_program(client)
        elif client.library == CONNECT_LIBRARY:
            self._connect_dist(client)
        elif client.library in PYTHON_LIBRARIES:
            self._python(client)
        elif client.library in GO_LIBRARIES:
            go_client_binary(client)
        else:
            raise ValueError(f"the process runtime runs no {client.library!r} clients")

    def _python(self, client: ClientSpec) -> str:
        with self._lock:
            if client.key in self._pythons:
                return self._pythons[client.key]
        if client.version == "installed":
            require_installed(client)
            python = sys.executable
        else:
            python = str(ensure_venv(client))
        with self._lock:
            self._pythons[client.key] = python
        return python

    def _java_clients(self, client: ClientSpec) -> Any:
        from harness.kafka_dist.java_clients import java_clients

        with self._lock:
            found = self._java.get(client.version)
        if found is None:
            found = java_clients(client.version, self.workdir / f"java-{client.version}")
            with self._lock:
                self._java[client.version] = found
        return found

    def _streams_program(self, client: ClientSpec) -> StreamsProgram:
        with self._lock:
            found = self._streams.get(client.version)
        if found is None:
            found = streams_program(client.version, self.workdir)
            with self._lock:
                self._streams[client.version] = found
        return found

    def _connect_dist(self, client: ClientSpec) -> Any:
        """Kafka Connect's worker jars of the release (harness/kafka_dist/connect.py); the
        workers are started by the cell itself (harness/matrix/connect_scenario.py), not spawned."""
        from harness.kafka_dist.connect import connect_dist

        with self._lock:
            found = self._connect.get(client.version)
        if found is None:
            found = connect_dist(client.version)
            with self._lock:
                self._connect[client.version] = found
        return found

    def installed_version(self, client: ClientSpec) -> str:
        """The exact release the client runs (what `installed`, `2.2.x` or `newest` resolved to)."""
        if client.library == "java":
            return str(self._java_clients(client).version)
        if client.library == STREAMS_LIBRARY:
            return self._streams_program(client).version
        if client.library == CONNECT_LIBRARY:
            return str(self._connect_dist(client).version)
        if client.library in GO_LIBRARIES:
            pinned = GO_LIBRARIES[client.library][2]
            return pinned if client.version in PINNED else client.version
        python = self._python(client)
        module = {
            "kafka-python": "kafka-python",
            "aiokafka": "aiokafka",
            "confluent-kafka": "confluent-kafka",
        }
        out = subprocess.run(
            [python, "-c", f"import importlib.metadata as m; print(m.version({module[client.library]!r}))"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return out.stdout.strip() or client.version

    # -- running clients ---------------------------------------------------------------------

    def spawn(self, client: ClientSpec, argv: Sequence[str], env: Mapping[str, str]) -> ProcessHandle:
        if client.library == "java":
            command = self._java_clients(client).command(argv[0], *argv[1:])
        elif client.library == STREAMS_LIBRARY:
            command = self._streams_program(client).command(list(argv[1:]))
        elif client.library in GO_LIBRARIES:
            command = go_command(client, argv)
        else:
            command = [self._python(client), "-u", *argv]
        with self._lock:
            self._n += 1
            n = self._n
        stderr = Path(env.get("MATRIX_STDERR_DIR", str(self.workdir / "stderr"))) / f"{client.key}-{n}.stderr"
        handle = ProcessHandle(command, {k: v for k, v in env.items() if k != "MATRIX_STDERR_DIR"}, stderr)
        with self._lock:
            self._handles.append(handle)
        return handle

    def close(self) -> None:
        with self._lock:
            handles, self._handles = self._handles, []
        for h in handles:
            h.kill()
            with contextlib.suppress(TimeoutError):
                h.wait(10)


def require_installed(client: ClientSpec) -> None:
    """ClientNotInstalled unless the runner's interpreter can import `client`'s library."""
    module = PYTHON_MODULES.get(client.library, client.library)
    if importlib.util.find_spec(module) is None:
        raise ClientNotInstalled(
            f"{client.library} is not installed in {sys.executable}; install it with "
            f"`{sys.executable} -m pip install {client.library}`, or name a version in the grid "
            f"({client.library}@newest) to have the matrix build its virtualenv"
        )


def ensure_venv(client: ClientSpec) -> Path:
    """The interpreter of `client`'s cached virtualenv, built with pip on first use."""
    root = cache_dir() / "venvs"
    root.mkdir(parents=True, exist_ok=True)
    venv = root / client.key
    python = venv / "bin" / "python"
    ready = venv / ".ready"
    if ready.exists():
        return python
    with open(root / f"{client.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            return python
        if venv.exists():
            subprocess.run(["rm", "-rf", str(venv)], check=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        requirements = [pip_requirement(client)]
        if client.library == "aiokafka" and client.version.startswith("0.8"):
            requirements.append("kafka-python==2.0.2")  # what aiokafka 0.8 was written against
        proc = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"pip install {' '.join(requirements)} failed:\n{proc.stderr[-2000:]}")
        ready.write_text(" ".join(requirements) + "\n")
    return python
