"""`groupshift groups reset-offsets GROUP (--topic T[:P,...]... | --all-topics | --from-file CSV)
SCENARIO [--dry-run | --execute] [--export]`.

Kafka's `kafka-consumer-groups.sh --reset-offsets` (ConsumerGroupCommand, GroupOffsetsResetter):

- scenarios `--to-earliest`, `--to-latest`, `--to-offset N`, `--shift-by N`, `--to-datetime
  YYYY-MM-DDTHH:mm:SS[.sss][zone]`, `--to-current`, `--from-file`; a target outside the log is
  clamped to [log start, log end] (to-offset, shift-by); a datetime past the last record falls
  back to the log end offset, with a warning; shift-by needs a committed offset.
- only an inactive group (Empty, Dead, or unknown) can be reset: otherwise the error names the
  state and nothing is written (exit 4).
- dry run unless `--execute`: prints GROUP TOPIC PARTITION NEW-OFFSET; `--export` prints the plan
  as Kafka's CSV (`topic,partition,offset` per line, no header), which `--from-file` reads back
  (also the `group,topic,partition,offset` form Kafka writes for several groups).
- `--execute` commits the offsets as Kafka's admin client alters them (OffsetCommit, generation
  -1, no member id).
- `--all-groups` instead of GROUP: every consumer group in turn (ListGroups), each planned and
  refused on its own; `--export` then writes Kafka's `group,topic,partition,offset` lines and
  `--json` a list of the single-group objects. The exit status is the highest of the groups'.

A streams group (KIP-1071) is reset as Kafka 4.4's `kafka-streams-groups.sh --reset-offsets`
(StreamsGroupCommand) resets one: the same scenarios and the same inactive-group rule (Empty or
Dead, else the same message); `--all-input-topics` (`--all-topics`) is every committed
partition of the subtopologies' source topics, not of their repartition topics (Kafka's
getInputTopicOffsets, measured against Kafka 4.4's tool), and `--input-topic` (`--topic`) partitions must
all have a committed offset, else "One or more topics are not part of the group" and nothing
is planned. Kafka's `--delete-internal-topic`/`--delete-all-internal-topics` (delete the
group's changelog and repartition topics with the reset) are not offered: groupshift's tools
delete no data they did not create without a backup (docs/deviations.md).
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import sys
from pathlib import Path
from typing import TextIO

from tools.groups.output import ERROR, OK, REFUSED, USAGE, Style, emit_json, error, table
from tools.groups.snapshot import describe
from tools.groups.streams_group import describe_streams
from tools.groups.wire import EARLIEST, LATEST, AdminWire, error_name

TP = tuple[str, int]


class PlanError(ValueError):
    """The reset cannot be planned (bad input or no committed offset to shift)."""


def parse_csv(text: str, group: str) -> dict[TP, int]:
    plan: dict[TP, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")]
        try:
            if len(fields) == 3:
                topic, part, off = fields
            elif len(fields) == 4:
                g, topic, part, off = fields
                if g != group:
                    continue
            else:
                raise ValueError
            plan[(topic, int(part))] = int(off)
        except ValueError:
            raise PlanError(
                f"line {n}: expected topic,partition,offset or group,topic,partition,offset, got {line!r}"
            ) from None
    return plan


def to_csv(plan: dict[TP, int]) -> str:
    return "".join(f"{t},{p},{o}\n" for (t, p), o in sorted(plan.items()))


def parse_datetime(text: str) -> int:
    """Epoch ms of Kafka's `yyyy-MM-ddTHH:mm:SS.sss[zone]`; a time without a zone is local time."""
    try:
        dt = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise PlanError(
            f"Error parsing timestamp '{text}': expected format yyyy-MM-ddTHH:mm:SS.sss, "
            "optionally followed by Z or +hh:mm"
        ) from None
    if dt.tzinfo is None:
        dt = dt.astimezone()
    return int(dt.timestamp() * 1000)


def partitions_for(admin: AdminWire, args: argparse.Namespace, committed: dict[TP, int]) -> list[TP]:
    if args.all_topics:
        return sorted(committed)
    explicit: list[TP] = []
    whole: list[str] = []
    for arg in args.topic or []:
        topic, sep, parts = arg.partition(":")
        if not sep:
            whole.append(topic)
            continue
        try:
            explicit += [(topic, int(p)) for p in parts.split(",")]
        except ValueError:
            raise PlanError(f"Invalid partition in topic arg '{arg}'") from None
    if whole:
        for topic, parts in admin.metadata(whole).items():
            explicit += [(topic, p) for p in parts]
    return sorted(set(explicit))


def streams_partitions_for(
    admin: AdminWire, args: argparse.Namespace, committed: dict[TP, int], input_topics: set[str]
) -> list[TP]:
    """A streams group's reset scope as Kafka's StreamsGroupCommand works it out: all input
    topics are the committed partitions of the subtopologies' source topics (`input_topics`;
    repartition topics are internal); named partitions must all be committed ones."""
    if args.all_topics:
        return sorted(tp for tp in committed if tp[0] in input_topics)
    parts = partitions_for(admin, args, committed)
    if any(tp not in committed for tp in parts):
        raise PlanError(f"One or more topics are not part of the group '{args.group}'.")
    return parts


