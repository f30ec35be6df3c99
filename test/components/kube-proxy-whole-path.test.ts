/**
 * Component test: podpath's whole-path evaluator held to the real kube-proxy and the kernel, in
 * iptables mode and in nftables mode, for the same Services. kube-proxy runs against the real API
 * server (test/components/cluster.ts) inside the node namespace of the whole-path sandbox
 * (src/lab/path-sandbox.ts: pods behind pod0, far hosts behind eth0 and eth1, the kernel's verdict
 * read by capture and by a delivery counter; test/components/masqueraded-flows.ts reads the flows
 * kube-proxy's `--random-fully` masquerade hides from it). The Services: web with two endpoints
 * (pods on other nodes, one behind each uplink; TCP and UDP), default/kubernetes to the node
 * itself (6443), orders without endpoints, shop a LoadBalancer (NodePort, external IP, balancer
 * address), sticky with ClientIP affinity, local (internalTrafficPolicy Local, its endpoint on
 * another node: kube-proxy drops what the node sends it).
 *
 * For each mode the node's evidence is collected as a snapshot holds it (iptables-save, and `nft
 * list ruleset` in nftables mode; ip rule, ip route show table all, ip addr; the sandbox's own
 * observers left out), read with loadSnapshot, and nodePathEvaluator answers flows from a pod and
 * from the node itself (to ClusterIPs, to the NodePort on the node's addresses, to the external
 * and load balancer addresses); the same flows are sent for real and the kernel's verdict must
 * be podpath's answer or one of its branches, and decided. Then the sticky Service again from the same pod, with the evidence collected anew: the
 * kernel keeps the endpoint, and in nftables mode podpath reads it from the affinity set. Last,
 * the two modes' answers are compared flow by flow: podpath's outcomes and the kernel's verdict
 * (kind, reject type, each mode's endpoint admitted by the other's answer), except where
 * kube-proxy's modes differ on purpose ({@link MODES_DIFFER}: the kernel must show it) or the
 * evidence does ({@link EVIDENCE_DIFFERS}). Flows podpath leaves undecided are listed, with why,
 * in {@link KNOWN_GAPS}, and printed.
 *
 * PODPATH_KEEP_SNAPSHOTS=1 keeps the collected snapshots (their folder is printed).
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { mustExec as must, type Namespace } from "../../src/lab/netns.ts";
import { kernelWords, outcomeTest, podpathWords } from "../../src/lab/path-agreement.ts";
import { pathPacketOf } from "../../src/lab/path-diff-node.ts";
import { PATH_NET, type PathFlow } from "../../src/lab/path-gen.ts";
import {
  createPathSandbox,
  type KernelPathVerdict,
  type PathSandbox,
} from "../../src/lab/path-sandbox.ts";
import { rootNamespaceHash } from "../../src/lab/root-state.ts";
import { nodePathEvaluator } from "../../src/path/node-path.ts";
import type { PathEvaluator } from "../../src/path/path-types.ts";
import { loadSnapshot } from "../../src/snapshot/load.ts";
import { openSnapshot } from "../../src/snapshot/source.ts";
import { reachApiFrom, writeInnerKubeconfig } from "./api-bridge.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import { componentSkip } from "./component-guard.ts";
import { spawnKubeProxy } from "./kube-proxy-node.ts";
import {
  addDeliveryCounters,
  type FarCaptures,
  startFarCaptures,
  unmasked,
} from "./masqueraded-flows.ts";

const skip =
  componentSkip("kube-proxy") ||
  componentSkip("kube-apiserver", { kernel: false }) ||
  componentSkip("etcd", { kernel: false });

type Mode = "iptables" | "nftables";
type ServiceName = "web" | "kubernetes" | "orders" | "shop" | "sticky" | "local";
const NODE = "node1";
const NODE_IP: string = PATH_NET.eth0.node;
const POD: string = PATH_NET.pods[0];
const POD2: string = PATH_NET.pods[1];
/** Where the API server's bridge listens inside the node (not a Service's port). */
const INNER_PORT = 16_443;
const API_ENDPOINT_PORT = 6443;
const NODE_PORT = 30_080;
/** shop's external IP and its load balancer's address (neither the node's: routed by eth0). */
const EXTERNAL_IP = "192.168.30.50";
const LB_IP = "192.168.30.60";
/** Pods on other nodes: 10.244.1.0/24 by the main table's default route (eth0), .2 by eth1. */
const REMOTE_ROUTES = [`10.244.2.0/24 via ${PATH_NET.eth1.gateway} dev eth1 table main`];
const ENDPOINTS = {
  web: ["10.244.1.5", "10.244.2.7"],
  shop: ["10.244.1.9"],
  sticky: ["10.244.1.11", "10.244.2.12"],
  local: ["10.244.1.13"],
} as const;

