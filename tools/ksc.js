// Compile .ksy files with kaitai-struct-compiler's JS API (the npm package
// has no command line). Usage: node ksc.js LANG[,LANG...] OUTDIR FILE.ksy...
// One language writes into OUTDIR; a comma-separated list (even "LANG,")
// writes into OUTDIR/LANG each, in one Node process (loading the compiler
// is most of the time).
// Prints the written file names, one per line; exits 1 with the compiler's
// message on any error.
//
// Where the compiler has no implementation of a construct for a target
// (0.11 lacks `valid: {expr: ...}` for Nim), the file is compiled again
// without those checks and a line "warning: LANG: ..." goes to stderr, so
// the other checks and the rest of the parser still reach that language.
"use strict";
const fs = require("fs");
const path = require("path");
const yaml = require("js-yaml");
const ksc = require("kaitai-struct-compiler");

function load(file) {
  return yaml.load(fs.readFileSync(file, "utf8"));
}

// The compiler is Scala.js: its errors wrap the cause (jl_Throwable__f_e).
function describe(err) {
  const parts = [];
  for (let e = err, i = 0; e && i < 8; e = e.jl_Throwable__f_e, i++) {
    const msg = e.message !== undefined ? e.message : String(e);
    if (msg && !parts.includes(msg)) parts.push(msg);
  }
  return parts.join(": ") || String(err);
}

function notImplemented(err) {
  for (let e = err, i = 0; e && i < 8; e = e.jl_Throwable__f_e, i++) {
    if (String(e).includes("NotImplementedError")) return true;
  }
  return false;
}

// Remove every `valid: {expr: ...}`; return the paths it was removed from.
function stripValidExpr(node, where, removed) {
  if (Array.isArray(node)) {
    node.forEach((item, i) => stripValidExpr(item, `${where}/${item && item.id ? item.id : i}`, removed));
  } else if (node && typeof node === "object") {
    if (node.valid && typeof node.valid === "object" && "expr" in node.valid) {
      removed.push(`${where}: valid expr ${JSON.stringify(node.valid.expr)}`);
      delete node.valid;
    }
    for (const [key, value] of Object.entries(node)) stripValidExpr(value, `${where}/${key}`, removed);
  }
  return removed;
}

async function compileOne(lang, file, importer) {
  try {
    return await ksc.compile(lang, load(file), importer, false);
  } catch (err) {
    if (!notImplemented(err)) throw err;
    const spec = load(file);
    const removed = stripValidExpr(spec, "", []);
    // Specs it imports (`imports:`) lose the same checks.
    const stripping = {
      importYaml: (name) => importer.importYaml(name).then((imported) => {
        stripValidExpr(imported, ` (imported ${name}.ksy)`, removed);
        return imported;
      }),
    };
    if (removed.length === 0 && !(load(file).meta || {}).imports) throw err;
    const out = await ksc.compile(lang, spec, stripping, false);
    for (const r of removed) {
      console.error(`warning: ${lang}: ${path.basename(file)}${r.split(":")[0]}: check not generated ` +
        `(kaitai-struct-compiler ${ksc.version} has no ${lang} implementation of valid expr)`);
    }
    return out;
  }
}

async function main() {
  const [langArg, outDir, ...files] = process.argv.slice(2);
  if (!langArg || !outDir || files.length === 0) {
    console.error("usage: node ksc.js LANG[,LANG...] OUTDIR FILE.ksy...");
    process.exit(2);
  }
  const langs = langArg.split(",").filter(Boolean);
  const importer = {
    importYaml: (name) =>
      Promise.resolve(load(path.join(path.dirname(files[0]), name + ".ksy"))),
  };
  const nest = langArg.includes(",");
  for (const lang of langs) {
    const dir = nest ? path.join(outDir, lang) : outDir;
    fs.mkdirSync(dir, { recursive: true });
    const written = new Set();
    for (const file of files) {
      let out;
      try {
        out = await compileOne(lang, file, importer);
      } catch (err) {
        console.error(`${lang}: ${file}: ${describe(err)}`);
        process.exit(1);
      }
      for (const [name, source] of Object.entries(out).sort()) {
        const target = path.join(dir, name);
        // A spec with `imports:` brings the imported spec's parser along:
        // write and list each file once.
        if (written.has(target)) continue;
        written.add(target);
        fs.mkdirSync(path.dirname(target), { recursive: true });
        fs.writeFileSync(target, source);
        console.log(target);
      }
    }
  }
}

main();
