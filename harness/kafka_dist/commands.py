"""The `groupshift kafka ...` commands (also `python -m harness.kafka_dist ...`): start a
reference cluster in the foreground (or restart one from its work directory), run Kafka's own
command-line tools, list the cached releases, fetch releases ahead of time."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any, TextIO

from harness.kafka_dist.cluster import KafkaCluster, KafkaStartError
from harness.kafka_dist.command_line_tools import SCRIPT_CLASSES, run_tool
from harness.kafka_dist.maven import Component, KafkaUnavailable, cache_root, cached_dists, resolve_component
from harness.kafka_dist.security import SASL_MECHANISMS, SECURITY_CHOICES


def parse_sets(sets: Sequence[str]) -> dict[str, str]:
    """`NAME=VALUE` strings as broker properties; ValueError names the malformed one."""
    configs: dict[str, str] = {}
    for item in sets:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--set expects NAME=VALUE, got {item!r}")
        configs[name.strip()] = value.strip()
    return configs


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def start(
    version: str,
    brokers: int = 1,
    sets: Sequence[str] = (),
    workdir: str | None = None,
    port: int = 0,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    security: str | None = None,
    sasl_mechanism: str = "SCRAM-SHA-256",
) -> int:
    """Start a cluster, print its bootstrap address, run until Ctrl-C/SIGTERM, stop it cleanly.

    With `security` (ssl, sasl_plaintext, sasl_ssl) the cluster is secured
    (harness.kafka_dist.security) and stdout has, after the bootstrap line, one line per client
    principal: `command-config User:NAME PATH`, the Kafka client properties file for
    `--command-config` (User:admin is the super user).

    Exit status: 0 after a requested stop, 1 when a node died or did not start, 2 bad input.
    """
    try:
        configs = parse_sets(sets)
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return 2
    # Both signals stop the cluster: SIGINT is installed explicitly because a shell starts a
    # background job with SIGINT ignored, and Python then never raises KeyboardInterrupt.
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    cluster: KafkaCluster | None = None
    try:
        cluster = KafkaCluster(
            version,
            brokers=brokers,
            configs=configs,
            workdir=workdir,
            port=port,
            security=security,
            sasl_mechanism=sasl_mechanism,
        )
        again = " again" if cluster.nodes[0].formatted else ""
        print(f"starting Kafka {cluster.version} ({brokers} node(s)){again} in {cluster.workdir}", file=err)
        cluster.start()
        for i in range(brokers):
            print(f"node {i}: {cluster.address(i)} log {cluster.log_path(i)}", file=err)
        print(f"ready in {cluster.startup_seconds:.1f}s; Ctrl-C stops the cluster", file=err)
        print(cluster.bootstrap, file=out, flush=cluster.security is None)
        if cluster.security is not None:
            protocol = cluster.security.protocol
            print(f"{protocol} listener, StandardAuthorizer, super user User:admin", file=err)
            for user, path in cluster.security.write_all_client_properties().items():
                print(f"command-config User:{user} {path}", file=out)
            out.flush()
        while True:
            time.sleep(0.5)
            dead = [i for i in range(brokers) if not cluster.is_running(i)]
            if dead:
                i = dead[0]
                print(f"error: node {i} exited; log {cluster.log_path(i)}:\n{cluster.log_tail(i)}", file=err)
                return 1
    except KeyboardInterrupt:
        print("stopping", file=err)
        return 0
    except (KafkaUnavailable, KafkaStartError) as exc:
        print(f"error: {exc}", file=err)
        return 1
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return 2
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if cluster is not None:
            cluster.stop()
            if workdir is None:
                cluster.cleanup()


def versions(out: TextIO = sys.stdout) -> int:
    """List what the cache holds: release, component, size, download time, directory."""
    dists = cached_dists()
    print(f"cache: {cache_root()}", file=out)
    if not dists:
        print("(nothing cached yet: `groupshift kafka fetch 4` or `groupshift kafka start`)", file=out)
        return 0
    print(f"{'version':<10} {'component':<9} {'MB':>6} {'fetch s':>8}  path", file=out)
    for dist in dists:
        size = float(str(dist.info.get("bytes", 0))) / 1e6
        seconds = dist.info.get("seconds", "?")
        print(f"{dist.version:<10} {dist.component:<9} {size:>6.1f} {seconds!s:>8}  {dist.lib}", file=out)
    return 0


def fetch(
    specs: Sequence[str],
    clients: bool = True,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    connect: bool = False,
) -> int:
    """Resolve each spec's broker (and Java tools, and with `connect` a Connect worker with the
    FileStream connectors) into the cache; print what each became on stdout and each failure on
    stderr (a script reading the paths never reads an error as one)."""
    status = 0
    components: tuple[Component, ...] = ("broker", "clients") if clients else ("broker",)
    if connect:
        components += ("connect",)
    for spec in specs:
        for component in components:
            began = time.monotonic()
            try:
                dist = resolve_component(spec, component)
            except (KafkaUnavailable, ValueError) as exc:
                print(f"error: {spec} {component}: {exc}", file=err)
                status = 1
                continue
            print(
                f"{spec} {component}: {dist.version} ({time.monotonic() - began:.1f}s) {dist.lib}",
                file=out,
                flush=True,
            )
    return status


def add_parser(sub: Any, summary: str) -> argparse.ArgumentParser:
    """`groupshift kafka`; `summary` is its line in `groupshift --help` (groupshift.cli.COMMANDS)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "kafka",
        help=summary,
        description=(
            "Reference Apache Kafka for comparisons and migrations (docs/kafka-in-the-loop.md). "
            "Needs Java 17+ and Maven; releases are cached under ~/.cache/groupshift/kafka."
        ),
    )
    add_arguments(p)
    return p


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `kafka` subcommands, shared by `groupshift kafka` and `python -m harness.kafka_dist`."""
    sub = parser.add_subparsers(dest="kafka_command", metavar="COMMAND")
    s = sub.add_parser(
        "start",
        help="run a reference Apache Kafka (KRaft) on 127.0.0.1 until Ctrl-C",
        description=(
            "Fetch Apache Kafka VERSION from Maven Central (once, into the user cache), start a "
            "KRaft cluster on free 127.0.0.1 ports, print its bootstrap address on stdout and run "
            "until Ctrl-C or SIGTERM, then stop it cleanly."
        ),
    )
    s.add_argument("--version", dest="kafka_version", default="4", help="release or line: 4.3.1, 4, 3.9")
    s.add_argument("--brokers", type=int, default=1, help="number of combined broker+controller nodes")
    s.add_argument(
        "--set",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a broker property, e.g. --set group.consumer.heartbeat.interval.ms=1000 (repeatable)",
    )
    s.add_argument(
        "--workdir",
        help="keep data and logs here (default: a temporary directory); a workdir an earlier "
        "start used restarts that cluster with its data on its ports",
    )
    s.add_argument("--port", type=int, default=0, help="node 0's client port (default: a free one)")
    s.add_argument(
        "--security",
        choices=SECURITY_CHOICES,
        help="secure the listeners (mutual TLS, or SASL PLAIN/SCRAM-SHA-256/SCRAM-SHA-512) with the "
        "StandardAuthorizer and no ACLs; prints a client properties file per principal "
        "(admin: super user; alice, bob) for --command-config (docs/security.md)",
    )
    s.add_argument(
        "--sasl-mechanism",
        choices=SASL_MECHANISMS,
        default="SCRAM-SHA-256",
        help="the SASL mechanism the client properties files name (all are enabled)",
    )
    s.set_defaults(
        run=lambda a: start(
            a.kafka_version,
            brokers=a.brokers,
            sets=a.set,
            workdir=a.workdir,
            port=a.port,
            security=a.security,
            sasl_mechanism=a.sasl_mechanism,
        )
    )
    t = sub.add_parser(
        "tool",
        help="run one of Kafka's command-line tools (kafka-consumer-groups, kafka-dump-log, ...)",
        description=(
            "Run Kafka's own tool NAME (the bin/NAME.sh of a distribution) with ARGS, from the "
            "cached jars, logging warnings to stderr. Tools: " + ", ".join(sorted(SCRIPT_CLASSES)) + "."
        ),
    )
    t.add_argument("--version", dest="kafka_version", default="4", help="release or line: 4.3.1, 4, 3.9")
    t.add_argument("name", metavar="NAME", help="e.g. kafka-consumer-groups")
    t.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the tool's own arguments")
    t.set_defaults(run=lambda a: run_tool(a.kafka_version, a.name, a.args))
    v = sub.add_parser("versions", help="list the Kafka releases in the cache")
    v.set_defaults(run=lambda a: versions())
    f = sub.add_parser("fetch", help="download releases into the cache ahead of time")
    f.add_argument("specs", nargs="+", metavar="VERSION", help="release or line: 4.3.1, 4, 3.9")
    f.add_argument("--broker-only", action="store_true", help="skip the Java tools (kafka-tools)")
    f.add_argument(
        "--connect",
        action="store_true",
        help="also a distributed Kafka Connect worker (connect-runtime, connect-file); "
        "Maven Central's newest with connect-file is 4.3.1",
    )
    f.set_defaults(run=lambda a: fetch(a.specs, clients=not a.broker_only, connect=a.connect))

    def usage(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(run=usage)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.kafka_dist", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    return int(args.run(args))
