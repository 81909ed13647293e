"""The `docker` runtime of `groupshift matrix`: each client is a container (testcontainers-python).

Same clients, same command lines, same events as the process runtime, so a cell gives the same
verdict in both: Python libraries run harness/matrix/clients/verifiable_consumer.py with the
interpreter of the library version's virtualenv baked into its image; Java runs Kafka's own
`VerifiableConsumer` of that release from its image's jars; Go runs the franz-go binary
(harness.matrix.go_clients). Images come from harness.matrix.docker_images (built locally, nothing
pulled), the engine from harness.matrix.docker_engine (an existing one, or a dockerd we start and
stop).

Each container uses host networking, so the loopback bootstrap addresses the runner hands out work
unchanged; the repository is mounted read-only at its host path and is the working directory, so
the client scripts are the very files the process runtime runs; any other absolute path on the
command line (a config file) is mounted read-only too. Containers are created through
testcontainers' `DockerContainer` with its reaper (Ryuk) disabled: Ryuk is an image we would have
to pull, and we remove our containers ourselves (each is labelled with this runtime's id, and
`close()` removes every container carrying it, even ones whose handle was lost).
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.matrix.docker_engine import Engine, ensure_engine
from harness.matrix.go_clients import GO_LIBRARIES, PINNED, go_argv
from harness.matrix.runtime import ClientSpec

REPO = Path(__file__).resolve().parent.parent.parent
LABEL = "groupshift.matrix.runtime"
STREAM_TIMEOUT = 24 * 3600  # a client may print nothing for a long time: never time out its stream

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")


class ContainerHandle:
    """A client container; stdout streamed line by line, stderr saved to a file when it exits."""

    def __init__(self, container: Any, stderr_path: Path) -> None:
        self._tc = container  # testcontainers DockerContainer
        self.container = container.get_wrapped_container()
        self.stderr_path = stderr_path
        self._exit: int | None = None

    @property
    def id(self) -> str:
        return str(self.container.id)

    def lines(self) -> Iterator[str]:
        pending = b""
        for chunk in self.container.logs(stream=True, follow=True, stdout=True, stderr=False):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                yield raw.decode("utf-8", "replace").rstrip("\r")
        if pending:
            yield pending.decode("utf-8", "replace")

    def _signal(self, sig: str) -> None:
        import docker.errors

        with contextlib.suppress(docker.errors.APIError):  # 409: it already exited
            self.container.kill(signal=sig)

    def terminate(self) -> None:
        self._signal("SIGTERM")

    def kill(self) -> None:
        self._signal("SIGKILL")

    def wait(self, timeout: float) -> int:
        import requests

        if self._exit is not None:
            return self._exit
        try:
            result = self.container.wait(timeout=timeout)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            raise TimeoutError(f"container {self.id[:12]} still running after {timeout:.0f}s") from None
        self._exit = int(result["StatusCode"])
        with contextlib.suppress(Exception):
            self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
            self.stderr_path.write_bytes(self.container.logs(stdout=False, stderr=True))
        return self._exit

    def remove(self) -> None:
        import docker.errors

        with contextlib.suppress(docker.errors.APIError):
            self._tc.stop(force=True)


def host_paths(argv: Sequence[str]) -> set[Path]:
    """Directories to mount so every absolute host path on the command line exists inside too."""
    dirs: set[Path] = set()
    for arg in argv:
        for part in arg.split("=", 1)[-1:]:
            if not part.startswith("/"):
                continue
            path = Path(part)
            if path.exists() and not path.is_relative_to(REPO):
                dirs.add(path if path.is_dir() else path.parent)
    return dirs


class DockerRuntime:
    """Clients as containers (see the module docstring). The engine is found or started lazily."""

    name = "docker"

    def __init__(self, workdir: Path | None = None, engine: Engine | None = None) -> None:
        self.workdir = workdir or Path.home() / ".cache" / "groupshift" / "matrix" / "work"
        self.id = uuid.uuid4().hex[:12]
        self._engine = engine
        self._owns_engine = engine is None
        self._lock = threading.RLock()
        self._builder: Any = None
        self._images: dict[str, tuple[str, list[str]]] = {}
        self._java: dict[str, Any] = {}
        self._handles: list[ContainerHandle] = []
        self._n = 0

    @property
    def engine(self) -> Engine:
        with self._lock:
            if self._engine is None:
                self._engine = ensure_engine()
            return self._engine

    def _images_builder(self) -> Any:
        from harness.matrix.docker_images import ImageBuilder

        with self._lock:
            if self._builder is None:
                self._builder = ImageBuilder(self.engine.client(timeout=STREAM_TIMEOUT))
            return self._builder

    @property
    def build_timings(self) -> dict[str, float]:
        """Seconds spent building each image this runtime had to build (empty when all cached)."""
        return dict(self._builder.timings) if self._builder is not None else {}

    # -- preparing clients -------------------------------------------------------------------

    def prepare(self, client: ClientSpec) -> None:
        self._image(client)

    def _image(self, client: ClientSpec) -> tuple[str, list[str]]:
        """The client's image and the command prefix that runs it there."""
        from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
        from harness.matrix.docker_images import JAVA_LOGGING, PYTHON_LIBRARIES

        with self._lock:
            found = self._images.get(client.key)
        if found is not None:
            return found
        builder = self._images_builder()
        if client.library == "java":
            image, clients = builder.java_client(client)
            with self._lock:
                self._java[client.key] = clients
            found = (image, ["java", *TOOL_JVM_OPTS, *JAVA_LOGGING, "-cp", "/opt/kafka/libs/*"])
        elif client.library in PYTHON_LIBRARIES:
            found = (builder.python_client(client), ["/opt/client/bin/python", "-u"])
        elif client.library in GO_LIBRARIES:
            image, binary = builder.go_client(client)
            found = (image, [binary])
        else:
            raise ValueError(f"the docker runtime runs no {client.library!r} clients")
        with self._lock:
            self._images[client.key] = found
        return found

    def installed_version(self, client: ClientSpec) -> str:
        """The exact release the client's image runs (what `2.2.x`, `newest` or `4` resolved to)."""
        image, prefix = self._image(client)
        if client.library == "java":
            return str(self._java[client.key].version)
        if client.library in GO_LIBRARIES:
            pinned = GO_LIBRARIES[client.library][2]
            return pinned if client.version in PINNED else client.version
        code = f"import importlib.metadata as m; print(m.version({client.library!r}))"
        output = self.engine.client(timeout=120).containers.run(
            image, [prefix[0], "-c", code], remove=True, network_mode="host"
        )
        return bytes(output).decode().strip() or client.version

    def command(self, client: ClientSpec, argv: Sequence[str]) -> tuple[str, list[str]]:
        """The image and the full command line of a client container."""
        image, prefix = self._image(client)
        if client.library == "java":
            # argv[0] names the tool ("VerifiableConsumer"), as in the process runtime
            return image, [*prefix, self._java[client.key].main_class(argv[0]), *argv[1:]]
        if client.library in GO_LIBRARIES:
            return image, [*prefix, *go_argv(argv)]
        return image, [*prefix, *argv]

    # -- running clients ---------------------------------------------------------------------

    def spawn(self, client: ClientSpec, argv: Sequence[str], env: Mapping[str, str]) -> ContainerHandle:
        from testcontainers.core.config import testcontainers_config
        from testcontainers.core.container import DockerContainer

        testcontainers_config.ryuk_disabled = True
        image, command = self.command(client, argv)
        with self._lock:
            self._n += 1
            n = self._n
        stderr_dir = Path(env.get("MATRIX_STDERR_DIR", str(self.workdir / "stderr")))
        environment = {k: v for k, v in env.items() if k != "MATRIX_STDERR_DIR"}
        environment.setdefault("PYTHONUNBUFFERED", "1")
        environment.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        container = (
            DockerContainer(image, docker_client_kw={"environment": {"DOCKER_HOST": self.engine.host}})
            .with_command(command)
            .with_envs(**environment)
            .with_volume_mapping(str(REPO), str(REPO), mode="ro")
            .with_kwargs(
                network_mode="host",
                working_dir=str(REPO),
                labels={LABEL: self.id, "groupshift.matrix.client": client.key},
                stop_signal="SIGTERM",
            )
            .with_name(f"gs-{client.key.replace('.', '_')}-{self.id}-{n}")
        )
        for path in host_paths(command):
            container = container.with_volume_mapping(str(path), str(path), mode="ro")
        container.start()
        handle = ContainerHandle(container, stderr_dir / f"{client.key}-{n}.stderr")
        with self._lock:
            self._handles.append(handle)
        return handle

    def close(self) -> None:
        """Remove every container of this runtime; stop the engine if this runtime started it."""
        with self._lock:
            handles, self._handles = self._handles, []
            engine = self._engine
        for h in handles:
            h.kill()
            h.remove()
        if engine is not None:
            with contextlib.suppress(Exception):
                client = engine.client(timeout=60)
                for c in client.containers.list(all=True, filters={"label": f"{LABEL}={self.id}"}):
                    c.remove(force=True)
                client.close()
            if self._owns_engine:
                engine.close()
