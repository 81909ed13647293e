// An exactly-once copier (consume-transform-produce, KIP-98/KIP-447): a read_committed consumer
// in a group (group.protocol consumer or classic), a transactional producer, and
// sendOffsetsToTransaction with the consumer's group metadata. Used by
// e2e/transactions.py (and e2e/test_upstream_passthrough.py) through groupshift in upstream mode.
//
// args: bootstrap input-topic output-topic group transactional-id group-protocol abort-every
//       [client-properties-file: security settings for both clients]
// Every `abort-every`-th transaction is aborted on purpose after its offsets were sent, and the
// consumer is rewound to the group's committed offsets (read with require_stable, as
// read_committed consumers do). stdout: one JSON object per line:
//   {"name":"ready"}
//   {"name":"committing","time":ms,"offsets":{"p":offset,...}}   before commitTransaction
//   {"name":"committed","time":ms,"count":n}                     after it returned
//   {"name":"aborted","time":ms,"offsets":{...}}                 a deliberate abort
//   {"name":"error","time":ms,"error":"..."}                     an abortable error, rewound
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TransactionalCopier {
    static void emit(String name, String fields) {
        System.out.println("{\"name\":\"" + name + "\",\"time\":" + System.currentTimeMillis() + fields + "}");
        System.out.flush();
    }

    static String offsetsJson(Map<TopicPartition, OffsetAndMetadata> offsets) {
        StringBuilder sb = new StringBuilder(",\"offsets\":{");
        boolean first = true;
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            if (!first) sb.append(',');
            first = false;
            sb.append('"').append(e.getKey().partition()).append("\":").append(e.getValue().offset());
        }
        return sb.append('}').toString();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], input = args[1], output = args[2], group = args[3], txnId = args[4];
        String protocol = args[5];
        int abortEvery = Integer.parseInt(args[6]);

        Properties common = new Properties();
        if (args.length > 7) {
            try (java.io.FileInputStream in = new java.io.FileInputStream(args[7])) {
                common.load(in);
            }
        }

        Properties pp = new Properties();
        pp.putAll(common);
        pp.put("bootstrap.servers", bootstrap);
        pp.put("transactional.id", txnId);
        pp.put("transaction.timeout.ms", "10000");
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
        producer.initTransactions();

        Properties cp = new Properties();
        cp.putAll(common);
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("group.protocol", protocol);
        cp.put("isolation.level", "read_committed");
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("max.poll.records", "25");
        if (protocol.equals("classic")) {
            cp.put("session.timeout.ms", "3000");
            cp.put("heartbeat.interval.ms", "500");
        }
        cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
        consumer.subscribe(List.of(input));
        emit("ready", "");

        long txns = 0;
        while (true) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            boolean inTransaction = false;
            try {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                producer.beginTransaction();
                inTransaction = true;
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    producer.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1, "copier"));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                txns++;
                Thread.sleep(15); // a wider window for a SIGKILL inside a transaction
                if (abortEvery > 0 && txns % abortEvery == 0) {
                    producer.abortTransaction();
                    inTransaction = false;
                    emit("aborted", offsetsJson(offsets));
                    rewind(consumer);
                    continue;
                }
                emit("committing", offsetsJson(offsets));
                while (true) {
                    try {
                        producer.commitTransaction();
                        break;
                    } catch (TimeoutException e) { // the outcome is unknown: commit again (Kafka's rule)
                        emit("error", ",\"error\":\"commit timed out\"");
                    }
                }
                inTransaction = false;
                emit("committed", ",\"count\":" + records.count());
            } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException e) {
                emit("fatal", ",\"error\":\"" + e.getClass().getSimpleName() + "\"");
                System.exit(2);
            } catch (KafkaException | IllegalStateException e) {
                // abortable (a rebalance fenced the member, a timeout, a coordinator that moved):
                // abort, and copy again from the group's committed offsets
                emit("error", ",\"error\":\"" + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('"', '\'') + "\"");
                if (inTransaction) {
                    try {
                        producer.abortTransaction();
                    } catch (KafkaException abortFailed) {
                        emit("fatal", ",\"error\":\"abort failed: " + abortFailed.getClass().getSimpleName() + "\"");
                        System.exit(3);
                    }
                }
                rewind(consumer);
            }
        }
    }

    // Seek every assigned partition back to the group's committed offset (read with
    // require_stable: read_committed). Retried until it succeeds: a position left past the
    // committed offset after an abort would skip records.
    static void rewind(KafkaConsumer<byte[], byte[]> consumer) {
        while (true) {
            try {
                Set<TopicPartition> assigned = consumer.assignment();
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned);
                for (TopicPartition tp : assigned) {
                    OffsetAndMetadata c = committed.get(tp);
                    if (c == null) consumer.seekToBeginning(List.of(tp));
                    else consumer.seek(tp, c.offset());
                }
                return;
            } catch (KafkaException | IllegalStateException e) {
                emit("error", ",\"error\":\"rewind: " + e.getClass().getSimpleName() + "\"");
            }
        }
    }
}
