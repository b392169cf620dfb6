// Conformance driver: the generated Java parser over hex lines.
// Input, one case a line: "LAYOUT_ID HEX"; output one JSON object a line
// (tests/langs/README.md). Parse errors are the runtime's (KaitaiStructError,
// BufferUnderflowException at the end of the bytes, IllegalArgumentException
// from a substream longer than the bytes left); any other exception is a
// crash and ends the process.
import io.kaitai.struct.ByteBufferKaitaiStream;
import io.kaitai.struct.KaitaiStream;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.BufferUnderflowException;
import java.nio.charset.StandardCharsets;
import liftbridge.LiftbridgeCommitlog;
import liftbridge.LiftbridgeEnvelope;

public class Driver {
    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    static String str(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') sb.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) sb.append(String.format("\\u%04x", (int) c));
            else sb.append(c);
        }
        return sb.append('"').toString();
    }

    static String failure(RuntimeException e) {
        return "{\"ok\":false,\"error\":" + str(e.getClass().getName() + ": " + e.getMessage()) + "}";
    }

    static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static String commitlog(byte[] payload) {
        LiftbridgeCommitlog cl;
        try {
            cl = new LiftbridgeCommitlog(new ByteBufferKaitaiStream(payload));
        } catch (KaitaiStream.KaitaiStructError | BufferUnderflowException | IllegalArgumentException e) {
            return failure(e);
        }
        StringBuilder sb = new StringBuilder("{\"ok\":true,\"leader_epoch\":\"")
            .append(Long.toUnsignedString(cl.leaderEpoch())).append("\",\"high_watermark\":\"")
            .append(cl.highWatermark()).append("\",\"entries\":[");
        String sep = "";
        for (LiftbridgeCommitlog.Entry e : cl.entries()) {
            LiftbridgeCommitlog.Body b = e.body();
            sb.append(sep).append("{\"offset\":\"").append(Long.toUnsignedString(e.offset()))
              .append("\",\"timestamp\":\"").append(e.timestamp())
              .append("\",\"leader_epoch\":\"").append(Long.toUnsignedString(e.leaderEpoch()))
              .append("\",\"size\":").append(e.size()).append(",\"crc32c\":").append(b.crc32c())
              .append(",\"magic\":").append(b.magic()).append(",\"attributes\":").append(b.attributes())
              .append(",\"key\":").append(b.keyLen() >= 0 ? "\"" + hex(b.key()) + "\"" : "null")
              .append(",\"value\":").append(b.valueLen() >= 0 ? "\"" + hex(b.value()) + "\"" : "null")
              .append(",\"headers\":[");
            String hsep = "";
            for (LiftbridgeCommitlog.Header h : b.headers()) {
                sb.append(hsep).append("[\"").append(hex(h.key()))
                  .append("\",\"").append(hex(h.value())).append("\"]");
                hsep = ",";
            }
            sb.append("]}");
            sep = ",";
        }
        return sb.append("]}").toString();
    }

    static String parse(byte[] data, int layout) {
        LiftbridgeEnvelope env;
        try {
            env = new LiftbridgeEnvelope(new ByteBufferKaitaiStream(data), LiftbridgeEnvelope.Layout.byId(layout));
        } catch (KaitaiStream.KaitaiStructError | BufferUnderflowException | IllegalArgumentException e) {
            return failure(e);
        }
        StringBuilder sb = new StringBuilder("{\"ok\":true");
        LiftbridgeEnvelope.Header h = env.header();
        String commitlog = "null";
        if (h != null) {
            sb.append(",\"version\":").append(h.version()).append(",\"header_len\":").append(h.headerLen())
              .append(",\"flags\":").append(h.flags()).append(",\"msg_type\":").append(h.msgType())
              .append(",\"crc32c\":").append(h.hasCrc() ? String.valueOf(env.crc32c()) : "null");
            if (env.layout() == LiftbridgeEnvelope.Layout.V0
                    && h.v0MsgType() == LiftbridgeEnvelope.V0MsgType.REPLICATION_RESPONSE) {
                commitlog = commitlog(env.payload());
            }
        } else {
            sb.append(",\"version\":null,\"header_len\":null,\"flags\":null,\"msg_type\":null,\"crc32c\":null");
        }
        sb.append(",\"payload_offset\":").append(data.length - env.payload().length)
          .append(",\"payload_len\":").append(env.payload().length)
          .append(",\"commitlog\":").append(commitlog).append("}");
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) continue;
            String[] parts = (line + " ").split(" ", 2);
            out.write(parse(unhex(parts[1].trim()), Integer.parseInt(parts[0])));
            out.write('\n');
        }
        out.flush();
    }
}
