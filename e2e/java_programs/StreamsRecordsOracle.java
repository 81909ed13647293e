// Kafka's own generated streams-group record classes as the oracle for groupshift's codec
// (records/streams_group_codec.py). Reads lines "TYPE HEX" on stdin (a value's bytes, version
// prefix included), parses them with the generated class of that record type, and prints
// "HEX JSON": the bytes Kafka writes for what it read, and Kafka's JSON view of it.
import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.group.generated.*;

public class StreamsRecordsOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        HexFormat hex = HexFormat.of();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.trim().split(" ");
            int type = Integer.parseInt(parts[0]);
            ByteBuffer buf = ByteBuffer.wrap(hex.parseHex(parts[1]));
            short version = buf.getShort();
            ByteBufferAccessor acc = new ByteBufferAccessor(buf);
            org.apache.kafka.common.protocol.ApiMessage msg;
            JsonNode json;
            switch (type) {
                case 17: { var m = new StreamsGroupMetadataValue(acc, version); msg = m; json = StreamsGroupMetadataValueJsonConverter.write(m, version); break; }
                case 19: { var m = new StreamsGroupMemberMetadataValue(acc, version); msg = m; json = StreamsGroupMemberMetadataValueJsonConverter.write(m, version); break; }
                case 20: { var m = new StreamsGroupTargetAssignmentMetadataValue(acc, version); msg = m; json = StreamsGroupTargetAssignmentMetadataValueJsonConverter.write(m, version); break; }
                case 21: { var m = new StreamsGroupTargetAssignmentMemberValue(acc, version); msg = m; json = StreamsGroupTargetAssignmentMemberValueJsonConverter.write(m, version); break; }
                case 22: { var m = new StreamsGroupCurrentMemberAssignmentValue(acc, version); msg = m; json = StreamsGroupCurrentMemberAssignmentValueJsonConverter.write(m, version); break; }
                case 23: { var m = new StreamsGroupTopologyValue(acc, version); msg = m; json = StreamsGroupTopologyValueJsonConverter.write(m, version); break; }
                default: throw new IllegalArgumentException("type " + type);
            }
            if (buf.hasRemaining()) throw new IllegalStateException(buf.remaining() + " bytes left unread");
            ByteBuffer out = MessageUtil.toVersionPrefixedByteBuffer(version, msg);
            byte[] bytes = new byte[out.remaining()];
            out.get(bytes);
            System.out.println(hex.formatHex(bytes) + " " + json.toString());
        }
    }
}
