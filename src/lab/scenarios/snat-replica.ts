/**
 * @module lab/scenarios/snat-replica — the single-node SNAT replica the owners' scenarios share
 * (aws-vpc-cni, kubenet, bridge-cni, calico, flannel, cilium): a pod on one node behind a router,
 * an on-prem host 10.20.30.40 that routes back only what the scenario says (the node range), and
 * optionally more hosts behind the router (the VPC host). The scenario gives what its owner
 * makes different: names and addresses, the node's and pod's own interface lines, the router's
 * routes, the owner's rules installer and the files it writes (cluster objects, owner files, site
 * files). This module builds the namespaces, starts the listeners, takes the captures (node
 * `-i any`, each far host's eth0), runs the probes (ping from node and pod, nc to the database
 * port from the pod), collects the kernel state and writes the snapshot.
 *
 * Topology (IPv4):
 *   pod ─ node (<hostVeth> · eth0 <node ip>/24) ─ router (br0 <router ip>/24 · [<extra>0] ·
 *     onprem0 10.20.0.1/16) ─ on-prem host (10.20.30.40/16) · [extra hosts (/24)]
 * With `spec.ipv6` the same links carry IPv6 too (dual stack, /64s, no DAD): the node's and the
 * router's /64 on eth0/br0, onprem0 fd00:20::1/64 ─ on-prem host fd00:20::30:40/64, the pod's
 * address beside its IPv4 one; the probes and captures add the IPv6 on-prem host, the snapshot
 * adds the node's ip6tables-save and its IPv6 routes.
 */
import { stringify } from "yaml";
import { z } from "zod";
import {
  type Capture,
  collectKernelState,
  runProbes,
  startCapture,
  stopProcess,
  writeSnapshotFile,
} from "../artifacts.ts";
import { KUBE_PROXY_RESTORE } from "../masq-rules.ts";
import { mustExec, type Namespace } from "../netns.ts";
import type { ScenarioContext, ScenarioOutcome } from "./index.ts";
import { DB_PORT, ONPREM_IP, ONPREM_PREFIX, SITE_NAME, startListener } from "./masquerade.ts";

const ROUTER_ONPREM_IP = "10.20.0.1";
/** The on-prem host's IPv6 address (in fd00:20::/64, as the GKE replica's) and its prefix. */
export const ONPREM_IP6 = "fd00:20::30:40";
export const ONPREM_PREFIX6 = "fd00:20::/64";
const ROUTER_ONPREM_IP6 = "fd00:20::1";
const CREATED_AT = "2026-01-01T00:00:00Z";

/** A boolean option as the CLI gives it: a bare `--flag` (true) or `--flag true|false`. */
export const boolText = z.union([z.boolean(), z.enum(["true", "false"])]);

/** True for a bare `--flag` or `--flag true`. */
export const isTrue = (v: boolean | "true" | "false" | undefined): boolean =>
  v === true || v === "true";

/** A comma-separated CIDR list option (`--routes-back`), blanks dropped. */
export const cidrList = (text: string): string[] =>
  text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");

/** Runs `argv` in `ns`; a non-zero exit throws with its stderr (netns's mustExec). */
export const must = mustExec;

/** `ip -batch -` with `lines` in `ns`. */
export const ipBatch = (ns: Namespace, lines: readonly string[]) =>
  must(ns, ["ip", "-batch", "-"], `${lines.join("\n")}\n`);

/** Object metadata as the replicas' objects carry it. */
export const meta = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  creationTimestamp: CREATED_AT,
  resourceVersion: "1000",
  ...extra,
});

/** The billing app's pod as the API server returns it. */
export function appPod(p: {
  name: string;
  namespace: string;
  nodeName: string;
  nodeIp: string;
  podIp: string;
  /** Dual stack: the pod's IPv6 address, listed second in `podIPs`. */
  podIp6?: string;
  annotations?: Record<string, string>;
}): unknown {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta(p.name, {
      namespace: p.namespace,
      labels: { app: "billing" },
      ...(p.annotations ? { annotations: p.annotations } : {}),
    }),
    spec: {
      nodeName: p.nodeName,
      containers: [{ name: "app", image: "registry.example/billing:1.4" }],
    },
    status: {
      phase: "Running",
      hostIP: p.nodeIp,
      podIP: p.podIp,
      podIPs: [{ ip: p.podIp }, ...(p.podIp6 ? [{ ip: p.podIp6 }] : [])],
    },
  };
}

