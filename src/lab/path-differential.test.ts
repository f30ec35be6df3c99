/**
 * Differential test of the whole-path evaluator against the kernel: seeded random node
 * configurations (lab/path-gen.ts: raw, mangle, nat, filter, `ip rule`, routes in several tables)
 * loaded into a sandbox node (lab/path-sandbox.ts), flows from a pod and from the node sent for
 * real, and for every flow the kernel's verdict (delivered, forwarded out of which interface with
 * which source and destination, rejected with which ICMP type, silent) must be podpath's answer
 * on the node's snapshot files, or one of its branches. A definite different answer fails, with
 * the seed, the flow and the case.
 *
 * Reproduce: PODPATH_PATH_DIFF_SEED=<seed> PODPATH_PATH_DIFF_SETS=1 node scripts/test.mjs path-differential
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { formatIp, parseIp } from "../net/cidr.ts";
import { nodePathEvaluator } from "../path/node-path.ts";
import type { PathOutcome } from "../path/path-types.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { kernelSkip } from "./kernel-guard.ts";
import { generatePathCase, generatePathFlows, type PathFlow } from "./path-gen.ts";
import {
  createPathSandbox,
  type KernelPathVerdict,
  type NodeFiles,
  parsePacket,
  withObservers,
  withoutObservers,
} from "./path-sandbox.ts";
import { rootNamespaceHash } from "./root-state.ts";

const BASE_SEED = Number(process.env["PODPATH_PATH_DIFF_SEED"] ?? 20261202);
const SETS = Number(process.env["PODPATH_PATH_DIFF_SETS"] ?? 60);
const FLOWS_PER_SET = 10;

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The kernel's verdict in words. */
export function kernelWords(v: KernelPathVerdict): string {
  switch (v.kind) {
    case "delivered":
    case "silent":
      return v.kind;
    case "rejected":
      return `rejected ${v.with}`;
    case "forwarded":
      return `forwarded ${v.dev} ${v.src} > ${v.dst}${v.dport !== undefined ? `:${v.dport}` : ""}`;
  }
}

/**
 * podpath's outcome as a test of the kernel's words; undefined for an undecided outcome (it
 * admits anything). Routing's refusals are named as the kernel answers them: a route of type
 * unreachable with host unreachable, an `ip rule` unreachable or no route with net unreachable,
 * prohibit with admin prohibited, blackhole silently; for the node's own packets the sender
 * gets an error and nothing is on the wire.
 */
function outcomeTest(o: PathOutcome, f: PathFlow): ((k: string) => boolean) | undefined {
  const v = o.verdict;
  const is = (w: string) => (k: string) => k === w;
  switch (v.kind) {
    case "delivered":
      return is("delivered");
    case "dropped":
      return is("silent");
    case "rejected":
      return is(`rejected ${v.with}`);
    case "undecided":
      return undefined;
    case "unroutable": {
      if (f.origin === "host" || v.how === "blackhole") return is("silent");
      // ip_error sends at most 5 errors, then 1 a second, per source (net.ipv4.route.error_cost,
      // a setting of the root namespace only): the error may not come
      const byRule = v.by?.file.includes("ip-rule") ?? false;
      const code =
        v.how === "prohibit"
          ? "icmp-admin-prohibited"
          : v.how === "unreachable" && !byRule
            ? "icmp-host-unreachable"
            : "icmp-net-unreachable";
      return (k) => k === `rejected ${code}` || k === "silent";
    }
    case "forwarded": {
      const head = `forwarded ${v.dev ?? "?"} `;
      const tail = ` > ${formatIp(v.dst)}${f.proto !== "icmp" && v.port !== undefined ? `:${v.port}` : ""}`;
      if (v.src) return is(`${head}${formatIp(v.src)}${tail}`);
      // the source is not decided: any source, the rest as said
      return (k) => k.startsWith(head) && k.endsWith(tail);
    }
  }
}

function podpathWords(outcomes: readonly PathOutcome[]): string {
  return outcomes
    .map((o) => {
      const v = o.verdict;
      if (v.kind === "forwarded")
        return `forwarded ${v.dev} ${v.src ? formatIp(v.src) : "?"} > ${formatIp(v.dst)}:${v.port ?? ""}`;
      if (v.kind === "rejected") return `rejected ${v.with}`;
      if (v.kind === "unroutable") return `unroutable ${v.how}`;
      if (v.kind === "undecided") return `undecided (${v.reason})`;
      return v.kind;
    })
    .join(" | ");
}

function writeSnapshot(dir: string, files: NodeFiles) {
  const n = join(dir, "nodes", "n1");
  mkdirSync(n, { recursive: true });
  writeFileSync(join(n, "iptables-save.txt"), files.iptablesSave);
  writeFileSync(join(n, "ip-rule.txt"), files.ipRule);
  writeFileSync(join(n, "ip-route.txt"), files.ipRoute);
  writeFileSync(join(n, "ip-addr.txt"), files.ipAddr);
}

