"""Committed offsets for every group type (spec §6; Kafka `OffsetMetadataManager`)."""
