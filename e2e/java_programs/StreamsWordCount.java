// A Kafka Streams word count exactly as a user writes it: a groupBy (a repartition topic) and a
// count (a state store with a changelog topic), run with group.protocol=streams (KIP-1071).
// Arguments: bootstrap, application id, input topic, output topic, state directory, then any
// Kafka Streams settings as key=value, set over the ones below (processing.guarantee=
// exactly_once_v2 for transactions, group.protocol=classic, consumer.session.timeout.ms=...).
// Prints "STATE <new state>" on every state change of the KafkaStreams instance, and
// "TASKS <active task ids>" once it is RUNNING with them, so the test can follow it.
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
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class StreamsWordCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put("consumer.auto.offset.reset", "earliest");
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }

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
                TreeSet<String> tasks = new TreeSet<>();
                for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                    t.activeTasks().forEach(task -> tasks.add(task.taskId().toString()));
                }
                System.out.println("TASKS " + String.join(",", tasks));
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
