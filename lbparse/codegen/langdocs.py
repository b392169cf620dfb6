"""The README and runnable example beside each language's generated parsers.

`write_docs(lang, folder)` writes `README.md` (what the files are, the build
line, the example and what it prints, what to know in that language) and
the example program itself. Every example reads the same three envelopes: a
ServerInfoResponse, a v0 envelope whose MsgType (99) is not in the table, and
a ReplicationResponse whose high watermark, 9007199254740993 (2^53 + 1),
only an exact 64-bit integer holds. tests/codegen/test_langs.py runs each example
with its README's build line and compares what it prints with `output`.

The build lines name the Kaitai runtime's folder `$KAITAI_RUNTIME` (the
runtime of that language at version 0.11, from its package registry or a
checkout of kaitai_struct_<lang>_runtime).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DOCS", "EXAMPLE_ENVELOPES", "LangDoc", "write_docs"]

EXAMPLE_ENVELOPES = (
    "b90e43b40008000b0a02733112126c6966746272696467652e6578616d706c6518cc48",
    "b90e43b4000800630a0161",
    "b90e43b40008000300000000000000050020000000000001",
)
_HEX = EXAMPLE_ENVELOPES

# What every example prints when it reads names from msg_types.json.
_JSON_OUTPUT = """\
v0 ServerInfoResponse: header_len 8, payload 27 bytes (protocol.ServerInfoResponse)
v0 MsgType 99: not in the layout's table (unknown_msg_type)
v0 ReplicationResponse: header_len 8, payload 16 bytes (raw)
  leader_epoch 5, high_watermark 9007199254740993, 0 entries
