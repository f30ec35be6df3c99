/**
 * Tests of `planMasquerade` on the embedded example (a real replica's snapshot) and on small
 * hand-written snapshots. The new list is checked with CIDR arithmetic (it covers the pod range,
 * no longer covers the destination, and never exempts more than before plus the pod range), and
 * the new config is read back the way the agent reads its file.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { parse } from "yaml";
import { type Cidr, formatCidr, mergeCidrs, parseCidr } from "../../net/cidr.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { PlanError, planMasquerade } from "./plan.ts";
import { rewriteConfigTextChecked } from "./plan-config.ts";
import {
  agentReads,
  appPodYaml,
  COMMENTED_CONFIG,
  clusterFiles,
  configMapYaml,
  covers,
  coversIp,
  ip,
  memorySnapshot,
  nodeYaml,
} from "./plan-fixtures.test.ts";

const ROOT = join(import.meta.dirname, "../../..");
const EXAMPLE = join(ROOT, "examples/snat-exception-list");
const cidrs = (list: readonly { cidr: string }[]): Cidr[] => list.map((c) => parseCidr(c.cidr));

describe("planMasquerade on examples/snat-exception-list (a real replica)", () => {
  const snap = loadSnapshot(openSnapshot(EXAMPLE));
  const plan = planMasquerade(snap, { strategy: "narrow" });
  const narrow = plan.narrow!;

  it("narrows to the pod range and stops exempting the destination", () => {
    assert.deepEqual(
      plan.destinations.map((d) => [d.ip, d.port, d.exemptToday, d.exemptBy]),
      [["10.20.30.40", 5432, true, "10.0.0.0/8"]],
    );
    const list = cidrs(narrow.newList);
    for (const r of plan.podRanges) assert.ok(covers(list, parseCidr(r)), `covers ${r}`);
    // the example's only node has 10.4.0.0/24; its pods live there
    assert.ok(covers(list, parseCidr("10.4.0.0/24")));
    assert.ok(!coversIp(list, ip("10.20.30.40")), "10.20.30.40 is no longer exempt");
    // every kept block was exempt before or is the pod range: narrowing never widens
    const old = plan.current.map((c) => parseCidr(c.text));
    for (const c of list)
      assert.ok(
        covers([...old, ...plan.podRanges.map((r) => parseCidr(r))], c),
        `${formatCidr(c)} was exempt before`,
      );
  });

  it("writes a config the agent accepts, with every other key unchanged", () => {
    const before = agentReads(plan.rollback.previousConfigMap!);
    const after = agentReads(narrow.newConfigMap);
    assert.equal(after.error, undefined);
    assert.equal(narrow.validationError, undefined);
    assert.deepEqual(
      (after.config.nonMasqueradeCIDRs ?? []).map((e) => e.text),
      narrow.newList.map((n) => n.cidr),
    );
    assert.equal(after.config.masqLinkLocal, before.config.masqLinkLocal);
    assert.equal(after.config.resyncIntervalNs, before.config.resyncIntervalNs);
    assert.equal(after.config.cidrLimit, before.config.cidrLimit);
    assert.match(after.text, /^resyncInterval: 60s$/m);
  });

  it("keeps the previous ConfigMap's data for rollback, without server fields", () => {
    const raw = parse(readFileSync(join(EXAMPLE, "cluster/ip-masq-agent.yaml"), "utf8")) as {
      items: { kind: string; data?: unknown }[];
    };
    const original = raw.items.find((i) => i.kind === "ConfigMap")!;
    const previous = parse(plan.rollback.previousConfigMap!) as {
      data: unknown;
      metadata: Record<string, unknown>;
    };
    assert.deepEqual(previous.data, original.data);
    assert.deepEqual(previous.metadata, { name: "ip-masq-agent", namespace: "kube-system" });
    const next = parse(narrow.newConfigMap) as { metadata: unknown; kind: string };
    assert.deepEqual(next.metadata, previous.metadata);
  });

  it("lists the allowlist entry that names pod addresses, with its file and line", () => {
    const refs = plan.impact.namesPodAddresses.filter((r) => r.what.startsWith("allowlist"));
    assert.equal(refs.length, 1);
    const r = refs[0]!;
    assert.equal(r.file, "remote/onprem-dc1.yaml");
    const line = readFileSync(join(EXAMPLE, r.file), "utf8").split("\n")[r.line - 1];
    assert.match(line ?? "", /10\.4\.0\.0\/14/);
    assert.match(plan.impact.announcement, /Behaviour change/);
    assert.ok(plan.impact.nowMasqueraded.includes("172.16.0.0/12"));
  });

  it("gives apply, checks and rollback a user can run", () => {
    assert.deepEqual(narrow.apply, [`kubectl apply -f ${narrow.newConfigMapFile}`]);
    assert.deepEqual(plan.rollback.apply, [`kubectl apply -f ${plan.rollback.file}`]);
    const commands = narrow.checks.filter((c) => !c.startsWith("#"));
    assert.ok(commands.some((c) => c.startsWith("iptables-save -t nat | grep -E 'IP-MASQ-AGENT'")));
    assert.ok(
      commands.some((c) => c.startsWith(`conntrack -D -s ${plan.podRanges[0]} -d 10.20.30.40`)),
    );
    assert.ok(commands.some((c) => c.startsWith("tcpdump -ni any host 10.20.30.40")));
    assert.ok(commands.some((c) => c.includes("--dest 10.20.30.40:5432")));
    // no placeholder is left in the commands a user runs on a node
    for (const c of commands.filter((x) => !x.startsWith("podpath")))
      assert.doesNotMatch(c.split("#")[0]!, /</, c);
    // the expected chain: a RETURN per new entry, in order, and MASQUERADE last
    const returns = narrow.expectedRules
      .filter((r) => r.startsWith("-A IP-MASQ-AGENT") && r.endsWith("-j RETURN"))
      .map((r) => /-d (\S+)/.exec(r)?.[1]);
    assert.deepEqual(returns, ["169.254.0.0/16", ...narrow.newList.map((n) => n.cidr)]);
    assert.match(narrow.expectedRules.at(-1)!, /-j MASQUERADE/);
    // the rollback is confirmed with the same checks, pod and node address swapped
    const rb = plan.rollback.checks;
    assert.equal(rb.length, narrow.checks.length);
    assert.ok(rb.some((c) => c.startsWith("iptables-save -t nat | grep -E 'IP-MASQ-AGENT'")));
    assert.ok(rb.some((c) => c.includes("a fresh request shows the pod address again")));
    assert.ok(
      rb.some((c) =>
        /^podpath verify <after-snapshot> <rolled-back-snapshot> --dest 10\.20\.30\.40:5432$/.test(
          c,
        ),
      ),
    );
  });

  it("names files in the folder --write uses", () => {
    const p = planMasquerade(snap, { strategy: "narrow", fileDir: "/tmp/change-42/" });
    assert.equal(p.narrow!.newConfigMapFile, "/tmp/change-42/ip-masq-agent.new.yaml");
    assert.deepEqual(p.narrow!.apply, ["kubectl apply -f /tmp/change-42/ip-masq-agent.new.yaml"]);
    assert.deepEqual(p.rollback.apply, [
      "kubectl apply -f /tmp/change-42/ip-masq-agent.previous.yaml",
    ]);
  });

  it("keeps the cluster's range when --pod-range gives it", () => {
    const p = planMasquerade(snap, { strategy: "narrow", podRange: [parseCidr("10.4.0.0/14")] });
    assert.deepEqual(p.podRanges, ["10.4.0.0/14"]);
    assert.ok(covers(cidrs(p.narrow!.newList), parseCidr("10.4.0.0/14")));
    assert.ok(!p.diagnostics.some((d) => d.code === "PLAN_POD_RANGE_FROM_NODES"));
  });
});

describe("planMasquerade on a hand-written cluster", () => {
  const snap = memorySnapshot("hand", clusterFiles());
  const plan = planMasquerade(snap, { strategy: "narrow" });
  const narrow = plan.narrow!;

  it("takes the pod range from kube-proxy's clusterCIDR and the destination from the site", () => {
    assert.deepEqual(plan.podRanges, ["10.8.0.0/14"]);
    assert.deepEqual(
      plan.destinations.map((d) => `${d.ip}:${d.port}`),
      ["10.30.1.10:5432"],
    );
    const list = cidrs(narrow.newList);
    assert.ok(covers(list, parseCidr("10.8.0.0/14")));
    assert.ok(!coversIp(list, ip("10.30.1.10")));
    // the nodes' addresses stay exempt (the old list covered them), each said why
    assert.ok(coversIp(list, ip("10.128.0.2")) && coversIp(list, ip("10.128.0.3")));
    for (const n of narrow.newList) assert.ok(n.why.length > 10, n.cidr);
    assert.deepEqual(
      narrow.dropped.map((d) => d.text),
      ["10.0.0.0/8", "192.168.0.0/16"],
    );
    assert.match(narrow.dropped[0]!.why, /covers 10\.30\.1\.10/);
  });

  it("keeps comments, masqLinkLocal and resyncInterval", () => {
    const r = agentReads(narrow.newConfigMap);
    assert.equal(r.error, undefined);
    assert.match(r.text, /^# exemptions agreed with the network team$/m);
    assert.match(r.text, /^masqLinkLocal: true$/m);
    assert.match(r.text, /^resyncInterval: 30s$/m);
    assert.equal(r.config.masqLinkLocal, true);
    assert.equal(r.config.resyncIntervalNs, 30_000_000_000n);
  });

  it("rolls back to exactly the previous data", () => {
    const previous = parse(plan.rollback.previousConfigMap!) as { data: { config: string } };
    assert.equal(previous.data.config, COMMENTED_CONFIG);
  });

  it("marks the pool without the agent as not reached", () => {
    const byPool = new Map(plan.coverage.map((c) => [c.pool, c]));
    assert.equal(byPool.get("default")?.reached, true);
    assert.equal(byPool.get("legacy")?.reached, false);
    assert.deepEqual(byPool.get("legacy")?.nodes, ["gke-east-legacy-b1"]);
    assert.match(byPool.get("legacy")!.why, /does not run here/);
  });

  it("lists allowlist sources and NetworkPolicy ipBlocks that name pod addresses", () => {
    const refs = plan.impact.namesPodAddresses;
    const allow = refs.find((r) => r.what === "allowlist orders-db of dc-east");
    assert.ok(allow, JSON.stringify(refs));
    assert.equal(allow.file, "remote/dc-east.yaml");
    assert.match(
      clusterFiles()["remote/dc-east.yaml"]!.split("\n")[allow.line - 1]!,
      /10\.8\.0\.0\/14/,
    );
    // the node subnet source is not a pod address: not listed
    assert.ok(!refs.some((r) => r.consequence.includes("10.128.0.0/20")));
    const np = refs.find((r) => r.what.startsWith("NetworkPolicy payments/from-pods"));
    assert.ok(np, JSON.stringify(refs));
    assert.equal(np.file, "cluster/netpol.yaml");
    assert.match(NETPOL_LINE(np.line), /cidr: 10\.8\.0\.0\/14/);
  });

  it("keep-pod-identity: the site learns the pod range (routes back, traffic selectors)", () => {
    const k = planMasquerade(snap, { strategy: "keep-pod-identity" });
    assert.equal(k.narrow, undefined);
    const site = k.keepPodIdentity!.sites;
    assert.equal(site.length, 1);
    assert.deepEqual(site[0]!.routesBackAdd, ["10.8.0.0/14"]);
    assert.deepEqual(site[0]!.selectorsAdd, ["10.8.0.0/14"]);
    assert.ok(site[0]!.diff.includes("+   - 10.8.0.0/14"), site[0]!.diff.join("\n"));
    assert.ok(site[0]!.diff.includes("+     - 10.8.0.0/14"), site[0]!.diff.join("\n"));
    assert.ok(site[0]!.diff.includes("    - 10.128.0.0/20"), "the existing entries stay");
    // the allowlist already admits the pod range: no firewall change
    assert.deepEqual(site[0]!.allowlistSourcesAdd, []);
    assert.deepEqual(k.impact.namesPodAddresses, []);
    assert.equal(k.tradeoff.length, 4);
    assert.ok(k.tradeoff.every((t) => t.narrow !== t.keepPodIdentity));
  });

  it("keep-pod-identity: an allowlist that admits only node addresses learns the pod range", () => {
    const files = clusterFiles();
    files["remote/dc-east.yaml"] = files["remote/dc-east.yaml"]!.replace(
      "      - 10.8.0.0/14\n",
      "",
    );
    const k = planMasquerade(memorySnapshot("fw", files), { strategy: "keep-pod-identity" });
    const site = k.keepPodIdentity!.sites[0]!;
    assert.deepEqual(site.allowlistSourcesAdd, [{ name: "orders-db", add: ["10.8.0.0/14"] }]);
    const diff = site.diff.join("\n");
    assert.match(
      diff,
      /allowlists:\n {2}- name: orders-db\n {4}sources:\n {8}- 10\.128\.0\.0\/20\n\+ {7}- 10\.8\.0\.0\/14/,
    );
  });

  it("a JSON config stays JSON, with the agent's case-insensitive key rewritten", () => {
    const json = `{"NonMasqueradeCidrs": ["10.0.0.0/8"], "resyncInterval": "45s", "masqLinkLocal": false}`;
    const p = planMasquerade(memorySnapshot("json", clusterFiles(json)), { strategy: "narrow" });
    const r = agentReads(p.narrow!.newConfigMap);
    assert.equal(r.error, undefined);
    assert.ok(r.text.trim().startsWith("{"));
    const obj = JSON.parse(r.text) as Record<string, unknown>;
    assert.deepEqual(Object.keys(obj), ["NonMasqueradeCidrs", "resyncInterval", "masqLinkLocal"]);
    assert.equal(obj["resyncInterval"], "45s");
    assert.deepEqual(
      obj["NonMasqueradeCidrs"],
      p.narrow!.newList.map((n) => n.cidr),
    );
  });

  it("no ConfigMap: a new one, and rollback deletes it", () => {
    const p = planMasquerade(memorySnapshot("none", clusterFiles(null)), {
      strategy: "narrow",
    });
    // without a ConfigMap the agent runs its defaults, which exempt 10.0.0.0/8
    assert.equal(p.destinations[0]?.exemptToday, true);
    const cm = parse(p.narrow!.newConfigMap) as { metadata: Record<string, string> };
    assert.deepEqual(cm.metadata, { name: "ip-masq-agent", namespace: "kube-system" });
    assert.equal(agentReads(p.narrow!.newConfigMap).error, undefined);
    assert.equal(p.rollback.previousConfigMap, undefined);
    assert.deepEqual(
      p.rollback.apply.map((a) => a.split("   #")[0]),
      ["kubectl -n kube-system delete configmap ip-masq-agent"],
    );
  });

  it("a config the agent refuses today: a warning, and the new one is accepted", () => {
    const p = planMasquerade(
      memorySnapshot(
        "refused",
        clusterFiles("nonMasqueradeCIDRs:\n  - 10.0.0.1/8\nresyncInterval: 30s\n"),
      ),
      { strategy: "narrow" },
    );
    const w = p.diagnostics.find((d) => d.code === "PLAN_CURRENT_CONFIG_REFUSED");
    assert.ok(w);
    assert.match(w.message, /CIDR "10\.0\.0\.1\/8" is not aligned/);
    const r = agentReads(p.narrow!.newConfigMap);
    assert.equal(r.error, undefined);
    assert.match(r.text, /^resyncInterval: 30s$/m);
    assert.ok(!r.text.includes("10.0.0.1/8"));
  });

  it("an unreadable config is replaced (with a warning), not a crash", () => {
    const p = planMasquerade(
      memorySnapshot("bad", clusterFiles("nonMasqueradeCIDRs: [10.0.0.0/8\n")),
      {
        strategy: "narrow",
      },
    );
    assert.ok(p.diagnostics.some((d) => d.code === "PLAN_CONFIG_REPLACED"));
    assert.equal(agentReads(p.narrow!.newConfigMap).error, undefined);
  });
});

const NETPOL_LINE = (line: number) =>
  clusterFiles()["cluster/netpol.yaml"]!.split("\n")[line - 1] ?? "";

describe("planMasquerade refuses input it cannot plan for", () => {
  it("without Nodes (no pod range)", () => {
    const files = clusterFiles();
    delete files["cluster/nodes.yaml"];
    delete files["cluster/kube-proxy.yaml"];
    assert.throws(
      () => planMasquerade(memorySnapshot("no-nodes", files), { strategy: "narrow" }),
      (e: unknown) => e instanceof PlanError && /pod range is not known/.test(e.message),
    );
  });
  it("with a destination inside the pod range", () => {
    assert.throws(
      () =>
        planMasquerade(memorySnapshot("hand", clusterFiles()), {
          strategy: "narrow",
          dest: { ip: ip("10.8.3.4"), port: 80, text: "10.8.3.4:80" },
        }),
      (e: unknown) => e instanceof PlanError && /inside the pod range/.test(e.message),
    );
  });
  it("without any destination", () => {
    const files = clusterFiles();
    delete files["remote/dc-east.yaml"];
    assert.throws(
      () => planMasquerade(memorySnapshot("no-dest", files), { strategy: "narrow" }),
      (e: unknown) => e instanceof PlanError && /--dest/.test(e.message),
    );
  });
});

describe("rewriteConfigTextChecked", () => {
  it("rewrites every spelling of the key the agent folds together", () => {
    const r = rewriteConfigTextChecked(
      "nonMasqueradeCIDRs: [10.0.0.0/8]\nNONMASQUERADECIDRS: [172.16.0.0/12]\nresyncInterval: 60s\n",
      ["10.4.0.0/14"],
    );
    assert.equal(r.rewritten, true);
    const d = agentReads(configMapYaml(r.text));
    assert.deepEqual(
      (d.config.nonMasqueradeCIDRs ?? []).map((e) => e.text),
      ["10.4.0.0/14"],
    );
  });
  it("replaces a list or scalar document with a fresh config", () => {
    for (const text of ["- a\n- b\n", "just text\n", "[1, 2"]) {
      const r = rewriteConfigTextChecked(text, ["10.4.0.0/14"]);
      assert.equal(r.rewritten, false, text);
      assert.equal(agentReads(configMapYaml(r.text)).error, undefined);
    }
  });
});

// Random private lists, pod ranges and destinations outside the pod range: the plan always
// covers the pod range, never the destination, never widens, and the agent accepts the config.
describe("planMasquerade properties", () => {
  const block = fc
    .tuple(
      fc.constantFrom(10, 172, 192),
      fc.integer({ min: 0, max: 255 }),
      fc.integer({ min: 8, max: 24 }),
    )
    .map(([a, b, len]) => parseCidr(`${a}.${b}.0.0/${len}`));
  it("narrowing holds for random configs", () => {
    fc.assert(
      fc.property(
        fc.array(block, { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 0, max: 63 }),
        fc.integer({ min: 1, max: 0xfffffe }),
        (old, podSlot, destLow) => {
          const pod = parseCidr(`10.${podSlot * 4}.0.0/14`);
          const dest = { family: 4 as const, value: (10n << 24n) | BigInt(destLow) };
          if (pod.start <= dest.value && dest.value <= pod.end) return;
          const oldList = mergeCidrs(old).map(formatCidr);
          const config = `nonMasqueradeCIDRs:\n${oldList.map((c) => `  - ${c}`).join("\n")}\nresyncInterval: 60s\n`;
          const files = {
            "cluster/nodes.yaml": nodeYaml(
              "n1",
              "default",
              `${formatIpv4(pod.start)}/24`,
              "172.31.0.2",
            ),
            "cluster/ip-masq-agent.yaml": configMapYaml(config),
            "cluster/pods.yaml": appPodYaml("app", "n1", formatIpv4(pod.start + 5n)),
          };
          const p = planMasquerade(memorySnapshot("prop", files), {
            strategy: "narrow",
            podRange: [pod],
            dest: { ip: dest, port: 443, text: "dest" },
          });
          const list = cidrs(p.narrow!.newList);
          assert.ok(covers(list, pod));
          assert.ok(!coversIp(list, dest));
          for (const c of list)
            assert.ok(covers([...oldList.map((t) => parseCidr(t)), pod], c), formatCidr(c));
          assert.equal(p.narrow!.validationError, undefined);
          assert.equal(agentReads(p.narrow!.newConfigMap).error, undefined);
        },
      ),
      { numRuns: 60 },
    );
  });
});

function formatIpv4(v: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => Number((v >> s) & 255n)).join(".");
}
