"""`groupshift check upgrade|downgrade`: a verdict per group, a summary per cluster, and an exit
status a CI gate can use (README "groupshift check").

    groupshift check upgrade   (--bootstrap-server HOST:PORT | --data-dir DIR | --log-dir DIR)
                               [GROUP ... | --all] [--json] [--set NAME=VALUE] [--config FILE]
                               [--regex GROUP=PATTERN]
    groupshift check downgrade --to classic-protocol|kafka-X.Y  (same inputs and options)

Settings the rules need (group.consumer.migration.policy, group.consumer.max.size,
group.max.size, group.consumer.assignors) come from the live brokers (DescribeConfigs) or, for
files, from `--config`/`--set`; what no input gives is assumed at Kafka's default, and each
verdict says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from tools.check.facts import GroupFacts, RecordKind
from tools.check.rules import (
    CLASSIC_TARGET,
    NEEDS_ACTION,
    NOT_READY,
    UNSAFE,
    Settings,
    Verdict,
    downgrade_verdict,
    upgrade_verdict,
)
from tools.groups.command import COMMAND_CONFIG_HELP, load_command_config, positive_seconds

if TYPE_CHECKING:
    from tools.groups.capabilities import ServerCapabilities

OK = 0  # every group READY / SAFE
ACTION = 1  # some group NOT-READY / NEEDS-ACTION (and none UNSAFE)
UNSAFE_EXIT = 2  # some group UNSAFE
INPUT_ERROR = 3  # bad arguments, unreadable input, unreachable cluster, unknown group

EPILOG = """\
input (exactly one):
  --bootstrap-server HOST:PORT  a live groupshift or Apache Kafka 2.x+ cluster (admin APIs only);
                                `upgrade` also asks whether it serves the KIP-848 consumer
                                protocol at all (every group NOT-READY if not)
  --data-dir DIR                a groupshift data dir, read without starting a server
  --log-dir DIR                 a Kafka broker's log dir or __consumer_offsets-N directories
                                (repeatable)

exit status:
  0  every group READY (upgrade) or SAFE (downgrade)
  1  some group NOT-READY or NEEDS-ACTION, none UNSAFE; for upgrade, also a server that does
     not serve the KIP-848 consumer protocol, even with no group listed
  2  some group UNSAFE
  3  input error: bad arguments, unreadable input, unreachable cluster, unknown group
