"""KIP-1071 streams groups: a Kafka Streams application's members, its topology and the tasks
the coordinator assigns (Kafka 4.4 `group-coordinator/.../streams/`). docs/streams-groups.md
says what of Kafka's behaviour is here and what is not yet."""
