"""The `groupshift` command: one table of commands, each parsed and run by its own module.

`COMMANDS` holds a row per command: its name, its line in `groupshift --help` and how to import
the module that builds its parser (`add_parser(sub, summary)`, which sets `run` on the parsed
arguments). Only the module of the command named on the command line is imported: `--version` and
the top-level `--help` import none (the listing comes from the table), so they stay instant
however heavy the layers below are; `groupshift groups ...` imports the group tools and nothing of
`serve`. Each row imports its module by a literal name, which tests/test_import_graph.py follows.

Usage errors exit with status 2 (argparse's) and show the usage of the sub-command that was
being parsed, an unknown option included; output piped into a reader that stops early (`| head`)
ends the command quietly; Ctrl-C ends it quietly with 130 (the shell's 128 + SIGINT). No command
prints a traceback: an exception no command handles is a bug, reported on one line (the
traceback with GROUPSHIFT_DEBUG=1) with exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Collection, Sequence
from importlib import import_module
from types import ModuleType

from groupshift import __version__, build_kind

Runner = Callable[[argparse.Namespace], int]


class Command:
    """One row of the command table. A plain class rather than a dataclass or NamedTuple: the
    table is read on every start, and `dataclasses` or `typing` would double what `--version`
    imports."""

    __slots__ = ("load", "name", "summary")

    def __init__(self, name: str, summary: str, load: Callable[[], ModuleType]) -> None:
        self.name = name
        self.summary = summary  # the line in `groupshift --help`
        # imports the module that defines add_parser(sub, summary) -> argparse.ArgumentParser
        self.load = load

    def __repr__(self) -> str:
        return f"Command({self.name!r})"


COMMANDS: tuple[Command, ...] = (
    Command(
        "simulate",
        "run a scripted or random consumer-group scenario through the engine",
        lambda: import_module("groupshift.commands.simulate"),
    ),
    Command(
        "serve",
        "run the Kafka-protocol gateway: consumer groups of both protocols, embedded topics",
        lambda: import_module("groupshift.commands.serve"),
    ),
    Command(
        "records",
        "inspect __consumer_offsets records (groupshift's logs or a Kafka broker's)",
        lambda: import_module("groupshift.commands.records"),
    ),
    Command(
        "groups",
        "list, describe, reset, delete consumer groups and watch a migration (any Kafka cluster)",
        lambda: import_module("tools.groups.command"),
    ),
    Command(
        "kafka",
        "a reference Apache Kafka from Maven Central: start a local cluster, list versions",
        lambda: import_module("harness.kafka_dist.commands"),
    ),
    Command(
        "acls",
        "add, remove, list ACLs as kafka-acls.sh does (groupshift or any Kafka with an authorizer)",
        lambda: import_module("tools.acls.command"),
    ),
    Command(
        "check",
        "upgrade readiness and downgrade safety per group (live cluster, data dir or Kafka logs)",
        lambda: import_module("tools.check.command"),
    ),
    Command(
        "matrix",
        "run client versions x protocols x scenarios against groupshift and Kafka",
        lambda: import_module("harness.matrix.command"),
    ),
    Command(
        "fleet",
        "migration readiness and rebalance health of many clusters at once (Spark)",
        lambda: import_module("tools.fleet.command"),
    ),
)


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The `groupshift` parser with the full parsers of `commands` (every command when None).
    The other commands are listed by name and summary only, without importing their modules;
    argparse hands the command line to one command's parser, so only that one needs to be real."""
    parser = argparse.ArgumentParser(
        prog="groupshift",
        description=(
            "A Kafka wire-protocol server for consumer groups of both protocols (classic and "
            "KIP-848) and the migration between them."
        ),
    )
    parser.add_argument("--version", action="version", version=f"groupshift {__version__} ({build_kind()})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        if commands is None or command.name in commands:
            command.load().add_parser(sub, command.summary)
        else:
            sub.add_parser(command.name, help=command.summary)
    return parser


def command_named(argv: Sequence[str]) -> str | None:
    """The command `argv` names: its first positional argument (the top-level options, -h and
    --version, take no value), or None when there is none or it is no command in the table."""
    for i, token in enumerate(argv):
        if token == "--":  # what follows is positional, the command first
            token = argv[i + 1] if i + 1 < len(argv) else ""
        elif token.startswith("-") and token != "-":
            continue
        return token if any(c.name == token for c in COMMANDS) else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    named: str | None = None
    try:
        named = command_named(arguments)
        parser = build_parser([] if named is None else [named])
        args, extra = parser.parse_known_args(arguments)
        if extra:
            # argparse reports an unknown option with the top-level usage, which names no
            # option of the sub-command; the parser of the sub-command that was chosen says it.
            innermost_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
        run: Runner | None = getattr(args, "run", None)
        if run is None:
            parser.print_help()
            return 2
        return run(args)
    except BrokenPipeError:
        return _stdout_gone()
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # the safety net: a bug, but one line rather than a traceback
        if os.environ.get("GROUPSHIFT_DEBUG"):
            raise
        what = named or "groupshift"
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        sys.stderr.write(
            f"groupshift {what}: error: {message} (a bug: please report it; "
            "run with GROUPSHIFT_DEBUG=1 for the traceback)\n"
        )
        return 1


def innermost_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the deepest sub-command `args` chose (`groupshift groups describe` ->
    the `describe` parser), following each level's sub-parsers by the name its `dest` holds."""
    while True:
        chosen = None
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                name = getattr(args, action.dest, None) if action.dest != argparse.SUPPRESS else None
                chosen = action.choices.get(name) if isinstance(name, str) else None
        if chosen is None:
            return parser
        parser = chosen


def _stdout_gone() -> int:
    """The reader of stdout went away (`groupshift ... | head`): stop quietly. stdout is
    pointed at /dev/null so that the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0
