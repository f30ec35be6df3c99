/**
 * NetworkPolicy verdicts against netpol-analyzer's golden outputs, for every test folder in
 * fixtures/netpol-analyzer/tests (see fixtures/README.md).
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { readKubeObjects } from "../evidence/kube-objects.ts";
import { parseIp } from "../net/cidr.ts";
import {
  type ConnectionSet,
  formatConnections,
  NO_CONNECTIONS,
  parseConnections,
} from "./connection-set.ts";
import { connectivityList, externalIntervals, renderConnlist, workloadsOf } from "./connlist.ts";
import { connectionsBetween } from "./evaluate.ts";
import { buildPolicyWorld, type Endpoint, type PolicyWorld } from "./policy-world.ts";

const ROOT = join(import.meta.dirname, "fixtures", "netpol-analyzer");
const TESTS = join(ROOT, "tests");
const CONNLIST = join(ROOT, "test_outputs", "connlist");
const DIFF = join(ROOT, "test_outputs", "diff");

/** Reads a test folder as netpol-analyzer does: every YAML/JSON manifest below it (not outputs). */
function worldOf(dir: string): PolicyWorld {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const f of readdirSync(d).sort()) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else if (/\.(ya?ml|json)$/.test(f) && !f.includes("output")) files.push(p);
    }
  };
  walk(join(TESTS, dir));
  const objects = files.flatMap((f) => readKubeObjects(readFileSync(f, "utf8"), f).value);
  const built = buildPolicyWorld(objects);
  assert.deepEqual(
    built.diagnostics.filter((d) => d.severity === "error"),
    [],
    `${dir} reads without errors`,
  );
  return built.value;
}

const TEST_DIRS = readdirSync(TESTS).sort();

const PEER = /^(.*)\[(.*)\]$/;

function parseInterval(text: string): [bigint, bigint] | undefined {
  const m = PEER.exec(text);
  if (m?.[2] !== "External") return undefined;
  const [a, b] = m[1]!.split("-");
  return [parseIp(a!).value, parseIp(b!).value];
}

/**
 * Golden peers as endpoints: a workload name, or an external interval split into the world's
 * atomic intervals (it must be a union of them, else the boundaries disagree).
 */
function endpointsOf(world: PolicyWorld, text: string): Endpoint[] {
  const iv = parseInterval(text);
  if (!iv) {
    const pod = workloadsOf(world).get(text);
    assert.ok(pod, `golden peer ${text} is a workload podpath knows`);
    return [pod];
  }
  const atoms = externalIntervals(world).filter(([s, e]) => s >= iv[0] && e <= iv[1]);
  const covered = atoms.reduce((n, [s, e]) => n + (e - s + 1n), 0n);
  assert.equal(covered, iv[1] - iv[0] + 1n, `${text} is a union of podpath's external intervals`);
  return atoms.map(([s, e]) => ({ kind: "external", ip: { family: 4, value: s }, end: e }));
}

/** How podpath's citations name an endpoint. */
function peerLabel(e: Endpoint): string {
  if (e.kind === "pod") return `${e.namespace}/${e.workload.name}[${e.workload.kind}]`;
  const v4 = (x: bigint) => [24n, 16n, 8n, 0n].map((sh) => String((x >> sh) & 255n)).join(".");
  return `${v4(e.ip.value)}-${v4(e.end ?? e.ip.value)}[External]`;
}

/** Checks that every endpoint pair behind (src, dst) allows exactly `want`. */
function assertPair(
  world: PolicyWorld,
  src: string,
  dst: string,
  want: ConnectionSet,
  where: string,
) {
  for (const s of endpointsOf(world, src)) {
    for (const d of endpointsOf(world, dst)) {
      const got = connectionsBetween(world, s, d).connections;
      assert.equal(formatConnections(got), formatConnections(want), `${where}: ${src} => ${dst}`);
    }
  }
}

interface GoldenLine {
  src: string;
  dst: string;
  conns: ConnectionSet;
}

function parseConnlist(text: string): GoldenLine[] {
  return text
    .split("\n")
    .filter((l) => l.includes(" => "))
    .map((l) => {
      const m = /^(.*) => (.*) : (.*)$/.exec(l.trim());
      assert.ok(m, l);
      const conns = parseConnections(m[3]!);
      assert.ok(conns, m[3]);
      return { src: m[1]!, dst: m[2]!, conns };
    });
}

/**
 * Set comparison independent of how intervals are merged: every (atomic source, atomic
 * destination) with its connections, from the golden and from podpath's listing.
 */