"""


def _usage_error(parser: argparse.ArgumentParser) -> Any:
    def error(message: str) -> NoReturn:
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"{parser.prog}: error: {message}\n")
        raise SystemExit(INPUT_ERROR)

    return error


def _add_inputs(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--bootstrap-server", metavar="HOST:PORT", help="a live cluster (groupshift or Kafka)")
    src.add_argument("--data-dir", metavar="DIR", help="a groupshift data directory")
    src.add_argument(
        "--log-dir",
        metavar="DIR",
        action="append",
        help="a Kafka broker log dir or a __consumer_offsets-N directory (repeatable)",
    )
    p.add_argument("groups", nargs="*", metavar="GROUP", help="groups to check")
    p.add_argument("--all", action="store_true", help="check every group")
    p.add_argument("--json", action="store_true", help='print {"groups": [...], "summary": ...} as JSON')
    p.add_argument(
        "--timeout", type=positive_seconds, default=10.0, metavar="S", help="socket timeout (live input)"
    )
    p.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP + " (live input)")
    p.add_argument("--config", metavar="FILE", help="broker properties file (settings for file inputs)")
    p.add_argument(
        "--set",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a broker setting, e.g. --set group.consumer.max.size=100 (overrides the input's)",
    )
    p.add_argument(
        "--regex",
        metavar="GROUP=PATTERN",
        action="append",
        default=[],
        help="a regex GROUP's classic clients subscribe with (classic groups store only topic names)",
    )
    p.add_argument("--verbose", action="store_true", help="print every check of every group")


def add_parser(sub: Any, summary: str) -> argparse.ArgumentParser:
    """The `check` parser; `summary` is its line in `groupshift --help` (groupshift.cli.COMMANDS)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "check",
        help=summary,
        description=(
            "A verdict per group, with the reason and the exact fix: can it migrate online to the "
            "KIP-848 consumer protocol now (upgrade), is a rollback safe (downgrade)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.error = _usage_error(p)  # type: ignore[method-assign]
    cs = p.add_subparsers(dest="check_command", metavar="SUBCOMMAND")
    up = cs.add_parser(
        "upgrade",
        help="READY / NOT-READY: does a group.protocol=consumer member convert the group now",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    up.error = _usage_error(up)  # type: ignore[method-assign]
    _add_inputs(up)
    down = cs.add_parser(
        "downgrade",
        help="SAFE / NEEDS-ACTION / UNSAFE: roll back to classic clients or an older Kafka",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    down.error = _usage_error(down)  # type: ignore[method-assign]
    down.add_argument(
        "--to",
        required=True,
        metavar="TARGET",
        help=f"{CLASSIC_TARGET} (members back to classic clients) or kafka-X.Y (a coordinator release)",
    )
    _add_inputs(down)

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return INPUT_ERROR

    p.set_defaults(run=usage)
    up.set_defaults(run=lambda a: run(a, sys.stdout, sys.stderr))
    down.set_defaults(run=lambda a: run(a, sys.stdout, sys.stderr))
    return p


def _properties(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            if not s or s[0] in "#!":
                continue
            k, sep, v = s.partition("=")
            if not sep:
                k, sep, v = s.partition(":")
            out[k.strip()] = v.strip()
    return out


class _InputError(Exception):
    pass


def unknown_setting(name: str) -> str | None:
    """The refusal `groupshift serve` gives a key neither groupshift nor a Kafka broker knows
    (gateway.config.resolve_config), so that a typo in `--set` is not silently ignored."""
    from gateway.config import GROUP_KEYS, SERVER_KEY_SYNONYMS, SERVER_KEYS
    from gateway.kafka_broker_keys import KAFKA_VERSIONS, is_kafka_broker_key
    from gateway.upstream.config import UPSTREAM_KEYS

    if name in SERVER_KEYS or name in GROUP_KEYS or name in UPSTREAM_KEYS or name in SERVER_KEY_SYNONYMS:
        return None
    if is_kafka_broker_key(name):
        return None
    return (
        f"unknown configuration key {name!r}: neither groupshift nor a Kafka broker "
        f"(Kafka {', '.join(KAFKA_VERSIONS)}) knows it"
    )


def _settings(
    args: argparse.Namespace, found: dict[str, str | None], topics: tuple[str, ...] | None
) -> Settings:
    configs: dict[str, str | None] = dict(found)
    if args.config:
        try:
            configs.update(_properties(args.config))
        except OSError as e:
            raise _InputError(f"--config {args.config}: {e.strerror}") from None
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise _InputError(f"--set expects NAME=VALUE, got {item!r}")
        if (refusal := unknown_setting(name.strip())) is not None:
            raise _InputError(f"--set {refusal}")
        configs[name.strip()] = value.strip()
    regexes = []
    for item in args.regex:
        group, sep, pattern = item.partition("=")
        if not sep or not group:
            raise _InputError(f"--regex expects GROUP=PATTERN, got {item!r}")
        regexes.append((group, pattern))
    try:
        return Settings.from_configs(configs, topics=topics, regexes=tuple(regexes))
    except ValueError as e:
        raise _InputError(f"bad setting: {e}") from None


Unknown = dict[int | None, tuple[RecordKind, ...]]


def load(
    args: argparse.Namespace,
) -> tuple[dict[str, GroupFacts], Settings, list[str], Unknown, ServerCapabilities | None]:
    """Facts, settings, problems met reading the input, per partition the records of types
    that could not be decoded, and (live input, `upgrade`) whether the server serves KIP-848."""
    wanted = None if args.all else list(args.groups)
    if args.command_config is not None and not args.bootstrap_server:
        raise _InputError("--command-config is for a live cluster (--bootstrap-server)")
    if args.bootstrap_server:
        from tools.check.facts import facts_from_admin
        from tools.groups.capabilities import probe_server
        from tools.groups.wire import AdminWire, KafkaError, WireError

        server = None
        try:
            security = load_command_config(args.command_config)
        except ValueError as e:
            raise _InputError(f"--command-config {e}") from None
        try:
            with AdminWire(args.bootstrap_server, timeout=args.timeout, security=security) as admin:
                facts, read = facts_from_admin(admin, wanted, cluster=args.bootstrap_server)
                if args.check_command == "upgrade":
                    server = probe_server(admin, args.bootstrap_server)
        except (WireError, KafkaError, ValueError, OSError) as e:
            raise _InputError(f"{args.bootstrap_server}: {e}") from None
        return facts, _settings(args, read.settings, read.topics or None), [], {}, server
    from tools.check.inputs import InputError, read_logs

    paths = [args.data_dir] if args.data_dir else list(args.log_dir)
    try:
        got = read_logs(paths)
    except (InputError, OSError) as e:
        raise _InputError(str(e)) from None
    return got.facts, _settings(args, {}, got.topics or None), got.problems, got.unknown_kinds, None


def evaluate(
    args: argparse.Namespace,
    facts: dict[str, GroupFacts],
    settings: Settings,
    unknown: Unknown,
    server: ServerCapabilities | None = None,
) -> list[Verdict]:
    """A verdict per wanted group. A group with only old records left (deleted) matters only to
    a coordinator release, which still reads them; its partition's other groups are its peers."""
    release = args.check_command == "downgrade" and args.to != CLASSIC_TARGET
    wanted = None if args.all else set(args.groups)
    by_partition: dict[int, list[GroupFacts]] = {}
    for f in facts.values():
        if f.partition is not None:
            by_partition.setdefault(f.partition, []).append(f)
    out = []
    for gid in sorted(facts):
        f = facts[gid]
        if (wanted is not None and gid not in wanted) or (not f.live and not release):
            continue
        if args.check_command == "upgrade":
            out.append(upgrade_verdict(f, settings, server))
        elif not release:
            out.append(downgrade_verdict(f, args.to, settings))
        else:
            peers = by_partition.get(f.partition, []) if f.partition is not None else []
            orphans = unknown.get(f.partition, ()) if f.partition is not None else ()
            out.append(downgrade_verdict(f, args.to, settings, peers=peers, orphans=orphans))
    return out


def exit_status(verdicts: Sequence[Verdict]) -> int:
    kinds = {v.verdict for v in verdicts}
    if UNSAFE in kinds:
        return UNSAFE_EXIT
    if kinds & {NOT_READY, NEEDS_ACTION}:
        return ACTION
    return OK


def summary(verdicts: Sequence[Verdict]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter[str]] = {}
    for v in verdicts:
        out.setdefault(v.cluster, Counter())[v.verdict] += 1
    return {c: dict(sorted(n.items())) for c, n in sorted(out.items())}


@dataclass(frozen=True, slots=True)
class Invocation:
    """The command line the verdicts came from: a fix is printed as a complete command on the
    same input, with the same options (a what-if `--set`, a `records rewrite` of the same files)."""

    check: str  # upgrade | downgrade
    target: str | None
    inputs: tuple[str, ...]  # the input option(s) exactly as given
    options: tuple[str, ...]  # --config, --set, --regex, --timeout as given
    data_dir: str | None = None
    log_dirs: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Invocation:
        if args.bootstrap_server:
            inputs: tuple[str, ...] = ("--bootstrap-server", args.bootstrap_server)
        elif args.data_dir:
            inputs = ("--data-dir", args.data_dir)
        else:
            inputs = tuple(x for d in args.log_dir for x in ("--log-dir", d))
        options: list[str] = []
        if args.bootstrap_server and args.timeout != 10.0:
            options += ["--timeout", f"{args.timeout:g}"]
        if args.bootstrap_server and args.command_config:
            options += ["--command-config", args.command_config]
        if args.config:
            options += ["--config", args.config]
        for item in args.set:
            options += ["--set", item]
        for item in args.regex:
            options += ["--regex", item]
        return cls(
            args.check_command,
            getattr(args, "to", None),
            inputs,
            tuple(options),
            args.data_dir,
            tuple(args.log_dir or ()),
        )

    def what_if(self, group: str, settings: Sequence[tuple[str, str]]) -> str:
        """`groupshift check ...` of this input and group with `settings` changed (a later
        `--set` wins over the input's and the earlier ones)."""
        to = ("--to", self.target) if self.check == "downgrade" and self.target else ()
        argv = ["groupshift", "check", self.check, *to, *self.inputs, *self.options, group]
        return shlex.join([*argv, *(x for name, value in settings for x in ("--set", f"{name}={value}"))])

    def rewrites(self, target: str) -> list[str]:
        """`groupshift records rewrite` of this input's files for `target` into new directories
        beside them (none for a live input: its files are on the brokers)."""
        sources = (
            [("--data-dir", self.data_dir)] if self.data_dir else [("--log-dir", d) for d in self.log_dirs]
        )
        return [
            shlex.join(
                [
                    "groupshift",
                    "records",
                    "rewrite",
                    "--for-downgrade",
                    target,
                    option,
                    path,
                    "--out",
                    f"{path.rstrip('/')}.for-{target}",
                ]
            )
            for option, path in sources
        ]


REWRITE = "groupshift records rewrite --for-downgrade "
BLOCKING = ("refused", "unsafe", "needs-action")  # the check statuses that decide a verdict


def fix_commands(v: Verdict, invocation: Invocation | None) -> list[tuple[str, str]]:
    """The complete commands that go with a verdict's fix, each with what it does: a what-if
    check with the setting the fix changes, or the rewrite of the input's records."""
    if invocation is None or not v.fix:
        return []
    out: list[tuple[str, str]] = []
    blocking = [c for c in v.details if c.status in BLOCKING]
    settings = list(dict.fromkeys(c.setting for c in blocking if c.setting is not None))
    if settings and len(settings) == len({c.name for c in blocking}) and all(c.setting for c in blocking):
        # only when the settings are the whole fix: the what-if then comes back READY/SAFE
        said = ", ".join(f"{name}={value}" for name, value in settings)
        out.append(
            (
                f"the verdict with {said} (a what-if: it changes nothing)",
                invocation.what_if(v.group, settings),
            )
        )
    if v.fix.startswith(REWRITE):
        target = v.fix.removeprefix(REWRITE).split()[0]
        out += [("rewrite the records for " + target, cmd) for cmd in invocation.rewrites(target)]
    return out


def _fix_text(fix: str | None, invocation: Invocation | None) -> str | None:
    """A fix in words. The rules name a rewrite by its command's start; on a file input the
    complete command follows on a `$ ` line; on a live input the text names what to run it on
    (the brokers' log dirs, brokers stopped), since those files are not here."""
    if not fix or not fix.startswith(REWRITE) or invocation is None:
        return fix
    target = fix.removeprefix(REWRITE).split()[0]
    if invocation.rewrites(target):
        return (
            f"rewrite the group's records so that {target} loads them (the `$ groupshift records "
            f"rewrite` command writes a new log dir), then start {target} on it"
        )
    return (
        f"rewrite the group's records so that {target} loads them: stop the brokers, run "
        f"{fix} --log-dir (a broker's log dir) --out (a new log dir) for each broker, and "
        f"start {target} on the new log dirs"
    )


def output_width(out: TextIO) -> int | None:
    """The width to wrap to: the terminal's (`shutil.get_terminal_size`: COLUMNS, else the
    terminal's size) when writing to a terminal or when COLUMNS is set; None (no wrapping)
    for a pipe or a file, which a script or `grep` reads line by line."""
    try:
        tty = out.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty and "COLUMNS" not in os.environ:
        return None
    return max(40, shutil.get_terminal_size().columns)


def _wrapped(
    label: str, text: str, width: int | None, indent: str = "  ", hang: str | None = None
) -> list[str]:
    """`label text` as lines no wider than `width`, continued under the text (or after `hang`);
    words (settings, paths, group ids) are never split."""
    first = indent + label
    if width is None:
        return [first + text]
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=" " * len(first) if hang is None else hang,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first]


def render(
    verdicts: Sequence[Verdict],
    problems: Sequence[str],
    verbose: bool,
    out: TextIO,
    server: ServerCapabilities | None = None,
    invocation: Invocation | None = None,
) -> None:
    """The verdicts for a person: a table of verdicts, then per group its reason and its fix
    on lines of their own, wrapped to the terminal, each command the fix needs complete on a
    `$ ` line of its own (never wrapped, so it can be copied)."""
    from tools.check.rules import check_title
    from tools.groups.output import Style, table, use_colour

    style = Style(use_colour(out))
    width = output_width(out)
    lines: list[str] = []
    if server is not None and server.serves_consumer_protocol is False:
        lines.append(style.bad(f"Server {server.bootstrap}: does not serve the KIP-848 consumer protocol"))
        lines += _wrapped("", server.reason, width)
        for i, way in enumerate(server.ways_out(), 1):
            lines += _wrapped(f"way out {i}: ", way, width)
        lines.append(
            "  $ " + shlex.join(["groupshift", "serve", "--upstream", server.bootstrap or "HOST:PORT"])
        )
    rows = [[v.group, v.group_type, v.size, v.verdict] for v in verdicts]
    headers = ["GROUP", "TYPE", "MEMBERS", "VERDICT"]
    if rows:
        lines.append(table(headers, rows, style, {3: lambda s: s not in ("READY", "SAFE")}))
    for v in verdicts:
        lines.append(style.bold(f"{v.group}: {v.verdict}"))
        lines += _wrapped("reason: ", v.reason, width)
        fix = _fix_text(v.fix, invocation)
        if fix:
            lines += _wrapped("fix: ", fix, width)
        for what, command in fix_commands(v, invocation):
            lines += _wrapped("", f"{what}:", width, hang="    ")
            lines.append(f"  $ {command}")
        if v.kafka_message:
            said = f"{v.group}: a group.protocol=consumer member is refused: {v.kafka_message}"
            lines += _wrapped("", said, width, hang="    ")
        if verbose:
            for c in v.details:
                said = f"{v.group} [{c.status}] {check_title(c.name)}: {c.reason}"
                lines += _wrapped("", said, width, hang="      ")
                if (check_fix := _fix_text(c.fix, invocation)) is not None:
                    lines += _wrapped("fix: ", check_fix, width, "      ")
    for p in problems:
        lines += [style.warn(line) for line in _wrapped("input: ", p, width, "")]
    for cluster, counts in summary(verdicts).items():
        total = sum(counts.values())
        parts = ", ".join(f"{n} {k}" for k, n in counts.items())
        lines += [
            style.bold(line)
            for line in _wrapped("", f"Cluster {cluster}: {total} group(s): {parts}", width, "", "  ")
        ]
    if not verdicts:
        lines.append("No groups.")
    out.write("\n".join(lines) + "\n")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not args.all and not args.groups:
        err.write(f"groupshift check {args.check_command}: error: name GROUP(s) or give --all\n")
        return INPUT_ERROR
    if args.check_command == "downgrade":
        from tools.check.loader_rules import KAFKA_TARGETS

        if args.to != CLASSIC_TARGET and args.to not in KAFKA_TARGETS:
            err.write(
                f"groupshift check downgrade: error: unknown target {args.to!r}; known: "
                f"{CLASSIC_TARGET}, {', '.join(KAFKA_TARGETS)}\n"
            )
            return INPUT_ERROR
    try:
        facts, settings, problems, unknown, server = load(args)
    except _InputError as e:
        err.write(f"groupshift check {args.check_command}: error: {e}\n")
        return INPUT_ERROR
    verdicts = evaluate(args, facts, settings, unknown, server)
    found = {v.group for v in verdicts}
    missing = [g for g in args.groups if g not in found] if not args.all else []
    if missing:
        err.write(f"groupshift check {args.check_command}: error: group(s) not found: {', '.join(missing)}\n")
        return INPUT_ERROR
    status = exit_status(verdicts)
    if args.check_command == "upgrade" and server is not None and server.serves_consumer_protocol is False:
        # Nothing on this server can be upgraded, listed or not (a server whose ListGroups
        # answers nothing, like Tansu's, must not pass a CI gate with "No groups.").
        status = max(status, ACTION)
    if args.json:
        doc = {
            "check": args.check_command,
            "target": getattr(args, "to", None),
            "groups": [v.to_json() for v in verdicts],
            "summary": summary(verdicts),
            "settings": {
                "group.consumer.migration.policy": settings.migration_policy,
                "group.consumer.max.size": settings.consumer_max_size,
                "group.max.size": settings.classic_max_size,
                "group.consumer.assignors": ",".join(settings.consumer_assignors),
                "known": sorted(settings.known),
            },
            "problems": problems,
            "server": server.to_json() if server is not None else None,
            "exit_status": status,
        }
        out.write(json.dumps(doc, indent=1) + "\n")
    else:
        render(verdicts, problems, args.verbose, out, server, Invocation.from_args(args))
    return status
