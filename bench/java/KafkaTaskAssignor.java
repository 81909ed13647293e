// Apache Kafka 4.4's streams-group task assignor (StickyTaskAssignor from the
// kafka-group-coordinator jar, KIP-1071) timed on the inputs bench/streams_assignor.py builds for
// groupshift's (engine/streams/assignor.py), so the two are compared in one run on one machine.
//
// Run by bench/kafka_assignors.py in Java's single-file source mode
// (`java -cp <Kafka's broker jars> KafkaTaskAssignor.java`); one JVM serves every case, so the JIT
// is as warm as in a long-running broker. Protocol, one case per exchange on stdin/stdout:
//   in:  CASE <members> <members per process> <subtopologies> <partitions each> <standby replicas> <0|1 sticky> <budget seconds>
//   out: {"wall": [ms, ...], "cpu": [ms, ...], "previous": ASSIGNMENT or null, "assignment": ASSIGNMENT}
//        ASSIGNMENT = {"<member id>": [{"<subtopology>": [partition, ...]}, {standby tasks alike}], ...}
// The inputs mirror bench/streams_assignor.py's: members "member<i>" on process
// "process<i / members per process>", subtopologies "0".."<n-1>", every one stateful (a changelog
// topic, so standby replicas apply), no client tags, no task offsets. A fresh case has no previous
// assignment; a sticky case is the assignor's own fresh result over all members but the last, as
// their current tasks, with the last member joining empty (its result is printed as "previous").

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.StringJoiner;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.AssignmentConfigsImpl;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.MemberMetadataAndStateImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;

public class KafkaTaskAssignor {
    static final int MIN_RUNS = 5;
    static final int MAX_RUNS = 15;

    // Every subtopology has `partitions` tasks and state; Kafka's own describer reads the
    // group's configured topology, which an assignor sees only through these three methods.
    record Describer(List<String> subtopologies, int partitions) implements TopologyDescriber {
        public int maxNumInputPartitions(String subtopologyId) {
            return partitions;
        }

        public boolean isStateful(String subtopologyId) {
            return true;
        }
    }

    static GroupSpecImpl spec(int members, int perProcess, Map<String, MemberAssignment> previous, int standbys) {
        Map<String, MemberMetadataAndStateImpl> specs = new HashMap<>();
        for (int i = 0; i < members; i++) {
            String id = "member" + i;
            MemberAssignment had = previous.get(id);
            specs.put(
                id,
                new MemberMetadataAndStateImpl(
                    Optional.empty(),
                    Optional.empty(),
                    "process" + (i / perProcess),
                    Collections.emptyMap(),
                    had == null ? Collections.emptyMap() : had.activeTasks(),
                    had == null ? Collections.emptyMap() : had.standbyTasks(),
                    Collections.emptyMap(),
                    Collections.emptyMap(),
                    Collections.emptyMap()
                )
            );
        }
        return new GroupSpecImpl(specs, AssignmentConfigsImpl.DEFAULT.withNumStandbyReplicas(standbys));
    }

    // The timing thread's CPU time (the assignor is single-threaded); see KafkaAssignors.java.
    static long threadCpuNanos() {
        return ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
    }

    static String list(List<Double> values) {
        StringJoiner j = new StringJoiner(", ", "[", "]");
        for (double v : values) j.add(String.format(Locale.ROOT, "%.4f", v));
        return j.toString();
    }

    static void tasks(StringBuilder out, Map<String, Set<Integer>> tasks) {
        out.append('{');
        boolean first = true;
        for (Map.Entry<String, Set<Integer>> e : tasks.entrySet()) {
            if (e.getValue().isEmpty()) continue;
            if (!first) out.append(',');
            first = false;
            out.append('"').append(e.getKey()).append("\":[");
            boolean firstPartition = true;
            for (Integer p : e.getValue()) {
                if (!firstPartition) out.append(',');
                firstPartition = false;
                out.append(p);
            }
            out.append(']');
        }
        out.append('}');
    }

    static String json(GroupAssignment result) {
        if (result == null) return "null";
        StringBuilder out = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, MemberAssignment> e : result.members().entrySet()) {
            if (!first) out.append(',');
            first = false;
            out.append('"').append(e.getKey()).append("\":[");
            tasks(out, e.getValue().activeTasks());
            out.append(',');
            tasks(out, e.getValue().standbyTasks());
            out.append(']');
        }
        return out.append('}').toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StickyTaskAssignor assignor = new StickyTaskAssignor();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] c = line.trim().split(" ");
            if (!c[0].equals("CASE") || c.length != 8) {
                throw new IllegalArgumentException("expected a CASE line, got " + line);
            }
            int members = Integer.parseInt(c[1]);
            int perProcess = Integer.parseInt(c[2]);
            List<String> subtopologies = new ArrayList<>();
            for (int s = 0; s < Integer.parseInt(c[3]); s++) subtopologies.add(Integer.toString(s));
            Describer describer = new Describer(subtopologies, Integer.parseInt(c[4]));
            int standbys = Integer.parseInt(c[5]);
            boolean sticky = c[6].equals("1");
            double budgetMs = Double.parseDouble(c[7]) * 1000;

            GroupAssignment previous = null;
            if (sticky) {
                previous = assignor.assign(spec(members - 1, perProcess, Collections.emptyMap(), standbys), describer);
            }
            GroupSpecImpl spec = spec(
                members, perProcess, previous == null ? Collections.emptyMap() : previous.members(), standbys
            );

            // Warm-up, as KafkaAssignors.java: at least MIN_RUNS runs and the case's whole budget.
            long warmStart = System.nanoTime();
            int warm = 0;
            while (warm < MIN_RUNS || (System.nanoTime() - warmStart) / 1e6 < budgetMs) {
                assignor.assign(spec, describer);
                warm++;
            }
            List<Double> wall = new ArrayList<>();
            List<Double> cpu = new ArrayList<>();
            GroupAssignment result = null;
            double spent = 0;
            while (wall.size() < MIN_RUNS || (wall.size() < MAX_RUNS && spent < budgetMs)) {
                System.gc();
                long c0 = threadCpuNanos();
                long t0 = System.nanoTime();
                result = assignor.assign(spec, describer);
                long t1 = System.nanoTime();
                long c1 = threadCpuNanos();
                wall.add((t1 - t0) / 1e6);
                cpu.add((c1 - c0) / 1e6);
                spent += (t1 - t0) / 1e6;
            }
            System.out.println(
                "{\"wall\": " + list(wall) + ", \"cpu\": " + list(cpu) + ", \"previous\": " + json(previous)
                    + ", \"assignment\": " + json(result) + "}"
            );
            System.out.flush();
        }
    }
}
