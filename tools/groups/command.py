"""Arguments of `groupshift groups --bootstrap-server HOST:PORT SUBCOMMAND ...`.

Option names follow Kafka's `kafka-consumer-groups.sh` (`--bootstrap-server`, `--topic T:P`,
`--to-earliest`, `--dry-run`/`--execute`, `--export`, `--from-file`, `--members --verbose`,
`--state`); the group is a positional argument. Exit codes: see `tools.groups.output`.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from tools.groups.output import ERROR, NOT_FOUND, USAGE, Style, use_colour

if TYPE_CHECKING:
    from protocol.client_security import ClientSecurity

EPILOG = """\
exit status:
  0  done
  1  error: cluster unreachable, a Kafka error, a partition that failed in a mutation
  2  usage: bad arguments
  3  the group does not exist
  4  refused because the group is active (reset-offsets, delete, delete-offsets)
"""


COMMAND_CONFIG_HELP = (
    "Kafka client properties for a secured cluster (security.protocol, ssl.*, sasl.mechanism, "
    "sasl.jaas.config), as kafka-consumer-groups.sh --command-config takes them (docs/security.md)"
)


def load_command_config(path: str | None) -> ClientSecurity | None:
    """The `ClientSecurity` of a `--command-config` file (None without one); ValueError
    (ClientSecurityError) with one line naming the file and what is wrong."""
    if path is None:
        return None
    from protocol.client_security import ClientSecurity

    return ClientSecurity.from_file(path)


def add_parser(sub: Any, summary: str) -> argparse.ArgumentParser:
    """The `groups` parser; `summary` is its line in `groupshift --help` (groupshift.cli.COMMANDS)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "groups",
        help=summary,
        description=(
            "kafka-consumer-groups.sh in the same words, for groupshift and any Kafka 2.x+ cluster "
            "(streams groups as kafka-streams-groups.sh shows them), plus `migration`: the live "
            "story of a group moving between the classic and the KIP-848 consumer protocol."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # --bootstrap-server, --timeout and --json go before or after the sub-command (README):
    # the sub-commands repeat them with SUPPRESS defaults, so that a value given after the
    # sub-command wins and one given before is not reset.
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="broker(s) to connect to (required)")
    p.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    p.add_argument(
        "--timeout", type=positive_seconds, default=10.0, metavar="S", help="socket timeout (default 10)"
    )
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")
    gs = p.add_subparsers(dest="groups_command", metavar="SUBCOMMAND")

    ls = gs.add_parser("list", help="list consumer, streams and connect groups")
    ls.add_argument("--state", nargs="?", const="", help="show STATE; filter by comma-separated states")
    ls.add_argument(
        "--type", nargs="?", const="", help="show TYPE; filter by classic,consumer,streams,connect"
    )

    d = gs.add_parser("describe", help="offsets and lag, members, or state of groups")
    d.add_argument("group_names", nargs="*", metavar="GROUP", help="groups to describe")
    d.add_argument(
        "--group", dest="group_options", action="append", default=[], metavar="GROUP",
        help="a group to describe (repeatable, as kafka-consumer-groups.sh has it)",
    )  # fmt: skip
    d.add_argument(
        "--all-groups", action="store_true", help="describe every consumer, streams and connect group"
    )
    d.add_argument("--offsets", action="store_true", help="per-partition offsets and lag (the default)")
    d.add_argument(
        "--members",
        action="store_true",
        help="members, their protocol and assignment (a streams group: tasks)",
    )
    d.add_argument("--state", dest="show_state", action="store_true", help="coordinator, state, epochs")
    d.add_argument(
        "--topology",
        action="store_true",
        help="a streams group's topology description, as the broker's topology description plugin stored it",
    )
    d.add_argument("--verbose", action="store_true", help="epochs, target assignments, leader epochs")

    r = gs.add_parser("reset-offsets", help="plan or execute an offset reset (dry run by default)")
    r.add_argument("group", nargs="?", help="the group whose offsets to reset")
    r.add_argument("--all-groups", action="store_true", help="reset every inactive consumer group")
    r.add_argument(
        "--topic",
        "--input-topic",
        action="append",
        metavar="T[:P,...]",
        help="topic or topic:partitions (repeatable; a streams group: committed ones only)",
    )
    r.add_argument(
        "--all-topics",
        "--all-input-topics",
        action="store_true",
        help="every partition with a committed offset (a streams group: of its source topics)",
    )
    r.add_argument("--to-earliest", action="store_true", help="the earliest offset of each partition")
    r.add_argument("--to-latest", action="store_true", help="the log-end offset of each partition")
    r.add_argument("--to-current", action="store_true", help="the committed offset (no change)")
    r.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the partition)")
    r.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (N < 0 goes back)")
    r.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="the first offset at or after this time (Z or +hh:mm; local time without)",
    )
    r.add_argument("--from-file", metavar="CSV", help="a plan as written by --export")
    mode = r.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    r.add_argument("--export", action="store_true", help="print the plan as CSV (topic,partition,offset)")

    do = gs.add_parser("delete-offsets", help="delete a group's committed offsets for topics")
    do.add_argument("group", help="the group whose offsets to delete")
    do.add_argument(
        "--topic", action="append", required=True, metavar="T[:P,...]",
        help="topic or topic:partitions (repeatable)",
    )  # fmt: skip

    dl = gs.add_parser("delete", help="delete empty groups")
    dl.add_argument("groups", nargs="*", metavar="GROUP", help="groups to delete")
    dl.add_argument(
        "--group", dest="group_options", action="append", default=[], metavar="GROUP",
        help="a group to delete (repeatable, as kafka-consumer-groups.sh has it)",
    )  # fmt: skip
    dl.add_argument("--all-groups", action="store_true", help="delete every consumer group (empty ones go)")

    c = gs.add_parser("config", help="show or change a group's dynamic configs")
    c.add_argument("group", help="the group whose configs to show or change")
    c.add_argument("--set", action="append", metavar="NAME=VALUE", help="set a config (repeatable)")
    c.add_argument(
        "--delete", action="append", metavar="NAME", help="reset a config to the broker's (repeatable)"
    )

    m = gs.add_parser(
        "migration",
        help="the live story of a classic <-> consumer protocol migration, either way (streams: tasks)",
        description="The live story of a group moving between the classic and the KIP-848 consumer "
        "protocol, either way; a streams group's members with their tasks. --watch redraws the "
        "view in place on a terminal and appends one block per poll otherwise.",
    )
    m.add_argument("group", help="the group to watch")
    m.add_argument(
        "--watch",
        action="store_true",
        help="poll until Ctrl-C (or --count polls); on a terminal the view is redrawn in place",
    )
    m.add_argument(
        "--interval",
        type=positive_seconds,
        default=2.0,
        metavar="S",
        help="seconds between polls (default 2)",
    )
    m.add_argument(
        "--count", type=positive_count, metavar="N", help="stop after N polls (with --watch; default: Ctrl-C)"
    )
    m.add_argument(
        "--stuck-after",
        type=positive_seconds,
        default=60.0,
        metavar="S",
        help="call a partition stuck after S seconds pending revocation (default 60)",
    )
    m.add_argument(
        "--expect",
        choices=("upgrade", "downgrade"),
        help="the direction you are moving the group (default: inferred from its last conversion); "
        "the view says when the group moves the other way",
    )
    m.add_argument("--plot", metavar="FILE.png", help="draw who owned which partition when")
    m.add_argument(
        "--events",
        metavar="FILE",
        help="the gateway's JSON event log: its conversions tell the direction, and --plot draws "
        "from it instead of the polls",
    )

    for sp in (ls, d, r, do, dl, c, m):
        sp.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
        )
        sp.add_argument(
            "--bootstrap-server",
            default=argparse.SUPPRESS,
            metavar="HOST:PORT",
            help="broker(s) to connect to",
        )
        sp.add_argument(
            "--timeout", type=positive_seconds, default=argparse.SUPPRESS, metavar="S", help="socket timeout"
        )
        sp.add_argument(
            "--command-config", default=argparse.SUPPRESS, metavar="FILE", help=COMMAND_CONFIG_HELP
        )

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return USAGE

    p.set_defaults(run=run_groups, groups_usage=usage, groups_parser=p)
    for sp in (ls, d, r, do, dl, c, m):
        sp.set_defaults(groups_subparser=sp)
    return p


