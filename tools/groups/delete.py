"""`groupshift groups delete GROUP...` and `groupshift groups delete-offsets GROUP --topic T[:P,...]...`.

Kafka's `kafka-consumer-groups.sh --delete` (DeleteGroups: only empty groups; a group with
members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND) and `--delete-offsets`
(OffsetDelete, KIP-496: refused per partition with GROUP_SUBSCRIBED_TO_TOPIC while the group is
subscribed to the topic), with the same messages and the TOPIC PARTITION STATUS table.
Exit 0 when everything was deleted, 3 when a group does not exist, 4 when it is not empty or
still subscribed, 1 for any other error.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from tools.groups.output import ERROR, NOT_FOUND, OK, REFUSED, Style, emit_json, error, table
from tools.groups.wire import AdminWire, error_name

GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC = 69, 68, 86

_MESSAGES = {
    GROUP_ID_NOT_FOUND: "The group id does not exist.",
    NON_EMPTY_GROUP: "The group is not empty.",
    GROUP_SUBSCRIBED_TO_TOPIC: "The consumer group is actively subscribed to the topic.",
}


def _exit_for(codes: list[int]) -> int:
    bad = [c for c in codes if c != 0]
    if not bad:
        return OK
    if all(c == GROUP_ID_NOT_FOUND for c in bad):
        return NOT_FOUND
    if all(c in (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC) for c in bad):
        return REFUSED
    return ERROR


def run_delete(admin: AdminWire, args: argparse.Namespace, out: TextIO, style: Style) -> int:
    from tools.groups.describe import named_groups

    group_ids = named_groups(admin, args)
    if not group_ids:  # --all-groups on a cluster without groups
        out.write("There are no consumer groups to delete.\n")
        return OK
    results = admin.delete_groups(group_ids)
    if args.json:
        emit_json([{"group": g, "error": None if c == 0 else error_name(c)} for g, c in results.items()], out)
        return _exit_for(list(results.values()))
    ok = [g for g, c in results.items() if c == 0]
    failed = {g: c for g, c in results.items() if c != 0}
    if not failed:
        out.write(
            "Deletion of requested consumer groups ("
            + ", ".join(f"'{g}'" for g in ok)
            + ") was successful.\n"
        )
    else:
        out.write("\nError: Deletion of some consumer groups failed:\n")
        for g, c in failed.items():
            out.write(f"* Group '{g}' could not be deleted due to: {error_name(c)}: {_MESSAGES.get(c, '')}\n")
        if ok:
            out.write(
                "\nThese consumer groups were deleted successfully: " + ", ".join(f"'{g}'" for g in ok) + "\n"
            )
    return _exit_for(list(results.values()))


def run_delete_offsets(admin: AdminWire, args: argparse.Namespace, out: TextIO, style: Style) -> int:
    partitions: list[tuple[str, int]] = []
    whole: list[str] = []
    for arg in args.topic:
        topic, sep, parts = arg.partition(":")
        if sep:
            try:
                partitions += [(topic, int(p)) for p in parts.split(",")]
            except ValueError:
                error(f"Invalid partition in topic arg '{arg}'")
                return 2
        else:
            whole.append(topic)
    if whole:
        for topic, parts_of in admin.metadata(whole).items():
            partitions += [(topic, p) for p in parts_of]
    top, per = admin.delete_offsets(args.group, partitions)
    if top != 0:
        per = per if per else {tp: per.get(tp, top) for tp in partitions}
    codes = [top, *per.values()]
    if args.json:
        emit_json(
            {
                "group": args.group,
                "error": None if top == 0 else error_name(top),
                "partitions": [
                    {"topic": t, "partition": p, "error": None if c == 0 else error_name(c)}
                    for (t, p), c in sorted(per.items())
                ],
            },
            out,
        )
        return _exit_for(codes)
    if top == 0 and all(c == 0 for c in per.values()):
        out.write(f"Request succeeded for deleting offsets from group {args.group}.\n")
    elif top in (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP):
        error(_MESSAGES[top])
    else:
        error("Encountered some partition-level error, see the follow-up details.")
    rows = [
        [t, p, "Successful" if c == 0 else f"Error: {_MESSAGES.get(c, error_name(c))}"]
        for (t, p), c in sorted(per.items())
    ]
    if rows:
        out.write("\n" + table(["TOPIC", "PARTITION", "STATUS"], rows, style) + "\n")
    return _exit_for(codes)
