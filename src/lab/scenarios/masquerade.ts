/**
 * @module lab/scenarios/masquerade — the replica of case A ("node can ping on-prem, pod cannot"):
 * per node pool a node namespace (eth0 in the VPC subnet, ip_forward=1, the nat rules
 * ip-masq-agent writes for the config — or, where the agent does not run, the OLD rules) with one
 * app pod behind it; a router standing for the VPC and the VPN; and the on-prem host whose routes
 * back cover only `--routes-back`. Probes ping from node and pods and open a TCP connection to a
 * listener on the on-prem host, with tcpdump at each node (`-i any`) and on-prem. `--rules old`
 * leaves the old rules on agent nodes too (the agent has not applied the config yet);
 * `--kube-proxy` adds kube-proxy's KUBE-POSTROUTING scaffolding ahead of the agent's jump.
 * The on-prem host enforces the allowlist `remote/onprem-dc1.yaml` describes (`--allow`) with
 * iptables filter rules in its own namespace: tcp/5432 from other sources is dropped silently.
 *
 * Topology (IPv4; with --ipv6 the same again in fd00::/8 where the kernel allows):
 *   pod i (10.4.i.5/24, eth0) ─ node i (gkeveth0 10.4.i.1/32 · eth0 10.128.0.(2+i)/20)
 *     ─ router (br0 10.128.0.1/20 · onprem0 10.20.0.1/16) ─ on-prem host (eth0 10.20.30.40/16)
 */
