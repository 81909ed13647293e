"""bench.state_load reads Kafka's load times from the broker's own log: the two lines a Kafka
4.4.0 broker wrote when it restarted on an exported 5,000-record `__consumer_offsets-0`."""

from __future__ import annotations

from bench.state_load import COORDINATOR_LOADED, LOG_LOADED

LINES = """\
[2026-11-28 11:12:40,844] INFO Completed load of Log(dir=/tmp/sl/kafka/node-0/data/__consumer_offsets-0, \
topicId=3gW1WDBzTNezEMEozg5c0A, topic=__consumer_offsets, partition=0, highWatermark=0, lastStableOffset=0, \
logStartOffset=0, logEndOffset=5000) with 1 segments, local-log-start-offset 0 and log-end-offset 5000 \
in 286ms \
(1/1 completed in /tmp/sl/kafka/node-0/data) (org.apache.kafka.storage.internals.log.LogManager)
[2026-11-28 11:12:40,851] INFO Completed load of Log(dir=/tmp/sl/kafka/node-0/data/__consumer_offsets-10, \
topicId=3gW1WDBzTNezEMEozg5c0A, topic=__consumer_offsets, partition=10) with 1 segments in 999ms \
(org.apache.kafka.storage.internals.log.LogManager)
[2026-11-28 11:12:46,923] INFO [GroupCoordinator id=0] Finished loading \
of metadata from __consumer_offsets-0 \
with epoch 2 in 2917ms where 89ms was spent in the scheduler. Loaded 5000 records \
which total to 367099 bytes. \
(org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)
"""


def test_the_broker_log_lines_give_the_load_times() -> None:
    log = LOG_LOADED.search(LINES)
    coordinator = COORDINATOR_LOADED.search(LINES)
    assert log is not None and log.group(1) == "286"
    assert coordinator is not None and coordinator.groups() == ("2917", "89", "5000")


def test_another_partition_is_not_taken_for_partition_0() -> None:
    only_10 = LINES.splitlines()[1]
    assert LOG_LOADED.search(only_10) is None