"""


@dataclass(frozen=True)
class LangDoc:
    """What a language folder's README says, and its runnable example.

    Attributes:
        name: How people call the language.
        example: The example's file name, relative to the folder.
        source: The example program.
        build: Shell lines, run in the folder, that build and run the example.
        output: What the example prints.
        notes: What to know when using the parsers in this language.
        tools: Executables the build lines need.
        extra: Other files to write, by name.
    """

    name: str  # how people call the language
    example: str  # file name of the example, relative to the folder
    source: str  # the example program
    build: str  # shell lines, run in the folder, that build and run the example
    output: str  # what the example prints
    notes: tuple[str, ...] = ()  # what to know when using the parsers in this language
    tools: tuple[str, ...] = ()  # executables the build line needs
    extra: dict[str, str] = field(default_factory=dict)  # other files to write


_GO = f'''\
// Reads three envelopes with the generated parser; names come from msg_types.json.
package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"github.com/kaitai-io/kaitai_struct_go_runtime/kaitai"
	lb "liftbridge"
)

type table struct {{
	Layouts map[string]struct {{
		ID       int `json:"id"`
		MsgTypes []struct {{
			Value       int    `json:"value"`
			Name        string `json:"name"`
			PayloadType string `json:"payload_type"`
		}} `json:"msg_types"`
	}} `json:"layouts"`
}}

func main() {{
	raw, err := os.ReadFile("msg_types.json")
	if err != nil {{
		panic(err)
	}}
	var t table
	if err := json.Unmarshal(raw, &t); err != nil {{
		panic(err)
	}}
	v0 := t.Layouts["v0"]
	for _, h := range []string{{"{_HEX[0]}",
		"{_HEX[1]}",
		"{_HEX[2]}"}} {{
		data, _ := hex.DecodeString(h)
		env := lb.NewLiftbridgeEnvelope(lb.LiftbridgeEnvelope_Layout(v0.ID))
		if err := env.Read(kaitai.NewStream(bytes.NewReader(data)), nil, env); err != nil {{
			fmt.Println("error:", err)
			continue
		}}
		name, ptype := "", ""
		for _, m := range v0.MsgTypes {{
			if m.Value == int(env.Header.MsgType) {{
				name, ptype = m.Name, m.PayloadType
			}}
		}}
		if name == "" {{
			fmt.Printf("v0 MsgType %d: not in the layout's table (unknown_msg_type)\\n", env.Header.MsgType)
			continue
		}}
		fmt.Printf("v0 %s: header_len %d, payload %d bytes (%s)\\n", name, env.Header.HeaderLen, len(env.Payload), ptype)
		if ptype == "raw" {{ // ReplicationResponse: commit-log entries
			cl := lb.NewLiftbridgeCommitlog()
			if err := cl.Read(kaitai.NewStream(bytes.NewReader(env.Payload)), nil, cl); err != nil {{
				fmt.Println("error:", err)
				continue
			}}
			fmt.Printf("  leader_epoch %d, high_watermark %d, %d entries\\n", cl.LeaderEpoch, cl.HighWatermark, len(cl.Entries))
		}}
	}}
}}
'''

_JS = f'''\
// Reads three envelopes with the generated parser; names come from msg_types.json.
// 64-bit integers are BigInt (exact); an unknown MsgType is reported, not a crash.
const KaitaiStream = require("kaitai-struct/KaitaiStream");
const {{ LiftbridgeEnvelope }} = require("./LiftbridgeEnvelope");
const {{ LiftbridgeCommitlog }} = require("./LiftbridgeCommitlog");
const types = require("./msg_types.json");

const layout = types.layouts.v0;
for (const hex of ["{_HEX[0]}",
                   "{_HEX[1]}",
                   "{_HEX[2]}"]) {{
  const env = new LiftbridgeEnvelope(new KaitaiStream(Buffer.from(hex, "hex")), null, null, layout.id);
  const h = env.header;
  const mt = layout.msg_types.find((m) => m.value === h.msgType);
  if (mt === undefined) {{
    console.log(`v0 MsgType ${{h.msgType}}: not in the layout's table (unknown_msg_type)`);
    continue;
  }}
  console.log(`v0 ${{mt.name}}: header_len ${{h.headerLen}}, payload ${{env.payload.length}} bytes (${{mt.payload_type}})`);
  if (mt.payload_type === "raw") {{  // ReplicationResponse: commit-log entries
    const cl = new LiftbridgeCommitlog(new KaitaiStream(env.payload));
    console.log(`  leader_epoch ${{cl.leaderEpoch}}, high_watermark ${{cl.highWatermark}}, ${{cl.entries.length}} entries`);
  }}
}}
'''

_PY = f'''\
"""Reads three envelopes with the generated parser; names come from msg_types.json."""
import json

from kaitaistruct import KaitaiStream, BytesIO

from liftbridge_commitlog import LiftbridgeCommitlog
from liftbridge_envelope import LiftbridgeEnvelope

layout = json.load(open("msg_types.json"))["layouts"]["v0"]
names = {{m["value"]: m for m in layout["msg_types"]}}
for h in ("{_HEX[0]}",
          "{_HEX[1]}",
          "{_HEX[2]}"):
    env = LiftbridgeEnvelope(LiftbridgeEnvelope.Layout(layout["id"]), KaitaiStream(BytesIO(bytes.fromhex(h))))
    mt = names.get(env.header.msg_type)
    if mt is None:
        print(f"v0 MsgType {{env.header.msg_type}}: not in the layout's table (unknown_msg_type)")
        continue
    print(f"v0 {{mt['name']}}: header_len {{env.header.header_len}}, payload {{len(env.payload)}} bytes "
          f"({{mt['payload_type']}})")
    if mt["payload_type"] == "raw":  # ReplicationResponse: commit-log entries
        cl = LiftbridgeCommitlog(KaitaiStream(BytesIO(env.payload)))
        print(f"  leader_epoch {{cl.leader_epoch}}, high_watermark {{cl.high_watermark}}, "
              f"{{len(cl.entries)}} entries")
'''

_JAVA = f'''\
// Reads three envelopes with the generated parser; names come from the generated enums.
import io.kaitai.struct.ByteBufferKaitaiStream;
import liftbridge.LiftbridgeCommitlog;
import liftbridge.LiftbridgeEnvelope;

public class Example {{
    public static void main(String[] args) {{
        String[] envelopes = {{"{_HEX[0]}",
                              "{_HEX[1]}",
                              "{_HEX[2]}"}};
        for (String hex : envelopes) {{
            byte[] data = new byte[hex.length() / 2];
            for (int i = 0; i < data.length; i++) data[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            LiftbridgeEnvelope env = new LiftbridgeEnvelope(new ByteBufferKaitaiStream(data), LiftbridgeEnvelope.Layout.V0);
            LiftbridgeEnvelope.V0MsgType mt = env.header().v0MsgType();  // null: not in the table
            if (mt == null) {{
                System.out.println("v0 MsgType " + env.header().msgType() + ": not in the layout's table (unknown_msg_type)");
                continue;
            }}
            System.out.println("v0 " + mt + ": header_len " + env.header().headerLen() + ", payload " + env.payload().length + " bytes");
            if (mt == LiftbridgeEnvelope.V0MsgType.REPLICATION_RESPONSE) {{
                LiftbridgeCommitlog cl = new LiftbridgeCommitlog(new ByteBufferKaitaiStream(env.payload()));
                // u8 is a Java long: print it unsigned.
                System.out.println("  leader_epoch " + Long.toUnsignedString(cl.leaderEpoch()) + ", high_watermark "
                                   + cl.highWatermark() + ", " + cl.entries().size() + " entries");
            }}
        }}
    }}
}}
'''

_ENUM_OUTPUT_JAVA = """\
v0 SERVER_INFO_RESPONSE: header_len 8, payload 27 bytes
v0 MsgType 99: not in the layout's table (unknown_msg_type)
v0 REPLICATION_RESPONSE: header_len 8, payload 16 bytes
  leader_epoch 5, high_watermark 9007199254740993, 0 entries
