// Apache Kafka's own server assignors (UniformAssignor, RangeAssignor from the
// kafka-group-coordinator jar) timed on the inputs bench.assignors builds for groupshift's, so the
// two are compared in one run on one machine instead of against JMH figures from other hardware.
//
// Run by bench/kafka_assignors.py in Java's single-file source mode
// (`java -cp <Kafka's broker jars> KafkaAssignors.java`); one JVM serves every case, so the JIT is
// as warm as in a long-running broker. Protocol, one case per exchange on stdin/stdout:
//   in:  CASE <uniform|range> <HOMOGENEOUS|HETEROGENEOUS> <0|1 incremental> <members> <ratio> <topics> <budget seconds>
//        IDS <32 hex digits>,<32 hex digits>,...      (the topic ids, in the order Python made them)
//   out: {"wall": [ms, ...], "cpu": [ms, ...], "assigned": <partitions in the timed result>}
// The inputs mirror bench/assignors.py's build_inputs: members "member<i>", heterogeneous members
// spread over at most 5 buckets of topics, an incremental case being members-1 with the assignor's
// own previous result plus one joining member "newMember".
// The topic describer is a plain map (no racks), as groupshift's MapTopicDescriber; Kafka's own
// describer reads its metadata image, which an assignor sees only through these two methods.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.StringJoiner;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;

public class KafkaAssignors {
    static final int MAX_BUCKET_COUNT = 5;
    static final int MIN_RUNS = 5;
    static final int MAX_RUNS = 15;

    record MapDescriber(Map<Uuid, Integer> partitions) implements SubscribedTopicDescriber {
        public int numPartitions(Uuid topicId) {
            Integer n = partitions.get(topicId);
            return n == null ? -1 : n;
        }

        public Set<String> racksForPartition(Uuid topicId, int partition) {
            return Collections.emptySet();
        }
    }

    record Inputs(GroupSpecImpl spec, MapDescriber describer) {}

    static int ceilDiv(int a, int b) {
        return -Math.floorDiv(-a, b);
    }

    static List<Set<Uuid>> subscriptions(SubscriptionType type, List<Uuid> ids, int members) {
        List<Set<Uuid>> out = new ArrayList<>(members);
        if (type == SubscriptionType.HOMOGENEOUS) {
            Set<Uuid> everything = new HashSet<>(ids);
            for (int i = 0; i < members; i++) out.add(everything);
            return out;
        }
        int buckets = Math.min(MAX_BUCKET_COUNT, members);
        int topicsPerBucket = ceilDiv(ids.size(), buckets);
        int membersPerBucket = ceilDiv(members, buckets);
        List<Set<Uuid>> sets = new ArrayList<>();
        for (int b = 0; b < buckets; b++) {
            int from = Math.min(b * topicsPerBucket, ids.size());
            int to = Math.min((b + 1) * topicsPerBucket, ids.size());
            sets.add(new HashSet<>(ids.subList(from, to)));
        }
        for (int i = 0; i < members; i++) out.add(sets.get(i / membersPerBucket));
        return out;
    }

    static ConsumerGroupPartitionAssignor assignor(String name) {
        return switch (name) {
            case "uniform" -> new UniformAssignor();
            case "range" -> new RangeAssignor();
            default -> throw new IllegalArgumentException("unknown assignor " + name);
        };
    }

    static Inputs build(
        ConsumerGroupPartitionAssignor assignor,
        SubscriptionType type,
        boolean incremental,
        int memberCount,
        int ratio,
        List<Uuid> ids
    ) {
        int partitionsPerTopic = memberCount * ratio / ids.size();
        Map<Uuid, Integer> partitions = new HashMap<>();
        for (Uuid id : ids) partitions.put(id, partitionsPerTopic);
        MapDescriber describer = new MapDescriber(partitions);
        int existing = incremental ? memberCount - 1 : memberCount;
        List<Set<Uuid>> subs = subscriptions(type, ids, existing);
        Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
        for (int i = 0; i < existing; i++) {
            members.put(
                "member" + i,
                new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(), subs.get(i), Assignment.EMPTY)
            );
        }
        GroupSpecImpl spec = new GroupSpecImpl(members, type, Collections.emptyMap());
        if (!incremental) return new Inputs(spec, describer);