function atomicTriples(world: PolicyWorld, lines: readonly GoldenLine[]): Set<string> {
  const out = new Set<string>();
  const key = (e: Endpoint) =>
    e.kind === "pod"
      ? `${e.namespace}/${e.workload.name}[${e.workload.kind}]`
      : `${e.ip.value}-${e.end}`;
  for (const l of lines) {
    for (const s of endpointsOf(world, l.src)) {
      for (const d of endpointsOf(world, l.dst))
        out.add(`${key(s)} => ${key(d)} : ${formatConnections(l.conns)}`);
    }
  }
  return out;
}

describe("connectivity listing against netpol-analyzer connlist goldens", () => {
  const goldens = readdirSync(CONNLIST).filter((f) => f.endsWith("_connlist_output.txt"));
  it("has goldens to compare", () => assert.ok(goldens.length >= 7));
  for (const g of goldens) {
    const dir = g.replace("_connlist_output.txt", "");
    it(`${dir}: same allowed connections as the golden, and the same text`, () => {
      const world = worldOf(dir);
      const golden = readFileSync(join(CONNLIST, g), "utf8");
      const mine = connectivityList(world);
      assert.deepEqual(
        atomicTriples(
          world,
          mine.map((e) => ({ src: e.src, dst: e.dst, conns: e.connections })),
        ),
        atomicTriples(world, parseConnlist(golden)),
      );
      const sortLines = (t: string) => t.split("\n").filter(Boolean).sort().join("\n");
      assert.equal(sortLines(renderConnlist(mine)), sortLines(golden));
    });
  }
  it("agrees with the golden produced through netpol-analyzer's CLI code path", () => {
    const cli = join(ROOT, "test_outputs", "cli", "onlineboutique_connlist_output.txt");
    const sortLines = (t: string) => t.split("\n").filter(Boolean).sort().join("\n");
    assert.equal(
      sortLines(renderConnlist(connectivityList(worldOf("onlineboutique")))),
      sortLines(readFileSync(cli, "utf8")),
    );
  });
  it("agrees with the JSON, CSV and Markdown forms of the same goldens", () => {
    for (const f of readdirSync(CONNLIST).filter((x) =>
      /_connlist_output\.(json|csv|md)$/.test(x),
    )) {
      const dir = f.replace(/_connlist_output\.(json|csv|md)$/, "");
      const world = worldOf(dir);
      const text = readFileSync(join(CONNLIST, f), "utf8");
      let lines: GoldenLine[];
      if (f.endsWith(".json")) {
        lines = (JSON.parse(text) as { src: string; dst: string; conn: string }[]).map((x) => ({
          src: x.src,
          dst: x.dst,
          conns: parseConnections(x.conn)!,
        }));
      } else {
        const sep = f.endsWith(".csv") ? "," : "|";
        lines = text
          .split("\n")
          .slice(f.endsWith(".csv") ? 1 : 2)
          .filter((l) => l.trim() !== "")
          .map((l) => {
            const cells = f.endsWith(".csv")
              ? (l.match(/("[^"]*"|[^,]+)/g) ?? []).map((c) => c.replace(/^"|"$/g, ""))
              : l
                  .split(sep)
                  .map((c) => c.trim())
                  .filter((c) => c !== "");
            return {
              src: cells[0]!,
              dst: cells[1]!,
              conns: parseConnections(cells.slice(2).join(","))!,
            };
          });
      }
      assert.ok(lines.length > 0, f);
      const mine = connectivityList(world).map((e) => ({
        src: e.src,
        dst: e.dst,
        conns: e.connections,
      }));
      assert.deepEqual(atomicTriples(world, mine), atomicTriples(world, lines), f);
    }
  });
});

describe("diff goldens", () => {
  for (const f of readdirSync(DIFF).filter((x) => x.endsWith(".txt"))) {
    it(`${f}: the connections that change between the two folders`, () => {
      const [, ref2, ref1] = /^diff_between_(.*)_and_(.*)\.txt$/.exec(f)!;
      const w1 = worldOf(ref1!);
      const w2 = worldOf(ref2!);
      const map = (w: PolicyWorld) => {
        const m = new Map<string, string>();
        for (const e of connectivityList(w))
          m.set(`${e.src}|${e.dst}`, formatConnections(e.connections));
        return m;
      };
      const m1 = map(w1);
      const m2 = map(w2);
      const mine = new Set<string>();
      for (const k of new Set([...m1.keys(), ...m2.keys()])) {
        const a = m1.get(k) ?? formatConnections(NO_CONNECTIONS);
        const b = m2.get(k) ?? formatConnections(NO_CONNECTIONS);
        if (a === b) continue;
        const type = !m1.has(k) ? "added" : !m2.has(k) ? "removed" : "changed";
        const [s, d] = k.split("|");
        mine.add(`diff-type: ${type}, source: ${s}, destination: ${d}, ref1: ${a}, ref2: ${b}`);
      }
      const golden = new Set(
        readFileSync(join(DIFF, f), "utf8")
          .split("\n")
          .filter((l) => l.startsWith("diff-type:"))
          .map((l) => l.trim()),
      );
      assert.ok(golden.size > 0);
      assert.deepEqual(mine, golden);
    });
  }
});

describe("explain goldens: allowed connections and the rules that allow them", () => {
  for (const f of readdirSync(CONNLIST).filter((x) => x.endsWith("_explain_output.txt"))) {
    const dir = f.replace("_explain_output.txt", "");
    it(`${dir}`, () => {
      const world = worldOf(dir);
      const blocks = readFileSync(join(CONNLIST, f), "utf8")
        .split(/^-{20,}$/m)
        .slice(1);
      assert.ok(blocks.length > 0);
      for (const b of blocks) {
        const head = /Connections between (.*) => (.*):\n/.exec(b);
        assert.ok(head, b.slice(0, 100));
        const [, src, dst] = head;
        let allowed = NO_CONNECTIONS;
        const allowSection = b.split("Denied connections:")[0]!;
        for (const m of allowSection.matchAll(/^\tAllowed (.*) due to/gm)) {
          const c = parseConnections(m[1]!);
          assert.ok(c, m[1]);
          allowed =
            parseConnections(
              `${formatConnections(allowed) === "No Connections" ? "" : formatConnections(allowed)},${formatConnections(c)}`.replace(
                /^,/,
                "",
              ),
            ) ?? c;
        }
        assertPair(world, src!, dst!, allowed, f);
        // the policies and rules the golden names for this pair are exactly those podpath cites
        const cited = new Set(
          [...b.matchAll(/^\t+(?:- )?((?:Baseline)?(?:Admin)?NetworkPolicy '.*)$/gm)].map(
            (m) => m[1]!,
          ),
        );
        for (const s of endpointsOf(world, src!)) {
          for (const d of endpointsOf(world, dst!)) {
            const r = connectionsBetween(world, s, d);
            const mine = new Set(
              [...r.egress.citations, ...r.ingress.citations].map((c) =>
                c.text.replaceAll(peerLabel(s), src!).replaceAll(peerLabel(d), dst!),
              ),
            );
            assert.deepEqual(mine, cited, `${src} => ${dst}`);
          }
        }
      }
    });
  }
});

describe("pod-to-pod connections map (onlineboutique)", () => {
  for (const name of ["connections_map_output.txt", "connections_map_output_bool.txt"]) {
    it(name, () => {
      const world = worldOf("onlineboutique");
      const lines = readFileSync(join(TESTS, "onlineboutique", name), "utf8")
        .split("\n")
        .filter(Boolean);
      assert.equal(lines.length, 144);
      for (const l of lines) {
        const m =
          /^src: (.*), dest: (.*), allowed conns: (.*)$/.exec(l) ??
          /^src: (.*), dest: (.*), allowed: (.*)$/.exec(l);
        assert.ok(m, l);
        const pod = (ref: string) => {
          const [ns, n] = ref.split("/");
          const p = world.pods.find((x) => x.namespace === ns && x.name === n);
          assert.ok(p, ref);
          return p;
        };
        const got = connectionsBetween(world, pod(m[1]!), pod(m[2]!)).connections;
        if (m[3] === "true" || m[3] === "false") {
          // CheckIfAllowed(src, dst, "", "") asks for every protocol and port: true only for All Connections
          assert.equal(formatConnections(got) === "All Connections", m[3] === "true", l);
        } else {
          assert.equal(formatConnections(got), formatConnections(parseConnections(m[3]!)!), l);
        }
      }
    });
  }
});

describe("every netpol-analyzer test folder is covered", () => {
  it("has a golden of some kind for each folder", () => {
    const outputs = [...readdirSync(CONNLIST), ...readdirSync(DIFF)].join("\n");
    for (const d of TEST_DIRS) {
      const covered =
        outputs.includes(`${d}_connlist_output`) ||
        outputs.includes(`${d}_explain_output`) ||
        outputs.includes(`_${d}.`) ||
        outputs.includes(`between_${d}_and`) ||
        existsSync(join(TESTS, d, "connections_map_output.txt"));
      assert.ok(covered, `${d} has a golden`);
    }
    assert.equal(TEST_DIRS.length, 11);
  });
});
