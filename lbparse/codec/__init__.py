"""The envelope codec: bytes in, objects out, and back; no numpy, no I/O, and
no other wing of lbparse (tests/project/test_import_contracts.py holds it so). Its
public names are re-exported by `lbparse`; the modules, one job each:

- wire, layouts: typed views of the generated tables (fixed facts, layouts,
  MsgTypes);
- header, envelope, enveloped, headerless: the header, the Envelope, and
  the layouts with and without the envelope header;
- payloads, commitlog, flatbuf, wirefit: the payloads (protobuf, FlatBuffers,
  commit-log entries, raw) and whether bytes fit a protobuf type;
- detect, generation: `layout="auto"`, alone or with what a capture knows;
- dispatch, api: which function decodes or encodes each layout, and the
  front (decode, decode_header, encode);
- limits, upstream, jsonform: resource limits, what upstream's decoders do
  with the same bytes, the JSON convention (64-bit integers as strings).
"""
