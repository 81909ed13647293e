"""`serve --workers N`: N processes serving as the brokers of one cluster (docs/workers.md).

A supervisor (`supervisor`) starts each worker as its own `groupshift serve` process; a worker
is one node of the cluster (node id = `node.id` + index, main listener on the configured port +
index). Coordinator shards are owned statically (`ownership`: shard s by worker s mod N); the
data plane is worker 0's, and the other workers forward every request that is not a group API to
it (`forwarding`).
"""