"""

_CPP = f'''\
// Reads three envelopes with the generated parser; MsgTypes checked against the generated enum.
#include <iostream>
#include <string>

#include "kaitai/kaitaistream.h"
#include "liftbridge_commitlog.h"
#include "liftbridge_envelope.h"

int main() {{
    const char* envelopes[] = {{"{_HEX[0]}",
                                "{_HEX[1]}",
                                "{_HEX[2]}"}};
    for (const char* hex : envelopes) {{
        std::string h(hex), data;
        for (size_t i = 0; i + 1 < h.size(); i += 2) data += static_cast<char>(std::stoi(h.substr(i, 2), 0, 16));
        kaitai::kstream ks(data);
        liftbridge_envelope_t env(liftbridge_envelope_t::LAYOUT_V0, &ks);
        liftbridge_envelope_t::v0_msg_type_t mt = env.header()->v0_msg_type();
        if (!liftbridge_envelope_t::_is_defined_v0_msg_type_t(mt)) {{
            std::cout << "v0 MsgType " << +env.header()->msg_type() << ": not in the layout's table (unknown_msg_type)\\n";
            continue;
        }}
        std::cout << "v0 MsgType " << +env.header()->msg_type() << ": header_len " << +env.header()->header_len()
                  << ", payload " << env.payload().size() << " bytes\\n";
        if (mt == liftbridge_envelope_t::V0_MSG_TYPE_REPLICATION_RESPONSE) {{
            kaitai::kstream cs(env.payload());
            liftbridge_commitlog_t cl(&cs);
            std::cout << "  leader_epoch " << cl.leader_epoch() << ", high_watermark " << cl.high_watermark() << ", "
                      << cl.entries()->size() << " entries\\n";
        }}
    }}
    return 0;
}}
'''

_CPP_OUTPUT = """\
v0 MsgType 11: header_len 8, payload 27 bytes
v0 MsgType 99: not in the layout's table (unknown_msg_type)
v0 MsgType 3: header_len 8, payload 16 bytes
  leader_epoch 5, high_watermark 9007199254740993, 0 entries
"""

_CSHARP = f'''\
// Reads three envelopes with the generated parser; names come from the generated enums.
using System;
using System.Linq;
using Kaitai;

public static class Example
{{
    public static void Main()
    {{
        foreach (var hex in new[] {{ "{_HEX[0]}",
                                     "{_HEX[1]}",
                                     "{_HEX[2]}" }})
        {{
            var data = Enumerable.Range(0, hex.Length / 2).Select(i => Convert.ToByte(hex.Substring(2 * i, 2), 16)).ToArray();
            var env = new LiftbridgeEnvelope(LiftbridgeEnvelope.LayoutType.V0, new KaitaiStream(data));
            var mt = env.Header.V0MsgType;
            if (!Enum.IsDefined(typeof(LiftbridgeEnvelope.V0MsgType), mt))
            {{
                Console.WriteLine("v0 MsgType " + env.Header.MsgType + ": not in the layout's table (unknown_msg_type)");
                continue;
            }}
            Console.WriteLine("v0 " + mt + ": header_len " + env.Header.HeaderLen + ", payload " + env.Payload.Length + " bytes");
            if (mt == LiftbridgeEnvelope.V0MsgType.ReplicationResponse)
            {{
                var cl = new LiftbridgeCommitlog(new KaitaiStream(env.Payload));
                Console.WriteLine("  leader_epoch " + cl.LeaderEpoch + ", high_watermark " + cl.HighWatermark + ", " + cl.Entries.Count + " entries");
            }}
        }}
    }}
}}
'''

_ENUM_OUTPUT_CS = """\
v0 ServerInfoResponse: header_len 8, payload 27 bytes
v0 MsgType 99: not in the layout's table (unknown_msg_type)
v0 ReplicationResponse: header_len 8, payload 16 bytes
  leader_epoch 5, high_watermark 9007199254740993, 0 entries
