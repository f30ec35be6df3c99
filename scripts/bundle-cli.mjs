// Bundles the CLI after `tsc -p tsconfig.build.json`: dist/cli/main.js (the `podpath` and
// `kubectl-podpath` bin) becomes one module holding what every command needs, and each command
// loaded lazily is a chunk in dist/cli-chunks/ (with the code those commands share). Loading
// 180 modules one by one cost `diagnose` about a fifth of its time (resolving, reading and
// compiling each); a few chunks cost a fraction of that. Packages from node_modules stay outside
// (imported as they are). The library (dist/index.js and the rest of dist/) is tsc's output, as
// before; only dist/cli/main.js is replaced.
//
// Stack traces of internal errors name the chunk's file and line, with function names as in the
// source; `node --enable-source-maps dist/cli/main.js ...` maps them to src/ (the .map files sit
// beside the chunks and are not published).
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { build } from "esbuild";

const ROOT = join(import.meta.dirname, "..");
const SRC = join(ROOT, "src");
const DIST = join(ROOT, "dist");
const CHUNKS = "cli-chunks";

/**
 * `import.meta.url` in a bundled file is the chunk's URL; modules that find files beside them
 * (lab/scenarios/tunnel-lab.ts starts lab/dns-responder.js, wireguard.ts finds .components/)
 * get the URL of their own file in dist/ instead. Every output sits one folder below dist/
 * (dist/cli/main.js, dist/cli-chunks/*.js), so "../<path in dist>" from the chunk's URL is it.
 */
const ownUrl = {
  name: "own-import-meta-url",
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, (args) => {
      if (!args.path.startsWith(SRC + sep)) return undefined;
      const source = readFileSync(args.path, "utf8");
      if (!source.includes("import.meta.url")) return { contents: source, loader: "ts" };
      const inDist = relative(SRC, args.path).split(sep).join("/").replace(/\.ts$/, ".js");
      const url = `new URL(${JSON.stringify(`../${inDist}`)}, import.meta.url).href`;
      return { contents: source.replaceAll("import.meta.url", url), loader: "ts" };
    });
  },
};

const result = await build({
  entryPoints: { "cli/main": join(SRC, "cli", "main.ts") },
  outdir: DIST,
  chunkNames: `${CHUNKS}/[name]-[hash]`,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  packages: "external",
  sourcemap: "linked",
  sourcesContent: false,
  plugins: [ownUrl],
  logLevel: "warning",
  write: false,
});
// chunks first, the entry last (each written whole, then renamed into place), stale chunks
// removed after: a CLI started meanwhile finds either the old build or the new one
const main = join(DIST, "cli", "main.js");
const files = result.outputFiles.sort((a, b) => (a.path === main) - (b.path === main));
if (!files.some((f) => f.path === main) || !files.at(-1).text.startsWith("#!/usr/bin/env node\n")) {
  console.error("bundle-cli: no dist/cli/main.js with its #! line in the output");
  process.exit(1);
}
mkdirSync(join(DIST, CHUNKS), { recursive: true });
for (const f of files) {
  const tmp = `${f.path}.${process.pid}.tmp`;
  writeFileSync(tmp, f.contents, { mode: f.path === main ? 0o755 : 0o644 });
  renameSync(tmp, f.path);
}
const written = new Set(files.map((f) => f.path));
for (const name of readdirSync(join(DIST, CHUNKS))) {
  const path = join(DIST, CHUNKS, name);
  if (!written.has(path)) rmSync(path, { force: true });
}
const chunks = files.filter((f) => f.path.endsWith(".js") && f.path !== main).length;
console.log(`bundle-cli: ${relative(ROOT, main)} and ${chunks} chunks in ${CHUNKS}${sep}`);
