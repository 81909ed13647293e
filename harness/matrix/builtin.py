"""The built-in grids (TOML, the same format as a user's grid file; see grid.py).

* `smoke`: what CI runs in processes, about 16 cells: kafka-python, aiokafka, confluent-kafka
  (the versions installed with groupshift's test extras, so no download) and the Java client of
  the newest Kafka 4.x, across both protocols and every scenario, each with its Kafka 4 twin.
* `default`: each library's supported release lines through the scenarios that matter most.
* `full`: every listed version, scenario, policy and backend (hours).
* `streams-smoke`: the Kafka Streams family alone, small: Kafka Streams 3.9 classic instances
  rolled online to 4.4 `streams` instances (groupshift converts the group; Kafka 4.4, the
  reference twin, refuses the first `streams` instance) and 4.4 `streams` instances added and
  removed.
* `connect-smoke`: the Kafka Connect family alone, one cell: a 3-worker Kafka Connect 4.3 cluster
  on groupshift, one worker replaced by an SDK worker (the group converts to a connect group)
  which then leaves (it converts back); no Kafka twin (Kafka has no connect groups).
"""

from __future__ import annotations

SMOKE = """
name = "smoke"
reference = "kafka-4"

[[cells]]
clients = ["kafka-python@installed"]
assignors = ["range"]
scenarios = ["add-remove"]

[[cells]]
clients = ["aiokafka@installed"]
assignors = ["roundrobin"]
scenarios = ["add-remove"]

[[cells]]
clients = ["confluent-kafka@installed"]
protocols = ["consumer"]
scenarios = ["add-remove"]

[[cells]]
clients = ["kafka-python@installed"]
assignors = ["cooperative-sticky"]
scenarios = ["rolling-upgrade"]

[[cells]]
clients = ["confluent-kafka@installed"]
protocols = ["consumer"]
assignors = ["cooperative-sticky"]
scenarios = ["rolling-downgrade"]

[[cells]]
clients = ["confluent-kafka@installed"]
assignors = ["cooperative-sticky"]
static = [true]
scenarios = ["static-bounce"]

[[cells]]
clients = ["java@4"]
protocols = ["consumer"]
assignors = ["range"]
scenarios = ["offline-migration"]

[[cells]]
clients = ["confluent-kafka@installed"]
assignors = ["range"]
scenarios = ["flapping"]
"""

DEFAULT = """
name = "default"
reference = "kafka-4"

# Classic-only Python clients: their own group, then an online upgrade to KIP-848 members
# (confluent-kafka, the newest installed).
[[cells]]
clients = ["kafka-python@2.0.2", "kafka-python@2.2.x", "kafka-python@3.0.x",
           "aiokafka@0.8.1", "aiokafka@0.10.x", "aiokafka@0.12.x", "aiokafka@0.14.x"]
assignors = ["range"]
scenarios = ["add-remove", "rolling-upgrade"]

[[cells]]
clients = ["kafka-python@3.0.x"]
assignors = ["cooperative-sticky"]
static = [true]
scenarios = ["rolling-upgrade", "static-bounce"]

# confluent-kafka (librdkafka): the classic protocol on every line, KIP-848 from 2.12 on.
[[cells]]
clients = ["confluent-kafka@2.3", "confluent-kafka@2.6", "confluent-kafka@2.10",
           "confluent-kafka@2.12", "confluent-kafka@newest"]
assignors = ["cooperative-sticky"]
scenarios = ["add-remove", "rolling-upgrade"]

[[cells]]
clients = ["confluent-kafka@2.12", "confluent-kafka@newest"]
protocols = ["consumer"]
assignors = ["range"]
scenarios = ["add-remove", "rolling-downgrade", "offline-migration", "flapping"]

# The migration policies beyond bidirectional.
[[cells]]
clients = ["confluent-kafka@newest"]
protocols = ["classic"]
assignors = ["range"]
scenarios = ["rolling-upgrade", "offline-migration"]
policies = ["upgrade", "disabled"]

[[cells]]
clients = ["confluent-kafka@newest"]
protocols = ["consumer"]
assignors = ["range"]
scenarios = ["rolling-downgrade"]
policies = ["downgrade"]

# Kafka's own Java client (VerifiableConsumer) of the releases Kafka's own
# consumer_protocol_migration_test uses, upgraded online to KIP-848 members (its own protocol
# from 3.7 on, else the Java 4 client's).
[[cells]]
clients = ["java@2.1"]
assignors = ["range"]
scenarios = ["rolling-upgrade"]

[[cells]]
clients = ["java@2.5", "java@3.2", "java@3.4", "java@3.7", "java@3.9", "java@4"]
assignors = ["cooperative-sticky"]
scenarios = ["rolling-upgrade"]

# 2.3 and 2.4's VerifiableConsumer only runs static members.
[[cells]]
clients = ["java@2.3"]
assignors = ["range"]
static = [true]
scenarios = ["rolling-upgrade"]

[[cells]]
clients = ["java@2.4"]
assignors = ["cooperative-sticky"]
static = [true]
scenarios = ["rolling-upgrade"]

[[cells]]
clients = ["java@3.9", "java@4"]
assignors = ["range"]
static = [true]
scenarios = ["static-bounce"]

[[cells]]
clients = ["java@4"]
protocols = ["consumer"]
assignors = ["range"]
scenarios = ["rolling-downgrade", "offline-migration"]

# Go: franz-go (classic, and KIP-848 through kgo.ServerSideBalancer) and Sarama (classic only;
# its consumer-protocol partner is franz-go).
[[cells]]
clients = ["franz-go@pinned", "sarama@pinned"]
assignors = ["cooperative-sticky"]
scenarios = ["add-remove", "rolling-upgrade"]

[[cells]]
clients = ["franz-go@pinned"]
protocols = ["consumer"]
assignors = ["range"]
scenarios = ["rolling-downgrade", "offline-migration"]

# Kafka Streams (harness/matrix/streams_clients.py): 3.9 instances on the classic protocol, 4.4
# instances on KIP-1071's streams protocol, the rolls between them (online: groupshift converts
# the group, Kafka 4.4 refuses) and the offline migrations (both).
[[cells]]
clients = ["kafka-streams@3.9"]
protocols = ["classic", "streams"]
scenarios = ["add-remove", "rolling-upgrade", "rolling-downgrade"]

[[cells]]
clients = ["kafka-streams@4.4"]
protocols = ["classic", "streams"]
scenarios = ["add-remove", "offline-migration"]

# ... and both rolls with groupshift in front of Kafka 3.9 (the internal topics, the instances'
# admin calls and the records through to Kafka; found a broken DescribeCluster rewrite)
[[cells]]
clients = ["kafka-streams@3.9"]
protocols = ["classic", "streams"]
scenarios = ["rolling-upgrade", "rolling-downgrade"]
backends = ["groupshift-kafka-3.9"]

# groupshift in front of Apache Kafka 3.9 (no KIP-848 there: groupshift brings it).
[[cells]]
clients = ["kafka-python@3.0.x", "java@3.9"]
assignors = ["range"]
scenarios = ["rolling-upgrade"]
backends = ["groupshift-kafka-3.9"]

[[cells]]
clients = ["confluent-kafka@newest"]
protocols = ["consumer"]
assignors = ["range"]
scenarios = ["rolling-downgrade"]
backends = ["groupshift-kafka-3.9"]

# Kafka Connect (harness/matrix/connect_scenario.py): a 3-worker cluster, one worker replaced by
# the SDK worker (the group converts to a connect group and back); groupshift only (Kafka has no
# connect groups: the twin is dropped).
[[cells]]
clients = ["kafka-connect@3.9", "kafka-connect@4.3"]
scenarios = ["sdk-worker-conversion"]
"""