"""

_RUBY = f"""\
# Reads three envelopes with the generated parser; names come from msg_types.json.
require 'json'
require 'liftbridge_envelope'
require 'liftbridge_commitlog'

layout = JSON.parse(File.read('msg_types.json'))['layouts']['v0']
names = layout['msg_types'].to_h {{ |m| [m['value'], m] }}
%w[{_HEX[0]}
   {_HEX[1]}
   {_HEX[2]}].each do |hex|
  env = LiftbridgeEnvelope.new(Kaitai::Struct::Stream.new([hex].pack('H*')), nil, nil,
                               LiftbridgeEnvelope::LAYOUT[layout['id']])
  mt = names[env.header.msg_type]
  if mt.nil?
    puts "v0 MsgType #{{env.header.msg_type}}: not in the layout's table (unknown_msg_type)"
    next
  end
  puts "v0 #{{mt['name']}}: header_len #{{env.header.header_len}}, payload #{{env.payload.bytesize}} bytes " \\
       "(#{{mt['payload_type']}})"
  next unless mt['payload_type'] == 'raw' # ReplicationResponse: commit-log entries

  cl = LiftbridgeCommitlog.new(Kaitai::Struct::Stream.new(env.payload))
  puts "  leader_epoch #{{cl.leader_epoch}}, high_watermark #{{cl.high_watermark}}, #{{cl.entries.size}} entries"
end
"""

_PHP = f"""\
<?php
// Reads three envelopes with the generated parser; names come from msg_types.json.
// Usage: php example.php KAITAI_RUNTIME/lib
spl_autoload_register(function (string $class) use ($argv): void {{
    $path = $argv[1] . '/' . str_replace('\\\\', '/', $class) . '.php';
    if (is_file($path)) require_once $path;
}});
require_once __DIR__ . '/LiftbridgeEnvelope.php';
require_once __DIR__ . '/LiftbridgeCommitlog.php';

$layout = json_decode(file_get_contents(__DIR__ . '/msg_types.json'), true)['layouts']['v0'];
$names = array_column($layout['msg_types'], null, 'value');
foreach (['{_HEX[0]}',
          '{_HEX[1]}',
          '{_HEX[2]}'] as $hex) {{
    $env = new LiftbridgeEnvelope($layout['id'], new \\Kaitai\\Struct\\Stream(hex2bin($hex)));
    $mt = $names[$env->header()->msgType()] ?? null;
    if ($mt === null) {{
        echo "v0 MsgType {{$env->header()->msgType()}}: not in the layout's table (unknown_msg_type)\\n";
        continue;
    }}
    printf("v0 %s: header_len %d, payload %d bytes (%s)\\n", $mt['name'], $env->header()->headerLen(),
           strlen($env->payload()), $mt['payload_type']);
    if ($mt['payload_type'] === 'raw') {{  // ReplicationResponse: commit-log entries
        $cl = new LiftbridgeCommitlog(new \\Kaitai\\Struct\\Stream($env->payload()));
        // PHP integers are signed 64-bit: %u prints a u8 exactly.
        printf("  leader_epoch %u, high_watermark %d, %d entries\\n", $cl->leaderEpoch(), $cl->highWatermark(),
               count($cl->entries()));
    }}
}}
"""

_PERL = f"""\
# Reads three envelopes with the generated parser; names come from msg_types.json.
use strict;
use warnings;
use JSON::PP;
use IO::KaitaiStruct;
use LiftbridgeEnvelope;
use LiftbridgeCommitlog;

