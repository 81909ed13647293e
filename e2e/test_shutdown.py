"""SIGTERM with clients attached: the gateway stops accepting, answers what it has read
(including fetches that were long-polling), closes storage and exits 0 promptly."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from e2e.conftest import Gateways
from e2e.harness import REPO
from protocol.client import WireClient, make_request


def test_sigterm_releases_long_polling_fetches_and_exits_zero(gateways: Gateways) -> None:
    gw = gateways.start("shutdown")
    with WireClient(gw.port) as c:
        created = c.request(
            make_request(
                19,
                5,
                topics=[
                    {
                        "name": "quiet",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                timeout=5000,
                validate_only=False,
            )
        )
        assert created.topics[0].error_code == 0
        # A fetch that would wait 30 s for data that never comes.
        fetch = make_request(
            1,
            12,
            max_wait=30_000,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            forgotten_topics_data=[],
            rack_id="",
            topics=[
                {
                    "topic": "quiet",
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
        )
        correlation_id = c.send(fetch)
        time.sleep(0.3)
        started = time.monotonic()
        gw.proc.terminate()  # SIGTERM
        answer = c.read_frame()
        assert answer is not None, "the waiting fetch was dropped instead of answered"
        assert int.from_bytes(answer[:4], "big") == correlation_id
        code = gw.stop(timeout=10)
        assert code == 0 and time.monotonic() - started < 5
    assert [e["event"] for e in gw.events() if e["event"].startswith("gateway.")][-2:] == [
        "gateway.stopping",
        "gateway.stopped",
    ]
    refused = socket.socket()
    try:
        assert refused.connect_ex(("127.0.0.1", gw.port)) != 0
    finally:
        refused.close()


def test_second_gateway_on_a_data_dir_in_use_exits_with_a_clear_message(gateways: Gateways) -> None:
    """Two gateways on one data directory would interleave writes to the same logs; the second
    must refuse to start with one readable line (not a traceback) and leave the first serving."""
    gw = gateways.start("locked")
    second = subprocess.run(
        [
            sys.executable,
            "-m",
            "groupshift",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            str(gw.data_dir),
        ],
        cwd=REPO,
        capture_output=True,
        timeout=60,
    )
    output = (second.stdout + second.stderr).decode()
    assert second.returncode == 1, output
    assert "in use by another open log" in output and "gateway.start_failed" in output
    assert "Traceback" not in output
    assert gw.alive()
    with WireClient(gw.port) as c:
        answer = c.request(make_request(18, 3, client_software_name="t", client_software_version="1"))
        assert answer.error_code == 0
