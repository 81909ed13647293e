"""The Spark job of `groupshift fleet report` (PySpark; local mode or any Spark master).

Stages, all on the executors (the driver only plans, and collects the small aggregates the HTML
report plots):

1. **segments**: every segment file of every cluster is read with Spark's `binaryFile` source and
   decoded by `mapInArrow` with the records/ codecs (tools.fleet.decode), each file compacted as
   it is read; problems (CRC mismatches, torn tails) become rows of their own;
2. **compaction** per (cluster, partition, key): the newest record wins (`max_by` offset); a
   tombstone deletes the key (Kafka's log cleaner, and what the coordinator's loader rebuilds);
3. **facts and verdicts** per (cluster, partition) by `applyInArrow`: the partition's live
   records go through `groupshift check`'s own builders and rules (tools.fleet.judge), with the
   broker settings of its cluster, its groups judged together as `check --log-dir` judges them;
4. **rebalance health** per (cluster, group) from the event logs (tools.fleet.health), and
   rebalances per group per hour.

Outputs (Parquet, under DIR): `facts`, `verdicts`, `health`, `rebalances_hourly`, `problems`.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tools.fleet.inputs import Cluster

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

RECORD_SCHEMA = (
    "cluster string, partition int, offset long, timestamp long, record_type int, `group` string, "
    "key binary, value binary, n long, problem string, file string"
)
PROBLEM_SCHEMA = "cluster string, partition int, file string, offset long, problem string"
# A task of the binaryFile source holds whole files in one Arrow batch: at most this many bytes
# of them (plus one file, when a single file is larger), which bounds a Python worker's memory.
FILE_BYTES_PER_TASK = 64 * 2**20
SHUFFLE_BYTES_PER_PARTITION = 32 * 2**20  # input bytes per shuffle partition (2 at least)


SPARK_LOG4J2 = """\
# groupshift fleet: Spark's own log goes to a file, so a failed task's Java and Python stack
# traces never reach the terminal (the command prints one line naming this file).
status = error
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss.SSS}} %p %c: %m%n%ex
"""


def spark_log_options(log_path: str) -> dict[str, str]:
    """Spark settings that send the driver's log4j2 output to `log_path` (a log4j2 properties
    file is written beside it). In local mode the executors run in the driver's JVM, so a task's
    failure is logged there too."""
    config = os.path.splitext(log_path)[0] + "-log4j2.properties"
    with open(config, "w", encoding="utf-8") as f:
        f.write(SPARK_LOG4J2.format(path=log_path))
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{config}"}


def session(
    master: str = "local[2]", app: str = "groupshift-fleet", log_path: str | None = None, **conf: str
) -> SparkSession:
    """A SparkSession bound to 127.0.0.1 whose Python workers run this interpreter (so they
    import groupshift from the same environment and checkout); with `log_path`, Spark's own log
    goes to that file instead of stderr."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.environ.get("PYTHONPATH", "")
    if here not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = here + (os.pathsep + path if path else "")
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.files.maxPartitionBytes", str(FILE_BYTES_PER_TASK))
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
    )
    for k, v in {**(spark_log_options(log_path) if log_path else {}), **conf}.items():
        b = b.config(k, v)
    return b.getOrCreate()


def _local(uri: str) -> str:
    p = urllib.parse.urlparse(uri)
    return os.path.normpath(urllib.parse.unquote(p.path) if p.scheme in ("file", "") else uri)


@dataclass
class Result:
    out_dir: str
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)


