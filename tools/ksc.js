// Compile .ksy files with kaitai-struct-compiler's JS API (the npm package
// has no command line). Usage: node ksc.js LANG OUTDIR FILE.ksy...
// Prints the written file names, one per line; exits 1 with the compiler's
// message on any error.
"use strict";
const fs = require("fs");
const path = require("path");
const yaml = require("js-yaml");
const ksc = require("kaitai-struct-compiler");

function load(file) {
  return yaml.load(fs.readFileSync(file, "utf8"));
}

async function main() {
  const [lang, outDir, ...files] = process.argv.slice(2);
  if (!lang || !outDir || files.length === 0) {
    console.error("usage: node ksc.js LANG OUTDIR FILE.ksy...");
    process.exit(2);
  }
  const importer = {
    importYaml: (name) =>
      Promise.resolve(load(path.join(path.dirname(files[0]), name + ".ksy"))),
  };
  fs.mkdirSync(outDir, { recursive: true });
  for (const file of files) {
    let out;
    try {
      out = await ksc.compile(lang, load(file), importer, false);
    } catch (err) {
      console.error(`${file}: ${err && err.message ? err.message : err}`);
      process.exit(1);
    }
    for (const [name, source] of Object.entries(out).sort()) {
      const target = path.join(outDir, name);
      fs.mkdirSync(path.dirname(target), { recursive: true });
      fs.writeFileSync(target, source);
      console.log(target);
    }
  }
}

main();
