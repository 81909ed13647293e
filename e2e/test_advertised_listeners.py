"""Advertised listeners from a client outside the host: the test makes its own network namespace
(a veth pair with a private /30 of its own), serves groupshift on 127.0.0.1 behind a port
mapping (a TCP forwarder on the host's veth address, as Docker's or a NAT's), and runs a
confluent-kafka client inside the namespace, which can reach the server only through the address
`advertised.listeners` gives it: 127.0.0.1 there is the namespace's own loopback.

A second listener for the host's own clients answers them with its own address (KIP-103).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess

pytestmark = pytest.mark.e2e


class PortForwarder:
    """A TCP port mapping: connections to `listen` are relayed to `target` (Docker's -p)."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.sock = socket.create_server((listen_host, 0))
        self.port = int(self.sock.getsockname()[1])
        self.target = target
        self.connections = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self.sock.close()


@contextmanager
def namespace() -> Iterator[tuple[str, str]]:
    """A network namespace joined to the host by a veth pair: (its name, the host's address)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        raise RuntimeError("network namespaces need root and iproute2's `ip`")
    tag = f"{os.getpid() % 100000}"
    name, host_if, ns_if = f"gs-ns{tag}", f"gsh{tag}", f"gsn{tag}"
    subnet = 4 * (os.getpid() % 60)  # a /30 of 10.200.0.0/24 per test process
    host_ip, ns_ip = f"10.200.0.{subnet + 1}", f"10.200.0.{subnet + 2}"

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)

    ip("netns", "add", name)
    try:
        ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        ip("link", "set", ns_if, "netns", name)
        ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        ip("link", "set", host_if, "up")
        ip("netns", "exec", name, "ip", "addr", "add", f"{ns_ip}/30", "dev", ns_if)
        ip("netns", "exec", name, "ip", "link", "set", ns_if, "up")
        ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield name, host_ip
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, timeout=30, check=False)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30, check=False)


CLIENT = r"""
import json, sys, time
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
bootstrap, topic = sys.argv[1], sys.argv[2]
brokers = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20).brokers
out = {"brokers": [[b.host, b.port] for b in brokers.values()], "groups": {}}
p = Producer({"bootstrap.servers": bootstrap})
for i in range(10):
    p.produce(topic, str(i).encode())
assert p.flush(30) == 0
for protocol in ("classic", "consumer"):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic + protocol, "group.protocol": protocol,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 60
    while len(got) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.commit(asynchronous=False)
    c.close()
    out["groups"][protocol] = got
print(json.dumps(out))
"""


def run_client(netns: str | None, bootstrap: str, topic: str) -> dict[str, object]:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    out = subprocess.run(
        [*prefix, sys.executable, "-c", CLIENT, bootstrap, topic],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_client_in_another_network_namespace_reaches_the_advertised_address(gateways: Gateways) -> None:
    with namespace() as (netns, host_ip):
        # The mapping's port is chosen first: it is what the server advertises.
        forwarder = PortForwarder(host_ip, ("127.0.0.1", 0))
        try:
            gw: GatewayProcess = gateways.start(
                "nat",
                sets=[
                    "listeners=INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
                    "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                    f"advertised.listeners=EXTERNAL://{host_ip}:{forwarder.port}",
                ],
            )
            ports = {k: int(v) for k, v in gw.events("gateway.listening")[-1]["ports"].items()}
            forwarder.target = ("127.0.0.1", ports["EXTERNAL"])
            topic = f"nat-{uuid.uuid4().hex[:8]}"
            outside = run_client(netns, f"{host_ip}:{forwarder.port}", topic)
            assert outside["brokers"] == [[host_ip, forwarder.port]]
            assert outside["groups"] == {p: [str(i) for i in range(10)] for p in ("classic", "consumer")}
            assert forwarder.connections >= 2  # bootstrap, then the advertised address
            # A client on the host, on the other listener, is told that listener's own address.
            inside = run_client(None, f"127.0.0.1:{ports['INTERNAL']}", topic + "-host")
            assert inside["brokers"] == [["127.0.0.1", ports["INTERNAL"]]]
        finally:
            forwarder.close()


def test_a_wildcard_plaintext_listener_warns_once_and_advertises_the_host_name(gateways: Gateways) -> None:
    from confluent_kafka.admin import AdminClient

    exposed = gateways.start(
        "exposed",
        sets=[
            "listeners=PLAINTEXT://0.0.0.0:0,OTHER://0.0.0.0:0",
            "listener.security.protocol.map=OTHER:PLAINTEXT",
        ],
    )
    warnings = exposed.events("gateway.plaintext_listener_exposed")
    assert len(warnings) == 1 and warnings[0]["level"] == "warning"
    assert [w.split("://")[0] for w in warnings[0]["listeners"]] == ["PLAINTEXT", "OTHER"]
    brokers = AdminClient({"bootstrap.servers": exposed.bootstrap}).list_topics(timeout=20).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [(socket.getfqdn(), exposed.port)]
    quiet = gateways.start("loopback")  # README command 1's listener: 127.0.0.1, no warning
    assert quiet.events("gateway.plaintext_listener_exposed") == []