import { readFileSync } from "node:fs";
import { stringify } from "yaml";
import { z } from "zod";
import type { MasqConfig } from "../../agents/ip-masq-agent/config.ts";
import { tryParseCidr } from "../../net/cidr.ts";
import {
  type Capture,
  collectKernelState,
  runProbes,
  startCapture,
  stopProcess,
  writeSnapshotFile,
} from "../artifacts.ts";
import {
  AGENT_DEFAULT_NON_MASQUERADE,
  agentConfigFrom,
  installAgentRules,
  KUBE_PROXY_RESTORE,
  renderAgentConfig,
} from "../masq-rules.ts";
import { mustExec as must, type Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import {
  aksAgentConfig,
  aksAgentObjects,
  aksUserText,
  installAzureV2Rules,
  reconciledText,
} from "./masquerade-aks.ts";
import {
  agentObjects,
  appPodObjects,
  kubectlList,
  nodeObjects,
  type ReplicaDescription,
  type ReplicaNode,
} from "./masquerade-cluster.ts";

export const ONPREM_IP = "10.20.30.40";
export const ONPREM_PREFIX = "10.20.0.0/16";
export const CLUSTER_POD_RANGE = "10.4.0.0/14";
export const NODE_SUBNET = "10.128.0.0/20";
export const DB_PORT = 5432;
export const SITE_NAME = "onprem-dc1";
const ROUTER_ONPREM_IP = "10.20.0.1";
const ROUTER_NODE_IP = "10.128.0.1";
/** A fixed timestamp keeps the generated Kubernetes objects stable across regenerations. */
const CREATED_AT = "2026-01-01T00:00:00Z";

const cidrList = (what: string) =>
  z.string().transform((s, ctx) => {
    const items = s
      .split(",")
      .map((x) => x.trim())
      .filter((x) => x !== "");
    for (const c of items) {
      const r = tryParseCidr(c, { allowBareAddress: false });
      if ("error" in r) ctx.addIssue({ code: "custom", message: `${what}: ${c}: ${r.error}` });
    }
    return items;
  });

const poolList = z.string().transform((s, ctx) => {
  const pools: { name: string; hasAgent: boolean }[] = [];
  for (const item of s.split(",").filter((x) => x.trim() !== "")) {
    const [name = "", mode = "agent"] = item.trim().split(":");
    if (!/^[a-z][a-z0-9-]{0,19}$/.test(name)) {
      ctx.addIssue({ code: "custom", message: `--pools: pool name ${JSON.stringify(name)}` });
    } else if (mode !== "agent" && mode !== "no-agent") {
      ctx.addIssue({
        code: "custom",
        message: `--pools: ${item}: expected NAME:agent or NAME:no-agent`,
      });
    } else if (pools.some((p) => p.name === name)) {
      ctx.addIssue({ code: "custom", message: `--pools: pool ${name} given twice` });
    } else {
      pools.push({ name, hasAgent: mode === "agent" });
    }
  }
  if (pools.length === 0 || pools.length > 8) {
    ctx.addIssue({ code: "custom", message: "--pools: between 1 and 8 pools" });
  }
  return pools;
});

export const MasqueradeOptions = z
  .object({
    "non-masquerade": cidrList("--non-masquerade").optional(),
    "old-non-masquerade": cidrList("--old-non-masquerade").optional(),
    "routes-back": cidrList("--routes-back").default([NODE_SUBNET]),
    allow: cidrList("--allow").default([CLUSTER_POD_RANGE]),
    pools: poolList.default([{ name: "default", hasAgent: true }]),
    config: z.string().optional(),
    phase: z.enum(["before", "after"]).default("before"),
    rules: z.enum(["current", "old"]).default("current"),
    "kube-proxy": z.union([z.literal(true), z.enum(["true", "false"])]).optional(),
    ipv6: z.union([z.literal(true), z.enum(["true", "false"])]).optional(),
    /** aks: Azure ip-masq-agent-v2 with AKS's two ConfigMaps (masquerade-aks.ts). */
    flavour: z.enum(["gke", "aks"]).default("gke"),
  })
  .strict()
  .refine((o) => !(o.config !== undefined && o["non-masquerade"] !== undefined), {
    message: "give either --config or --non-masquerade, not both",
  });
export type MasqueradeOptions = z.output<typeof MasqueradeOptions>;

/** What the replica's nodes run, derived from the options (pure, for tests and the snapshot). */
export interface ReplicaPlan {
  readonly nodes: readonly ReplicaNode[];
  /** ConfigMap `config` text. */
  readonly configText: string;
  /** Why the agent rejects configText (then every node keeps the old rules). */
  readonly configError: string | undefined;
  /** Rules on nodes where the agent runs (from the config). */
  readonly current: MasqConfig;
  /** Rules on nodes without the agent (what an earlier agent run left). */
  readonly old: MasqConfig;
  /** Agent nodes hold the old rules too: the agent has not applied the config yet. */
  readonly agentLagging: boolean;
  /** kube-proxy's KUBE-POSTROUTING scaffolding is installed first, as on a real node. */
  readonly kubeProxy: boolean;
  readonly routesBack: readonly string[];
  readonly allow: readonly string[];
  readonly phase: "before" | "after";
  readonly ipv6: boolean;
  readonly flavour: "gke" | "aks";
  /** aks: the reconciled ConfigMap's text (AKS's own ranges); configText is the user's. */
  readonly reconciledText?: string;
}

/**
 * Derives the replica from options; throws Error with a user-facing message when --config cannot
 * be read or --old-non-masquerade is rejected. An invalid --config is replicated as the agent
 * handles it: it keeps running with the previous (old) config and its rules.
 */
export function planReplica(o: MasqueradeOptions): ReplicaPlan {
  const ipv6 = o.ipv6 === true || o.ipv6 === "true";
  const oldText = renderAgentConfig(o["old-non-masquerade"] ?? AGENT_DEFAULT_NON_MASQUERADE);
  const oldResult = agentConfigFrom(oldText, ipv6);
  if (oldResult.error) throw new Error(`--old-non-masquerade: ${oldResult.error.message}`);
  const old = oldResult.config;
  let configText: string;
  if (o.config !== undefined) {
    try {
      configText = readFileSync(o.config, "utf8");
    } catch (e) {
      throw new Error(`--config ${o.config}: cannot read (${(e as NodeJS.ErrnoException).code})`);
    }
  } else if (o.flavour === "aks") {
    configText = aksUserText(o["non-masquerade"] ?? AGENT_DEFAULT_NON_MASQUERADE);
  } else {
    configText = renderAgentConfig(o["non-masquerade"] ?? AGENT_DEFAULT_NON_MASQUERADE);
  }
  const reconciled =
    o.flavour === "aks" ? reconciledText([CLUSTER_POD_RANGE, NODE_SUBNET]) : undefined;
  const synced =
    reconciled === undefined
      ? agentConfigFrom(configText, ipv6, old)
      : aksAgentConfig(configText, reconciled, ipv6, old);
  if (synced.error && o.config === undefined) {
    throw new Error(`--non-masquerade: ${synced.error.message}`);
  }
  const current = synced.config;
  const configError = synced.error?.message;
  const nodes = o.pools.map((p, i) => ({
    name: `gke-lab-${p.name}-${i}`,
    pool: p.name,
    hasAgent: p.hasAgent,
    internalIp: `10.128.0.${2 + i}`,
    podCidr: `10.4.${i}.0/24`,
    podName: `billing-${p.name}`,
    podIp: `10.4.${i}.5`,
  }));
  return {
    nodes,
    configText,
    configError,
    current,
    old,
    agentLagging: o.rules === "old",
    kubeProxy: o["kube-proxy"] === true || o["kube-proxy"] === "true",
    routesBack: o["routes-back"],
    allow: o.allow,
    phase: o.phase,
    ipv6,
    flavour: o.flavour,
    ...(reconciled === undefined ? {} : { reconciledText: reconciled }),
  };
}

/** The far side as podpath's RemoteSite schema describes it. */
export function remoteSiteYaml(plan: ReplicaPlan): string {
  return stringify({
    kind: "RemoteSite",
    name: SITE_NAME,
    prefixes: [ONPREM_PREFIX],
    routesBack: [...plan.routesBack],
    vpn: {
      kind: "cloud-vpn-classic",
      localTrafficSelectors: [...plan.routesBack],
      remoteTrafficSelectors: [ONPREM_PREFIX],
    },
    allowlists: [
      {
        name: "db-firewall",
        sources: plan.allow,
        destinations: [`${ONPREM_IP}/32`],
        ports: [`tcp/${DB_PORT}`],
      },
    ],
  });
}

/** The chain on the on-prem host that holds the database firewall's allowlist. */
export const FIREWALL_CHAIN = "DB-FIREWALL";

/**
 * The far side's database firewall as `iptables-restore --noflush` input for the on-prem host's
 * own namespace (the host is the destination, so INPUT): tcp/5432 to the database from each
 * allowlisted IPv4 source is accepted, from any other source dropped. DROP, not REJECT: cloud
 * firewalls (GCP VPC firewall rules, AWS security groups) and the default-deny policy of the
 * usual perimeter or host firewall discard the packet without a word, so the client sees a
 * timeout and a capture sees SYNs with no answer; a REJECT would put a reset on the wire, an
 * answer from the destination.
 */
export function allowlistFilterRules(plan: ReplicaPlan): string {
  const sources = plan.allow.filter((c) => !c.includes(":"));
  return [
    "*filter",
    `:${FIREWALL_CHAIN} - [0:0]`,
    `-A INPUT -d ${ONPREM_IP}/32 -p tcp -m tcp --dport ${DB_PORT} -j ${FIREWALL_CHAIN}`,
    ...sources.map((c) => `-A ${FIREWALL_CHAIN} -s ${c} -j ACCEPT`),
    `-A ${FIREWALL_CHAIN} -j DROP`,
    "COMMIT",
    "",
  ].join("\n");
}

/** Runs `ip -batch -` so one process applies a whole list of ip commands. */
const ipBatch = (ns: Namespace, lines: readonly string[]) =>
  must(ns, ["ip", "-batch", "-"], `${lines.join("\n")}\n`);

const sysctl = (ns: Namespace, key: string, value: string) =>
  must(ns, ["sysctl", "-q", "-w", `${key}=${value}`]);

interface Built {
  readonly router: Namespace;
  readonly onprem: Namespace;
  readonly nodes: readonly {
    readonly ns: Namespace;
    readonly pod: Namespace;
    readonly node: ReplicaNode;
  }[];
  readonly ipv6: boolean;
}

/** Whether IPv6 works in a fresh namespace here (it may be disabled by boot parameters). */
async function ipv6Usable(ns: Namespace): Promise<boolean> {
  const r = await ns.exec(["sysctl", "-n", "net.ipv6.conf.all.disable_ipv6"]);
  return r.code === 0 && r.stdout.trim() === "0";
}

async function build(ctx: ScenarioContext, plan: ReplicaPlan): Promise<Built> {
  const { lab } = ctx;
  const router = await lab.addNamespace("router");
  const onprem = await lab.addNamespace("onprem");
  const ipv6 = plan.ipv6 && (await ipv6Usable(router));
  if (plan.ipv6 && !ipv6) ctx.log("IPv6 is disabled in this kernel; building IPv4 only");
  await lab.link(router, "onprem0", onprem, "eth0");
  await ipBatch(router, [
    "link add br0 type bridge",
    "link set br0 up",
    `addr add ${ROUTER_NODE_IP}/20 dev br0`,
    `addr add ${ROUTER_ONPREM_IP}/16 dev onprem0`,
    "link set onprem0 up",
    ...(ipv6
      ? ["addr add fd00:128::1/64 dev br0 nodad", "addr add fd00:20::1/64 dev onprem0 nodad"]
      : []),
  ]);
  await sysctl(router, "net.ipv4.ip_forward", "1");
  if (ipv6) await sysctl(router, "net.ipv6.conf.all.forwarding", "1");
  await ipBatch(onprem, [
    `addr add ${ONPREM_IP}/16 dev eth0`,
    "link set eth0 up",
    ...plan.routesBack
      .filter((c) => !c.includes(":"))
      .map((c) => `route add ${c} via ${ROUTER_ONPREM_IP}`),
    ...(ipv6
      ? [
          "addr add fd00:20::30:40/64 dev eth0 nodad",
          ...plan.routesBack
            .filter((c) => c.includes(":"))
            .map((c) => `route add ${c} via fd00:20::1`),
        ]
      : []),
  ]);
  await must(onprem, ["iptables-restore", "--noflush"], allowlistFilterRules(plan));

  const nodes: { ns: Namespace; pod: Namespace; node: ReplicaNode }[] = [];
  for (const [i, node] of plan.nodes.entries()) {
    const ns = await lab.addNamespace(`node${i}`);
    const pod = await lab.addNamespace(`pod${i}`);
    await lab.link(ns, "eth0", router, `n${i}`);
    await lab.link(pod, "eth0", ns, "gkeveth0");
    await ipBatch(router, [
      `link set n${i} master br0`,
      `link set n${i} up`,
      `route add ${node.podCidr} via ${node.internalIp}`,
    ]);
    const gw = node.podCidr.replace(/0\/24$/, "1");
    await ipBatch(ns, [
      `addr add ${node.internalIp}/20 dev eth0`,
      "link set eth0 up",
      `addr add ${gw}/32 dev gkeveth0`,
      "link set gkeveth0 up",
      `route add ${node.podIp}/32 dev gkeveth0`,
      `route add default via ${ROUTER_NODE_IP}`,
      ...(ipv6
        ? [
            `addr add fd00:128::${2 + i}/64 dev eth0 nodad`,
            `route add fd00:4:${i}::/64 dev gkeveth0`,
            "route add default via fd00:128::1",
          ]
        : []),
    ]);
    await sysctl(ns, "net.ipv4.ip_forward", "1");
    if (ipv6) {
      await sysctl(ns, "net.ipv6.conf.all.forwarding", "1");
      await ipBatch(router, [`route add fd00:4:${i}::/64 via fd00:128::${2 + i}`]);
    }
    // GKE pods see their gateway as a /32 peer; a host route to it then a default route
    await ipBatch(pod, [
      `addr add ${node.podIp}/24 dev eth0`,
      "link set eth0 up",
      `route replace default via ${gw} dev eth0 onlink`,
      ...(ipv6
        ? [
            `addr add fd00:4:${i}::5/64 dev eth0 nodad`,
            `route add default via fd00:4:${i}::1 dev eth0 onlink`,
          ]
        : []),
    ]);
    if (ipv6) await ipBatch(ns, [`addr add fd00:4:${i}::1/128 dev gkeveth0 nodad`]);
    if (plan.kubeProxy) await must(ns, ["iptables-restore", "--noflush"], KUBE_PROXY_RESTORE);
    const rules = node.hasAgent && !plan.agentLagging ? plan.current : plan.old;
    const install = plan.flavour === "aks" ? installAzureV2Rules : installAgentRules;
    await install(ns, rules, 4, plan.ipv6);
    if (ipv6) await install(ns, rules, 6, plan.ipv6);
    nodes.push({ ns, pod, node });
  }
  return { router, onprem, nodes, ipv6 };
}

/** A TCP listener on the on-prem host (on `DB_PORT`) that answers each connection with one line. */
export async function startListener(onprem: Namespace, ipv6: boolean) {
  const script =
    "const s=require('net').createServer(c=>{c.on('error',()=>{});c.end('pong\\n')});" +
    `s.listen(${DB_PORT},'${ipv6 ? "::" : "0.0.0.0"}',()=>process.stdout.write('ready\\n'))`;
  const child = onprem.spawn([process.execPath, "-e", script]);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("on-prem listener did not start")), 5_000);
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      if (d.includes("ready")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`on-prem listener exited ${code}`));
    });
  });
  return child;
}

