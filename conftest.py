"""Root conftest: registers the reference-Kafka fixtures (`kafka4`, `kafka_cluster_factory`,
`kafka_clients4`; see tests/plugins/kafka.py) and the Tansu one (`tansu_factory`;
tests/plugins/tansu.py) for tests/ and e2e/ alike."""

pytest_plugins = ["tests.plugins.kafka", "tests.plugins.fleet", "tests.plugins.tansu"]