/** The sandbox's observer rules (lab/path-sandbox.ts withObservers), as iptables-nft lists them. */
const OBSERVER_RULE =
  /^\t\t(udp sport 9|meta l4proto icmp icmp type destination-unreachable|tcp flags .*\brst\b.*) +counter packets \d+ bytes \d+ accept$/;

/** The tables the sandbox's observers go into, with nothing else (kube-proxy adds its own). */
const EMPTY_TABLES = [
  ["raw", ["PREROUTING", "OUTPUT"]],
  ["mangle", ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"]],
  ["nat", ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"]],
  ["filter", ["INPUT", "FORWARD", "OUTPUT"]],
] as const;
const emptyRestore = [
  ...EMPTY_TABLES.flatMap(([t, chains]) => [
    `*${t}`,
    ...chains.map((c) => `:${c} ACCEPT [0:0]`),
    "COMMIT",
  ]),
  "",
].join("\n");

interface NamedFlow {
  readonly name: string;
  readonly flow: PathFlow;
}

/** The flows, each mode with its own source ports (`base` + index). */
function flowsFor(ip: Record<ServiceName, string>, base: number) {
  const list: [string, Omit<PathFlow, "sport">][] = [
    ["pod -> web ClusterIP", { proto: "tcp", src: POD, dst: ip.web, dport: 80, origin: "pod" }],
    [
      "pod -> kubernetes ClusterIP (the node itself)",
      { proto: "tcp", src: POD, dst: ip.kubernetes, dport: 443, origin: "pod" },
    ],
    [
      "pod -> orders ClusterIP (no endpoints)",
      { proto: "tcp", src: POD, dst: ip.orders, dport: 80, origin: "pod" },
    ],
    [
      "pod -> NodePort on the node's address",
      { proto: "tcp", src: POD, dst: NODE_IP, dport: NODE_PORT, origin: "pod" },
    ],
    [
      "pod -> shop's external IP",
      { proto: "tcp", src: POD, dst: EXTERNAL_IP, dport: 80, origin: "pod" },
    ],
    [
      "pod -> shop's load balancer address",
      { proto: "tcp", src: POD2, dst: LB_IP, dport: 80, origin: "pod" },
    ],
    [
      "node -> shop's load balancer address",
      { proto: "tcp", src: NODE_IP, dst: LB_IP, dport: 80, origin: "host" },
    ],
    [
      "pod -> NodePort on the node's pod-side address",
      { proto: "tcp", src: POD2, dst: PATH_NET.podGateway, dport: NODE_PORT, origin: "pod" },
    ],
    [STICKY_NAME, { proto: "tcp", src: POD2, dst: ip.sticky, dport: 80, origin: "pod" }],
    [
      "pod -> web ClusterIP on a port it does not serve",
      { proto: "tcp", src: POD2, dst: ip.web, dport: 81, origin: "pod" },
    ],
    [
      "node -> web ClusterIP",
      { proto: "tcp", src: NODE_IP, dst: ip.web, dport: 80, origin: "host" },
    ],
    [
      "pod -> web ClusterIP (DNS, UDP)",
      { proto: "udp", src: POD, dst: ip.web, dport: 53, origin: "pod" },
    ],
    [
      "node -> web ClusterIP (DNS, UDP)",
      { proto: "udp", src: NODE_IP, dst: ip.web, dport: 53, origin: "host" },
    ],
    [
      "node -> kubernetes ClusterIP (the node itself)",
      { proto: "tcp", src: NODE_IP, dst: ip.kubernetes, dport: 443, origin: "host" },
    ],
    [
      "pod -> local ClusterIP (internalTrafficPolicy Local, no endpoint on the node)",
      { proto: "tcp", src: POD, dst: ip.local, dport: 80, origin: "pod" },
    ],
    [
      "node -> local ClusterIP (internalTrafficPolicy Local, no endpoint on the node)",
      { proto: "tcp", src: NODE_IP, dst: ip.local, dport: 80, origin: "host" },
    ],
    [
      "node -> orders ClusterIP (no endpoints)",
      { proto: "tcp", src: NODE_IP, dst: ip.orders, dport: 80, origin: "host" },
    ],
    [
      "node -> NodePort on its own address",
      { proto: "tcp", src: NODE_IP, dst: NODE_IP, dport: NODE_PORT, origin: "host" },
    ],
  ];
  return list.map(([name, f], i): NamedFlow => ({ name, flow: { ...f, sport: base + i } }));
}

const STICKY_NAME = "pod -> sticky ClusterIP (ClientIP affinity)";
/** The sticky Service again from the same pod, answered from evidence collected after the first. */
const AFFINITY = "pod -> sticky ClusterIP again (the affinity kept)";

/**
 * Flows kube-proxy's two modes answer differently on purpose, by its documentation: the kernel
 * must show the difference, and podpath must follow each mode.
 */
const MODES_DIFFER: Readonly<Record<string, string>> = {
  "pod -> web ClusterIP on a port it does not serve":
    "nftables mode rejects a ClusterIP's unused ports (KEP-3866); iptables mode routes them on",
  "pod -> NodePort on the node's pod-side address":
    "nftables mode takes NodePorts only on the node's primary address (--nodeport-addresses primary, its default); iptables mode on every local address",
};

/**
 * Flows whose evidence differs between the modes: podpath's nftables-mode answer may be narrower
 * (one of the iptables-mode answer's outcomes), the kernel's verdict is of the same kind.
 */
const EVIDENCE_DIFFERS: Readonly<Record<string, string>> = {
  [AFFINITY]:
    "nftables mode's affinity sets are in `nft list ruleset` (with their elements); iptables mode's `-m recent` lists are not in iptables-save (/proc/net/xt_recent)",
};

/**
 * Flows podpath leaves undecided where the kernel decides, with why: each must still be
 * undecided (once decided, it is held to the kernel like every other flow: take it off the list).
 */
const KNOWN_GAPS: Readonly<Record<string, string>> = {};

/** podpath's outcomes as a sorted list of words (undecided reasons left out). */
function podpathSet(outcomes: Parameters<typeof podpathWords>[0]): string[] {
  const words = outcomes.map((o) =>
    o.verdict.kind === "undecided" ? "undecided" : podpathWords([o]),
  );
  return [...new Set(words)].sort();
}

/** The kernel's verdict as the modes are compared: a forwarded packet without its endpoint. */
function kernelKind(words: string): string {
  return words.startsWith("forwarded ") ? "forwarded" : words;
}

/** podpath's answer to one flow, and how it stands to the kernel's verdict. */
function answer(ev: PathEvaluator, name: string, f: PathFlow, seen: KernelPathVerdict): FlowAnswer {
  const kernel = kernelWords(seen);
  const r = ev.evaluate(pathPacketOf(f));
  const tests = r.outcomes.map((o) => outcomeTest(o, f));
  return {
    name,
    kernel,
    podpath: podpathSet(r.outcomes),
    words: podpathWords(r.outcomes),
    agree: tests.some((x) => x === undefined || x(kernel)),
    decided: tests.every((x) => x !== undefined),
    admits: (k) => tests.some((x) => x === undefined || x(k)),
  };
}

interface FlowAnswer {
  readonly name: string;
  readonly kernel: string;
  readonly podpath: string[];
  /** podpath's outcomes in words, undecided reasons included. */
  readonly words: string;
  readonly agree: boolean;
  readonly decided: boolean;
  /** Whether podpath's outcomes for this flow admit the kernel's words `k`. */
  readonly admits: (k: string) => boolean;
}

describe("the whole path on a real kube-proxy node (iptables and nftables mode) against the kernel", {
  skip,
}, () => {
  let cluster: Cluster | undefined;
  let sb: PathSandbox | undefined;
  let node: Namespace | undefined;
  let outer: { close(): void } | undefined;
  let running: ChildProcess | undefined;
  let dir = "";
  let log = "";
  const ips: Record<ServiceName, string> = {
    web: "",
    kubernetes: "",
    orders: "",
    shop: "",
    sticky: "",
    local: "",
  };
  const answers = new Map<Mode, FlowAnswer[]>();

  let rootBefore = "";

  before(async () => {
    rootBefore = await rootNamespaceHash();
    dir = mkdtempSync(join(tmpdir(), "podpath-kube-proxy-path-"));
    // default/kubernetes goes to the node itself: its EndpointSlice is ours
    cluster = await startCluster({ apiServerArgs: ["--endpoint-reconciler-type=none"] });
    sb = await createPathSandbox();
    node = sb.lab.namespaces.find((n) => n.role === "node");
    assert.ok(node, "the sandbox has a node namespace");
    outer = await reachApiFrom(
      node,
      Number(new URL(cluster.url).port),
      join(dir, "api.sock"),
      INNER_PORT,
    );
    writeInnerKubeconfig(join(dir, "kubeconfig"), cluster, INNER_PORT);
    await createServices(cluster);
  });
  after(async () => {
    await stopProxy();
    await sb?.destroy();
    outer?.close();
    await cluster?.stop();
    if (process.env["PODPATH_KEEP_SNAPSHOTS"]) console.log(`snapshots kept in ${dir}`);
    else if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function createServices(c: Cluster): Promise<void> {
    const send = async (method: string, path: string, body: unknown) => {
      const r = await c.api(method, path, c.adminToken, body);
      assert.ok(
        [200, 201].includes(r.status),
        `${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`,
      );
      return r.body as Record<string, unknown>;
    };
    const n = await send("POST", "/api/v1/nodes", {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: NODE },
    });
    await send("PUT", `/api/v1/nodes/${NODE}/status`, {
      ...n,
      status: { addresses: [{ type: "InternalIP", address: NODE_IP }] },
    });
    const service = async (name: string, spec: Record<string, unknown>) => {
      const s = await send("POST", "/api/v1/namespaces/default/services", {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name },
        spec: { type: "ClusterIP", ...spec },
      });
      return (s["spec"] as { clusterIP: string }).clusterIP;
    };
    const slice = (
      svc: string,
      portName: string,
      port: number,
      addrs: readonly string[],
      more: readonly { name: string; port: number; protocol: string }[] = [],
    ) => ({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: svc,
        namespace: "default",
        labels: {
          "kubernetes.io/service-name": svc,
          "endpointslice.kubernetes.io/managed-by": "podpath-test",
        },
      },
      addressType: "IPv4",
      ports: [{ name: portName, port, protocol: "TCP" }, ...more],
      endpoints: addrs.map((a) => ({
        addresses: [a],
        conditions: { ready: true },
        nodeName: a === NODE_IP ? NODE : "node2",
      })),
    });
    const slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
    const http = [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }];
    // web serves DNS too (UDP): kube-proxy's UDP rules, and the node's own datagram masqueraded
    const dns = { name: "dns", port: 53, targetPort: 5353, protocol: "UDP" };
    ips.web = await service("web", { ports: [...http, dns] });
    await send(
      "POST",
      slices,
      slice("web", "http", 8080, ENDPOINTS.web, [{ name: "dns", port: 5353, protocol: "UDP" }]),
    );
    ips.orders = await service("orders", { ports: http });
    // shop: a LoadBalancer (its NodePort, an external IP, and the balancer's address in its status)
    ips.shop = await service("shop", {
      type: "LoadBalancer",
      ports: [{ ...http[0], nodePort: NODE_PORT }],
      externalIPs: [EXTERNAL_IP],
    });
    const shop = await send("GET", "/api/v1/namespaces/default/services/shop", undefined);
    await send("PUT", "/api/v1/namespaces/default/services/shop/status", {
      ...shop,
      status: { loadBalancer: { ingress: [{ ip: LB_IP }] } },
    });
    await send("POST", slices, slice("shop", "http", 8080, ENDPOINTS.shop));
    ips.sticky = await service("sticky", { ports: http, sessionAffinity: "ClientIP" });
    await send("POST", slices, slice("sticky", "http", 8080, ENDPOINTS.sticky));
    // local: its only endpoint on another node, and node-local traffic only (dropped here)
    ips.local = await service("local", { ports: http, internalTrafficPolicy: "Local" });
    await send("POST", slices, slice("local", "http", 8080, ENDPOINTS.local));
    // default/kubernetes: made by the API server itself; its endpoint, the node on 6443
    const kube = await c.api("GET", "/api/v1/namespaces/default/services/kubernetes", c.adminToken);
    ips.kubernetes = (kube.body as { spec: { clusterIP: string } }).spec.clusterIP;
    const apiSlice = slice("kubernetes", "https", API_ENDPOINT_PORT, [NODE_IP]);
    const old = await c.api("GET", `${slices}/kubernetes`, c.adminToken);
    if (old.status === 200) {
      const meta = (old.body as { metadata: Record<string, unknown> }).metadata;
      await send("PUT", `${slices}/kubernetes`, {
        ...apiSlice,
        metadata: { ...apiSlice.metadata, resourceVersion: meta["resourceVersion"] },
      });
    } else {
      await send("POST", slices, apiSlice);
    }
  }

  async function stopProxy(): Promise<void> {
    const p = running;
    running = undefined;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((r) => p.once("exit", r));
    p.kill("SIGTERM");
    await gone;
  }

  /** Polls `read` until `ready` holds of its answer; fails with kube-proxy's log otherwise. */
  async function waitFor(
    what: string,
    read: () => Promise<string>,
    ready: (s: string) => boolean,
  ): Promise<string> {
    const deadline = Date.now() + 180_000;
    for (;;) {
      const s = await read();
      if (ready(s)) return s;
      assert.ok(running && running.exitCode === null, `kube-proxy exited:\n${log}`);
      assert.ok(Date.now() < deadline, `${what} not written in 180 s:\n${log}\n${s}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** Whether every Service's rules are in the mode's listing. */
  function programmed(mode: Mode, text: string): boolean {
    const endpoints = [...ENDPOINTS.web, ...ENDPOINTS.shop, ...ENDPOINTS.sticky];
    if (mode === "iptables") {
      const dnat = text.split("\n").filter((l) => /^-A KUBE-SEP-\w+ .*-j DNAT/.test(l));
      return (
        [...endpoints, NODE_IP].every((a) =>
          dnat.some((l) => l.includes(`--to-destination ${a}:`)),
        ) &&
        [ips.web, ips.kubernetes, ips.shop, ips.sticky].every((a) => text.includes(`-d ${a}/32`)) &&
        text.includes(`-d ${ips.web}/32 -p udp`) &&
        [EXTERNAL_IP, LB_IP].every((a) => text.includes(`-d ${a}/32`)) &&
        new RegExp(`-d ${ips.local}/32 .*no local endpoints.* -j DROP`).test(text) &&
        new RegExp(`-d ${ips.orders}/32 .*-j REJECT`).test(text) &&
        new RegExp(`^-A KUBE-NODEPORTS .*--dport ${NODE_PORT} `, "m").test(text)
      );
    }
    const dnat = text.split("\n").filter((l) => / dnat (ip )?to /.test(l));
    return (
      [...endpoints, NODE_IP].every((a) =>
        dnat.some((l) => l.includes(`${a}:`) || l.includes(`${a} .`)),
      ) &&
      [ips.web, ips.shop, ips.sticky].every((a) =>
        text.includes(`${a} . tcp . 80 : goto service-`),
      ) &&
      text.includes(`${ips.kubernetes} . tcp . 443 : goto service-`) &&
      text.includes(`${ips.web} . udp . 53 : goto service-`) &&
      [EXTERNAL_IP, LB_IP].every((a) => text.includes(`${a} . tcp . 80 : goto external-`)) &&
      text.includes(`${ips.local} . tcp . 80 `) &&
      text.includes(`${ips.orders} . tcp . 80 `) &&
      text.includes(`tcp . ${NODE_PORT} : goto external-`) &&
      text.includes("table ip6 kube-proxy")
    );
  }

  /**
   * `nft list ruleset` without the sandbox's observers (iptables-nft rules, listed without their
   * comment: known by their exact form) and its security table.
   */
  function withoutSandbox(listing: string): string {
    const out: string[] = [];
    let skipping = false;
    for (const l of listing.split("\n")) {
      if (/^table ip security \{/.test(l)) skipping = true;
      if (!skipping && !OBSERVER_RULE.test(l)) out.push(l);
      if (skipping && l === "}") skipping = false;
    }
    return out.join("\n");
  }

  /**
   * The node's evidence as a snapshot holds it (the sandbox's own parts left out), written to
   * `snapshot-<name>/nodes/node1/`, read by loadSnapshot; the node's whole-path evaluator.
   */
  async function collect(mode: Mode, name: string): Promise<PathEvaluator> {
    const files = await sb!.nodeFiles();
    const nodeDir = join(dir, `snapshot-${name}`, "nodes", NODE);
    mkdirSync(nodeDir, { recursive: true });
    writeFileSync(join(nodeDir, "iptables-save.txt"), files.iptablesSave);
    if (mode === "nftables") {
      const listing = await must(node!, ["nft", "list", "ruleset"]);
      writeFileSync(join(nodeDir, "nft-ruleset.txt"), withoutSandbox(listing));
    }
    writeFileSync(join(nodeDir, "ip-rule.txt"), files.ipRule);
    writeFileSync(join(nodeDir, "ip-route.txt"), files.ipRoute);
    writeFileSync(join(nodeDir, "ip-addr.txt"), files.ipAddr);
    const snap = loadSnapshot(openSnapshot(join(dir, `snapshot-${name}`)));
    const ev = snap.nodes.get(NODE);
    assert.ok(ev, "the snapshot holds the node");
    assert.equal(ev.natFrom ?? "iptables", mode, "podpath reads the rules the kernel runs");
    // every rule read (no expression podpath does not know, no line it cannot parse)
    const problems = snap.diagnostics.filter((d) => d.severity !== "info");
    assert.deepEqual(problems, [], JSON.stringify(problems));
    const evaluator = nodePathEvaluator(ev);
    assert.ok(evaluator, "podpath builds the node's evaluator");
    return evaluator;
  }

  /**
   * Sends one TCP flow from the pod (a connection attempt, kept open until seen) and reads where
   * it left the node: the far hosts' captures, waited on until the flow's packet is there (a
   * packet the node keeps never reaches them: silent after 10 s).
   */
  async function sendFromPod(f: PathFlow, caps: FarCaptures): Promise<KernelPathVerdict> {
    const pod = sb!.lab.namespaces.find((n) => n.role === "pod")!;
    const to = { host: f.dst, port: f.dport, localAddress: f.src, localPort: f.sport };
    const sender = pod.spawn([
      process.execPath,
      "-e",
      `require("net").connect(${JSON.stringify(to)}).on("error", () => {});`,
    ]);
    try {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const p = caps.packets.find(
          (x) => x.proto === f.proto && x.src === f.src && x.sport === f.sport,
        );
        if (p) return { kind: "forwarded", dev: p.dev, src: p.src, dst: p.dst, dport: p.dport };
        if (Date.now() > deadline) return { kind: "silent" };
        await new Promise((r) => setTimeout(r, 10));
      }
    } finally {
      sender.kill();
    }
  }

  async function runMode(mode: Mode, t: { diagnostic(m: string): void }): Promise<FlowAnswer[]> {
    const started = Date.now();
    const flows = flowsFor(ips, mode === "iptables" ? 40_000 : 41_000);
    // the observers in empty tables (whatever the last mode left is flushed), then kube-proxy
    const err = await sb!.load(
      { seed: 0, restore: emptyRestore, ipRules: [], routes: REMOTE_ROUTES },
      flows.map((f) => f.flow),
    );
    assert.equal(err, undefined, err);
    await addDeliveryCounters(
      node!,
      flows.map((f) => f.flow),
    );
    log = "";
    running = spawnKubeProxy(
      node!,
      {
        kubeconfig: join(dir, "kubeconfig"),
        mode,
        hostname: NODE,
        nodeIp: NODE_IP,
        clusterCidr: "10.244.0.0/16",
      },
      (tail) => (log = tail),
    );
    const listCommand = mode === "iptables" ? ["iptables-save"] : ["nft", "list", "ruleset"];
    await waitFor(
      `${mode} rules`,
      () => must(node!, listCommand),
      (s) => programmed(mode, s),
    );
    const written = Date.now();

    const evaluator = await collect(mode, mode);

    // kube-proxy's masquerade picks a new source port: captures on the far hosts and the node's
    // conntrack say where such a flow went
    const caps = await startFarCaptures(
      (["far0", "far1"] as const).map((role, k) => ({
        ns: sb!.lab.namespaces.find((n) => n.role === role)!,
        dev: `eth${k}`,
      })),
    );
    const out: FlowAnswer[] = [];
    try {
      const sent = flows.map((f) => f.flow);
      const seen = await unmasked(node!, sent, await sb!.observe(sent), caps);
      out.push(...flows.map(({ name, flow: f }, i) => answer(evaluator, name, f, seen[i]!)));
      // the sticky Service again, from the same pod: the kernel keeps it on the endpoint it chose,
      // and the node's evidence, collected again, is what podpath answers from
      const sticky = flows.find((f) => f.name === STICKY_NAME)!.flow;
      const again: PathFlow = { ...sticky, sport: sticky.sport! + 50 };
      const later = await collect(mode, `${mode}-after`);
      const sentAgain = await sendFromPod(again, caps);
      out.push(answer(later, AFFINITY, again, sentAgain));
    } finally {
      caps.stop();
    }
    t.diagnostic(
      `${mode} mode: ${out.length} flows, ${out.filter((a) => a.agree).length} agree with the kernel, ${out.filter((a) => a.decided).length} decided; rules written in ${Math.round((written - started) / 1000)} s, ${Date.now() - started} ms in all`,
    );
    for (const a of out) t.diagnostic(`  ${a.name}: kernel ${a.kernel}; podpath ${a.words}`);
    await stopProxy();
    return out;
  }

  for (const mode of ["iptables", "nftables"] as const) {
    it(`${mode} mode: podpath's whole path agrees with the kernel on every flow`, async (t) => {
      const out = await runMode(mode, t);
      answers.set(mode, out);
      const wrong = out.filter((a) => !a.agree || (!a.decided && KNOWN_GAPS[a.name] === undefined));
      assert.deepEqual(wrong, [], JSON.stringify(out, null, 2));
      // the kernel kept the affinity, and podpath reads nftables mode's affinity set
      const first = out.find((a) => a.name === STICKY_NAME)!;
      const again = out.find((a) => a.name === AFFINITY)!;
      const dst = (k: string) => k.split(" > ")[1];
      assert.equal(dst(again.kernel), dst(first.kernel), `${again.kernel} after ${first.kernel}`);
      if (mode === "nftables") assert.equal(again.podpath.length, 1, again.words);
      for (const a of out.filter((x) => KNOWN_GAPS[x.name] !== undefined)) {
        assert.ok(!a.decided, `${a.name} is decided now (${a.words}): take it off KNOWN_GAPS`);
        t.diagnostic(
          `known gap: ${a.name}: kernel ${a.kernel}; podpath ${a.words}: ${KNOWN_GAPS[a.name]}`,
        );
      }
    });
  }

  it("both modes give the same answers per flow, where kube-proxy's modes are meant to agree", () => {
    const ipt = answers.get("iptables");
    const nft = answers.get("nftables");
    assert.ok(ipt && nft, "both modes ran");
    for (const [i, a] of ipt.entries()) {
      const b: FlowAnswer = nft[i]!;
      const why = MODES_DIFFER[a.name];
      if (why !== undefined) {
        // the documented difference: the kernel shows it, and podpath follows each mode
        assert.notEqual(kernelKind(a.kernel), kernelKind(b.kernel), `${a.name}: ${why}`);
        continue;
      }
      if (EVIDENCE_DIFFERS[a.name] !== undefined) {
        assert.ok(
          b.podpath.every((w) => a.podpath.includes(w)),
          `${a.name}: ${b.words} within ${a.words} (${EVIDENCE_DIFFERS[a.name]})`,
        );
        assert.equal(
          kernelKind(b.kernel),
          kernelKind(a.kernel),
          `${a.name}: the kernel's verdicts`,
        );
        continue;
      }
      assert.deepEqual(b.podpath, a.podpath, `${a.name}: podpath's answers`);
      assert.equal(kernelKind(b.kernel), kernelKind(a.kernel), `${a.name}: the kernel's verdicts`);
      // the endpoint one mode's kernel chose is one the other mode's answer allows
      assert.ok(a.admits(b.kernel) && b.admits(a.kernel), `${a.name}: ${a.kernel} / ${b.kernel}`);
    }
  });

  it("leaves the root namespace as it was (kube-proxy ran in the sandbox's node only)", async () => {
    assert.equal(await rootNamespaceHash(), rootBefore);
  });
});