const PING = ["ping", "-c", "3", "-i", "0.2", "-W", "1"] as const;

async function probeAndSnapshot(
  ctx: ScenarioContext,
  out: string,
  plan: ReplicaPlan,
  built: Built,
): Promise<ScenarioOutcome> {
  const files: string[] = [];
  const summary: string[] = [];
  const captures: Capture[] = [];
  const filter = `host ${ONPREM_IP}${built.ipv6 ? " or host fd00:20::30:40" : ""}`;
  for (const { ns, node } of built.nodes) {
    captures.push(
      await startCapture(ns, out, `node-${node.name}`, {
        iface: "any",
        filter,
        point: `node/${node.name}`,
        phase: plan.phase,
      }),
    );
  }
  captures.push(
    await startCapture(built.onprem, out, `remote-${SITE_NAME}`, {
      iface: "eth0",
      filter,
      point: `remote/${SITE_NAME}`,
      phase: plan.phase,
    }),
  );
  try {
    for (const { ns, pod, node } of built.nodes) {
      if (ctx.signal?.aborted) break;
      const nodeProbe = await runProbes(ns, [
        { shown: `${PING.join(" ")} ${ONPREM_IP}`, argv: [...PING, ONPREM_IP] },
      ]);
      files.push(
        writeSnapshotFile(
          out,
          `probes/node-${node.name}.txt`,
          `# client: node/${node.name}\n${nodeProbe.transcript}`,
        ),
      );
      // an application exchange: connect, half-close (-N on end of input), read the answer
      const nc = ["nc", "-v", "-N", "-w", "2", ONPREM_IP, String(DB_PORT)];
      const podSteps = [
        { shown: `${PING.join(" ")} ${ONPREM_IP}`, argv: [...PING, ONPREM_IP] },
        { shown: `${nc.join(" ")} </dev/null`, argv: nc, input: "", stderrFirst: true },
        ...(built.ipv6
          ? [{ shown: `${PING.join(" ")} fd00:20::30:40`, argv: [...PING, "fd00:20::30:40"] }]
          : []),
      ];
      const podProbe = await runProbes(pod, podSteps);
      files.push(
        writeSnapshotFile(
          out,
          `probes/pod-${node.podName}.txt`,
          `# client: pod/default/${node.podName}\n${podProbe.transcript}`,
        ),
      );
      const ok = (code: number | undefined) => (code === 0 ? "answers" : "silent");
      summary.push(
        `${node.name} (${node.hasAgent ? "agent" : "no agent"}): node ping ${ok(nodeProbe.results[0]?.code)}, ` +
          `pod ping ${ok(podProbe.results[0]?.code)}, pod tcp/${DB_PORT} ${ok(podProbe.results[1]?.code)}`,
      );
    }
  } finally {
    // let the last replies (or their absence) reach the captures before stopping them
    await new Promise((r) => setTimeout(r, 200));
    for (const c of captures) await c.stop();
  }
  for (const c of captures) files.push(c.rel, c.rel.replace(/\.pcap$/, ".yaml"));
  for (const { ns, pod, node } of built.nodes) {
    files.push(
      ...(await collectKernelState(ns, out, `nodes/${node.name}`, [
        "iptables-save",
        ...(built.ipv6 ? (["ip6tables-save"] as const) : []),
        "ip-route",
        "ip-addr",
        "sysctl",
        "conntrack",
      ])),
      ...(await collectKernelState(pod, out, `pods/default/${node.podName}`, [
        "ip-route",
        "ip-addr",
        "sysctl",
      ])),
    );
  }
  const desc: ReplicaDescription = {
    nodes: plan.nodes,
    agentConfig: plan.configText,
    enableIpv6: plan.ipv6,
    createdAt: CREATED_AT,
  };
  files.push(
    writeSnapshotFile(out, "cluster/nodes.yaml", kubectlList(nodeObjects(desc))),
    plan.reconciledText === undefined
      ? writeSnapshotFile(out, "cluster/ip-masq-agent.yaml", kubectlList(agentObjects(desc)))
      : writeSnapshotFile(
          out,
          "cluster/azure-ip-masq-agent.yaml",
          kubectlList(aksAgentObjects(desc, plan.configText, plan.reconciledText)),
        ),
    writeSnapshotFile(out, "cluster/pods.yaml", kubectlList(appPodObjects(desc))),
    writeSnapshotFile(out, `remote/${SITE_NAME}.yaml`, remoteSiteYaml(plan)),
  );
  return { files, summary };
}

