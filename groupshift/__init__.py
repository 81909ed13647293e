"""groupshift: a Kafka consumer-group migration and compatibility gateway.

This package holds only the version and the `groupshift` command; the layers are the top-level
packages `protocol`, `records`, `engine`, `translation`, `gateway`, `tools` and `harness`
(see docs/architecture.md).
"""

__version__ = "0.1.0"
