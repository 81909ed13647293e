"""Kafka's own `kafka-consumer-groups.sh` (ConsumerGroupCommand, kafka-tools 4.x) against
groupshift, compared with the same tool against a real Apache Kafka 4.x node.

The same scenario is set up on both servers (e2e/test_groups_cli_kafka.py's `Target`: a
3-partition topic with 7, 5 and 3 records; an active classic group with one kafka-python member
that committed 4 and 5, nothing on partition 2; an empty group that committed 1, 2, 3; plus a
KIP-848 group with one confluent-kafka member so that `--type` has both kinds to show). Then
every sub-command runs on both through the Java tool: `--list` (plain, `--state`, `--state
Empty`, `--type`, `--type consumer`), `--describe` (`--offsets` with lag, `--members --verbose`,
`--state`), `--reset-offsets` (`--to-earliest`, `--to-datetime`, `--shift-by`; dry-run and
`--execute`; refused for an active group), `--delete-offsets` (refused while subscribed, done on
the empty group) and `--delete` (refused for a non-empty group, done for the empty one; then
`--describe` says the group does not exist).

What differs by nature is normalised away: topic and group names (random per run), member ids,
client hosts, the coordinator's address and node id, and column padding (the tool pads each
column to its longest value, which depends on the member ids). Whatever remains must be equal,
line by line. (e2e/test_groups_cli_kafka.py compares our own `groupshift groups` with this tool
on Kafka; this module runs Kafka's tool against groupshift.)
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.consumer_group_commands import consumer_group_commands
from e2e.harness import GatewayProcess
from e2e.migration import FAST_GROUP_SETTINGS
from e2e.test_groups_cli_kafka import Target
from harness.kafka_dist.java_clients import JavaClients

# A KIP-848 member id (22 characters of base64) standing alone as a cell.
_MEMBER_ID = re.compile(r"(?<![\w+/-])[A-Za-z0-9_+/-]{22}(?![\w+/-])")
# Commands whose rows come from a HashMap or from ListGroups (whose order Kafka leaves to its
# coordinator partitions): their order is not part of what must agree.
UNORDERED = ("list", "reset")


class ToolTarget(Target):
    """A `Target` that also has a KIP-848 group (one confluent-kafka member)."""

    def setup(self) -> None:
        super().setup()
        from confluent_kafka import Consumer

        self.modern = self.active.replace("cmp-active", "cmp-modern")
        self.modern_member = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.modern,
                "group.protocol": "consumer",
                "client.id": "cmp-modern-client",
                "enable.auto.commit": False,
            }
        )
        self.modern_member.subscribe([self.topic])
        deadline = time.monotonic() + 30
        while not self.modern_member.assignment() and time.monotonic() < deadline:
            self.modern_member.poll(0.1)
        assert self.modern_member.assignment(), f"{self.name}: the KIP-848 member was never assigned"

    def close(self) -> None:
        super().close()
        member = getattr(self, "modern_member", None)
        if member is not None:
            member.close()
            self.modern_member = None

    def norm(self, text: str) -> str:
        text = super().norm(text).replace(self.modern, "MODERN")
        text = text.replace(self.bootstrap, "BOOTSTRAP")
        text = re.sub(r"127\.0\.0\.1:\d+ \(\d+\)", "COORDINATOR", text)
        text = re.sub(r"/127\.0\.0\.1", "HOST", text)
        text = re.sub(r"(cmp-(?:modern-)?client)-[0-9a-f-]{36}", r"\1-ID", text)
        text = _MEMBER_ID.sub("ID", text)
        # Column padding depends on value lengths: compare whitespace-separated cells.
        return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


def commands(t: ToolTarget) -> list[tuple[str, tuple[str, ...]]]:
    """Every sub-command the comparison runs, in order (key, tool arguments)."""
    base = ("--reset-offsets", "--group", t.empty, "--topic", t.topic)
    return [
        ("list", ("--list",)),
        ("list --state", ("--list", "--state")),
        ("list --state Empty", ("--list", "--state", "Empty")),
        ("list --type", ("--list", "--type")),
        ("list --type consumer", ("--list", "--type", "consumer")),
        ("describe --offsets", ("--describe", "--group", t.active, "--offsets")),
        ("describe --members --verbose", ("--describe", "--group", t.active, "--members", "--verbose")),
        (
            "describe modern --members --verbose",
            ("--describe", "--group", t.modern, "--members", "--verbose"),
        ),
        ("describe --state", ("--describe", "--group", t.active, "--state")),
        ("describe modern --state", ("--describe", "--group", t.modern, "--state")),
        ("describe empty", ("--describe", "--group", t.empty)),
        ("reset --to-earliest", (*base, "--to-earliest", "--dry-run")),
        ("reset --to-datetime", (*base, "--to-datetime", "2000-01-01T00:00:00.000", "--dry-run")),
        ("reset --shift-by -2", (*base, "--shift-by", "-2", "--dry-run")),
        ("reset --shift-by 1 --execute", (*base, "--shift-by", "1", "--execute")),
        ("describe empty after reset", ("--describe", "--group", t.empty)),
        (
            "reset active",
            ("--reset-offsets", "--group", t.active, "--topic", t.topic, "--to-earliest", "--execute"),
        ),
        ("delete-offsets active", ("--delete-offsets", "--group", t.active, "--topic", f"{t.topic}:0")),
        ("delete-offsets empty", ("--delete-offsets", "--group", t.empty, "--topic", f"{t.topic}:0")),
        ("describe empty after delete-offsets", ("--describe", "--group", t.empty)),
        ("delete active", ("--delete", "--group", t.active)),
        ("delete empty", ("--delete", "--group", t.empty)),
        ("describe deleted", ("--describe", "--group", t.empty)),
    ]


def transcript(tool: JavaClients, t: ToolTarget) -> dict[str, Any]:
    """Each command's (exit code, normalised stdout, normalised stderr's first line).

    The commands run one after the other in one JVM (e2e/consumer_group_commands.py), each as
    `kafka-consumer-groups.sh` would run it alone."""
    keep_alive = threading.Event()

    def poll() -> None:  # the active members keep heartbeating while the tool runs
        while not keep_alive.is_set():
            if t.member is not None:
                t.member.poll(100)
            if t.modern_member is not None:
                t.modern_member.poll(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    todo = commands(t)
    try:
        results = consumer_group_commands(tool, t.bootstrap, [args for _, args in todo], timeout=600)
    finally:
        keep_alive.set()
        poller.join(5)
    out: dict[str, Any] = {}
    for (key, _), r in zip(todo, results, strict=True):
        err = [line for line in r.stderr.splitlines() if line.strip() and not line.startswith("[")]
        stdout = t.norm(r.stdout)
        if key.startswith("list"):
            # the node is shared with other tests of the session: only this run's groups (their
            # names normalised to upper case) and the header are compared
            stdout = "\n".join(
                line
                for line in stdout.splitlines()
                if line.startswith("GROUP") or (line.split() and line.split()[0].isupper())
            )
        if key.startswith(UNORDERED):
            lines = stdout.splitlines()
            head = [line for line in lines if line.startswith(("GROUP", "Error"))]
            stdout = "\n".join(head + sorted(line for line in lines if line not in head))
        out[key] = (r.returncode, stdout, t.norm(err[0]) if err else "")
    return out


@pytest.fixture(scope="module")
def tool_gateway(module_gateways: Gateways) -> GatewayProcess:
    """One groupshift server for the module's three tests (each uses groups of its own, or none)."""
    return module_gateways.start("tool", sets=FAST_GROUP_SETTINGS)