/** The replica's Node as the API server returns it (Ready, its InternalIP and Hostname). */
export function nodeObject(n: {
  name: string;
  ip: string;
  /** Dual stack: the node's IPv6 InternalIP. */
  ip6?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  spec: Record<string, unknown>;
  nodeInfo: Record<string, string>;
}): unknown {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: meta(n.name, {
      labels: { ...n.labels, "kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux" },
      ...(n.annotations ? { annotations: n.annotations } : {}),
    }),
    spec: n.spec,
    status: {
      addresses: [
        { address: n.ip, type: "InternalIP" },
        ...(n.ip6 ? [{ address: n.ip6, type: "InternalIP" }] : []),
        { address: n.name, type: "Hostname" },
      ],
      conditions: [{ status: "True", type: "Ready", reason: "KubeletReady" }],
      nodeInfo: n.nodeInfo,
    },
  };
}

/** An owner's DaemonSet and its one pod on the node (host network, node-critical). */
export function daemonSetAndPod(d: {
  name: string;
  namespace: string;
  labels: Record<string, string>;
  selector: Record<string, string>;
  podName: string;
  podSpec: Record<string, unknown>;
  nodeName: string;
  nodeIp: string;
}): [unknown, unknown] {
  const ds = {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: meta(d.name, { namespace: d.namespace, labels: d.labels }),
    spec: {
      selector: { matchLabels: d.selector },
      template: { metadata: { labels: d.labels }, spec: d.podSpec },
    },
    status: { desiredNumberScheduled: 1, numberReady: 1 },
  };
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta(d.podName, {
      namespace: d.namespace,
      labels: d.labels,
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "DaemonSet", name: d.name, controller: true },
      ],
    }),
    spec: { ...d.podSpec, nodeName: d.nodeName },
    status: { phase: "Running", hostIP: d.nodeIp, podIP: d.nodeIp },
  };
  return [ds, pod];
}

/**
 * The on-prem site in podpath's RemoteSite schema: its prefix, what it routes back, and optionally
 * the VPN's selectors and the database firewall's allowlist (the routes-back ranges); YAML, or one
 * line of JSON (which RemoteSite files may also be).
 */
export function onpremSite(
  routesBack: readonly string[],
  opts: { vpn?: boolean; allowlist?: boolean; json?: boolean; ipv6?: boolean } = {},
): string {
  const prefixes = [ONPREM_PREFIX, ...(opts.ipv6 ? [ONPREM_PREFIX6] : [])];
  const site = {
    kind: "RemoteSite",
    name: SITE_NAME,
    prefixes,
    routesBack: [...routesBack],
    ...(opts.vpn
      ? {
          vpn: {
            kind: "ipsec",
            localTrafficSelectors: [...routesBack],
            remoteTrafficSelectors: prefixes,
          },
        }
      : {}),
    ...(opts.allowlist
      ? {
          allowlists: [
            {
              name: "db-firewall",
              sources: [...routesBack],
              destinations: [`${ONPREM_IP}/32`, ...(opts.ipv6 ? [`${ONPREM_IP6}/128`] : [])],
              ports: [`tcp/${DB_PORT}`],
            },
          ],
        }
      : {}),
  };
  return opts.json ? `${JSON.stringify(site)}\n` : stringify(site);
}

/** A host behind the router besides the on-prem one (its own /24 on a router interface). */
export interface ExtraHost {
  /** Namespace name in the lab. */
  readonly ns: string;
  /** The router's interface toward it. */
  readonly routerIface: string;
  readonly routerIp: string;
  readonly ip: string;
  /** Its remote site name (capture `remote-<site>`). */
  readonly site: string;
  /** How the summary names it ("VPC host"). */
  readonly label: string;
}

/** One snapshot file: path relative to the snapshot root, and its content. */
export type SnapshotText = readonly [rel: string, content: string];

/** The namespaces of a built replica. */
export interface SnatReplica {
  readonly router: Namespace;
  readonly onprem: Namespace;
  readonly node: Namespace;
  readonly pod: Namespace;
  /** In the order of `spec.extraHosts`. */
  readonly extra: readonly Namespace[];
}

