// The word count of StreamsWordCount.java (a groupBy: a repartition topic; a count: a changelog
// topic) on the classic protocol, as Kafka Streams 3.x runs it (no group.protocol: a classic
// group, protocol `stream`), with one standby replica and an application.server endpoint.
// Arguments: bootstrap, application id, input topic, output topic, state directory, endpoint,
// and optionally the consumers' session.timeout.ms (Kafka Streams sends no LeaveGroup on close,
// so a stopped instance's tasks move only once its session expires: 45 s by default) and their
// heartbeat.interval.ms (3 s by default: how soon a member hears of a rebalance), and its
// group.instance.id (static membership, KIP-345).
// Prints "STATE <new state>" on every state change and, once RUNNING, "TASKS <active task ids>"
// and "STANDBY <standby task ids>", so the test can compare them with the group's metadata.
// With STREAMS_START_ON_STDIN set, it starts only once a line comes on stdin (a roll's next
// instance started ahead of its turn: e2e/test_streams_online_migration.py).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class StreamsWordCountClassic {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, args[5]);
        if (args.length > 6) {
            props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), Integer.parseInt(args[6]));
        }
        if (args.length > 7) {
            props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), Integer.parseInt(args[7]));
        }
        if (args.length > 8) {
            props.put(StreamsConfig.consumerPrefix("group.instance.id"), args[8]);
        }
        props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put("consumer.auto.offset.reset", "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2])
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.as("words"))
            .count(Materialized.as("counts"))
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            if (now == KafkaStreams.State.RUNNING) {
                TreeSet<String> active = new TreeSet<>();
                TreeSet<String> standby = new TreeSet<>();
                for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                    t.activeTasks().forEach(task -> active.add(task.taskId().toString()));
                    t.standbyTasks().forEach(task -> standby.add(task.taskId().toString()));
                }
                System.out.println("TASKS " + String.join(",", active));
                System.out.println("STANDBY " + String.join(",", standby));
            }
            System.out.flush();
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                done.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            done.countDown();
        }));
        if (System.getenv("STREAMS_START_ON_STDIN") != null) {
            // Started ahead of its turn (a test's roll): the JVM and the topology are ready, the
            // instance joins its group once a line comes (or exits if stdin closes first).
            if (new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine() == null) {
                System.exit(0);
            }
        }
        streams.start();
        done.await();
    }
}
