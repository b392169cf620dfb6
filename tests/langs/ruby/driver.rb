# Conformance driver: the generated Ruby parser over hex lines.
# Input, one case a line: "LAYOUT_ID HEX"; output one JSON object a line
# (tests/langs/README.md). Parse errors are the runtime's (KaitaiStructError,
# EOFError); anything else is a crash and ends the process.
require 'json'
require 'liftbridge_envelope'
require 'liftbridge_commitlog'

PARSE_ERRORS = [Kaitai::Struct::KaitaiStructError, EOFError].freeze

def failure(err)
  { ok: false, error: "#{err.class}: #{err.message}" }
end

def hex_or_nil(bytes, present)
  present ? bytes.unpack1('H*') : nil
end

def commitlog(payload)
  cl = LiftbridgeCommitlog.new(Kaitai::Struct::Stream.new(payload))
  entries = cl.entries.map do |e|
    b = e.body
    { offset: e.offset.to_s, timestamp: e.timestamp.to_s, leader_epoch: e.leader_epoch.to_s,
      size: e.size, crc32c: b.crc32c, magic: b.magic, attributes: b.attributes,
      key: hex_or_nil(b.key, b.key_len >= 0), value: hex_or_nil(b.value, b.value_len >= 0),
      headers: b.headers.map { |h| [h.key.unpack1('H*'), h.value.unpack1('H*')] } }
  end
  { ok: true, leader_epoch: cl.leader_epoch.to_s, high_watermark: cl.high_watermark.to_s,
    entries: entries }
rescue *PARSE_ERRORS => e
  failure(e)
end

def parse(data, layout_id)
  env = LiftbridgeEnvelope.new(Kaitai::Struct::Stream.new(data), nil, nil,
                               LiftbridgeEnvelope::LAYOUT[layout_id])
  res = { ok: true, version: nil, header_len: nil, flags: nil, msg_type: nil, crc32c: nil,
          payload_offset: data.bytesize - env.payload.bytesize, payload_len: env.payload.bytesize,
          commitlog: nil }
  h = env.header
  unless h.nil?
    res.merge!(version: h.version, header_len: h.header_len, flags: h.flags, msg_type: h.msg_type,
               crc32c: h.has_crc ? env.crc32c : nil)
    if env.layout == :layout_v0 && h.v0_msg_type == :v0_msg_type_replication_response
      res[:commitlog] = commitlog(env.payload)
    end
  end
  res
rescue *PARSE_ERRORS => e
  failure(e)
end

$stdout.sync = false
$stdin.each_line do |line|
  layout, hex = line.strip.split(' ', 2)
  next if layout.nil?
  puts JSON.generate(parse([hex || ''].pack('H*'), layout.to_i))
end