def positive_seconds(text: str) -> float:
    """A duration in seconds above 0 (argparse type): 0 or less is refused before any work."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def positive_count(text: str) -> int:
    """A count of 1 or more (argparse type): `--count 0` would mean nothing or forever."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def input_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the sub-command's own arguments, found before connecting: a missing
    --from-file or --events, a --plot file that cannot be written, a bad --to-datetime, no
    group named. None when nothing is."""
    from tools.groups.reset_offsets import PlanError, parse_datetime

    command = args.groups_command
    if command in ("describe", "delete"):
        named = [*getattr(args, "group_names", []), *getattr(args, "groups", []), *args.group_options]
        if named and args.all_groups:
            return "give GROUP names or --all-groups, not both"
        if not named and not args.all_groups:
            return "name at least one GROUP (or give --all-groups)"
    if command == "reset-offsets":
        if (args.group is None) == (not args.all_groups):
            return "name one GROUP or give --all-groups"
        if args.from_file is not None and not os.path.isfile(args.from_file):
            return f"--from-file {args.from_file}: no such file"
        if args.to_datetime is not None:
            try:
                parse_datetime(args.to_datetime)
            except PlanError as e:
                return str(e)
    if command == "migration":
        if args.events is not None and not os.path.isfile(args.events):
            return f"--events {args.events}: no such file"
        if args.plot is not None:
            folder = os.path.dirname(os.path.abspath(args.plot))
            if not os.path.isdir(folder):
                return f"--plot {args.plot}: no directory {folder}"
            if not os.access(folder, os.W_OK):
                return f"--plot {args.plot}: {folder} is not writable"
        if args.count is not None and not args.watch:
            return "--count needs --watch"
    return None


def run_groups(args: argparse.Namespace) -> int:
    from tools.groups import config, delete, describe, list_groups, migration, reset_offsets
    from tools.groups.output import error
    from tools.groups.wire import AdminWire, KafkaError, WireError

    runners = {
        "list": list_groups.run,
        "describe": describe.run,
        "reset-offsets": reset_offsets.run,
        "delete-offsets": delete.run_delete_offsets,
        "delete": delete.run_delete,
        "config": config.run,
        "migration": migration.run,
    }
    if args.groups_command is None:
        return int(args.groups_usage(args))
    if args.bootstrap_server is None:
        args.groups_subparser.error("the following arguments are required: --bootstrap-server")
    problem = input_problem(args)
    if problem is not None:
        error(problem)
        return USAGE
    if getattr(args, "plot", None) and find_spec("matplotlib") is None:  # said before polling
        error("--plot needs matplotlib: pip install 'groupshift[plot]'")
        return ERROR
    try:
        security = load_command_config(args.command_config)
    except ValueError as e:  # unreadable file, unusable properties
        error(f"--command-config {e}")
        return USAGE
    style = Style(use_colour(sys.stdout))
    try:
        with AdminWire(args.bootstrap_server, timeout=args.timeout, security=security) as admin:
            return runners[args.groups_command](admin, args, sys.stdout, style)
    except ValueError as e:  # bad --bootstrap-server
        error(str(e))
        return USAGE
    except KafkaError as e:
        error(str(e))
        return NOT_FOUND if e.name == "GROUP_ID_NOT_FOUND" else ERROR
    except WireError as e:
        error(f"{args.bootstrap_server}: {e}")
        return ERROR
    except BrokenPipeError:  # piped into `head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
