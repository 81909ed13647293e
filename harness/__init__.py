"""Kafka in the loop (docs/kafka-in-the-loop.md): the reference Apache Kafka launcher and Java
clients from Maven Central, Tansu, the version matrix and headless Chromium. The tests, the
benchmarks and the `groupshift kafka` / `groupshift matrix` commands build on it; the operator
tools (`tools/`) never do."""
