"""Root conftest: registers the reference-Kafka fixtures (`kafka4`, `kafka_cluster_factory`,
`kafka_clients4`; see compat/pytest_kafka.py) and the Tansu one (`tansu_factory`;
compat/pytest_tansu.py) for tests/ and e2e/ alike."""

pytest_plugins = ["compat.pytest_kafka", "compat.pytest_fleet", "compat.pytest_tansu"]
