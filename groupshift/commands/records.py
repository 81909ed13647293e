"""`groupshift records dump | export | import | rewrite`: the coordinator records of
`__consumer_offsets` (Kafka's key/value schemas of the group coordinator, KIP-848's record types
included). `dump` decodes them like Kafka's `kafka-dump-log --offsets-decoder`; export, import and
rewrite (tools.records_transfer) move them between groupshift's data directory and a Kafka
broker's log directory.
"""

from __future__ import annotations

import argparse
from typing import Any

from tools.records_transfer import add_commands

_RECORDS_DUMP_EPILOG = """\
PATH is one of:
  a data directory    groupshift's --data-dir: every coordinator log in <data dir>/coordinator
  a coordinator dir   <data dir>/coordinator, or a Kafka broker's log directory: every
                      __consumer_offsets-N log in it, each under a "log: NAME" line
  a log directory     every <20-digit offset>.log segment in it: groupshift's
                      <data dir>/coordinator/__consumer_offsets-N, or a __consumer_offsets-N
                      directory copied from a Kafka broker (.index, .timeindex, ... ignored)
  a .log file         one segment
  any other file      raw records as text, one per line:
                        <key hex> <value hex, or - for a tombstone>
                      blank lines and lines starting with # are ignored; records are numbered
                      from 0 (shown as the offset). E.g. from a live cluster with kafka-python:
                        for m in KafkaConsumer("__consumer_offsets", exclude_internal_topics=False,
                                auto_offset_reset="earliest", consumer_timeout_ms=5000):
                            print(m.key.hex(), "-" if m.value is None else m.value.hex())

--group GROUP prints only that group's records; with a data or coordinator directory it
reads only the log that holds the group (Kafka's partitionFor over the number of logs).

One line per record: offset, timestamp, record type, key fields, value version and fields (or
<tombstone>), with Kafka's JSON field names. Unknown record types are printed as unknown(N).
Malformed records, compressed batches (unsupported) and damaged batches are reported on an
"error:" line naming the offset (or file and byte position) and the dump continues. The input
is only read (no recovery, no lock). Exit status: 0 all decoded, 1 errors were reported, 2 PATH
cannot be read.
"""


def add_parser(sub: Any, summary: str) -> argparse.ArgumentParser:
    """The `records` parser and its subcommands; `summary` is its line in `groupshift --help`
    (groupshift.cli.COMMANDS)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "records",
        help=summary,
        description="Tools for coordinator records: the __consumer_offsets key/value format.",
    )
    records_sub = p.add_subparsers(dest="records_command", metavar="COMMAND")
    d = records_sub.add_parser(
        "dump",
        help="print every record of a log directory, segment or raw-pairs file, decoded",
        description=(
            "Print the coordinator records of PATH decoded, like Kafka's `kafka-dump-log --offsets-decoder`."
        ),
        epilog=_RECORDS_DUMP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument(
        "path",
        metavar="PATH",
        help="data directory, coordinator directory, log directory, .log segment or raw-pairs text file",
    )
    d.add_argument("--json", action="store_true", help="print one JSON object per record")
    d.add_argument("--group", metavar="GROUP", help="only the records of this group")
    add_commands(records_sub)

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(run=usage)
    d.set_defaults(run=run_dump)
    return p


def run_dump(args: argparse.Namespace) -> int:
    """`records dump PATH`: exit 0 all decoded, 1 errors were reported, 2 PATH cannot be read."""
    from gateway.groups.routing import partition_for
    from records.dump import dump

    return dump(args.path, as_json=args.json, group=args.group, shard_for=partition_for)
