// Kafka's own generated message classes as the oracle for groupshift's wire schemas of the
// streams group APIs kio lacks (protocol/kafka_schemas.py: StreamsGroupHeartbeat and
// StreamsGroupDescribe v1, StreamsGroupTopologyDescriptionUpdate v0). Reads lines on stdin:
//   "write NAME VERSION JSON": Kafka's JsonConverter reads the JSON into NAME (e.g.
//     StreamsGroupHeartbeatResponseData) and prints the body bytes Kafka writes, as hex;
//   "read NAME VERSION HEX": Kafka parses the body bytes and prints "HEX JSON", the bytes it
//     writes back and its JSON view.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.Readable;

public class StreamsWireOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        HexFormat hex = HexFormat.of();
        ObjectMapper mapper = new ObjectMapper();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.trim().split(" ", 4);
            Class<?> cls = Class.forName("org.apache.kafka.common.message." + parts[1]);
            Class<?> conv = Class.forName("org.apache.kafka.common.message." + parts[1] + "JsonConverter");
            short version = Short.parseShort(parts[2]);
            ApiMessage msg;
            if (parts[0].equals("write")) {
                Method read = conv.getMethod("read", JsonNode.class, short.class);
                msg = (ApiMessage) read.invoke(null, mapper.readTree(parts[3]), version);
            } else {
                ByteBuffer buf = ByteBuffer.wrap(hex.parseHex(parts[3]));
                msg = (ApiMessage) cls.getConstructor(Readable.class, short.class)
                    .newInstance(new ByteBufferAccessor(buf), version);
                if (buf.hasRemaining()) throw new IllegalStateException(buf.remaining() + " bytes left unread");
            }
            ByteBuffer out = MessageUtil.toByteBufferAccessor(msg, version).buffer();
            byte[] bytes = new byte[out.remaining()];
            out.get(bytes);
            if (parts[0].equals("write")) {
                System.out.println(hex.formatHex(bytes));
            } else {
                Method write = conv.getMethod("write", cls, short.class);
                System.out.println(hex.formatHex(bytes) + " " + write.invoke(null, msg, version).toString());
            }
        }
    }
}
