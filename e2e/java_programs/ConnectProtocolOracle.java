// Kafka Connect's own protocol classes (ConnectProtocol, IncrementalCooperativeConnectProtocol,
// ExtendedAssignment, ExtendedWorkerState of connect-runtime) as the oracle for groupshift's codec
// (translation/connect_classic_protocol.py). Reads one request per line on stdin, fields
// separated by tabs; a string is "x" then its UTF-8 as hex ("-" for null), a list is ";"-separated, a task
// is CONNECTOR_HEX:N. Prints one line per request.
//
//   W0  url offset                        ConnectProtocol.serializeMetadata -> HEX
//   W   sessioned url offset ASSIGNMENT   IncrementalCooperativeConnectProtocol.serializeMetadata
//                                         (ASSIGNMENT "empty": ExtendedAssignment.empty()) -> HEX
//   A0  error leader leaderUrl offset connectors tasks       ConnectProtocol.serializeAssignment -> HEX
//   A   sessioned error leader leaderUrl offset connectors tasks revokedConnectors revokedTasks delay
//                                         IncrementalCooperativeConnectProtocol.serializeAssignment -> HEX
//   RW  HEX    deserializeMetadata (incremental) -> url offset | allocation as below
//   RA  HEX    deserializeAssignment (incremental) ->
//              version error leader leaderUrl offset connectors tasks revokedConnectors revokedTasks delay
//   R0  HEX    ConnectProtocol.deserializeAssignment -> error leader leaderUrl offset connectors tasks
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HexFormat;
import java.util.List;
import org.apache.kafka.connect.runtime.distributed.ConnectProtocol;
import org.apache.kafka.connect.runtime.distributed.ExtendedAssignment;
import org.apache.kafka.connect.runtime.distributed.ExtendedWorkerState;
import org.apache.kafka.connect.runtime.distributed.IncrementalCooperativeConnectProtocol;
import org.apache.kafka.connect.util.ConnectorTaskId;

public class ConnectProtocolOracle {
    static final HexFormat HEX = HexFormat.of();

    static String str(String field) {
        return field.equals("-") ? null : new String(HEX.parseHex(field.substring(1)), StandardCharsets.UTF_8);
    }

    static String hex(String s) {
        return s == null ? "-" : "x" + HEX.formatHex(s.getBytes(StandardCharsets.UTF_8));
    }

    static List<String> names(String field) {
        List<String> out = new ArrayList<>();
        if (field.isEmpty()) return out;
        for (String part : field.split(";", -1)) out.add(str(part));
        return out;
    }

    static List<ConnectorTaskId> tasks(String field) {
        List<ConnectorTaskId> out = new ArrayList<>();
        if (field.isEmpty()) return out;
        for (String part : field.split(";", -1)) {
            String[] ct = part.split(":");
            out.add(new ConnectorTaskId(str(ct[0]), Integer.parseInt(ct[1])));
        }
        return out;
    }

    static String namesOut(Collection<String> names) {
        List<String> out = new ArrayList<>();
        for (String n : names) out.add(hex(n));
        return String.join(";", out);
    }

    static String tasksOut(Collection<ConnectorTaskId> tasks) {
        List<String> out = new ArrayList<>();
        for (ConnectorTaskId t : tasks) out.add(hex(t.connector()) + ":" + t.task());
        return String.join(";", out);
    }

    static String bytes(ByteBuffer buf) {
        if (buf == null) return "-";
        byte[] out = new byte[buf.remaining()];
        buf.duplicate().get(out);
        return HEX.formatHex(out);
    }

    // f[i..i+8]: error leader leaderUrl offset connectors tasks revokedConnectors revokedTasks delay
    static ExtendedAssignment extended(short version, String[] f, int i) {
        return new ExtendedAssignment(version, Short.parseShort(f[i]), str(f[i + 1]), str(f[i + 2]),
                Long.parseLong(f[i + 3]), names(f[i + 4]), tasks(f[i + 5]), names(f[i + 6]),
                tasks(f[i + 7]), Integer.parseInt(f[i + 8]));
    }

    static String describe(ExtendedAssignment a) {
        return String.join("\t", String.valueOf(a.version()), String.valueOf(a.error()), hex(a.leader()),
                hex(a.leaderUrl()), String.valueOf(a.offset()), namesOut(a.connectors()), tasksOut(a.tasks()),
                namesOut(a.revokedConnectors()), tasksOut(a.revokedTasks()), String.valueOf(a.delay()));
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", -1);
            switch (f[0]) {
                case "W0":
                    System.out.println(bytes(ConnectProtocol.serializeMetadata(
                            new ConnectProtocol.WorkerState(str(f[1]), Long.parseLong(f[2])))));
                    break;
                case "W": {
                    boolean sessioned = Boolean.parseBoolean(f[1]);
                    short version = (short) (sessioned ? 2 : 1);
                    ExtendedAssignment a = f[4].equals("empty") ? ExtendedAssignment.empty() : extended(version, f, 4);
                    System.out.println(bytes(IncrementalCooperativeConnectProtocol.serializeMetadata(
                            new ExtendedWorkerState(str(f[2]), Long.parseLong(f[3]), a), sessioned)));
                    break;
                }
                case "A0":
                    System.out.println(bytes(ConnectProtocol.serializeAssignment(new ConnectProtocol.Assignment(
                            Short.parseShort(f[1]), str(f[2]), str(f[3]), Long.parseLong(f[4]), names(f[5]),
                            tasks(f[6])))));
                    break;
                case "A": {
                    boolean sessioned = Boolean.parseBoolean(f[1]);
                    short version = (short) (sessioned ? 2 : 1);
                    System.out.println(bytes(IncrementalCooperativeConnectProtocol.serializeAssignment(
                            extended(version, f, 2), sessioned)));
                    break;
                }
                case "RW": {
                    ExtendedWorkerState w = IncrementalCooperativeConnectProtocol.deserializeMetadata(
                            ByteBuffer.wrap(HEX.parseHex(f[1])));
                    ExtendedAssignment a = w.assignment();
                    System.out.println(hex(w.url()) + "\t" + w.offset() + "\t"
                            + (a == ExtendedAssignment.empty() ? "empty" : describe(a)));
                    break;
                }
                case "RA":
                    System.out.println(describe(IncrementalCooperativeConnectProtocol.deserializeAssignment(
                            ByteBuffer.wrap(HEX.parseHex(f[1])))));
                    break;
                case "R0": {
                    ConnectProtocol.Assignment a = ConnectProtocol.deserializeAssignment(ByteBuffer.wrap(HEX.parseHex(f[1])));
                    System.out.println(String.join("\t", String.valueOf(a.error()), hex(a.leader()),
                            hex(a.leaderUrl()), String.valueOf(a.offset()), namesOut(a.connectors()),
                            tasksOut(a.tasks())));
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown request " + f[0]);
            }
        }
    }
}
