/**
 * Evidence reader benchmark. In the same process and run, on the same text, each reader is timed
 * next to a reference that does strictly less work, and the ratio is printed:
 * - readKubeObjects on `kubectl get pods -o json`-shaped text vs `JSON.parse` of it;
 * - readKubeObjects on kubectl's YAML (the fast block reader) vs the `yaml` package's
 *   parseAllDocuments + toJS, and on YAML outside that subset (the full parser, same package);
 * - readConntrack and readIpRoute on large listings vs splitting the text into whitespace tokens.
 * `EVIDENCE_BENCH_PODS` sets the list size (default 4000 pods); best of `EVIDENCE_BENCH_RUNS` (3).
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments, stringify } from "yaml";
import { readConntrack } from "../src/evidence/conntrack.ts";
import { readIpRoute } from "../src/evidence/ip-route.ts";
import { readKubeObjects } from "../src/evidence/kube-objects.ts";

const here = dirname(fileURLToPath(import.meta.url));
const fixtures = join(here, "..", "src", "evidence", "fixtures");
const podCount = Number(process.env["EVIDENCE_BENCH_PODS"] ?? "4000");
const runs = Number(process.env["EVIDENCE_BENCH_RUNS"] ?? "3");

function best(fn: () => unknown): number {
  let ms = Number.POSITIVE_INFINITY;
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    fn();
    ms = Math.min(ms, performance.now() - t);
  }
  return ms;
}

function report(name: string, mb: number, ours: number, refName: string, ref: number): void {
  const rate = (ms: number) => `${(mb / (ms / 1000)).toFixed(1)} MB/s`;
  console.log(
    `${name.padEnd(34)} ${mb.toFixed(1).padStart(6)} MB  podpath ${ours.toFixed(0).padStart(6)} ms (${rate(ours)})  ${refName} ${ref.toFixed(0)} ms (${rate(ref)})  ratio ${(ours / ref).toFixed(2)}x`,
  );
}

const sample = readKubeObjects(
  readFileSync(join(fixtures, "kube", "pods.yaml"), "utf8"),
  "pods.yaml",
).value;
const items = Array.from({ length: podCount }, (_, i) => {
  const raw = sample[i % sample.length]!.raw;
  return { ...raw, metadata: { ...(raw.metadata as object), name: `pod-${i}` } };
});
const list = { apiVersion: "v1", kind: "List", items, metadata: { resourceVersion: "" } };

const json = JSON.stringify(list, null, 4);
const jsonMs = best(() => {
  const r = readKubeObjects(json, "pods.json");
  if (r.value.length !== podCount) throw new Error("wrong count");
});
report(
  "kube objects (JSON)",
  json.length / 1e6,
  jsonMs,
  "JSON.parse",
  best(() => JSON.parse(json)),
);

// kubectl's own YAML (the fixture's items, repeated), as `kubectl get pods -A -o yaml` prints it.
const podsYaml = readFileSync(join(fixtures, "kube", "pods.yaml"), "utf8");
const itemsBlock = podsYaml.slice(
  podsYaml.indexOf("items:\n") + 7,
  podsYaml.indexOf("\nkind: List") + 1,
);
const copies = Math.max(1, Math.round(podCount / sample.length));
const yamlText = `apiVersion: v1\nitems:\n${itemsBlock.repeat(copies)}kind: List\nmetadata:\n  resourceVersion: ""\n`;
const yamlMs = best(() => {
  const r = readKubeObjects(yamlText, "pods.yaml");
  if (r.value.length !== copies * sample.length) throw new Error("wrong count");
});
// The full parser is slow: it is timed on a tenth of the text and scaled.
const part = `apiVersion: v1\nitems:\n${itemsBlock.repeat(Math.max(1, Math.round(copies / 10)))}kind: List\n`;
const partMs = best(() => {
  for (const d of parseAllDocuments(part, { uniqueKeys: true, prettyErrors: false }) as unknown as {
    toJS(): unknown;
  }[])
    d.toJS();
});
report(
  "kube objects (kubectl YAML)",
  yamlText.length / 1e6,
  yamlMs,
  "yaml parseAllDocuments+toJS (scaled)",
  (partMs * yamlText.length) / part.length,
);
const plainYaml = stringify(
  { ...list, items: items.slice(0, 300) },
  { aliasDuplicateObjects: false },
);
report(
  "kube objects (other YAML: full parser)",
  plainYaml.length / 1e6,
  best(() => readKubeObjects(plainYaml, "other.yaml")),
  "yaml parseAllDocuments+toJS",
  best(() => {
    for (const d of parseAllDocuments(plainYaml, {
      uniqueKeys: true,
      prettyErrors: false,
    }) as unknown as { toJS(): unknown }[])
      d.toJS();
  }),
);

const tokenize = (t: string) => {
  let n = 0;
  for (const l of t.split("\n")) n += l.split(/\s+/).length;
  return n;
};
const ct = readFileSync(join(fixtures, "conntrack-L.txt"), "utf8");
const ctBig = ct.repeat(Math.ceil(200_000 / ct.split("\n").length));
report(
  "conntrack -L",
  ctBig.length / 1e6,
  best(() => readConntrack(ctBig, "c")),
  "split into tokens",
  best(() => tokenize(ctBig)),
);
const rt = readFileSync(join(fixtures, "ip-route-table-all.txt"), "utf8");
const rtBig = rt.repeat(Math.ceil(200_000 / rt.split("\n").length));
report(
  "ip route show table all",
  rtBig.length / 1e6,
  best(() => readIpRoute(rtBig, "r")),
  "split into tokens",
  best(() => tokenize(rtBig)),
);
