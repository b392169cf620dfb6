"""Code generation: the spec for other languages and for Wireshark
(`lbparse generate`). It reads the spec and the codec's tables, never another
wing.

The front is `generate(languages, out)` and what its command needs; the
modules behind it, one job each:

- targets: one self-contained folder per target (Kaitai parsers, schemas,
  the MsgType tables), the language names and aliases;
- kaitai_fixups: what the Kaitai compiler's output needs per language;
- langdocs: each language folder's README and runnable example;
- wireshark: the Lua dissector, the spec as Lua tables (lua_expr: Kaitai
  expressions in Lua; wireshark_lua: the fixed Lua after the tables).
"""

from lbparse.codegen.targets import LANGUAGES, CodegenError, Generated, generate, resolve_languages

__all__ = ["LANGUAGES", "CodegenError", "Generated", "generate", "resolve_languages"]
