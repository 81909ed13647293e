"""`groupshift groups`: kafka-consumer-groups.sh for groupshift and any Kafka 2.x+ cluster, plus
the migration view (one module per sub-command; `wire` is the admin client, `output` the
tables, JSON and exit codes, `command` the argument parser)."""