def _decode_files(index: dict[str, tuple[str, int]]) -> Any:
    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from tools.fleet.decode import compact_segment

        names = [c.strip().split(" ")[0].strip("`") for c in RECORD_SCHEMA.split(",")]
        for batch in batches:
            paths = batch.column("path").to_pylist()
            contents = batch.column("content")
            for i, path in enumerate(paths):
                local = _local(path)
                cluster, partition = index[local]
                data = contents[i].as_py()
                rows, problems, _records = compact_segment(data)
                cols: dict[str, list[Any]] = {n: [] for n in names}
                for r in rows:
                    for n, v in (
                        ("cluster", cluster),
                        ("partition", partition),
                        ("offset", r.offset),
                        ("timestamp", r.timestamp),
                        ("record_type", r.record_type),
                        ("group", r.group),
                        ("key", r.key),
                        ("value", r.value),
                        ("n", r.n),
                        ("problem", None),
                        ("file", local),
                    ):
                        cols[n].append(v)
                for p in problems:
                    for n, v in (
                        ("cluster", cluster),
                        ("partition", partition),
                        ("offset", p.offset),
                        ("timestamp", None),
                        ("record_type", None),
                        ("group", None),
                        ("key", None),
                        ("value", None),
                        ("n", 0),
                        ("problem", f"position {p.position}: {p.error}"),
                        ("file", local),
                    ):
                        cols[n].append(v)
                yield pa.RecordBatch.from_pydict(cols, schema=_arrow(RECORD_SCHEMA))

    return decode


def _arrow(ddl: str) -> pa.Schema:
    from tools.fleet.schema import arrow_schema

    return arrow_schema(ddl)


def _judge_groups(
    settings: dict[str, dict[str, str | None]], topics: dict[str, dict[str, str]], targets: Sequence[str]
) -> Any:
    def judge_group(table: pa.Table) -> pa.Table:
        import uuid

        import pyarrow as pa

        from tools.fleet.judge import JUDGED_SCHEMA, judge

        schema = _arrow(JUDGED_SCHEMA)
        if table.num_rows == 0:
            return schema.empty_table()
        cluster = table.column("cluster")[0].as_py()
        partition = table.column("partition")[0].as_py()
        offsets = table.column("offset").to_pylist()
        order = sorted(range(table.num_rows), key=lambda i: offsets[i])
        keys = table.column("key").to_pylist()
        values = table.column("value").to_pylist()
        entries = [(keys[i], values[i]) for i in order]
        records: dict[str, int] = {}
        for g, n in zip(table.column("group").to_pylist(), table.column("n").to_pylist(), strict=True):
            records[g] = records.get(g, 0) + n
        names = {uuid.UUID(k): v for k, v in topics.get(cluster, {}).items()}
        rows = judge(cluster, entries, records, settings.get(cluster, {}), targets, names, partition)
        return pa.Table.from_pylist(rows, schema=schema)

    return judge_group


def _parse_event_files(index: dict[str, str]) -> Any:
    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from tools.fleet.health import EVENT_SCHEMA, parse_event

        schema = _arrow(EVENT_SCHEMA)
        for batch in batches:
            paths = batch.column("path").to_pylist()
            contents = batch.column("content")
            for i, path in enumerate(paths):
                cluster = index[_local(path)]
                text = contents[i].as_py().decode("utf-8", errors="replace")
                rows = []
                for seq, line in enumerate(text.splitlines()):
                    e = parse_event(line, cluster, seq)
                    if e is not None:
                        rows.append(e)
                    if len(rows) >= 50_000:
                        yield pa.RecordBatch.from_pylist(rows, schema=schema)
                        rows = []
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=schema)

    return parse


def _health_of_groups(windows: dict[str, tuple[float, float]]) -> Any:
    def health_of_group(table: pa.Table) -> pa.Table:
        import pyarrow as pa

        from tools.fleet.health import HEALTH_SCHEMA, health

        schema = _arrow(HEALTH_SCHEMA)
        if table.num_rows == 0:
            return schema.empty_table()
        rows = table.to_pylist()
        cluster = rows[0]["cluster"]
        row = health(cluster, rows[0]["group"], rows, windows.get(cluster))
        return pa.Table.from_pylist([row], schema=schema)

    return health_of_group


def input_problems(clusters: Sequence[Cluster]) -> list[tuple[str, int | None, str, int | None, str]]:
    """Rows of the `problems` table for input files read before the job (settings.json,
    topics.json) that could not be used."""
    return [(c.name, None, path, None, message) for c in clusters for path, message in c.problems]


