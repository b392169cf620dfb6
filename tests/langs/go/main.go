// Conformance driver: the generated Go parser over hex lines.
// Input, one case a line: "LAYOUT_ID HEX" (LAYOUT_ID: the spec's `layout` enum value).
// Output, one JSON object a line (see tests/langs/README.md). Parse errors are
// the runtime's errors, printed; a panic is a crash and ends the process.
package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kaitai-io/kaitai_struct_go_runtime/kaitai"
	lb "liftbridge"
)

type obj = map[string]interface{}

func failure(err error) obj {
	return obj{"ok": false, "error": fmt.Sprintf("%T: %v", err, err)}
}

func hexOrNil(b []byte, present bool) interface{} {
	if !present {
		return nil
	}
	return hex.EncodeToString(b)
}

func commitlog(payload []byte) obj {
	cl := lb.NewLiftbridgeCommitlog()
	if err := cl.Read(kaitai.NewStream(bytes.NewReader(payload)), nil, cl); err != nil {
		return failure(err)
	}
	entries := []obj{}
	for _, e := range cl.Entries {
		b := e.Body
		headers := [][]string{}
		for _, h := range b.Headers {
			headers = append(headers, []string{hex.EncodeToString(h.Key), hex.EncodeToString(h.Value)})
		}
		entries = append(entries, obj{
			"offset": strconv.FormatUint(e.Offset, 10), "timestamp": strconv.FormatInt(e.Timestamp, 10),
			"leader_epoch": strconv.FormatUint(e.LeaderEpoch, 10), "size": e.Size,
			"crc32c": b.Crc32c, "magic": b.Magic, "attributes": b.Attributes,
			"key": hexOrNil(b.Key, b.KeyLen >= 0), "value": hexOrNil(b.Value, b.ValueLen >= 0),
			"headers": headers,
		})
	}
	return obj{"ok": true, "leader_epoch": strconv.FormatUint(cl.LeaderEpoch, 10),
		"high_watermark": strconv.FormatInt(cl.HighWatermark, 10), "entries": entries}
}

func parse(data []byte, layout int) obj {
	env := lb.NewLiftbridgeEnvelope(lb.LiftbridgeEnvelope_Layout(layout))
	if err := env.Read(kaitai.NewStream(bytes.NewReader(data)), nil, env); err != nil {
		return failure(err)
	}
	res := obj{"ok": true, "version": nil, "header_len": nil, "flags": nil, "msg_type": nil,
		"crc32c": nil, "payload_offset": len(data) - len(env.Payload),
		"payload_len": len(env.Payload), "commitlog": nil}
	if h := env.Header; h != nil {
		res["version"], res["header_len"], res["flags"], res["msg_type"] = h.Version, h.HeaderLen, h.Flags, h.MsgType
		hasCrc, err := h.HasCrc()
		if err != nil {
			return failure(err)
		}
		if hasCrc {
			res["crc32c"] = env.Crc32c
		}
		if env.Layout == lb.LiftbridgeEnvelope_Layout__V0 &&
			lb.LiftbridgeEnvelope_V0MsgType(h.MsgType) == lb.LiftbridgeEnvelope_V0MsgType__ReplicationResponse {
			res["commitlog"] = commitlog(env.Payload)
		}
	}
	return res
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 256<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		parts := strings.SplitN(line+" ", " ", 2)
		layout, err := strconv.Atoi(parts[0])
		data, err2 := hex.DecodeString(strings.TrimSpace(parts[1]))
		if err != nil || err2 != nil {
			fmt.Fprintf(os.Stderr, "bad input line: %q\n", line)
			os.Exit(2)
		}
		enc, _ := json.Marshal(parse(data, layout))
		out.Write(enc)
		out.WriteByte('\n')
	}
}
