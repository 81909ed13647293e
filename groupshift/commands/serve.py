"""`groupshift serve`: the Kafka-protocol gateway (consumer groups of both protocols, embedded
topics) with settings under Kafka's broker config names.

Errors in settings are printed as `groupshift serve: error: ...` alone (no usage block: the usage
is not the problem), with exit status 2 like argparse's own usage errors. In upstream mode with
security, a cluster that refuses groupshift's credentials or certificate at start-up is one such line
(naming the `upstream.` setting) and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any, summary: str) -> argparse.ArgumentParser:
    """The `serve` parser; `summary` is its line in `groupshift --help` (groupshift.cli.COMMANDS)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help=summary,
        description=(
            "Serve the Kafka wire protocol on Kafka's listeners (PLAINTEXT, SSL, SASL_PLAINTEXT, "
            "SASL_SSL; docs/security.md). "
            "Settings use Kafka's broker config names; a properties file (--config), the flags "
            "below and --set NAME=VALUE feed the same validated model (later sources win: file, "
            "flags, --set)."
        ),
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="listener (`listeners`, default 127.0.0.1:9092; port 0 picks a free port); replaces "
        "the file's listeners and advertised.listeners",
    )
    p.add_argument("--data-dir", metavar="DIR", help="data directory (`log.dirs`, default ./groupshift-data)")
    p.add_argument("--config", metavar="FILE", help="Java-properties file of NAME=VALUE lines")
    p.add_argument(
        "--upstream",
        metavar="BOOTSTRAP",
        help=(
            "front an existing Kafka cluster (`upstream.bootstrap.servers`, HOST:PORT[,HOST:PORT...]): "
            "group APIs are answered here, everything else is forwarded"
        ),
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="serve as N processes, the brokers of one cluster: worker i is node node.id+i on the "
        "listener's port + i; coordinator shards split between them (docs/workers.md; default 1)",
    )
    # A worker of `--workers N`, started by the supervisor (not for people to pass).
    p.add_argument("--worker-index", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--set",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="one setting by its Kafka name, e.g. --set num.partitions=6 (repeatable)",
    )
    p.add_argument(
        "--force-data-dir",
        action="store_true",
        help="use a non-empty data directory that groupshift did not create (normally refused)",
    )
    p.add_argument(
        "--ignore-topics-file",
        action="store_true",
        help=(
            "start although topics.json is missing or damaged (normally refused): with no topics, "
            "the damaged file kept as topics.json.<id>-damaged and every partition directory "
            "renamed aside as <name>.<id>-stray; nothing is deleted"
        ),
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the least severe events logged (default info)",
    )
    p.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="text for people or one JSON object per line (default: text when stderr is a "
        "terminal, json otherwise)",
    )
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Load and check the settings, then serve until stopped (the gateway's exit status)."""
    import structlog

    from gateway.config import ConfigError, check_data_dir, check_data_dir_is_ours, load_settings
    from gateway.dataplane.datadir import DataDirLock, DataDirLockedError
    from gateway.groups.service import install_group_layer
    from gateway.logs import configure_logging
    from gateway.server import Extension
    from gateway.server import run as serve

    configure_logging(args.log_level, log_format=args.log_format)
    overrides = {}
    if args.listen is not None:
        overrides["listeners"] = args.listen
    if args.data_dir is not None:
        overrides["log.dirs"] = args.data_dir
    if args.upstream is not None:
        overrides["upstream.bootstrap.servers"] = args.upstream
    try:
        loaded = load_settings(
            config_file=args.config,
            overrides=overrides,
            override_origins={"listeners": "--listen", "log.dirs": "--data-dir"},
            sets=args.set,
        )
        check_data_dir_is_ours(loaded.config, allow_foreign=args.force_data_dir)
    except ConfigError as e:
        return _error(str(e))
    if args.workers < 1:
        return _error(f"--workers must be at least 1 (got {args.workers})")
    if args.worker_index is not None and not 0 <= args.worker_index < args.workers:
        return _error(f"--worker-index must be below --workers ({args.worker_index} of {args.workers})")
    plan = None
    if args.workers > 1:
        from gateway.workers.plan import WorkerPlan, refusal, worker_listeners

        cfg = loaded.config
        host, port = cfg.listen_address
        problem = refusal(
            cfg.served_listeners,
            cfg.advertised_listeners,
            authorizer=bool(cfg.authorizer_class_name),
            upstream=cfg.upstream is not None,
        )
        if problem is not None:
            return _error(problem)
        if args.worker_index is None:
            from gateway.workers.supervisor import Supervisor

            argv = [sys.executable, "-m", "groupshift", *_worker_arguments(args)]
            ports = [port + i for i in range(args.workers)]
            return Supervisor(lambda i: [*argv, "--worker-index", str(i)], host, ports).run()
        plan = WorkerPlan(args.worker_index, args.workers, host, port, cfg.node_id, Path(cfg.data_dir))
        try:
            loaded = load_settings(
                config_file=args.config,
                overrides={**overrides, "log.dirs": str(plan.data_dir)},
                override_origins={"listeners": "--listen", "log.dirs": "--data-dir"},
                sets=[
                    *args.set,
                    # After the user's items, so that a `--set listeners=...` is moved too.
                    f"listeners={worker_listeners(cfg.served_listeners, plan.index)}",
                    f"node.id={plan.node_id}",
                    *_worker_metrics(cfg.metrics_address, plan.index),
                ],
            )
            check_data_dir_is_ours(loaded.config, allow_foreign=args.force_data_dir)
        except ConfigError as e:
            return _error(str(e))
    if loaded.config.upstream is not None and loaded.config.upstream.security_protocol != "PLAINTEXT":
        refused = _check_upstream_security(loaded.config.upstream)
        if refused is not None:
            structlog.get_logger("gateway").error("gateway.start_failed", error=refused)
            sys.stderr.write(f"groupshift serve: error: {refused}\n")
            return 1
    # The data directory's lock before anything else reads or changes it (Kafka's
    # LogManager): a second server on a live directory stops here, having changed nothing.
    try:
        lock = DataDirLock.acquire(loaded.config.data_dir)
    except (DataDirLockedError, OSError) as e:
        structlog.get_logger("gateway").error("gateway.start_failed", error=str(e))
        return 1
    try:
        check_data_dir(loaded.config, allow_foreign=args.force_data_dir)
    except ConfigError as e:
        lock.release()
        return _error(str(e))
    if loaded.ignored_kafka_keys:
        structlog.get_logger("gateway").warning(
            "config.kafka_keys_ignored",
            keys=list(loaded.ignored_kafka_keys),
            reason="Kafka broker settings that groupshift does not use",
        )
    extensions: list[Extension] = [install_group_layer]
    if plan is not None:
        from gateway.workers.worker import worker_extension

        extensions = [worker_extension(plan)]
    elif loaded.config.upstream is not None:
        from gateway.upstream import install_upstream_mode

        extensions = [install_upstream_mode]
    return serve(
        loaded.config,
        extensions=extensions,
        data_dir_lock=lock,
        ignore_topics_file=args.ignore_topics_file,
    )


def _check_upstream_security(upstream: Any) -> str | None:
    """Authenticate to the upstream once before serving: a definite refusal (credentials, token,
    mechanism, certificate) is the one-line reason naming the setting; an unreachable cluster
    is not (the gateway starts and keeps trying, as in PLAINTEXT)."""
    import structlog

    from gateway.upstream.security import check_at_startup, relabel

    timeout = upstream.connect_timeout_ms / 1000
    refused, unreachable = check_at_startup(upstream.client_security(), upstream.bootstrap, timeout)
    if refused is None and unreachable:
        structlog.get_logger("gateway").warning("upstream.unreachable_at_start", brokers=unreachable)
    if refused is not None:
        return refused
    # Each principal's credential of `upstream.identity.credentials.file`, the same way: a
    # wrong password there is found now, not at that client's first request.
    for principal, client in upstream.principal_credentials().items():
        refused, _ = check_at_startup(client, upstream.bootstrap, timeout)
        if refused is not None:
            return relabel(refused, f"upstream.identity.credentials.file ({principal})")
    return None


def _worker_metrics(address: tuple[str, int] | None, index: int) -> list[str]:
    """Worker i serves its metrics on `metrics.listen`'s port + i (port 0: a free one each)."""
    if address is None:
        return []
    host, port = address
    return [f"metrics.listen={host}:{port + index if port else 0}"]


def _worker_arguments(args: argparse.Namespace) -> list[str]:
    """The `serve` arguments a worker is started with: the supervisor's own, rebuilt from what
    was parsed (not from `sys.argv`, which is not the command line when `main(argv)` is called)."""
    out = ["serve", "--workers", str(args.workers)]
    for flag, value in (
        ("--listen", args.listen),
        ("--data-dir", args.data_dir),
        ("--config", args.config),
        ("--upstream", args.upstream),
        ("--log-level", args.log_level),
        ("--log-format", args.log_format),
    ):
        if value is not None:
            out += [flag, value]
    for item in args.set:
        out += ["--set", item]
    if args.force_data_dir:
        out.append("--force-data-dir")
    if args.ignore_topics_file:
        out.append("--ignore-topics-file")
    return out


def _error(message: str) -> int:
    """`groupshift serve: error: message` on stderr and exit status 2, like argparse, without the
    usage."""
    lines = message.splitlines() or [""]
    sys.stderr.write("".join(f"groupshift serve: error: {line}\n" for line in lines))
    return 2