/**
 * How the pod hangs off the node. "bridge": the node's bridge holds the gateway (/24), the pod's
 * veth is on it, the pod has a /24 and its default via the gateway. "routed": the pod has a /32,
 * an on-link gateway and the default via it; the node routes the /32 to the veth, whose MAC is
 * `hostMac`; `staticNeigh` gives the pod a permanent neighbour entry for the gateway (else the
 * node answers ARP, e.g. by proxy ARP in `sysctls`).
 */
export type PodAttachment =
  | { readonly kind: "bridge"; readonly bridge: string; readonly gateway: string }
  | {
      readonly kind: "routed";
      readonly gateway: string;
      readonly hostMac: string;
      readonly staticNeigh: boolean;
    };

/** The node's and the pod's `ip -batch` lines for an attachment. */
export function attachmentLines(
  a: PodAttachment,
  hostVeth: string,
  podIp: string,
): { node: string[]; pod: string[] } {
  if (a.kind === "bridge") {
    return {
      node: [
        `link add ${a.bridge} type bridge`,
        `addr add ${a.gateway}/24 dev ${a.bridge}`,
        `link set ${a.bridge} up`,
        `link set ${hostVeth} master ${a.bridge}`,
        `link set ${hostVeth} up`,
      ],
      pod: [
        `addr add ${podIp}/24 dev eth0`,
        "link set eth0 up",
        `route add default via ${a.gateway}`,
      ],
    };
  }
  return {
    node: [
      `link set ${hostVeth} address ${a.hostMac}`,
      `link set ${hostVeth} up`,
      `route add ${podIp}/32 dev ${hostVeth} scope link`,
    ],
    pod: [
      `addr add ${podIp}/32 dev eth0`,
      "link set eth0 up",
      `route add ${a.gateway} dev eth0 scope link`,
      `route add default via ${a.gateway} dev eth0`,
      ...(a.staticNeigh
        ? [`neigh add ${a.gateway} lladdr ${a.hostMac} dev eth0 nud permanent`]
        : []),
    ],
  };
}

/**
 * The node's and the pod's IPv6 `ip -batch` lines for an attachment (addresses added without
 * DAD). "bridge": the gateway's /64 on the bridge, the pod's /64. "routed": the pod's /128, the
 * node's route to it; the pod reaches its gateway through a permanent neighbour entry for the
 * veth's MAC (nothing answers neighbour solicitations for it otherwise).
 */
export function attachmentLines6(
  a: PodAttachment,
  hostVeth: string,
  v6: { readonly podIp: string; readonly gateway: string },
): { node: string[]; pod: string[] } {
  if (a.kind === "bridge") {
    return {
      node: [`addr add ${v6.gateway}/64 dev ${a.bridge} nodad`],
      pod: [`addr add ${v6.podIp}/64 dev eth0 nodad`, `route add default via ${v6.gateway}`],
    };
  }
  return {
    node: [`route add ${v6.podIp}/128 dev ${hostVeth}`],
    pod: [
      `addr add ${v6.podIp}/128 dev eth0 nodad`,
      `route add ${v6.gateway} dev eth0`,
      `neigh add ${v6.gateway} lladdr ${a.hostMac} dev eth0 nud permanent`,
      `route add default via ${v6.gateway} dev eth0`,
    ],
  };
}

/** The replica's IPv6 side (dual stack): the owner's addresses and what routes back. */
export interface SnatReplicaV6 {
  /** The node's address on eth0 (/64 shared with the router). */
  readonly nodeIp: string;
  readonly routerIp: string;
  readonly podIp: string;
  /** The pod's gateway (on the bridge, or the routed pod's on-link gateway). */
  readonly gateway: string;
  /** The router's IPv6 routes toward the node's pods (`ip -batch` lines). */
  readonly routerLines?: readonly string[];
  /** What the on-prem host routes back to the router (IPv6 prefixes). */
  readonly routesBack: readonly string[];
}