@pytest.fixture
def pair(tool_gateway: GatewayProcess, kafka4: Any) -> Iterator[tuple[ToolTarget, ToolTarget]]:
    gw = tool_gateway
    ours, theirs = ToolTarget("groupshift", gw.bootstrap), ToolTarget("kafka", kafka4.bootstrap)
    try:
        ours.setup()
        theirs.setup()
        yield ours, theirs
    finally:
        ours.close()
        theirs.close()


def test_kafka_consumer_groups_sh_reads_the_same_on_groupshift_and_kafka(
    pair: tuple[ToolTarget, ToolTarget], kafka_clients4: JavaClients
) -> None:
    ours, theirs = pair
    results: dict[str, dict[str, Any]] = {}

    def take(t: ToolTarget) -> None:
        results[t.name] = transcript(kafka_clients4, t)

    threads = [threading.Thread(target=take, args=(t,)) for t in (ours, theirs)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(400)
    a, b = results["groupshift"], results["kafka"]
    for key in b:
        for name, r in (("groupshift", a[key]), ("kafka", b[key])):
            print(f"== {key} -- {name}: exit {r[0]}\n{r[1]}\n{r[2]}")
    differences = [key for key in b if a[key] != b[key]]
    assert not differences, f"kafka-consumer-groups.sh differs on groupshift in {differences}"


def test_describe_groups_v6_says_group_id_not_found_like_kafka(
    tool_gateway: GatewayProcess, kafka4: Any
) -> None:
    """DescribeGroups v6 (KIP-1043): a group that does not exist is GROUP_ID_NOT_FOUND with
    "Group X not found." (v5 and older: an error-free Dead group), on both servers."""
    from protocol.client import WireClient, make_request

    gw = tool_gateway
    answers = {}
    for name, bootstrap in (("groupshift", gw.bootstrap), ("kafka", kafka4.bootstrap)):
        port = int(bootstrap.rsplit(":", 1)[1])
        deadline = time.monotonic() + 30
        while True:  # until the coordinator is up (a fresh Kafka creates __consumer_offsets first)
            with WireClient(port) as c:
                v6 = c.request(
                    make_request(15, 6, groups=["no-such-group"], include_authorized_operations=False)
                )
                v5 = c.request(
                    make_request(15, 5, groups=["no-such-group"], include_authorized_operations=False)
                )
            if v5.groups[0].error_code not in (14, 15, 16) or time.monotonic() > deadline:
                break
            with WireClient(port) as c:  # makes Kafka create its offsets topic
                c.request(make_request(10, 4, key_type=0, coordinator_keys=["no-such-group"]))
            time.sleep(0.5)
        answers[name] = [
            (g.error_code, getattr(g, "error_message", None), g.group_state, len(g.members))
            for g in (*v6.groups, *v5.groups)
        ]
    assert answers["groupshift"] == answers["kafka"], answers
    assert answers["groupshift"][0] == (69, "Group no-such-group not found.", "Dead", 0)
    assert answers["groupshift"][1] == (0, None, "Dead", 0)


def test_describe_groups_v6_not_found_on_groupshift_alone(tool_gateway: GatewayProcess) -> None:
    """The same regression check without Java: v6 says GROUP_ID_NOT_FOUND, v5 an empty Dead group."""
    from protocol.client import WireClient, make_request

    gw = tool_gateway
    with WireClient(gw.port) as c:
        v6 = c.request(make_request(15, 6, groups=["nope"], include_authorized_operations=False))
        v5 = c.request(make_request(15, 5, groups=["nope"], include_authorized_operations=False))
    assert (v6.groups[0].error_code, v6.groups[0].error_message) == (69, "Group nope not found.")
    assert (v5.groups[0].error_code, v5.groups[0].group_state) == (0, "Dead")
