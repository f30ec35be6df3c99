/**
 * Component test: the real kube-proxy runs in iptables mode inside a lab network namespace against
 * the real kube-apiserver (test/components/cluster.ts). The API server listens on the root
 * namespace's loopback; the namespace reaches it through a Unix socket (a path on the shared
 * filesystem) bridged to a TCP port on the namespace's own loopback. A Node, Services and an
 * EndpointSlice are created through the API; once kube-proxy has written their rules, the real
 * `iptables-save` is read by podpath without errors, and the evaluator and the kernel agree on
 * flows through it (the differential sandbox of src/lab). Then kube-proxy runs in nftables mode:
 * podpath reads its ruleset in every form without errors and gives the same answers for the same
 * Service as in iptables mode, and the kernel agrees with them.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { compileNat } from "../../src/iptables/nat-eval.ts";
import type { NatTrace } from "../../src/iptables/nat-trace.ts";
import { parseIptablesSave } from "../../src/iptables/save-parser.ts";
import { createNatSandbox, natSection, type SandboxFlow } from "../../src/lab/nat-sandbox.ts";
import { createLab, type Lab, type Namespace } from "../../src/lab/netns.ts";
import { sandboxContext, sandboxFlow } from "../../src/lab/replay.ts";
import { compareTranslation } from "../../src/lab/translation.ts";
import { formatIp } from "../../src/net/cidr.ts";
import { compileNftNat } from "../../src/nftables/nat-eval.ts";
import { readNftRuleset } from "../../src/nftables/read-ruleset.ts";
import { reachApiFrom, writeInnerKubeconfig } from "./api-bridge.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import { componentSkip, componentsDir } from "./component-guard.ts";
import { addNodeUplink, spawnKubeProxy } from "./kube-proxy-node.ts";

const skip =
  componentSkip("kube-proxy") ||
  componentSkip("kube-apiserver", { kernel: false }) ||
  componentSkip("etcd", { kernel: false });
const NODE_IP = "10.128.0.2";
const INNER_PORT = 6443;
/** PODPATH_COMPONENT_SERVICES=N: how many Services the scale case creates (default 1000). */
const SERVICES = Number(process.env["PODPATH_COMPONENT_SERVICES"] ?? 1000);
const FIXTURES = join(import.meta.dirname, "../../src/nftables/fixtures");