/** What a scenario's owner makes different in the replica. */
export interface SnatReplicaSpec {
  /** Progress line: `building <title> replica <lab id>[ (<note>)]`. */
  readonly title: string;
  readonly note?: string;
  readonly phase: "before" | "after";
  readonly node: {
    readonly name: string;
    readonly ip: string;
    /** The router's address on the node's /24 (the node's default gateway). */
    readonly routerIp: string;
    /** The node's end of the pod's veth pair. */
    readonly hostVeth: string;
    /** The owner's own node lines for `ip -batch`, before the pod's attachment. */
    readonly lines?: readonly string[];
    /** sysctl `key=value`s set after ip_forward. */
    readonly sysctls?: readonly string[];
  };
  readonly pod: {
    readonly name: string;
    readonly namespace: string;
    readonly ip: string;
    readonly attach: PodAttachment;
  };
  /** The router's routes toward the node's pods (`ip -batch` lines). */
  readonly routerLines?: readonly string[];
  /** What the on-prem host routes back to the router. */
  readonly routesBack: readonly string[];
  readonly extraHosts?: readonly ExtraHost[];
  /** Dual stack: the IPv6 side, when the owner's scenario asks for it. */
  readonly ipv6?: SnatReplicaV6;
  /** Load kube-proxy's nat scaffolding before the owner's rules. */
  readonly kubeProxy: boolean;
  /** Adds the owner's rules (and sets) to the node. */
  readonly install: (node: Namespace) => Promise<void>;
  /** The node probe's transcript (default `probes/node.txt`). */
  readonly nodeProbeFile?: string;
  /** How the summary names the on-prem host's tcp probe ("on-prem"); none by default. */
  readonly onpremLabel?: string;
  /** The owner's files, written after the kernel state (cluster objects, node files, sites). */
  readonly files: (r: SnatReplica) => Promise<readonly SnapshotText[]>;
}