function evaluate(dir: string, flows: readonly PathFlow[]) {
  const node = loadSnapshot(openSnapshot(dir)).nodes.get("n1");
  assert.ok(node?.iptables && node.routes && node.ipRules, "the snapshot holds the node's files");
  const ev = nodePathEvaluator(node);
  assert.ok(ev);
  return flows.map((f) =>
    ev.evaluate({
      src: parseIp(f.src),
      dst: parseIp(f.dst),
      proto: f.proto,
      ...(f.sport !== undefined ? { sport: f.sport } : {}),
      ...(f.dport !== undefined ? { dport: f.dport } : {}),
      origin: f.origin,
    }),
  );
}

describe("path-sandbox helpers", () => {
  it("adds the observers first in every built-in chain and strips them from a save", () => {
    const c = generatePathCase(7);
    const text = withObservers(c.restore, generatePathFlows(7, 3));
    assert.match(text, /\*security\n/);
    const lines = text.split("\n");
    const filterAt = lines.indexOf("*filter");
    const firstFilter = lines.findIndex((l, n) => n > filterAt && l.startsWith("-A "));
    assert.match(lines[firstFilter] ?? "", /podpath-observer/);
    assert.equal(withoutObservers(text).includes("podpath-observer"), false);
    assert.equal(withoutObservers(text).includes("*security"), false);
  });

  it("reads an ICMP error's type, code and the packet it quotes", () => {
    // 10.244.0.1 > 10.244.0.5 ICMP 3/10 quoting UDP 10.244.0.5:20001 > 8.8.8.8:53
    const hex =
      "4500003800004000400100000af400010af40005030a0000000000004500001c0000400040110000" +
      "0af4000508080808" +
      "4e210035000800000";
    const b = (hex.match(/../g) ?? []).map((x) => Number.parseInt(x, 16));
    const p = parsePacket(b);
    assert.equal(p?.icmpType, 3);
    assert.equal(p?.icmpCode, 10);
    assert.deepEqual(p?.inner, { proto: 17, src: "10.244.0.5", dst: "8.8.8.8", sport: 20001 });
  });
});

describe("whole-path evaluator vs kernel (differential)", { skip: kernelSkip() }, () => {
  it(`agrees with the kernel on ${SETS} node configurations x ${FLOWS_PER_SET} flows from seed ${BASE_SEED}`, async (t) => {
    const rootBefore = await rootNamespaceHash();
    const sb = await createPathSandbox();
    const dir = mkdtempSync(join(tmpdir(), "podpath-path-diff-"));
    dirs.push(dir);
    const failures: string[] = [];
    let decided = 0;
    let total = 0;
    const started = Date.now();
    try {
      for (let k = 0; k < SETS && failures.length < 5; k++) {
        const seed = BASE_SEED + k;
        const c = generatePathCase(seed);
        const flows = generatePathFlows(seed, FLOWS_PER_SET);
        const err = await sb.load(c, flows);
        if (err !== undefined) throw new Error(`seed ${seed}: the kernel refused the case: ${err}`);
        const files = await sb.nodeFiles();
        writeSnapshot(dir, files);
        const observed = await sb.observe(flows);
        const results = evaluate(dir, flows);
        for (const [i, f] of flows.entries()) {
          total++;
          const k = kernelWords(observed[i]!);
          const tests = results[i]!.outcomes.map((o) => outcomeTest(o, f));
          const definite = tests.every((x) => x !== undefined);
          if (definite) decided++;
          if (tests.some((x) => x === undefined || x(k))) continue;
          failures.push(
            [
              `seed ${seed} (PODPATH_PATH_DIFF_SEED=${seed} PODPATH_PATH_DIFF_SETS=1), flow ${JSON.stringify(f)}`,
              `  kernel:  ${k}`,
              `  podpath: ${podpathWords(results[i]!.outcomes)}`,
              "  ip rule:",
              ...files.ipRule.split("\n").map((l) => `    ${l}`),
              "  routes:",
              ...c.routes.map((l) => `    ${l}`),
              "  rules:",
              ...files.iptablesSave
                .split("\n")
                .filter((l) => /^[*:-]/.test(l))
                .map((l) => `    ${l}`),
            ].join("\n"),
          );
        }
      }
    } finally {
      await sb.destroy();
    }
    t.diagnostic(
      `${total} cases, ${decided} decided by podpath, ${failures.length} disagreements, ${Date.now() - started} ms`,
    );
    assert.equal(await rootNamespaceHash(), rootBefore, "the root namespace changed");
    assert.deepEqual(failures, [], `\n${failures.join("\n\n")}`);
    assert.ok(total >= SETS * FLOWS_PER_SET);
    assert.ok(decided >= total * 0.8, `only ${decided} of ${total} cases were decided`);
  });
});
