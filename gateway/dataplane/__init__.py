"""The embedded data plane: topics, partitions and their logs, served over Kafka's APIs.

groupshift can front a real Kafka-compatible cluster, but out of the box it serves topics
itself so real clients (and the group layer's tests) can produce and consume against one
process. This package owns topic metadata (`topics`), partition storage (`store`), producer
ids (`producers`) and the `DataPlane` facade (`plane`); `apis/` holds the Kafka request
handlers built on it.
"""
