"""The gateway image as a user deploys it: `docker run -p` with `advertised.listeners` set to the
mapped address, and the README's Python example run from the host through that mapping.

The image is deploy/image/Dockerfile built by harness.gateway_image on the matrix's local layers
(debootstrap base, Debian's Python; nothing pulled), on the engine harness.matrix.docker_engine
finds or starts; with no engine the test skips and says why, as e2e/test_matrix_docker.py does
(CI builds the same base layer there, so this adds the Python layer, the wheels and the image:
about a minute cold, nothing when the checkout is unchanged).

Port publishing needs a bridge network, and the groupshift dockerd runs with `--bridge=none
--iptables=false` (the matrix's cells use host networking only). Rather than a second daemon
mode, the test creates a user-defined bridge network, which that daemon makes without the default
bridge, and publishes on it: with no iptables rules the engine's userland proxy (docker-proxy)
listens on the host's 127.0.0.1:PORT and relays to the container, which is the `-p` a user
gets. The container listens on 9092 and 9404 and the host ports differ from both, so a client
that followed the container's own address instead of the advertised one would fail.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.matrix.docker_engine import Engine, EngineUnavailable, ensure_engine

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
README_BOOTSTRAP = "127.0.0.1:9092"
READY_TIMEOUT = 60.0
LABEL = "groupshift.test.gateway_image"


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    try:
        found = ensure_engine()
    except EngineUnavailable as e:
        print(f"no Docker engine for the gateway image: {e}")
        pytest.skip(f"no Docker engine can be found or started here: {e}")
    print(f"docker engine: {found.how}")
    try:
        yield found
    finally:
        found.close()


@pytest.fixture(scope="module")
def client(engine: Engine) -> Iterator[Any]:
    c = engine.client()
    try:
        yield c
    finally:
        for container in c.containers.list(all=True, filters={"label": LABEL}):
            container.remove(force=True)
        for network in c.networks.list(filters={"label": LABEL}):
            network.remove()
        for volume in c.volumes.list(filters={"label": LABEL}):
            volume.remove(force=True)
        c.close()


@pytest.fixture(scope="module")
def image(client: Any) -> str:
    from harness.gateway_image import build_gateway_image
    from harness.matrix.docker_images import ImageBuilder

    builder = ImageBuilder(client)
    t0 = time.monotonic()
    tag = build_gateway_image(builder)
    print(f"gateway image {tag} in {time.monotonic() - t0:.1f}s; images built (s): {builder.timings}")
    return tag


def _wait_ready(url: str, container: Any) -> dict[str, Any]:
    """The JSON of the first 200 from /health/ready, polled through the mapped metrics port."""
    deadline = time.monotonic() + READY_TIMEOUT
    last = "no answer"
    while time.monotonic() < deadline:
        container.reload()
        assert container.status in ("created", "running"), container.logs().decode(errors="replace")[-3000:]
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                body: dict[str, Any] = json.loads(answer.read())
                assert answer.status == 200
                return body
        except urllib.error.HTTPError as e:  # 503 while a shard loads
            last = f"{e.code} {e.read()!r}"
        except OSError as e:
            last = repr(e)
        time.sleep(0.25)
    logs = container.logs().decode(errors="replace")[-3000:]
    raise AssertionError(f"{url} not ready in {READY_TIMEOUT:.0f}s (last: {last}):\n{logs}")


def test_readme_example_through_a_port_mapping(client: Any, image: str, tmp_path: Path) -> None:
    kafka_port, metrics_port = _free_port(), _free_port()
    advertised = f"127.0.0.1:{kafka_port}"
    name = f"groupshift-image-test-{os.getpid()}"
    network = client.networks.create(name, driver="bridge", labels={LABEL: ""})
    volume = client.volumes.create(name, labels={LABEL: ""})
    # As the Kubernetes manifest runs it: a read-only root, /tmp writable, the data on a volume.
    container = client.containers.run(
        image,
        detach=True,
        network=network.name,
        ports={"9092/tcp": ("127.0.0.1", kafka_port), "9404/tcp": ("127.0.0.1", metrics_port)},
        environment={"GROUPSHIFT_SET_ADVERTISED_LISTENERS": f"PLAINTEXT://{advertised}"},
        read_only=True,
        tmpfs={"/tmp": ""},
        volumes={volume.name: {"bind": "/var/lib/groupshift", "mode": "rw"}},
        labels={LABEL: ""},
    )
    t0 = time.monotonic()
    ready = _wait_ready(f"http://127.0.0.1:{metrics_port}/health/ready", container)
    print(f"ready through the mapped port in {time.monotonic() - t0:.1f}s: {ready}")
    assert ready["ready"] is True

    # Not root: the image's user, and the process that serves is that user's.
    assert container.attrs["Config"]["User"] == "10001:10001"
    assert container.exec_run(["id", "-u"]).output.decode().strip() == "10001"
    # The data directory is groupshift's own, on the volume.
    listing = container.exec_run(["ls", "/var/lib/groupshift/data"]).output.decode()
    assert "meta.properties" in listing.split(), listing

    # Clients are told the mapped address, not the container's 9092.
    from confluent_kafka.admin import AdminClient

    brokers = AdminClient({"bootstrap.servers": advertised}).list_topics(timeout=15).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", kafka_port)]

    # The README's Python example, verbatim but for its bootstrap address.
    example = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.M | re.S)[0]
    assert example.count(README_BOOTSTRAP) == 3, "the README example's bootstrap address changed"
    script = tmp_path / "readme_example.py"
    script.write_text(example.replace(README_BOOTSTRAP, advertised))
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    print(f"README example through the mapping: {time.monotonic() - t0:.1f}s")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "b'hello'", run.stdout + run.stderr

    # The engine's SIGTERM reaches groupshift (PID 1 by exec) and it stops cleanly.
    container.stop(timeout=20)
    status = container.wait(timeout=30)["StatusCode"]
    logs = container.logs().decode(errors="replace")
    assert status == 0, logs[-3000:]
    assert '"event": "gateway.stopped"' in logs
    assert f"advertised {advertised}" in logs