open(my $fh, '<', 'msg_types.json') or die "msg_types.json: $!";
my $layout = decode_json(do {{ local $/; <$fh> }})->{{layouts}}{{v0}};
my %names = map {{ $_->{{value}} => $_ }} @{{ $layout->{{msg_types}} }};
for my $hex (qw({_HEX[0]}
                {_HEX[1]}
                {_HEX[2]})) {{
    my $env = LiftbridgeEnvelope->new(IO::KaitaiStruct::Stream->new(pack('H*', $hex)), undef, undef,
                                      $layout->{{id}});
    my $mt = $names{{ $env->header()->msg_type() }};
    if (!$mt) {{
        printf("v0 MsgType %d: not in the layout's table (unknown_msg_type)\\n", $env->header()->msg_type());
        next;
    }}
    printf("v0 %s: header_len %d, payload %d bytes (%s)\\n", $mt->{{name}}, $env->header()->header_len(),
           length($env->payload()), $mt->{{payload_type}});
    next unless $mt->{{payload_type}} eq 'raw';    # ReplicationResponse: commit-log entries
    my $cl = LiftbridgeCommitlog->new(IO::KaitaiStruct::Stream->new($env->payload()));
    printf("  leader_epoch %s, high_watermark %s, %d entries\\n", $cl->leader_epoch(), $cl->high_watermark(),
           scalar @{{ $cl->entries() }});
}}
"""

_LUA = f'''\
-- Reads three envelopes with the generated parser; names come from the generated enums.
local stringstream = require("string_stream")
require("kaitaistruct")
require("liftbridge_envelope")
require("liftbridge_commitlog")

for _, hex in ipairs({{ "{_HEX[0]}",
                       "{_HEX[1]}",
                       "{_HEX[2]}" }}) do
  local data = hex:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end)
  local env = LiftbridgeEnvelope(LiftbridgeEnvelope.Layout.v0, KaitaiStream(stringstream(data)))
  local mt = env.header.v0_msg_type  -- nil: not in the table
  if mt == nil then
    print(("v0 MsgType %d: not in the layout's table (unknown_msg_type)"):format(env.header.msg_type))
  else
    print(("v0 %s: header_len %d, payload %d bytes"):format(mt.label, env.header.header_len, #env.payload))
    if mt == LiftbridgeEnvelope.V0MsgType.replication_response then
      local cl = LiftbridgeCommitlog(KaitaiStream(stringstream(env.payload)))
      -- Lua 5.3 integers are signed 64-bit: %d is exact for an s8; a u8 above 2^63-1 prints negative.
      print(("  leader_epoch %d, high_watermark %d, %d entries"):format(cl.leader_epoch, cl.high_watermark,
                                                                       #cl.entries))
    end
  end
end
'''

_LUA_OUTPUT = """\
v0 server_info_response: header_len 8, payload 27 bytes
v0 MsgType 99: not in the layout's table (unknown_msg_type)
v0 replication_response: header_len 8, payload 16 bytes
  leader_epoch 5, high_watermark 9007199254740993, 0 entries
"""

_NIM = f'''\
## Reads three envelopes with the generated parser; names come from msg_types.json.
import std/[json, strutils]
import kaitai_struct_nim_runtime
import liftbridge_envelope, liftbridge_commitlog

let layout = parseFile("msg_types.json")["layouts"]["v0"]
for hex in ["{_HEX[0]}",
            "{_HEX[1]}",
            "{_HEX[2]}"]:
  var data = newSeq[byte](hex.len div 2)
  for i in 0 ..< data.len: data[i] = byte(parseHexInt(hex[2*i .. 2*i+1]))
  let env = LiftbridgeEnvelope.read(newKaitaiStream(data), nil, nil, LiftbridgeEnvelope_Layout(layout["id"].getInt))
  let byte7 = int(env.header.msgType)
  var mt: JsonNode = nil
  for m in layout["msg_types"]:
    if m["value"].getInt == byte7: mt = m
  if mt == nil:
    echo "v0 MsgType ", byte7, ": not in the layout's table (unknown_msg_type)"
    continue
  echo "v0 ", mt["name"].getStr, ": header_len ", int(env.header.headerLen), ", payload ", env.payload.len,
       " bytes (", mt["payload_type"].getStr, ")"
  if mt["payload_type"].getStr == "raw":  # ReplicationResponse: commit-log entries
    let cl = LiftbridgeCommitlog.read(newKaitaiStream(env.payload), nil, nil)
    echo "  leader_epoch ", cl.leaderEpoch, ", high_watermark ", cl.highWatermark, ", ", cl.entries.len, " entries"
'''

_README = """\
# Liftbridge envelope parsers: {name}

