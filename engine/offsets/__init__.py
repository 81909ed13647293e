"""Committed offsets for every group type (Kafka `OffsetMetadataManager`)."""