async function build(ctx: ScenarioContext, spec: SnatReplicaSpec): Promise<SnatReplica> {
  const { lab } = ctx;
  const extras = spec.extraHosts ?? [];
  const n = spec.node;
  const router = await lab.addNamespace("router");
  const onprem = await lab.addNamespace("onprem");
  const extra: Namespace[] = [];
  for (const h of extras) extra.push(await lab.addNamespace(h.ns));
  const node = await lab.addNamespace("node");
  const pod = await lab.addNamespace("pod");
  await lab.link(router, "onprem0", onprem, "eth0");
  for (const [i, h] of extras.entries()) {
    const ns = extra[i];
    if (ns) await lab.link(router, h.routerIface, ns, "eth0");
  }
  await lab.link(node, "eth0", router, "br0");
  await lab.link(pod, "eth0", node, n.hostVeth);
  await ipBatch(router, [
    `addr add ${n.routerIp}/24 dev br0`,
    ...extras.map((h) => `addr add ${h.routerIp}/24 dev ${h.routerIface}`),
    `addr add ${ROUTER_ONPREM_IP}/16 dev onprem0`,
    "link set br0 up",
    ...extras.map((h) => `link set ${h.routerIface} up`),
    "link set onprem0 up",
    ...(spec.routerLines ?? []),
  ]);
  await must(router, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await ipBatch(onprem, [
    `addr add ${ONPREM_IP}/16 dev eth0`,
    "link set eth0 up",
    ...spec.routesBack.map((c) => `route add ${c} via ${ROUTER_ONPREM_IP}`),
  ]);
  const v6 = spec.ipv6;
  if (v6) {
    await ipBatch(router, [
      `addr add ${v6.routerIp}/64 dev br0 nodad`,
      `addr add ${ROUTER_ONPREM_IP6}/64 dev onprem0 nodad`,
      ...(v6.routerLines ?? []),
    ]);
    await must(router, ["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]);
    await ipBatch(onprem, [
      `addr add ${ONPREM_IP6}/64 dev eth0 nodad`,
      ...v6.routesBack.map((c) => `route add ${c} via ${ROUTER_ONPREM_IP6}`),
    ]);
  }
  for (const [i, h] of extras.entries()) {
    const ns = extra[i];
    if (!ns) continue;
    await ipBatch(ns, [
      `addr add ${h.ip}/24 dev eth0`,
      "link set eth0 up",
      `route add default via ${h.routerIp}`,
    ]);
  }
  const attach = attachmentLines(spec.pod.attach, n.hostVeth, spec.pod.ip);
  await ipBatch(node, [
    `addr add ${n.ip}/24 dev eth0`,
    "link set eth0 up",
    ...(n.lines ?? []),
    ...attach.node,
    `route add default via ${n.routerIp}`,
  ]);
  await must(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  for (const s of n.sysctls ?? []) await must(node, ["sysctl", "-q", "-w", s]);
  await ipBatch(pod, attach.pod);
  if (v6) {
    const a6 = attachmentLines6(spec.pod.attach, n.hostVeth, v6);
    await ipBatch(node, [
      `addr add ${v6.nodeIp}/64 dev eth0 nodad`,
      ...a6.node,
      `route add default via ${v6.routerIp}`,
    ]);
    await must(node, ["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]);
    await ipBatch(pod, a6.pod);
    // both hops of the node's own way to on-prem
    await ipv6Reachable(node, v6.routerIp);
    await ipv6Reachable(router, ONPREM_IP6);
  }
  if (spec.kubeProxy) {
    await must(node, ["iptables-restore", "--noflush", "-w"], KUBE_PROXY_RESTORE);
  }
  await spec.install(node);
  return { router, onprem, node, pod, extra };
}

/**
 * Waits until `ns` reaches `ip` over IPv6 (a loaded machine takes a while after the links come
 * up before neighbour discovery across the router's bridge answers), at most 20 s; after that
 * the probes run anyway and show what they see.
 */
async function ipv6Reachable(ns: Namespace, ip: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const r = await ns.exec(["ping", "-6", "-c", "1", "-W", "1", ip]);
    if (r.code === 0) return;
  }
}

const PING = ["ping", "-c", "3", "-i", "0.2", "-W", "1"] as const;
const nc = (ip: string) => ["nc", "-v", "-N", "-w", "2", ip, String(DB_PORT)];
const ncStep = (ip: string) => ({
  shown: `${nc(ip).join(" ")} </dev/null`,
  argv: nc(ip),
  input: "",
  stderrFirst: true,
});

async function probeAndSnapshot(
  out: string,
  spec: SnatReplicaSpec,
  r: SnatReplica,
): Promise<ScenarioOutcome> {
  const extras = spec.extraHosts ?? [];
  const { phase, pod } = spec;
  const node = spec.node.name;
  const files: string[] = [];
  const captures: Capture[] = [
    await startCapture(r.node, out, "node", {
      iface: "any",
      filter: [ONPREM_IP, ...(spec.ipv6 ? [ONPREM_IP6] : []), ...extras.map((h) => h.ip)]
        .map((ip) => `host ${ip}`)
        .join(" or "),
      point: `node/${node}`,
      phase,
    }),
    await startCapture(r.onprem, out, `remote-${SITE_NAME}`, {
      iface: "eth0",
      filter: `host ${ONPREM_IP}${spec.ipv6 ? ` or host ${ONPREM_IP6}` : ""}`,
      point: `remote/${SITE_NAME}`,
      phase,
    }),
  ];
  for (const [i, h] of extras.entries()) {
    const ns = r.extra[i];
    if (!ns) continue;
    captures.push(
      await startCapture(ns, out, `remote-${h.site}`, {
        iface: "eth0",
        filter: `host ${h.ip}`,
        point: `remote/${h.site}`,
        phase,
      }),
    );
  }
  const summary: string[] = [];
  try {
    const v6 = spec.ipv6 !== undefined;
    const nodeProbe = await runProbes(r.node, [
      { shown: `${PING.join(" ")} ${ONPREM_IP}`, argv: [...PING, ONPREM_IP] },
      ...(v6 ? [{ shown: `${PING.join(" ")} ${ONPREM_IP6}`, argv: [...PING, ONPREM_IP6] }] : []),
    ]);
    files.push(
      writeSnapshotFile(
        out,
        spec.nodeProbeFile ?? "probes/node.txt",
        `# client: node/${node}\n${nodeProbe.transcript}`,
      ),
    );
    const podProbe = await runProbes(r.pod, [
      { shown: `${PING.join(" ")} ${ONPREM_IP}`, argv: [...PING, ONPREM_IP] },
      ncStep(ONPREM_IP),
      ...extras.map((h) => ncStep(h.ip)),
      ...(v6
        ? [
            { shown: `${PING.join(" ")} ${ONPREM_IP6}`, argv: [...PING, ONPREM_IP6] },
            ncStep(ONPREM_IP6),
          ]
        : []),
    ]);
    files.push(
      writeSnapshotFile(
        out,
        `probes/pod-${pod.name}.txt`,
        `# client: pod/${pod.namespace}/${pod.name}\n${podProbe.transcript}`,
      ),
    );
    const ok = (code: number | undefined) => (code === 0 ? "answers" : "silent");
    const label = spec.onpremLabel ? ` ${spec.onpremLabel}` : "";
    summary.push(
      [
        `node ping ${ONPREM_IP} ${ok(nodeProbe.results[0]?.code)}`,
        `pod ping ${ok(podProbe.results[0]?.code)}`,
        `pod tcp/${DB_PORT}${label} ${ok(podProbe.results[1]?.code)}`,
        ...extras.map(
          (h, i) => `pod tcp/${DB_PORT} ${h.label} ${ok(podProbe.results[2 + i]?.code)}`,
        ),
      ].join(", "),
    );
    if (v6) {
      const at = 2 + extras.length;
      summary.push(
        [
          `IPv6: node ping ${ONPREM_IP6} ${ok(nodeProbe.results[1]?.code)}`,
          `pod ping ${ok(podProbe.results[at]?.code)}`,
          `pod tcp/${DB_PORT} ${ok(podProbe.results[at + 1]?.code)}`,
        ].join(", "),
      );
    }
  } finally {
    // the capture helper offers no condition to wait for (packets written): the last replies
    // are given a moment to reach tcpdump before it is stopped
    await new Promise((res) => setTimeout(res, 200));
    for (const c of captures) await c.stop();
  }
  for (const c of captures) files.push(c.rel, c.rel.replace(/\.pcap$/, ".yaml"));
  // dual stack: the IPv6 routes follow the IPv4 ones in one file, as
  // `ip route show; ip -6 route show` prints them
  const routes = spec.ipv6 ? ([] as const) : (["ip-route"] as const);
  files.push(
    ...(await collectKernelState(r.node, out, `nodes/${node}`, [
      "iptables-save",
      ...(spec.ipv6 ? (["ip6tables-save"] as const) : []),
      ...routes,
      "ip-addr",
      "sysctl",
      "conntrack",
    ])),
    ...(await collectKernelState(r.pod, out, `pods/${pod.namespace}/${pod.name}`, [
      ...routes,
      "ip-addr",
      "sysctl",
    ])),
  );
  if (spec.ipv6) {
    for (const [ns, dir] of [
      [r.node, `nodes/${node}`],
      [r.pod, `pods/${pod.namespace}/${pod.name}`],
    ] as const) {
      const v4 = await must(ns, ["ip", "route", "show"]);
      const v6 = await must(ns, ["ip", "-6", "route", "show"]);
      files.push(writeSnapshotFile(out, `${dir}/ip-route.txt`, `${v4}${v6}`));
    }
  }
  for (const [rel, content] of await spec.files(r)) {
    files.push(writeSnapshotFile(out, rel, content));
  }
  return { files, summary };
}

/**
 * Builds the replica in `ctx.lab` and starts the listeners; with `ctx.outDir`, probes, captures
 * and writes the snapshot there (and stops the listeners), otherwise says how to enter it.
 */
export async function runSnatReplica(
  ctx: ScenarioContext,
  spec: SnatReplicaSpec,
): Promise<ScenarioOutcome> {
  ctx.log(`building ${spec.title} replica ${ctx.lab.id}${spec.note ? ` (${spec.note})` : ""}`);
  const r = await build(ctx, spec);
  const extras = spec.extraHosts ?? [];
  const listeners = [await startListener(r.onprem, spec.ipv6 !== undefined)];
  for (const ns of r.extra) listeners.push(await startListener(ns, false));
  try {
    if (ctx.outDir === undefined) {
      const hosts = [`on-prem ${ONPREM_IP}`, ...extras.map((h) => `${h.label} ${h.ip}`)];
      return {
        files: [],
        summary: [
          `${hosts.join(" and ")} ${hosts.length > 1 ? "listen" : "listens"} on tcp/${DB_PORT}`,
          `node ${spec.node.name}: ip netns exec ${r.node.name} …   pod ${spec.pod.ip}: ip netns exec ${r.pod.name} …`,
        ],
      };
    }
    return await probeAndSnapshot(ctx.outDir, spec, r);
  } finally {
    if (ctx.outDir !== undefined) for (const l of listeners) await stopProcess(l);
  }
}