        GroupAssignment previous = assignor.assign(spec, describer);
        Map<String, MemberSubscriptionAndAssignmentImpl> next = new HashMap<>();
        Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
        for (Map.Entry<String, MemberSubscriptionAndAssignmentImpl> e : members.entrySet()) {
            MemberAssignment had = previous.members().get(e.getKey());
            Map<Uuid, Set<Integer>> owned = had == null ? Collections.emptyMap() : had.partitions();
            next.put(
                e.getKey(),
                new MemberSubscriptionAndAssignmentImpl(
                    Optional.empty(), Optional.empty(), e.getValue().subscribedTopicIds(), new Assignment(owned)
                )
            );
            for (Map.Entry<Uuid, Set<Integer>> t : owned.entrySet()) {
                Map<Integer, String> byPartition = inverted.computeIfAbsent(t.getKey(), k -> new HashMap<>());
                for (Integer p : t.getValue()) byPartition.put(p, e.getKey());
            }
        }
        Set<Uuid> joining = type == SubscriptionType.HOMOGENEOUS
            ? new HashSet<>(ids)
            : members.get("member" + (memberCount - 2)).subscribedTopicIds();
        next.put(
            "newMember",
            new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(), joining, Assignment.EMPTY)
        );
        return new Inputs(new GroupSpecImpl(next, type, inverted), describer);
    }

    // The timing thread's CPU time: the JVM reports the process's only in 10 ms ticks, too coarse
    // for runs of a few milliseconds. The assignors are single-threaded; what this leaves out is
    // the collector's and the JIT's threads (a collection is forced before each run).
    static long threadCpuNanos() {
        return ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
    }

    static int assigned(GroupAssignment result) {
        int n = 0;
        for (MemberAssignment m : result.members().values()) {
            for (Set<Integer> parts : m.partitions().values()) n += parts.size();
        }
        return n;
    }

    static String list(List<Double> values) {
        StringJoiner j = new StringJoiner(", ", "[", "]");
        for (double v : values) j.add(String.format(Locale.ROOT, "%.4f", v));
        return j.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] c = line.trim().split(" ");
            String idsLine = in.readLine();
            if (!c[0].equals("CASE") || idsLine == null || !idsLine.startsWith("IDS ")) {
                throw new IllegalArgumentException("expected CASE and IDS lines, got " + line);
            }
            List<Uuid> ids = new ArrayList<>();
            for (String hex : idsLine.substring(4).trim().split(",")) {
                ids.add(new Uuid(Long.parseUnsignedLong(hex.substring(0, 16), 16), Long.parseUnsignedLong(hex.substring(16), 16)));
            }
            ConsumerGroupPartitionAssignor assignor = assignor(c[1]);
            SubscriptionType type = SubscriptionType.valueOf(c[2]);
            Inputs inputs = build(assignor, type, c[3].equals("1"), Integer.parseInt(c[4]), Integer.parseInt(c[5]), ids);
            double budgetMs = Double.parseDouble(c[7]) * 1000;

            // Warm-up: the JIT compiles the assignor's loops only after they have run a while
            // (JMH warms up for seconds too): at least MIN_RUNS runs and the case's whole budget.
            long warmStart = System.nanoTime();
            int warm = 0;
            while (warm < MIN_RUNS || (System.nanoTime() - warmStart) / 1e6 < budgetMs) {
                assignor.assign(inputs.spec(), inputs.describer());
                warm++;
            }
            List<Double> wall = new ArrayList<>();
            List<Double> cpu = new ArrayList<>();
            int assigned = 0;
            double spent = 0;
            while (wall.size() < MIN_RUNS || (wall.size() < MAX_RUNS && spent < budgetMs)) {
                System.gc();
                long c0 = threadCpuNanos();
                long t0 = System.nanoTime();
                GroupAssignment result = assignor.assign(inputs.spec(), inputs.describer());
                long t1 = System.nanoTime();
                long c1 = threadCpuNanos();
                assigned = assigned(result);
                wall.add((t1 - t0) / 1e6);
                cpu.add((c1 - c0) / 1e6);
                spent += (t1 - t0) / 1e6;
            }
            System.out.println("{\"wall\": " + list(wall) + ", \"cpu\": " + list(cpu) + ", \"assigned\": " + assigned + "}");
            System.out.flush();
        }
    }
}
