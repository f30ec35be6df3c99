// Fails when folders of src/ import each other in a cycle (a folder is a top-level folder of src/,
// each case under src/cases/ is one of its own, and the case registry, src/cases/index.ts, stands
// above them: the cases import the contract beside it, cases/case.ts). Tests and test material
// (test-helpers/, testdata/) are left out: a test may reach across. Run by `npm run check`.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative, sep } from "node:path";

const SRC = process.env["PODPATH_CYCLES_SRC"] ?? join(import.meta.dirname, "..", "src");
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["'](\.{1,2}\/[^"']+)["']/g;

/** The folder a file belongs to: `capture`, `cases/vpn`, `cases` (for cases/*.ts), `.` for src/*.ts. */
function folderOf(file) {
  const parts = relative(SRC, file).split(sep);
  if (parts.length === 1) return ".";
  if (parts[0] === "cases" && parts.length > 2) return `cases/${parts[1]}`;
  if (parts[0] === "cases" && parts[1] === "index.ts") return "cases (registry)";
  return parts[0];
}

const files = readdirSync(SRC, { recursive: true, encoding: "utf8" })
  .filter(
    (f) =>
      f.endsWith(".ts") &&
      !f.endsWith(".test.ts") &&
      !f.split(sep).some((p) => p === "test-helpers" || p === "testdata"),
  )
  .map((f) => join(SRC, f));
const edges = new Map();
const why = new Map();
for (const file of files) {
  const from = folderOf(file);
  for (const m of readFileSync(file, "utf8").matchAll(IMPORT)) {
    const to = folderOf(normalize(join(dirname(file), m[1])));
    if (to === from) continue;
    if (!edges.has(from)) edges.set(from, new Set());
    edges.get(from).add(to);
    const k = `${from} -> ${to}`;
    if (!why.has(k)) why.set(k, `${relative(SRC, file)} imports ${m[1]}`);
  }
}

// Tarjan's strongly connected components: every component of more than one folder is a cycle
let index = 0;
const idx = new Map();
const low = new Map();
const stack = [];
const on = new Set();
const cycles = [];
function visit(v) {
  idx.set(v, index);
  low.set(v, index++);
  stack.push(v);
  on.add(v);
  for (const w of edges.get(v) ?? []) {
    if (!idx.has(w)) {
      visit(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
  }
  if (low.get(v) === idx.get(v)) {
    const comp = [];
    let w;
    do {
      w = stack.pop();
      on.delete(w);
      comp.push(w);
    } while (w !== v);
    if (comp.length > 1) cycles.push(comp.sort());
  }
}
for (const v of edges.keys()) if (!idx.has(v)) visit(v);
if (cycles.length === 0) {
  console.log(`no import cycle between the ${new Set([...edges.keys()]).size} folders of src/`);
  process.exit(0);
}
for (const comp of cycles) {
  console.error(`import cycle between folders: ${comp.join(", ")}`);
  for (const a of comp)
    for (const b of comp) {
      const k = `${a} -> ${b}`;
      if (why.has(k)) console.error(`  ${k}: ${why.get(k)}`);
    }
}
process.exit(1);
