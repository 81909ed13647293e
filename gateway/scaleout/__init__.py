"""Scale-out: several groupshift nodes sharing the coordinator shards through the upstream Kafka
cluster (docs/scale-out.md): `shard_log` (a shard's log in a compacted topic, written by a fenced
transactional producer), `fleet` (membership in one upstream group with protocol type
`groupshift`), `ownership` (which shards this node serves; routing and NOT_COORDINATOR)."""
