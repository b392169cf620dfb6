// Conformance driver: the generated C# parser over hex lines.
// Input, one case a line: "LAYOUT_ID HEX"; output one JSON object a line
// (tests/langs/README.md). Parse errors are the runtime's (KaitaiStructError,
// EndOfStreamException); any other exception is a crash and ends the process.
using System;
using System.IO;
using System.Linq;
using System.Text;
using Kaitai;

public static class Driver
{
    static string Hex(byte[] b) { return string.Concat(b.Select(x => x.ToString("x2"))); }

    static string Str(string s)
    {
        var sb = new StringBuilder("\"");
        foreach (char c in s)
        {
            if (c == '"' || c == '\\') sb.Append('\\').Append(c);
            else if (c < 0x20 || c > 0x7e) sb.AppendFormat("\\u{0:x4}", (int)c);
            else sb.Append(c);
        }
        return sb.Append('"').ToString();
    }

    static string Failure(Exception e) { return "{\"ok\":false,\"error\":" + Str(e.GetType().Name + ": " + e.Message) + "}"; }

    static string Commitlog(byte[] payload)
    {
        LiftbridgeCommitlog cl;
        try { cl = new LiftbridgeCommitlog(new KaitaiStream(payload)); }
        catch (KaitaiStructError e) { return Failure(e); }
        catch (EndOfStreamException e) { return Failure(e); }
        var entries = cl.Entries.Select(e =>
            "{\"offset\":\"" + e.Offset + "\",\"timestamp\":\"" + e.Timestamp + "\",\"leader_epoch\":\"" +
            e.LeaderEpoch + "\",\"size\":" + e.Size + ",\"crc32c\":" + e.Body.Crc32c + ",\"magic\":" +
            e.Body.Magic + ",\"attributes\":" + e.Body.Attributes +
            ",\"key\":" + (e.Body.KeyLen >= 0 ? "\"" + Hex(e.Body.Key) + "\"" : "null") +
            ",\"value\":" + (e.Body.ValueLen >= 0 ? "\"" + Hex(e.Body.Value) + "\"" : "null") +
            ",\"headers\":[" + string.Join(",", e.Body.Headers.Select(h =>
                "[\"" + Hex(h.Key) + "\",\"" + Hex(h.Value) + "\"]")) + "]}");
        return "{\"ok\":true,\"leader_epoch\":\"" + cl.LeaderEpoch + "\",\"high_watermark\":\"" +
               cl.HighWatermark + "\",\"entries\":[" + string.Join(",", entries) + "]}";
    }

    static string Parse(byte[] data, int layout)
    {
        LiftbridgeEnvelope env;
        try { env = new LiftbridgeEnvelope((LiftbridgeEnvelope.LayoutType)layout, new KaitaiStream(data)); }
        catch (KaitaiStructError e) { return Failure(e); }
        catch (EndOfStreamException e) { return Failure(e); }
        var sb = new StringBuilder("{\"ok\":true");
        var h = env.Header;
        string cl = "null";
        if (h != null)
        {
            sb.Append(",\"version\":").Append(h.Version).Append(",\"header_len\":").Append(h.HeaderLen)
              .Append(",\"flags\":").Append(h.Flags).Append(",\"msg_type\":").Append(h.MsgType)
              .Append(",\"crc32c\":").Append(h.HasCrc ? env.Crc32c.ToString() : "null");
            if (env.Layout == LiftbridgeEnvelope.LayoutType.V0
                && h.V0MsgType == LiftbridgeEnvelope.V0MsgType.ReplicationResponse)
                cl = Commitlog(env.Payload);
        }
        else
            sb.Append(",\"version\":null,\"header_len\":null,\"flags\":null,\"msg_type\":null,\"crc32c\":null");
        return sb.Append(",\"payload_offset\":").Append(data.Length - env.Payload.Length)
                 .Append(",\"payload_len\":").Append(env.Payload.Length)
                 .Append(",\"commitlog\":").Append(cl).Append('}').ToString();
    }

    static byte[] Unhex(string s)
    {
        var b = new byte[s.Length / 2];
        for (int i = 0; i < b.Length; i++) b[i] = Convert.ToByte(s.Substring(2 * i, 2), 16);
        return b;
    }

    public static void Main()
    {
        var stdout = new StreamWriter(Console.OpenStandardOutput(), new UTF8Encoding(false));
        string line;
        while ((line = Console.In.ReadLine()) != null)
        {
            var parts = (line.Trim() + " ").Split(new[] { ' ' }, 2);
            if (parts[0] == "") continue;
            stdout.Write(Parse(Unhex(parts[1].Trim()), int.Parse(parts[0])));
            stdout.Write('\n');
        }
        stdout.Flush();
    }
}