describe("kube-proxy (iptables and nftables mode) against the real API server", { skip }, () => {
  let cluster: Cluster | undefined;
  let lab: Lab | undefined;
  let ns: Namespace | undefined;
  let outer: { close(): void } | undefined;
  let dir = "";
  let log = "";
  let running: ChildProcess | undefined;
  let clusterIP = "";
  /** The iptables-mode dump of the first test, for comparing nftables mode's answers. */
  let iptablesDump: ReturnType<typeof parseIptablesSave>["value"] | undefined;
  /** What the iptables-mode scale test made: the Services' addresses, its dump and sample. */
  let scale:
    | {
        ips: string[];
        dump: string;
        flows: SandboxFlow[];
        parsed: ReturnType<typeof parseIptablesSave>["value"];
      }
    | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "podpath-kube-proxy-"));
    cluster = await startCluster();
    const apiPort = Number(new URL(cluster.url).port);
    lab = await createLab();
    ns = await lab.addNamespace("node");
    await addNodeUplink(lab, ns, NODE_IP);
    outer = await reachApiFrom(ns, apiPort, join(dir, "api.sock"), INNER_PORT);
    writeInnerKubeconfig(join(dir, "kubeconfig"), cluster, INNER_PORT);
  });
  after(async () => {
    await lab?.destroy();
    outer?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** kube-proxy in the lab's node namespace, in the given mode; its log kept in `log`. */
  function startProxy(mode: "iptables" | "nftables"): ChildProcess {
    log = "";
    const proxy = spawnKubeProxy(
      ns!,
      {
        kubeconfig: join(dir, "kubeconfig"),
        mode: mode,
        hostname: "node1",
        nodeIp: NODE_IP,
        clusterCidr: "10.4.0.0/16",
      },
      (tail) => (log = tail),
    );
    running = proxy;
    return proxy;
  }

  async function stopProxy(): Promise<void> {
    const p = running;
    running = undefined;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((r) => p.once("exit", r));
    p.kill("SIGTERM");
    await gone;
  }

  it("writes the rules of a Service created through the API, and podpath reads them without errors", async () => {
    const c = cluster!;
    const post = async (path: string, body: unknown) => {
      const r = await c.api("POST", path, c.adminToken, body);
      assert.equal(r.status, 201, `${path}: ${JSON.stringify(r.body)}`);
      return r.body as Record<string, unknown>;
    };
    const node = await post("/api/v1/nodes", {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "node1" },
    });
    // the node's address, as a kubelet would report it (kube-proxy waits for it)
    const status = await c.api("PUT", "/api/v1/nodes/node1/status", c.adminToken, {
      ...node,
      status: { addresses: [{ type: "InternalIP", address: NODE_IP }] },
    });
    assert.equal(status.status, 200, JSON.stringify(status.body));
    const svc = await post("/api/v1/namespaces/default/services", {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "web" },
      spec: { type: "ClusterIP", ports: [{ name: "http", port: 80, targetPort: 8080 }] },
    });
    clusterIP = (svc["spec"] as { clusterIP: string }).clusterIP;
    await post("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: "web-1",
        labels: {
          "kubernetes.io/service-name": "web",
          "endpointslice.kubernetes.io/managed-by": "podpath-test",
        },
      },
      addressType: "IPv4",
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      endpoints: [
        { addresses: ["10.4.1.5"], conditions: { ready: true }, nodeName: "node1" },
        { addresses: ["10.4.2.7"], conditions: { ready: true }, nodeName: "node2" },
      ],
    });

    const proxy = startProxy("iptables");
    let exited = false;
    proxy.once("exit", () => {
      exited = true;
    });

    // wait until kube-proxy has written the Service's rules
    let dump = "";
    const deadline = Date.now() + 120_000;
    for (;;) {
      const r = await ns!.exec(["iptables-save"]);
      dump = r.stdout;
      if (dump.includes(`-d ${clusterIP}/32`) && dump.includes("KUBE-SEP-")) break;
      assert.ok(!exited, `kube-proxy exited:\n${log}`);
      assert.ok(Date.now() < deadline, `no rules for ${clusterIP} in 120 s:\n${log}\n${dump}`);
      await new Promise((r) => setTimeout(r, 250));
    }

    // podpath reads the real dump without errors
    const parsed = parseIptablesSave(dump, "iptables-save.txt");
    const errors = parsed.diagnostics.filter((d) => d.severity === "error");
    assert.deepEqual(errors, [], dump);
    iptablesDump = parsed.value;

    // the Service's chain jumps to one chain per endpoint
    const svcChain = /^-A KUBE-SERVICES .*-d (\S+)\/32 .*-j (KUBE-SVC-\w+)$/m.exec(dump);
    assert.ok(svcChain && svcChain[1] === clusterIP, dump);
    const seps = dump
      .split("\n")
      .filter((l) => l.startsWith(`-A ${svcChain[2]} `) && l.includes("-j KUBE-SEP-"));
    assert.equal(seps.length, 2, dump);

    // the evaluator and the kernel agree on flows through the dump's nat table (the differential
    // sandbox of src/lab); the endpoints' addresses are placed beyond the node by flows of their
    // own, so a packet DNATed to them is routed on and conntrack shows its translation
    const nat = natSection(dump);
    assert.ok(nat, dump);
    const flows: SandboxFlow[] = [
      { proto: "tcp", src: "10.4.0.9", sport: 41_000, dst: clusterIP, dport: 80 },
      { proto: "tcp", src: "10.4.0.10", sport: 41_000, dst: clusterIP, dport: 81 },
      { proto: "tcp", src: "10.4.0.11", sport: 41_000, dst: "10.20.30.40", dport: 5432 },
      { proto: "udp", src: "10.4.0.12", sport: 41_000, dst: "10.4.1.5", dport: 8080 },
      { proto: "udp", src: "10.4.0.13", sport: 41_000, dst: "10.4.2.7", dport: 8080 },
      { proto: "tcp", src: NODE_IP, sport: 41_001, dst: clusterIP, dport: 80, local: true },
    ];
    const sb = await createNatSandbox({ inIface: "cbr0", outIface: "eth0", nodeIp: NODE_IP });
    try {
      const loadError = await sb.loadNat(nat);
      assert.equal(loadError, undefined, `the kernel refuses the dump's nat table: ${loadError}`);
      const seen = await sb.observe(flows);
      const program = compileNat(parsed.value, sandboxContext(NODE_IP, "cbr0", "eth0"));
      const decided = flows.map((f, i) => {
        const a = compareTranslation(program.evaluate(sandboxFlow(f, "cbr0", "eth0")), seen[i]!);
        return { flow: `${f.local ? "local " : ""}${f.src}->${f.dst}:${f.dport}`, ...a };
      });
      const disagree = decided.filter((d) => d.agree === false);
      assert.deepEqual(disagree, [], JSON.stringify(decided, null, 2));
      // the Service flow was translated by the kernel to one of its endpoints
      assert.ok(
        ["10.4.1.5", "10.4.2.7"].includes(seen[0]!.destination ?? ""),
        JSON.stringify(seen[0]),
      );
      assert.ok(
        decided.filter((d) => d.agree === true).length >= 4,
        JSON.stringify(decided, null, 2),
      );
    } finally {
      await sb.destroy();
    }
    await stopProxy();
  });

  it("in nftables mode writes the same Service into table ip kube-proxy, and no iptables rule for it", async () => {
    assert.ok(clusterIP, "the iptables-mode test created the Service");
    const proxy = startProxy("nftables");
    let exited = false;
    proxy.once("exit", () => {
      exited = true;
    });
    let ruleset = "";
    const deadline = Date.now() + 120_000;
    for (;;) {
      ruleset = (await ns!.exec(["nft", "list", "table", "ip", "kube-proxy"])).stdout;
      if (
        ruleset.includes(`${clusterIP} . tcp . 80 : goto service-`) &&
        / dnat (ip )?to /.test(ruleset)
      ) {
        break;
      }
      assert.ok(!exited, `kube-proxy exited:\n${log}`);
      assert.ok(
        Date.now() < deadline,
        `no nftables rules for ${clusterIP} in 120 s:\n${log}\n${ruleset}`,
      );
      await new Promise((r) => setTimeout(r, 250));
    }
    // the Service's chain DNATs to its two endpoints, chosen at random (one map, no chain each)
    const dnat = ruleset.split("\n").find((l) => / dnat (ip )?to /.test(l)) ?? "";
    for (const endpoint of ["10.4.1.5 . 8080", "10.4.2.7 . 8080"]) {
      assert.ok(dnat.includes(endpoint), ruleset);
    }
    // the IPv6 table is written after the IPv4 one: the whole ruleset, once both are there
    let listing = "";
    for (;;) {
      listing = (await ns!.exec(["nft", "list", "ruleset"])).stdout;
      if (listing.includes("table ip6 kube-proxy") && listing.includes("service-")) break;
      assert.ok(!exited, `kube-proxy exited:\n${log}`);
      assert.ok(Date.now() < deadline, `no table ip6 kube-proxy in 120 s:\n${log}\n${listing}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    // PODPATH_WRITE_NFT_FIXTURES=1: the real ruleset, in every form podpath reads, becomes the
    // nftables reader's fixture (src/nftables/fixtures/kube-proxy-*.nft)
    if (process.env["PODPATH_WRITE_NFT_FIXTURES"] === "1") {
      const forms: [string, string[]][] = [
        ["kube-proxy-ruleset.nft", ["nft", "list", "ruleset"]],
        ["kube-proxy-ruleset-a.nft", ["nft", "-a", "list", "ruleset"]],
        ["kube-proxy-ruleset-nn.nft", ["nft", "-nn", "list", "ruleset"]],
        ["kube-proxy-ruleset-s.nft", ["nft", "-s", "list", "ruleset"]],
        ["kube-proxy-ruleset.json", ["nft", "-j", "list", "ruleset"]],
      ];
      for (const [file, argv] of forms) {
        const r = await ns!.exec(argv);
        assert.equal(r.code, 0, r.stderr);
        writeFileSync(join(FIXTURES, file), r.stdout);
      }
    }

    // podpath reads the real ruleset, in every form, without errors
    for (const argv of [[], ["-a"], ["-nn"], ["-j"]]) {
      const text = (await ns!.exec(["nft", ...argv, "list", "ruleset"])).stdout;
      const r = readNftRuleset(text, "nft-ruleset.txt");
      assert.deepEqual(
        r.diagnostics.filter((d) => d.severity === "error"),
        [],
        argv.join(" "),
      );
    }
    const rs = readNftRuleset(listing, "nft-ruleset.txt").value;
    const nftNat = compileNftNat(rs, sandboxContext(NODE_IP, "cbr0", "eth0"));
    const iptNat = compileNat(iptablesDump!, sandboxContext(NODE_IP, "cbr0", "eth0"));
    // for the same Service, the same answer as in iptables mode: each endpoint's DNAT, and the
    // masquerade decision (a pod keeps its address, a source outside the cluster range and the
    // node itself are masqueraded)
    const flows: SandboxFlow[] = [
      { proto: "tcp", src: "10.4.0.9", sport: 42_000, dst: clusterIP, dport: 80 },
      { proto: "tcp", src: "10.9.0.9", sport: 42_000, dst: clusterIP, dport: 80 },
      { proto: "tcp", src: "10.4.0.11", sport: 42_000, dst: "10.20.30.40", dport: 5432 },
      { proto: "tcp", src: NODE_IP, sport: 42_001, dst: clusterIP, dport: 80, local: true },
    ];
    const answer = (t: NatTrace) =>
      (t.branches?.map((b) => b.trace) ?? [t])
        .map(
          (l) =>
            `${l.decision} src ${l.sourceOut?.ip ? formatIp(l.sourceOut.ip) : "?"} dst ${formatIp(l.dstOut!.ip)}:${l.dstOut!.port}`,
        )
        .sort();
    for (const f of flows) {
      const q = sandboxFlow(f, "cbr0", "eth0");
      const nftAnswer = answer(nftNat.evaluate(q));
      assert.deepEqual(nftAnswer, answer(iptNat.evaluate(q)), JSON.stringify(f));
      if (f.dst === clusterIP) assert.equal(nftAnswer.length, 2, nftAnswer.join("\n"));
    }
    // and the kernel agrees: kube-proxy's table, as listed, loaded into the differential sandbox
    const table = (await ns!.exec(["nft", "list", "table", "ip", "kube-proxy"])).stdout;
    const sb = await createNatSandbox({ inIface: "cbr0", outIface: "eth0", nodeIp: NODE_IP });
    try {
      const load = await sb.node.exec(["nft", "-f", "-"], { input: table });
      assert.equal(load.code, 0, load.stderr);
      // the endpoints placed beyond the node by flows of their own, as in iptables mode
      const all: SandboxFlow[] = [
        ...flows,
        { proto: "udp", src: "10.4.0.12", sport: 42_000, dst: "10.4.1.5", dport: 8080 },
        { proto: "udp", src: "10.4.0.13", sport: 42_000, dst: "10.4.2.7", dport: 8080 },
      ];
      const seen = await sb.observe(all);
      const decided = all.map((f, i) => ({
        flow: `${f.src}->${f.dst}:${f.dport}`,
        ...compareTranslation(nftNat.evaluate(sandboxFlow(f, "cbr0", "eth0")), seen[i]!),
      }));
      assert.deepEqual(
        decided.filter((d) => d.agree !== true),
        [],
        JSON.stringify(decided, null, 2),
      );
    } finally {
      await sb.destroy();
    }
    // kube-proxy removed its iptables-mode rules: iptables-save has nothing of the Service, so a
    // node in nftables mode is read from `nft list ruleset`
    const dump = (await ns!.exec(["iptables-save", "-t", "nat"])).stdout;
    assert.ok(!dump.includes(clusterIP), dump);
    await stopProxy();
  });

  it(`in iptables mode with ${SERVICES} Services: podpath reads the dump and agrees with the kernel on a sample`, async (t) => {
    const c = cluster!;
    const started = Date.now();
    const ips: string[] = [];
    // created a few at a time through the API, as a controller would
    for (let i = 0; i < SERVICES; i += 10) {
      const batch = Array.from({ length: Math.min(10, SERVICES - i) }, (_, k) => i + k);
      const made = await Promise.all(
        batch.map(async (n) => {
          const svc = await c.api("POST", "/api/v1/namespaces/default/services", c.adminToken, {
            apiVersion: "v1",
            kind: "Service",
            metadata: { name: `s${n}` },
            spec: { ports: [{ name: "p", port: 80 + (n % 5), targetPort: 8080 }] },
          });
          assert.equal(svc.status, 201, JSON.stringify(svc.body));
          const slice = await c.api(
            "POST",
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            c.adminToken,
            {
              apiVersion: "discovery.k8s.io/v1",
              kind: "EndpointSlice",
              metadata: {
                name: `s${n}-1`,
                labels: {
                  "kubernetes.io/service-name": `s${n}`,
                  "endpointslice.kubernetes.io/managed-by": "podpath-test",
                },
              },
              addressType: "IPv4",
              ports: [{ name: "p", port: 8080, protocol: "TCP" }],
              endpoints: [
                {
                  addresses: [`10.5.${n >> 8}.${n & 255}`],
                  conditions: { ready: true },
                  nodeName: "node2",
                },
              ],
            },
          );
          assert.equal(slice.status, 201, JSON.stringify(slice.body));
          return (svc.body as { spec: { clusterIP: string } }).spec.clusterIP;
        }),
      );
      ips.push(...made);
    }
    const proxy = startProxy("iptables");
    let exited = false;
    proxy.once("exit", () => {
      exited = true;
    });
    let dump = "";
    const last = ips.at(-1)!;
    const deadline = Date.now() + 180_000;
    for (;;) {
      dump = (await ns!.exec(["iptables-save", "-t", "nat"])).stdout;
      const svcs = dump.split("\n").filter((l) => /^:KUBE-SVC-/.test(l)).length;
      if (dump.includes(`-d ${last}/32`) && svcs >= SERVICES) break;
      assert.ok(!exited, `kube-proxy exited:\n${log}`);
      assert.ok(Date.now() < deadline, `kube-proxy wrote ${svcs} of ${SERVICES} Services:\n${log}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    const parsed = parseIptablesSave(dump, "iptables-save.txt");
    assert.deepEqual(
      parsed.diagnostics.filter((d) => d.severity === "error"),
      [],
    );
    const nat = natSection(dump)!;
    // a sample spread over the Services, each from its own pod address
    const step = Math.max(1, Math.floor(SERVICES / 8));
    const flows: SandboxFlow[] = [];
    for (let n = 0; n < SERVICES; n += step) {
      flows.push({
        proto: "tcp",
        src: `10.4.9.${flows.length + 1}`,
        sport: 41_000,
        dst: ips[n]!,
        dport: 80 + (n % 5),
      });
      flows.push({
        proto: "tcp",
        src: `10.4.8.${flows.length + 1}`,
        sport: 41_000,
        dst: `10.5.${n >> 8}.${n & 255}`,
        dport: 8080,
      });
    }
    const sb = await createNatSandbox({ inIface: "cbr0", outIface: "eth0", nodeIp: NODE_IP });
    try {
      const loadError = await sb.loadNat(nat);
      assert.equal(loadError, undefined, `the kernel refuses the dump's nat table: ${loadError}`);
      const seen = await sb.observe(flows);
      const program = compileNat(parsed.value, sandboxContext(NODE_IP, "cbr0", "eth0"));
      const decided = flows.map((f, i) => ({
        flow: `${f.src}->${f.dst}:${f.dport}`,
        ...compareTranslation(program.evaluate(sandboxFlow(f, "cbr0", "eth0")), seen[i]!),
      }));
      assert.deepEqual(
        decided.filter((d) => d.agree !== true),
        [],
        JSON.stringify(decided, null, 2),
      );
      // each Service flow went to its own endpoint
      for (let k = 0; k < flows.length; k += 2) {
        assert.equal(seen[k]!.destination, flows[k + 1]!.dst, JSON.stringify(seen[k]));
      }
    } finally {
      await sb.destroy();
    }
    await stopProxy();
    t.diagnostic(
      `iptables mode, ${SERVICES} Services: ${Math.round((Date.now() - started) / 1000)} s`,
    );
    scale = { ips, dump, flows, parsed: parsed.value };
  });

  it(`in nftables mode with ${SERVICES} Services: podpath reads the ruleset and answers as in iptables mode`, async (t) => {
    assert.ok(scale, "the iptables-mode scale test created the Services");
    const started = Date.now();
    const proxy = startProxy("nftables");
    let exited = false;
    proxy.once("exit", () => {
      exited = true;
    });
    const last = scale.ips.at(-1)!;
    const deadline = Date.now() + 300_000;
    let listing = "";
    for (;;) {
      listing = (await ns!.exec(["nft", "list", "table", "ip", "kube-proxy"])).stdout;
      const chains = listing.match(/^\tchain service-/gm)?.length ?? 0;
      if (listing.includes(`${last} . tcp . `) && chains >= SERVICES) break;
      assert.ok(!exited, `kube-proxy exited:\n${log}`);
      assert.ok(
        Date.now() < deadline,
        `kube-proxy wrote ${chains} of ${SERVICES} Services:\n${log}`,
      );
      await new Promise((r) => setTimeout(r, 1000));
    }
    const written = Date.now();
    const r = readNftRuleset(listing, "nft-ruleset.txt");
    assert.deepEqual(
      r.diagnostics.filter((d) => d.severity === "error"),
      [],
    );
    const nftNat = compileNftNat(r.value, sandboxContext(NODE_IP, "cbr0", "eth0"));
    const iptNat = compileNat(scale.parsed, sandboxContext(NODE_IP, "cbr0", "eth0"));
    const answer = (x: NatTrace) =>
      (x.branches?.map((b) => b.trace) ?? [x])
        .map(
          (l) =>
            `${l.decision} ${l.sourceOut?.ip ? formatIp(l.sourceOut.ip) : "?"} ${formatIp(l.dstOut!.ip)}:${l.dstOut!.port}`,
        )
        .sort();
    for (const f of scale.flows) {
      const q = sandboxFlow(f, "cbr0", "eth0");
      assert.deepEqual(answer(nftNat.evaluate(q)), answer(iptNat.evaluate(q)), JSON.stringify(f));
    }
    // PODPATH_COMPONENT_DUMPS=1 (or 10k Services): the real dumps for the benchmarks
    if (process.env["PODPATH_COMPONENT_DUMPS"] === "1" || SERVICES >= 10_000) {
      const dir = join(componentsDir(), "dumps");
      mkdirSync(dir, { recursive: true });
      const tag = SERVICES % 1000 === 0 ? `${SERVICES / 1000}k` : String(SERVICES);
      writeFileSync(join(dir, `kube-proxy-${tag}-iptables-save.txt`), scale.dump);
      writeFileSync(join(dir, `kube-proxy-${tag}-nft.txt`), listing);
    }
    await stopProxy();
    t.diagnostic(
      `nftables mode, ${SERVICES} Services: written in ${Math.round((written - started) / 1000)} s, read and compared in ${Date.now() - written} ms`,
    );
  });
});
