"""Root conftest: registers the reference-Kafka fixtures (`kafka4`, `kafka_cluster_factory`,
`kafka_clients4`; see tests/plugins/kafka.py) and the Tansu one (`tansu_factory`;
tests/plugins/tansu.py) for tests/ and e2e/ alike."""

pytest_plugins = ["tests.plugins.kafka", "tests.plugins.fleet", "tests.plugins.tansu"]


def pytest_configure(config: object) -> None:
    """`GROUPSHIFT_EXPECT_BUILD=compiled` (scripts/compiled_tests.sh): stop before any test if the
    modules mypyc compiles were imported from their .py files (the checkout shadowing the wheel),
    so a compiled-build run can never pass by testing the pure build."""
    import os

    if os.environ.get("GROUPSHIFT_EXPECT_BUILD") != "compiled":
        return
    import engine.shard
    import gateway.connection

    for module in (engine.shard, gateway.connection):
        if (module.__file__ or "").endswith(".py"):
            raise RuntimeError(f"compiled build expected, but {module.__name__} is {module.__file__}")