def plan_reset(
    admin: AdminWire,
    args: argparse.Namespace,
    committed: dict[TP, int],
    streams_input_topics: set[str] | None = None,
) -> dict[TP, int]:
    """The new offset of each partition in scope; `streams_input_topics` (the topics a streams
    group's subtopologies read) makes the scope a streams group's."""
    if args.from_file:
        try:
            return parse_csv(Path(args.from_file).read_text(), args.group)
        except OSError as e:
            raise PlanError(f"cannot read {args.from_file}: {e}") from None
    if streams_input_topics is None:
        parts = partitions_for(admin, args, committed)
    else:
        parts = streams_partitions_for(admin, args, committed, streams_input_topics)
    if not parts:
        return {}
    if args.to_earliest:
        return admin.list_offsets(parts, EARLIEST)
    if args.to_latest:
        return admin.list_offsets(parts, LATEST)
    if args.to_current:
        return {tp: committed[tp] for tp in parts if tp in committed}
    if args.to_datetime is not None:
        ts = parse_datetime(args.to_datetime)
        at = admin.list_offsets(parts, ts)
        empty = [tp for tp, o in at.items() if o < 0]
        if empty:
            ends = admin.list_offsets(empty, LATEST)
            for tp in empty:
                sys.stderr.write(
                    f"Warn: Partition {tp[1]} from topic {tp[0]} is empty. "
                    "Falling back to latest known offset.\n"
                )
                at[tp] = ends[tp]
        return at
    if args.to_offset is not None:
        wanted = dict.fromkeys(parts, args.to_offset)
    else:  # shift-by
        missing = [tp for tp in parts if tp not in committed]
        if missing:
            t, p = missing[0]
            raise PlanError(
                f"Cannot shift offset for partition {t}-{p} since there is no current committed offset"
            )
        wanted = {tp: committed[tp] + args.shift_by for tp in parts}
    starts = admin.list_offsets(parts, EARLIEST)
    ends = admin.list_offsets(parts, LATEST)
    return {tp: min(max(o, starts[tp]), ends[tp]) for tp, o in wanted.items()}


def run(admin: AdminWire, args: argparse.Namespace, out: TextIO, style: Style) -> int:
    """Reset the named group, or with `--all-groups` each consumer group in turn."""
    if not getattr(args, "all_groups", False):
        return run_one(admin, args, out, style)
    group_ids = sorted(
        g["group"] for g in admin.list_groups() if (g["protocol_type"] or "") in ("consumer", "")
    )
    codes: list[int] = []
    found: list[object] = []
    for group_id in group_ids:
        one = argparse.Namespace(**{**vars(args), "group": group_id})
        if not (args.json or args.export):
            codes.append(run_one(admin, one, out, style))
            continue
        buffer = io.StringIO()  # the single-group output, re-shaped for several groups
        codes.append(run_one(admin, one, buffer, style))
        if args.json:
            found.append(json.loads(buffer.getvalue()) if buffer.getvalue() else {"group": group_id})
        else:
            out.write("".join(f"{group_id},{line}\n" for line in buffer.getvalue().splitlines()))
    if args.json:
        emit_json(found, out)
    return max(codes, default=OK)


def run_one(admin: AdminWire, args: argparse.Namespace, out: TextIO, style: Style) -> int:
    scenarios = [
        args.to_earliest,
        args.to_latest,
        args.to_current,
        args.to_offset is not None,
        args.shift_by is not None,
        args.to_datetime is not None,
        args.from_file is not None,
    ]
    if sum(scenarios) != 1:
        error(
            "reset-offsets needs exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
            "--shift-by, --to-datetime, --from-file"
        )
        return USAGE
    if args.from_file is None and not args.topic and not args.all_topics:
        error("One of the reset scopes should be defined: --all-topics, --topic.")
        return USAGE
    streams = describe_streams(admin, args.group)
    input_topics: set[str] | None = None
    if streams is not None:
        exists, state = True, streams.state
        input_topics = set(streams.source_topics)
    else:
        group = describe(admin, args.group)
        exists, state = group.exists, group.state
    if exists and state not in ("Empty", "Dead"):
        error(
            f"Assignments can only be reset if the group '{args.group}' is inactive, "
            f"but the current state is {state}."
        )
        return REFUSED
    committed = {tp: v[0] for tp, v in admin.offset_fetch(args.group).items()} if exists else {}
    try:
        plan = plan_reset(admin, args, committed, input_topics)
    except PlanError as e:
        error(str(e))
        return USAGE if "line " in str(e) or "Invalid" in str(e) or "parsing" in str(e) else ERROR
    failed: dict[TP, str] = {}
    if args.execute and plan:
        codes = admin.commit_offsets(args.group, plan)
        failed = {tp: error_name(c) for tp, c in codes.items() if c != 0}
    if args.json:
        emit_json(
            {
                "group": args.group,
                "executed": bool(args.execute),
                "offsets": [
                    {"topic": t, "partition": p, "new_offset": o, "error": failed.get((t, p))}
                    for (t, p), o in sorted(plan.items())
                ],
            },
            out,
        )
    elif args.export:
        out.write(to_csv(plan))
    elif plan:
        rows = [[args.group, t, p, o] for (t, p), o in sorted(plan.items())]
        out.write("\n" + table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, style) + "\n\n")
    for (t, p), name in sorted(failed.items()):
        error(f"offset for {t}-{p} not committed: {name}")
    return ERROR if failed else OK