Generated by `lbparse generate --lang {lang}` from lbparse's spec
(`spec/envelope.ksy`, `spec/commitlog.ksy`) with kaitai-struct-compiler 0.11:
do not edit, change the spec and generate again.

| file | what |
|---|---|
{files}| `msg_types.json` | every layout: its `id` (the `layout` parameter of the envelope parser), what header byte 7 means (`byte7`), its MsgType table (value, name, payload type, `internal` for server-to-server RPCs); the error kinds |
| `proto/` | the protobuf schemas of the payloads and `lbparse.desc`, their FileDescriptorSet |
| `flatbuffers/api.fbs` | the FlatBuffers schema of the FlatBuffers layouts |
| `{example}` | the example below |

The envelope parser takes the layout (which generation wrote the bytes) as
a parameter; it checks everything the header says (magic, version, header
length, CRC flag) and leaves the CRC-32C value, the MsgType table and the
payload schema to you: look byte 7 up in `msg_types.json` (a value not in
the table is `unknown_msg_type`), decode the payload as its `payload_type`
(protobuf with `proto/`, `raw` = a ReplicationResponse: parse it with the
commit-log parser).

## Build and run the example

```sh
{build}
```

```{fence}
{source}```

prints

```
{output}```
{notes}"""


def _md_notes(name: str, notes: tuple[str, ...]) -> str:
    if not notes:
        return ""
    return f"\n## What to know in {name}\n\n" + "".join(f"- {n}\n" for n in notes)


_ERRORS = "A parse error is the runtime's {}; anything else from a parse is a bug."

DOCS: dict[str, LangDoc] = {
    "go": LangDoc(
        "Go",
        "example/main.go",
        _GO,
        "# offline (no module proxy): point the module at the runtime and at Debian's x/text\n"
        "go mod edit -replace github.com/kaitai-io/kaitai_struct_go_runtime=$KAITAI_RUNTIME\n"
        "go mod edit -replace golang.org/x/text=/usr/share/gocode/src/golang.org/x/text\n"
        "# (online instead: go mod tidy)\n"
        "GOFLAGS=-mod=mod go run ./example",
        _JSON_OUTPUT,
        (
            "The folder is the Go module `liftbridge` (package `liftbridge`); rename it with "
            "`go mod edit -module` and the package clauses.",
            _ERRORS.format(
                "`error` from `Read` (a `kaitai.ValidationNotEqualError` & co. with the "
                "field's spec path, or an I/O error at the end of the bytes)"
            ),
            "64-bit fields are `uint64`/`int64`: exact.",
            "Go's enums are plain integers: `v0_msg_type` of an unknown byte is just that number; "
            "check it against `msg_types.json`.",
        ),
        ("go",),
    ),
    "javascript": LangDoc(
        "JavaScript (Node)",
        "example.js",
        _JS,
        "npm install   # kaitai-struct 0.11, pinned by package.json\nnode example.js",
        _JSON_OUTPUT,
        (
            "64-bit fields (`leaderEpoch`, `highWatermark`, the entries' `offset`, `timestamp`, "
            "`leaderEpoch`) are `BigInt`, exact: lbparse rewrites the compiler's Number reads, "
            "which lose precision above 2^53. Mix them with Numbers through `BigInt(n)` or "
            "`Number(b)`.",
            _ERRORS.format(
                "exception (`KaitaiStream.EOFError`, `ValidationNotEqualError` & co., "
                "whose `srcPath` names the field of the spec that failed)"
            ),
            "An unknown MsgType is not an error of the parser: `layout.msg_types.find(...)` "
            "gives `undefined`, as the example shows.",
        ),
        ("node",),
    ),
    "python": LangDoc(
        "Python",
        "example.py",
        _PY,
        "pip install kaitaistruct==0.11\npython3 example.py",
        _JSON_OUTPUT,
        (
            "lbparse itself (`pip install lbparse`) decodes everything these parsers read, and "
            "the payloads too; these are for programs that want the bare Kaitai parsers.",
            _ERRORS.format("`kaitaistruct.KaitaiStructError` or `EOFError`"),
        ),
        ("python3",),
    ),
    "java": LangDoc(
        "Java",
        "Example.java",
        _JAVA,
        "javac -d classes $(find $KAITAI_RUNTIME/src/main/java -name '*.java') *.java\n"
        "java -cp classes Example",
        _ENUM_OUTPUT_JAVA,
        (
            "The parsers are the package `liftbridge`.",
            "u8 fields are Java `long`s: above 2^63-1 they read negative; print them with "
            "`Long.toUnsignedString` (s8 fields are exact as they are).",
            _ERRORS.format(
                "`KaitaiStream.KaitaiStructError` (checks), `BufferUnderflowException` "
                "(a read past the end) or `IllegalArgumentException` (the runtime's "
                "substream on fewer bytes than the header block)"
            ),
            "`header().v0MsgType()` is `null` for a byte not in the table.",
        ),
        ("javac", "java"),
    ),
    "cpp": LangDoc(
        "C++ (STL, C++11)",
        "example.cpp",
        _CPP,
        "g++ -std=c++11 -DKS_STR_ENCODING_ICONV -I$KAITAI_RUNTIME -I. \\\n"
        "    $KAITAI_RUNTIME/kaitai/kaitaistream.cpp *.cpp -o example\n./example",
        _CPP_OUTPUT,
        (
            _ERRORS.format(
                "exception: `kaitai::kstruct_error` (checks, with the spec path), "
                "`std::ios_base::failure` (a read past the end) or "
                "`kaitai::bytes_to_str_error` (a header key that is not UTF-8)"
            ),
            "`_is_defined_v0_msg_type_t` says whether byte 7 is in the table.",
            "64-bit fields are `uint64_t`/`int64_t`: exact.",
        ),
        ("g++",),
    ),
    "csharp": LangDoc(
        "C#",
        "Example.cs",
        _CSHARP,
        "mcs -out:example.exe $KAITAI_RUNTIME/*.cs *.cs   # or the runtime's NuGet package\n"
        "mono example.exe",
        _ENUM_OUTPUT_CS,
        (
            "The namespace is `Kaitai`. Nested types that share a name with a property "
            "(`Header`, `Layout`) are `HeaderType` and `LayoutType` (C# refuses a member and a "
            "type of one name).",
            _ERRORS.format("`KaitaiStructError` (checks) or `EndOfStreamException`"),
            "`Enum.IsDefined` says whether byte 7 is in the table; 64-bit fields are "
            "`ulong`/`long`: exact.",
        ),
        ("mcs", "mono"),
    ),
    "ruby": LangDoc(
        "Ruby",
        "example.rb",
        _RUBY,
        "ruby -I$KAITAI_RUNTIME/lib -I. example.rb   # or: gem install kaitai-struct -v 0.11",
        _JSON_OUTPUT,
        (
            _ERRORS.format("`Kaitai::Struct::KaitaiStructError` or `EOFError`"),
            "Integers are exact at any size.",
        ),
        ("ruby",),
    ),
    "php": LangDoc(
        "PHP",
        "example.php",
        _PHP,
        "php example.php $KAITAI_RUNTIME/lib   # or composer require kaitai-io/kaitai_struct_php_runtime",
        _JSON_OUTPUT,
        (
            _ERRORS.format(
                "`Kaitai\\Struct\\Error\\KaitaiError` (its subclasses: checks, end of stream)"
            ),
            "PHP integers are signed 64-bit: a u8 above 2^63-1 reads negative; `sprintf('%u')` "
            "prints it exactly.",
        ),
        ("php",),
    ),
    "perl": LangDoc(
        "Perl",
        "example.pl",
        _PERL,
        "perl -I$KAITAI_RUNTIME/lib -I. example.pl",
        _JSON_OUTPUT,
        (
            "kaitai-struct-compiler 0.11 writes neither the checks nor the `layout` parameter for "
            "Perl; lbparse adds both from the spec (`LiftbridgeEnvelope->new($io, undef, undef, "
            "$layout)`), and a failed check dies with `ValidationXError: SPEC PATH: ...`.",
            _ERRORS.format(
                "`die` with a message: `Requested N bytes, but only M bytes available` "
                "or `Validation...Error: ...`"
            ),
            "64-bit integers are exact on a Perl with 64-bit integers (`perl -V:ivsize` 8).",
        ),
        ("perl",),
    ),
    "lua": LangDoc(
        "Lua 5.3",
        "example.lua",
        _LUA,
        'LUA_PATH="./?.lua;$KAITAI_RUNTIME/?.lua;;" lua5.3 example.lua',
        _LUA_OUTPUT,
        (
            _ERRORS.format(
                "`error` string (`requested N bytes, but only M bytes available`, or a "
                "check's message, which lbparse prefixes with the field's spec path)"
            ),
            "Lua 5.3 integers are signed 64-bit: s8 fields are exact, a u8 above 2^63-1 reads "
            "negative (print it with `%u`-like care: `math.ult`).",
            "`header.v0_msg_type` is `nil` for a byte not in the table.",
        ),
        ("lua5.3",),
    ),
    "nim": LangDoc(
        "Nim",
        "example.nim",
        _NIM,
        "nim c -r --hints:off --path:$KAITAI_RUNTIME example.nim",
        _JSON_OUTPUT,
        (
            "kaitai-struct-compiler 0.11 writes no checks for Nim (no `contents`, no `valid`); "
            "lbparse adds every check of the spec, raising `KaitaiError` with the field's spec "
            "path. The module enables overloadable enums (three MsgType tables share names).",
            _ERRORS.format(
                "`KaitaiError` (checks), `IOError` (a number read past the end) or "
                "`AssertionDefect` (the runtime's `readBytes` asserts that the bytes are "
                "there: catch it, or check lengths first)"
            ),
            "`v0MsgType` of a byte that is not in the table raises `KaitaiError` (a Nim enum "
            "cannot hold it; the compiler's conversion raised a `RangeDefect`, lbparse's fixup "
            "says it as an error). Or look `msgType` up in `msg_types.json`, as the example does.",
            "64-bit fields are `uint64`/`int64`: exact.",
        ),
        ("nim",),
    ),
}

_NO_BUILD = {
    "rust": (
        "Rust",
        "The Rust runtime of Kaitai Struct 0.11 needs the crates `encoding-next`, "
        "`cp437`, `unicode-segmentation` and `flate2` from crates.io; where crates.io is "
        'reachable, add the runtime (`kaitai = "0.11"`) to a Cargo project with these '
        "files. lbparse's CI cannot reach crates.io and Debian packages neither "
        "`encoding-next` nor `cp437`, so this target is generated but not compiled or "
        "run by lbparse's tests.",
    ),
    "graphviz": (
        "Graphviz",
        "Diagrams of the spec's types: `dot -Tsvg liftbridge_envelope.dot -o envelope.svg`.",
    ),
    "html": ("HTML", "The spec's types as HTML pages: open them in a browser."),
}


def write_docs(lang: str, folder: Path) -> list[Path]:
    """README.md (and the example program) for `lang` in `folder`.

    Args:
        lang: The target's name.
        folder: The target's folder, its parsers already written there.

    Returns:
        The files written.
    """
    files = sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file() and p.suffix not in (".json", ".md", ".txt") and p.name != "go.mod"
    )
    doc = DOCS.get(lang)
    if doc is None:
        name, text = _NO_BUILD.get(lang, (lang, ""))
        listing = "".join(f"- `{f}`\n" for f in files)
        path = folder / "README.md"
        path.write_text(
            f"# Liftbridge envelope parsers: {name}\n\nGenerated by `lbparse generate "
            f"--lang {lang}` from lbparse's spec with kaitai-struct-compiler 0.11.\n\n"
            f"{listing}\n{text}\n",
            encoding="utf-8",
        )
        return [path]
    example = folder / doc.example
    example.parent.mkdir(parents=True, exist_ok=True)
    example.write_text(doc.source, encoding="utf-8")
    rows = "".join(f"| `{f}` | parser (Kaitai Struct) |\n" for f in files if f != doc.example)
    fence = {"cpp": "cpp", "csharp": "csharp", "javascript": "js"}.get(lang, lang)
    notes = _md_notes(doc.name, doc.notes)
    readme = folder / "README.md"
    readme.write_text(
        _README.format(
            name=doc.name,
            lang=lang,
            files=rows,
            example=doc.example,
            build=doc.build,
            fence=fence,
            source=doc.source,
            output=doc.output,
            notes=notes,
        ),
        encoding="utf-8",
    )
    return [readme, example]