FULL = """
name = "full"
reference = "kafka-4"

[[cells]]
clients = ["kafka-python@2.0.2", "kafka-python@2.2.x", "kafka-python@3.0.x",
           "aiokafka@0.8.1", "aiokafka@0.10.x", "aiokafka@0.12.x", "aiokafka@0.14.x",
           "confluent-kafka@2.3", "confluent-kafka@2.6", "confluent-kafka@2.10",
           "confluent-kafka@2.12", "confluent-kafka@newest",
           "java@2.1", "java@2.3", "java@2.4", "java@2.5", "java@3.2", "java@3.4", "java@3.5",
           "java@3.6", "java@3.7", "java@3.8", "java@3.9", "java@4",
           "franz-go@pinned", "sarama@pinned"]
protocols = ["classic", "consumer"]
assignors = ["range", "roundrobin", "cooperative-sticky", "server"]
static = [false, true]
scenarios = ["add-remove", "static-bounce", "offline-migration", "rolling-upgrade",
             "rolling-downgrade", "flapping"]
policies = ["disabled", "upgrade", "downgrade", "bidirectional"]
backends = ["groupshift", "groupshift-kafka-3.9"]

[[cells]]
clients = ["kafka-streams@3.4", "kafka-streams@3.7", "kafka-streams@3.9", "kafka-streams@4.0",
           "kafka-streams@4.4"]
protocols = ["classic", "streams"]
scenarios = ["add-remove", "offline-migration", "rolling-upgrade", "rolling-downgrade"]
policies = ["disabled", "upgrade", "downgrade", "bidirectional"]
backends = ["groupshift", "groupshift-kafka-3.9"]

# Kafka Connect (harness/matrix/connect_scenario.py): a 3-worker cluster, one worker replaced by
# the SDK worker (the group converts to a connect group and back); groupshift only (Kafka has no
# connect groups: the twin is dropped); every release verified to run it (3.7.2, 3.9.1, 4.0.2,
# 4.3.1; Maven has no connect-file 4.4.0).
[[cells]]
clients = ["kafka-connect@3.7", "kafka-connect@3.9", "kafka-connect@4.0", "kafka-connect@4.3"]
scenarios = ["sdk-worker-conversion"]
"""

STREAMS_SMOKE = """
name = "streams-smoke"
reference = "kafka-4"

[[cells]]
clients = ["kafka-streams@3.9"]
scenarios = ["rolling-upgrade"]

[[cells]]
clients = ["kafka-streams@4.4"]
protocols = ["streams"]
scenarios = ["add-remove"]
"""

# Kafka Connect (harness/matrix/connect_scenario.py): the newest Connect with a FileStream
# connector on Maven (no connect-file 4.4.0), the release e2e/test_connect_runtime.py runs.
CONNECT_SMOKE = """
name = "connect-smoke"
reference = ""

[[cells]]
clients = ["kafka-connect@4.3"]
scenarios = ["sdk-worker-conversion"]
"""

GRIDS = {
    "smoke": SMOKE,
    "default": DEFAULT,
    "full": FULL,
    "streams-smoke": STREAMS_SMOKE,
    "connect-smoke": CONNECT_SMOKE,
}
