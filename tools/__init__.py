"""Operator tools (docs/architecture.md, "tools/"): `groups`, `check`, `fleet`, `records`
export/import/rewrite and the one module that knows a Kafka broker's log directory. They read
groupshift's records and speak the Kafka protocol to live servers; they never import the test
harness (`harness/`)."""
