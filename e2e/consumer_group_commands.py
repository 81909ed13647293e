"""Kafka's `kafka-consumer-groups.sh` (ConsumerGroupCommand) run several times in one JVM.

The e2e comparisons of that tool against groupshift and Kafka run a few dozen commands; a JVM
start per command (class loading, JIT, an admin client) took several seconds each on the CI
machine. e2e/java_programs/ConsumerGroupCommands.java calls the tool's `main` once per argument
list, in order, in one JVM (Java's single-file source mode: no build step), with each run's stdout
and stderr captured apart and the tool's exits caught through Kafka's `Exit` procedures, so every
command gets the `ToolResult` a JVM of its own would have given (Log4j's lines go to the JVM's
stderr, which the comparisons drop anyway).
"""

from __future__ import annotations

import base64
import itertools
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.kafka_dist.java_clients import TOOL_JVM_OPTS, JavaClients, ToolResult

SOURCE = Path(__file__).parent / "java_programs" / "ConsumerGroupCommands.java"
_RUNS = itertools.count(1)


def consumer_group_commands(
    tool: JavaClients, bootstrap: str, invocations: Sequence[Sequence[str]], timeout: float = 600.0
) -> list[ToolResult]:
    """`kafka-consumer-groups.sh --bootstrap-server <bootstrap> <args>` for each argument list, in
    order, in one JVM: one result per invocation."""
    n = next(_RUNS)
    args_file = tool.workdir / f"consumer-group-commands-{n}.args"
    lines: list[str] = []
    for args in invocations:
        for arg in ("--bootstrap-server", bootstrap, *args):
            assert arg and "\n" not in arg, f"an argument the invocation file cannot hold: {arg!r}"
            lines.append(arg)
        lines.append("")
    args_file.write_text("".join(f"{line}\n" for line in lines))
    stderr_path = tool.workdir / f"consumer-group-commands-{n}.stderr"
    command = [
        "java",
        *TOOL_JVM_OPTS,
        *tool.logging_props,
        "-cp",
        tool.dist.classpath,
        str(SOURCE),
        str(args_file),
    ]
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.run(
            command,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    results = []
    for line in proc.stdout.decode().splitlines():
        if line.startswith("RESULT "):
            _, code, out, err = line.split(" ")
            results.append(
                ToolResult(int(code), base64.b64decode(out).decode(), base64.b64decode(err).decode())
            )
    if proc.returncode != 0 or len(results) != len(invocations):
        tail = stderr_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(
            f"ConsumerGroupCommands exited {proc.returncode} after {len(results)} of {len(invocations)} "
            f"invocations:\n{tail}"
        )
    return results