async function run(ctx: ScenarioContext, opts: MasqueradeOptions): Promise<ScenarioOutcome> {
  const plan = planReplica(opts);
  ctx.log(`building masquerade replica ${ctx.lab.id} (${plan.nodes.length} node(s))`);
  if (plan.configError !== undefined) {
    ctx.log(`the agent rejects this config (${plan.configError}); nodes keep the old rules`);
  }
  const built = await build(ctx, plan);
  const listener = await startListener(built.onprem, built.ipv6);
  if (ctx.outDir === undefined) {
    return {
      files: [],
      summary: [
        `on-prem host ${ONPREM_IP} listens on tcp/${DB_PORT}`,
        ...built.nodes.map(
          ({ ns, pod, node }) =>
            `${node.name}: ip netns exec ${ns.name} …   pod ${node.podName} (${node.podIp}): ip netns exec ${pod.name} …`,
        ),
      ],
    };
  }
  try {
    return await probeAndSnapshot(ctx, ctx.outDir, plan, built);
  } finally {
    await stopProcess(listener);
  }
}

export const scenario: Scenario<MasqueradeOptions> = {
  name: "masquerade",
  description:
    "SNAT exception lists: nodes with ip-masq-agent rules, a VPN router, an on-prem host",
  options: MasqueradeOptions,
  run,
};
