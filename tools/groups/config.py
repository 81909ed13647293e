"""`groupshift groups config GROUP [--set NAME=VALUE]... [--delete NAME]...`.

Per-group dynamic configs (KIP-848 "Dynamic group configs"): without options, the group's
configs from DescribeConfigs on the GROUP resource (NAME VALUE SOURCE, SOURCE `dynamic` for an
override, `default` otherwise); with `--set`/`--delete`, one IncrementalAlterConfigs with SET and
DELETE operations (Kafka's `kafka-configs.sh --entity-type groups --alter`), then the result.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from tools.groups.output import OK, USAGE, Style, emit_json, error, table
from tools.groups.wire import GROUP_RESOURCE, AdminWire

_SOURCES = {
    1: "dynamic topic",
    2: "dynamic broker",
    3: "dynamic default broker",
    4: "static broker",
    5: "default",
    6: "dynamic broker logger",
    7: "client metrics",
    8: "dynamic",
}


def run(admin: AdminWire, args: argparse.Namespace, out: TextIO, style: Style) -> int:
    sets: dict[str, str] = {}
    for s in args.set or []:
        name, eq, value = s.partition("=")
        if not eq or not name:
            error(f"--set expects NAME=VALUE, got {s!r}")
            return USAGE
        sets[name.strip()] = value.strip()
    deletes = list(args.delete or [])
    if sets or deletes:
        admin.alter_group_configs(args.group, sets, deletes)
    configs = admin.describe_configs(GROUP_RESOURCE, args.group)
    if args.json:
        emit_json(
            {
                "group": args.group,
                "configs": {
                    k: {"value": v["value"], "source": _SOURCES.get(v["source"], str(v["source"]))}
                    for k, v in sorted(configs.items())
                },
            },
            out,
        )
        return OK
    if sets or deletes:
        out.write(f"Completed updating config for group {args.group}.\n")
    rows = [[k, v["value"], _SOURCES.get(v["source"], v["source"])] for k, v in sorted(configs.items())]
    out.write(table(["NAME", "VALUE", "SOURCE"], rows, style) + "\n")
    return OK
