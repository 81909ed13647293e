// Kafka Streams 4.4's own SubscriptionInfo / AssignmentInfo (the StreamsPartitionAssignor's
// user data) as the oracle for what groupshift answers a classic Kafka Streams instance inside a
// streams group. Reads lines on stdin:
//   "decsub HEX": SubscriptionInfo.decode of the bytes, printed as
//     "version latestSupportedVersion processId";
//   "decasg HEX": AssignmentInfo.decode of the bytes, printed as "version commonlySupportedVersion
//     errCode active standby hosts" (tasks as subtopology_partition joined by ',', standby
//     tasks sorted, hosts as host:port=topic-partition|... sorted; '-' for none);
//   "encsub VERSION UUID TASKS": a SubscriptionInfo Kafka Streams writes at VERSION for process
//     UUID running TASKS (subtopology_partition joined by ',', or '-') as active tasks, printed
//     as hex.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.stream.Collectors;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.internals.assignment.AssignmentInfo;
import org.apache.kafka.streams.processor.internals.assignment.SubscriptionInfo;
import org.apache.kafka.streams.state.HostInfo;

public class StreamsSubscriptionOracle {
    static String tasks(List<TaskId> ids) {
        if (ids.isEmpty()) return "-";
        return ids.stream().map(t -> t.subtopology() + "_" + t.partition()).collect(Collectors.joining(","));
    }

    static String hosts(Map<HostInfo, Set<TopicPartition>> byHost) {
        if (byHost.isEmpty()) return "-";
        TreeMap<String, String> out = new TreeMap<>();
        for (Map.Entry<HostInfo, Set<TopicPartition>> e : byHost.entrySet()) {
            out.put(e.getKey().host() + ":" + e.getKey().port(),
                e.getValue().stream().map(TopicPartition::toString).sorted().collect(Collectors.joining("|")));
        }
        return out.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        HexFormat hex = HexFormat.of();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.trim().split(" ");
            switch (parts[0]) {
                case "decsub": {
                    SubscriptionInfo info = SubscriptionInfo.decode(ByteBuffer.wrap(hex.parseHex(parts[1])));
                    System.out.println(info.version() + " " + info.latestSupportedVersion() + " " + info.processId());
                    break;
                }
                case "decasg": {
                    AssignmentInfo info = AssignmentInfo.decode(ByteBuffer.wrap(hex.parseHex(parts[1])));
                    List<TaskId> standby = new ArrayList<>(info.standbyTasks().keySet());
                    standby.sort(null);
                    System.out.println(info.version() + " " + info.commonlySupportedVersion() + " " + info.errCode()
                        + " " + tasks(info.activeTasks()) + " " + tasks(standby) + " " + hosts(info.partitionsByHost()));
                    break;
                }
                case "encsub": {
                    Map<TaskId, Long> offsetSums = new TreeMap<>();
                    if (!parts[3].equals("-")) {
                        for (String t : parts[3].split(",")) {
                            String[] sp = t.split("_");
                            offsetSums.put(new TaskId(Integer.parseInt(sp[0]), Integer.parseInt(sp[1])), -2L);
                        }
                    }
                    int version = Integer.parseInt(parts[1]);
                    SubscriptionInfo info = new SubscriptionInfo(version, version,
                        new ProcessId(UUID.fromString(parts[2])), "", offsetSums, (byte) 0, 0, Map.of());
                    ByteBuffer buf = info.encode();
                    byte[] bytes = new byte[buf.remaining()];
                    buf.get(bytes);
                    System.out.println(hex.formatHex(bytes));
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown command " + parts[0]);
            }
            System.out.flush();  // one answer per line asked: the test talks to one JVM
        }
    }
}
