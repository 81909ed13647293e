"""Generators run by hand by developers (not shipped): they rebuild committed data files from a
real Kafka, e.g. `python -m scripts.gen_kafka_configs`."""
