// A "verifiable" Kafka Streams application for the version matrix (harness/matrix/streams.py):
// a small stateful topology over the matrix topic, printing the JSON lines of Kafka's
// VerifiableConsumer so that the matrix's checks judge it like any consumer.
//
// Topology: one source (the matrix topic) and one processor (Processor API) with an in-memory
// key-value store (logged: a changelog topic, so the tasks are stateful and move with restores).
// One subtopology, so task 0_p reads input partition p, and the events name the partition.
//
// Events (one JSON object a line on stdout, each with "timestamp" in ms):
//   startup_complete      once KafkaStreams.start() returned
//   partitions_assigned   when a task's processor is initialized (Processor.init: the task is
//                         restored and about to process; Kafka Streams calls it again after a
//                         suspended task resumes)
//   partitions_revoked    when a task's processor is closed (Processor.close: the task is
//                         suspended or closed, revoked, lost or shut down); these two bracket
//                         the task's real ownership, unlike the consumer's metadata
//   records_consumed      partition, minOffset, maxOffset of records processed, contiguous
//                         runs flushed every 100 ms (wall-clock punctuation) and on close
//   shutdown_requested    on SIGTERM, before KafkaStreams.close
//   shutdown_complete     after KafkaStreams.close returned
//   client_error          an uncaught exception in a stream thread (e.g. the coordinator
//                         refusing the member: Kafka 4.4 answers a streams member joining a classic
//                         group GROUP_ID_NOT_FOUND), or the instance reaching ERROR
//
// Arguments: --bootstrap-server, --topic, --group-id (application.id), --group-protocol
// classic|streams, --client-id, --state-dir, --session-timeout and --heartbeat-interval (the
// classic consumer's; a streams member gets them from the server). It compiles against Kafka
// Streams 3.4, 3.7, 3.9, 4.0 and 4.4 alike (no group.protocol constant: the name as a string).
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public class VerifiableStreams {
    static final String STORE = "seen";

    static synchronized void emit(String name, String fields) {
        StringBuilder b = new StringBuilder("{\"name\":\"").append(name).append('"');
        if (!fields.isEmpty()) {
            b.append(',').append(fields);
        }
        b.append(",\"timestamp\":").append(System.currentTimeMillis()).append('}');
        System.out.println(b);
        System.out.flush();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static String partitionList(String topic, int partition) {
        return "\"partitions\":[{\"topic\":" + quote(topic) + ",\"partition\":" + partition + "}]";
    }

    /** One task's processor: reports its init/close and the offsets it processed. */
    static final class Tracker implements Processor<byte[], byte[], Void, Void> {
        private final String topic;
        private ProcessorContext<Void, Void> context;
        private KeyValueStore<String, Long> store;
        private int partition = -1;
        private long min = -1;
        private long max = -1;

        Tracker(String topic) {
            this.topic = topic;
        }

        @Override
        public void init(ProcessorContext<Void, Void> context) {
            this.context = context;
            this.store = context.getStateStore(STORE);
            this.partition = context.taskId().partition();
            this.min = -1;
            emit("partitions_assigned", partitionList(topic, partition));
            context.schedule(Duration.ofMillis(100), PunctuationType.WALL_CLOCK_TIME, now -> flush());
        }

        @Override
        public void process(Record<byte[], byte[]> record) {
            RecordMetadata meta = context.recordMetadata().orElse(null);
            if (meta == null) {
                return;
            }
            long offset = meta.offset();
            if (min >= 0 && offset != max + 1) {
                flush();
            }
            if (min < 0) {
                min = offset;
            }
            max = offset;
            Long n = store.get("records");
            store.put("records", n == null ? 1L : n + 1);
        }

        void flush() {
            if (min < 0) {
                return;
            }
            long count = max - min + 1;
            emit(
                "records_consumed",
                "\"count\":" + count + ",\"partitions\":[{\"topic\":" + quote(topic) + ",\"partition\":" + partition
                    + ",\"count\":" + count + ",\"minOffset\":" + min + ",\"maxOffset\":" + max + "}]");
            min = -1;
        }

        @Override
        public void close() {
            flush();
            emit("partitions_revoked", partitionList(topic, partition));
        }
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String topic = args.get("topic");
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap-server"));
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args.get("group-id"));
        props.put(StreamsConfig.CLIENT_ID_CONFIG, args.getOrDefault("client-id", "verifiable-streams"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, args.get("state-dir"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1); // one instance, one group member
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // A task is moved to a new instance at once (no warm-up and probing rebalance of the
        // classic HighAvailabilityTaskAssignor): the changelog is small anyway.
        props.put(StreamsConfig.ACCEPTABLE_RECOVERY_LAG_CONFIG, Long.MAX_VALUE / 2);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        String protocol = args.getOrDefault("group-protocol", "classic");
        if (protocol.equals("streams")) {
            props.put("group.protocol", "streams");
        } else {
            if (args.containsKey("session-timeout")) {
                props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), args.get("session-timeout"));
            }
            if (args.containsKey("heartbeat-interval")) {
                props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), args.get("heartbeat-interval"));
            }
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(
            Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore(STORE), Serdes.String(), Serdes.Long()));
        builder.stream(topic, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
            .process(() -> new Tracker(topic), STORE);

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setUncaughtExceptionHandler(e -> {
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            emit("client_error", "\"error\":" + quote(root.getClass().getSimpleName() + ": " + root.getMessage()));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR) {
                emit("client_error", "\"error\":\"the instance reached state ERROR\"");
            }
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                done.countDown();
            }
        });
        CountDownLatch closed = new CountDownLatch(1);
        java.util.concurrent.atomic.AtomicBoolean terminating = new java.util.concurrent.atomic.AtomicBoolean();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            terminating.set(true);
            emit("shutdown_requested", "");
            streams.close(Duration.ofSeconds(30));
            emit("shutdown_complete", "");
            closed.countDown();
        }));
        streams.start();
        emit("startup_complete", "");
        done.await();
        if (terminating.get()) {
            closed.await();
        } else {
            // Not a SIGTERM: the instance stopped on an error; close what is left and exit.
            streams.close(Duration.ofSeconds(10));
            System.exit(1);
        }
    }
}