def build(
    spark: SparkSession,
    clusters: Sequence[Cluster],
    downgrade_targets: Sequence[str],
) -> dict[str, DataFrame]:
    """The job's tables as DataFrames (lazy): facts, verdicts, health, rebalances_hourly,
    problems."""
    from pyspark.sql import functions as F

    from tools.fleet.health import EVENT_SCHEMA, HEALTH_SCHEMA
    from tools.fleet.judge import JUDGED_SCHEMA

    seg_index = {os.path.normpath(p): (c.name, part) for c in clusters for part, p in c.segments}
    ev_index = {os.path.normpath(p): c.name for c in clusters for p in c.events}
    settings = {c.name: c.settings for c in clusters}
    topics = {c.name: c.topic_names for c in clusters}
    tables: dict[str, DataFrame] = {}

    total = sum(os.path.getsize(p) for p in seg_index) + sum(os.path.getsize(p) for p in ev_index)
    partitions = max(2, min(200, total // SHUFFLE_BYTES_PER_PARTITION + 1))
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    if seg_index:
        newest = F.struct("offset", "timestamp", "record_type", "group", "value")
        files = spark.read.format("binaryFile").load(sorted(seg_index))
        decoded = files.select("path", "content").mapInArrow(_decode_files(seg_index), RECORD_SCHEMA)
        decoded = decoded.persist()
        records = decoded.filter(F.col("problem").isNull())
        live = (
            records.groupBy("cluster", "partition", "key")
            .agg(
                F.max_by(newest, "offset").alias("r"),
                F.sum("n").alias("n"),
            )
            .select("cluster", "partition", "key", "r.*", "n")
        )
        # one call per __consumer_offsets partition: a release loads a partition whole, so a
        # group's kafka-X.Y verdict depends on the other groups of its partition (as in check)
        judged = (
            live.groupBy("cluster", "partition")
            .applyInArrow(_judge_groups(settings, topics, list(downgrade_targets)), JUDGED_SCHEMA)
            .persist()
        )
        tables["facts"] = judged.filter(F.col("live")).drop("live", "verdicts", "problems")
        tables["verdicts"] = judged.select(
            "cluster", "group", "type", "size", F.explode("verdicts").alias("v")
        ).select("cluster", "group", "type", "size", "v.*")
        tables["problems"] = decoded.filter(F.col("problem").isNotNull()).select(
            "cluster", "partition", "file", "offset", "problem"
        )
    inputs = input_problems(clusters)
    if inputs:
        found = spark.createDataFrame(inputs, PROBLEM_SCHEMA)
        tables["problems"] = tables["problems"].unionByName(found) if "problems" in tables else found
    if ev_index:
        files = spark.read.format("binaryFile").load(sorted(ev_index))
        events = (
            files.select("path", "content").mapInArrow(_parse_event_files(ev_index), EVENT_SCHEMA).persist()
        )
        # the span each cluster's log covers: one row per cluster, the only thing collected here
        spans = events.groupBy("cluster").agg(F.min("ts").alias("lo"), F.max("ts").alias("hi")).collect()
        windows = {r["cluster"]: (float(r["lo"]), float(r["hi"])) for r in spans}
        health_of_group = _health_of_groups(windows)
        tables["health"] = events.groupBy("cluster", "group").applyInArrow(health_of_group, HEALTH_SCHEMA)
        starts = events.filter(F.col("event").isin("group.rebalance_prepared", "group.epoch_bumped"))
        tables["rebalances_hourly"] = (
            starts.withColumn("hour", F.timestamp_seconds(F.floor(F.col("ts") / 3600) * 3600))
            .groupBy("cluster", "group", "hour")
            .agg(F.count(F.lit(1)).alias("rebalances"))
        )
    return tables


def _rows_written(spark: SparkSession, path: str) -> int:
    """Rows of a written table, from the Parquet footers when the path is local (no Spark job)."""
    if os.path.isdir(path):
        import pyarrow.dataset as ds

        return int(ds.dataset(path, format="parquet").count_rows())
    return int(spark.read.parquet(path).count())


def run(
    spark: SparkSession,
    clusters: Sequence[Cluster],
    out_dir: str,
    downgrade_targets: Sequence[str],
) -> Result:
    """Build the tables and write them as Parquet under `out_dir`."""
    start = time.monotonic()
    tables = build(spark, clusters, downgrade_targets)
    counts: dict[str, int] = {}
    for name, df in tables.items():
        path = os.path.join(out_dir, name)
        df.write.mode("overwrite").parquet(path)
        counts[name] = _rows_written(spark, path)
    return Result(out_dir, time.monotonic() - start, counts)
