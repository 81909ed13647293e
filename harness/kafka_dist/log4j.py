"""Logging configs for Kafka's JVMs, for both of Kafka's logging backends.

Kafka 4.0 logs through log4j2 (KIP-653) and reads `-Dlog4j2.configurationFile`; earlier
releases log through reload4j and read `-Dlog4j.configuration`. A JVM of either kind is given
both files, so one setup serves every release. Brokers log to stdout at a chosen level (their
`server.log`); the client tools (VerifiableConsumer, ConsumerGroupCommand, ...) log warnings to
stderr, so that their stdout carries only their JSON events or table. The tool configs are used
on the host (`java_clients`) and baked into the Java client images of the matrix
(`harness.matrix.docker_images`): the same text in both places, so it is kept here once.
"""

from __future__ import annotations

from pathlib import Path

#: A broker's log4j2 config (Kafka 4.0 on); `{level}` is the root and `kafka` logger level.
BROKER_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRefs = stdout
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.state.name = state.change.logger
logger.state.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
"""

#: A broker's reload4j config (before 4.0); `{level_upper}` is the root logger level.
BROKER_LOG4J1 = """\
log4j.rootLogger={level_upper}, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
"""

#: A client tool's log4j2 config: warnings to stderr.
TOOL_LOG4J2_STDERR = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRefs = stderr
rootLogger.appenderRef.stderr.ref = STDERR
"""

#: A client tool's reload4j config: warnings to stderr.
TOOL_LOG4J1_STDERR = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def write_log4j_configs(directory: Path, log4j2: str, log4j1: str) -> list[str]:
    """Write `log4j2.properties` and `log4j.properties` into `directory`; the JVM system
    properties that point a JVM of either backend at its file."""
    directory.mkdir(parents=True, exist_ok=True)
    log4j2_path = directory / "log4j2.properties"
    log4j2_path.write_text(log4j2)
    log4j1_path = directory / "log4j.properties"
    log4j1_path.write_text(log4j1)
    return [f"-Dlog4j2.configurationFile={log4j2_path}", f"-Dlog4j.configuration=file:{log4j1_path}"]
