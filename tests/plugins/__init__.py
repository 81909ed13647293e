"""pytest plugins registered by the root conftest.py: the reference Kafka fixtures
(`tests.plugins.kafka`), the shared Spark session (`tests.plugins.fleet`) and Tansu
(`tests.plugins.tansu`). Test code, not shipped in the wheel."""
