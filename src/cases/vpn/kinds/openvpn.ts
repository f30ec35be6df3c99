/**
 * @module cases/vpn/kinds/openvpn — OpenVPN as a tunnel kind: a pod with an OpenVPN server config
 * (`pods/NS/POD/openvpn.conf` or the chart's ConfigMap key), a tun/tap device, or a workload the
 * stable/openvpn chart rendered; its pool from the config, the chart values, the image's env or
 * tun0; its chart switch `ipForwardInitContainer` and the MASQUERADE its `configure.sh` installs.
 * Beyond the chart: tap mode (`dev tapN`, `dev-type tap`, `server-bridge`), `topology net30|subnet`,
 * per-client files (`pods/NS/POD/ccd/<cn>`: `iroute`, per-client `push "route"`, `push-reset`).
 */

import {
  chartMasqueradeRule,
  envClientPool,
  recognizeChart,
} from "../../../agents/openvpn/chart.ts";
import type { OpenvpnClientConfig } from "../../../agents/openvpn/client-config.ts";
import {
  cidrOf,
  clientPools,
  type OpenvpnServerConfig,
} from "../../../agents/openvpn/server-config.ts";
import type { KubeObject } from "../../../evidence/kube-objects.ts";
import { type Finding, type Located, refToEvidence } from "../../../model/types.ts";
import { type Cidr, contains, formatCidr, formatIp, type Ip } from "../../../net/cidr.ts";
import { rawWord, sh, whole } from "../../../report/shell-quote.ts";
import { podSpecPath } from "../durable.ts";
import { execIn, type VpnPodEvidence } from "../input.ts";
import { scriptNatFor } from "../plan-nat.ts";
import type { ChartSwitch, KindContext, KindView, TunnelKind } from "./kind.ts";

/** stable/openvpn's init container, exactly as its template renders it (chart 4.2.5). */
export const CHART_INIT_CONTAINER = {
  args: ["-c", "sysctl -w net.ipv4.ip_forward=1"],
  command: ["/bin/sh"],
  image: "busybox:1.29",
  imagePullPolicy: "IfNotPresent",
  name: "sysctl",
  resources: { requests: { cpu: "1m", memory: "1Mi" } },
  securityContext: { privileged: true },
} as const;

const isTunOrTap = (name: string) => /^(tun|tap)/.test(name);

function rec(v: unknown): Record<string, unknown> | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

/** The containers of a workload's pod template (or of the Pod), with the path to them. */
function containersOf(workload: KubeObject): { path: (string | number)[]; containers: unknown[] } {
  const path = podSpecPath(workload.kind);
  let c: unknown = workload.raw;
  for (const p of path) c = rec(c)?.[p];
  const list = rec(c)?.["containers"];
  return { path, containers: Array.isArray(list) ? list : [] };
}

/** The tunnel device's IPv4 address (tun*, tap*, or another kind's prefix). */
export function deviceAddress(
  evidence: VpnPodEvidence | undefined,
  isDevice: (n: string) => boolean,
) {
  return evidence?.ipAddr?.interfaces
    .find((i) => isDevice(i.name))
    ?.addresses?.find((a) => a.family === 4);
}

/** The pool shown by the tunnel device's own address (`10.8.0.1/24` on tun0 → 10.8.0.0/24). */
export function devicePool(
  evidence: VpnPodEvidence | undefined,
  isDevice: (n: string) => boolean,
): Located<Cidr> | undefined {
  const a = deviceAddress(evidence, isDevice);
  if (!a) return undefined;
  const c = cidrOf(formatCidr(a.cidr));
  return c ? { value: c, source: a.source } : undefined;
}

/** Tap mode: `dev-type tap`, a `dev tapN` (the reader folds both into devType), `server-bridge`. */
export function isTapMode(cfg: OpenvpnServerConfig | undefined): boolean {
  return cfg?.devType?.value === "tap" || cfg?.serverBridge !== undefined;
}

/**
 * The device client packets arrive on: in tap mode the tap device (`tapN`: frames arrive bridged,
 * openvpn(8) --dev tap), else the tun device; the one `ip addr` shows, else `dev`'s name when it
 * has a unit number, else unit 0 (OpenVPN takes the first free one).
 */
export function tunnelDeviceOf(ctx: KindContext): string {
  const cfg = ctx.evidence?.openvpn;
  const ifaces = ctx.evidence?.ipAddr?.interfaces ?? [];
  const type = cfg ? (isTapMode(cfg) ? "tap" : "tun") : undefined;
  const isType = (n: string) => (type ? n.startsWith(type) : isTunOrTap(n));
  const seen = ifaces.find((i) => isType(i.name));
  if (seen) return seen.name;
  const dev = cfg?.dev?.value;
  if (dev && type && new RegExp(`^${type}\\d+$`).test(dev)) return dev;
  return `${type ?? "tun"}0`;
}

/** The smallest single block holding every block (server-bridge's START-END range as one CIDR). */
function coveringCidr(blocks: readonly Cidr[]): Cidr | undefined {
  const first = blocks[0];
  if (!first) return undefined;
  // rangeToCidrs gives the blocks in order
  const start = first.start;
  const end = blocks.at(-1)?.end ?? first.end;
  const bits = first.family === 4 ? 32 : 128;
  for (let prefix = bits; prefix >= 0; prefix--) {
    const size = 1n << BigInt(bits - prefix);
    const net = (start / size) * size;
    if (end <= net + size - 1n)
      return { family: first.family, start: net, end: net + size - 1n, prefix };
  }
  return undefined;
}

/** The pool of the server config: `server` (either topology), `ifconfig-pool`, `server-bridge`. */
function configPool(cfg: OpenvpnServerConfig): Located<Cidr> | undefined {
  // server-bridge hands out START..END (openvpn(8) --server-bridge expands to ifconfig-pool):
  // the masquerade and return-path questions need one block holding the whole range
  if (!cfg.server && !cfg.ifconfigPool && cfg.serverBridge) {
    const c = coveringCidr(cfg.serverBridge.value);
    return c ? { value: c, source: cfg.serverBridge.source } : undefined;
  }
  // `server` decides the pool in net30 and subnet alike: net30 carves a /30 per client out of it
  return clientPools(cfg)[0];
}

/** The client pool: the server's own config decides; then the chart values; then env; then tun0. */
function clientPoolOf(ctx: KindContext): Located<Cidr> | undefined {
  const evidence = ctx.evidence;
  let pool: Located<Cidr> | undefined = evidence?.openvpn
    ? configPool(evidence.openvpn)
    : undefined;
  pool ??= ctx.input.chartValues?.[0]?.clientPool;
  const workload = ctx.workload;
  if (!pool && workload) {
    const { path, containers } = containersOf(workload);
    for (let i = 0; i < containers.length && !pool; i++) {
      pool = envClientPool(workload, [...path, "containers", i]);
    }
  }
  if (pool) return pool;
  // net30/p2p: tun0 shows `inet 10.8.0.1 peer 10.8.0.2/32`, a /32 that says nothing of the pool
  const a = deviceAddress(evidence, isTunOrTap);
  if (a?.peer && a.cidr.prefix === (a.cidr.family === 4 ? 32 : 128)) return undefined;
  return devicePool(evidence, isTunOrTap);
}

/**
 * The server's tunnel address: the tunnel device's own (`local`, also under net30's `peer` form),
 * else server-bridge's GATEWAY (tap mode), else the first host of `server` (openvpn(8): the server
 * takes .1 in net30 and subnet alike), else the first of the pool.
 */
function peerOf(ctx: KindContext, pool: Located<Cidr> | undefined): Located<Ip> | undefined {
  const device = tunnelDeviceOf(ctx);
  const tunAddr = deviceAddress(ctx.evidence, (n) => n === device);
  if (tunAddr) return { value: tunAddr.local, source: tunAddr.source };
  const gw = ctx.evidence?.openvpn?.bridgeGateway;
  if (gw) return gw;
  const s = ctx.evidence?.openvpn?.server;
  if (s) return { value: { family: 4, value: s.value.start + 1n }, source: s.source };
  if (pool && pool.value.family === 4)
    return { value: { family: 4, value: pool.value.start + 1n }, source: pool.source };
  return undefined;
}

/**
 * What clients send into the tunnel, as a union over clients: the server's pushes (every client
 * without a file of its own gets them, and which clients exist is not in the snapshot, so
 * `push-reset` in one file does not remove them) and each client file's own pushes.
 * `redirect-gateway` pushed server-wide or to any client is all.
 */
export function tunnelledOf(
  cfg: OpenvpnServerConfig | undefined,
  clients: readonly OpenvpnClientConfig[],
): { tunnelled: KindView["tunnelled"]; pushedRoutes: readonly Located<Cidr>[] } {
  if (!cfg) return { tunnelled: { kind: "unknown" }, pushedRoutes: [] };
  const live = clients.filter((c) => !c.disabled);
  const routes: Located<Cidr>[] = [];
  const seen = new Set<string>();
  const add = (r: Located<Cidr>) => {
    const k = formatCidr(r.value);
    if (!seen.has(k)) {
      seen.add(k);
      routes.push(r);
    }
  };
  cfg.pushedRoutes.forEach(add);
  for (const c of live) c.pushedRoutes.forEach(add);
  const redirect = cfg.redirectGateway ?? live.find((c) => c.redirectGateway)?.redirectGateway;
  return {
    tunnelled: redirect
      ? { kind: "all", source: redirect }
      : { kind: "prefixes", prefixes: routes },
    pushedRoutes: routes,
  };
}

/** The networks behind clients (`iroute`): sources that arrive through the tunnel besides the pool. */
export function clientNetworksOf(clients: readonly OpenvpnClientConfig[]): Located<Cidr>[] {
  return clients.filter((c) => !c.disabled).flatMap((c) => c.iroutes);
}

/**
 * `vpn/iroute-unrouted`: an `iroute` no server `route` (nor the pool) covers. openvpn(8): --iroute
 * only tells OpenVPN which client owns the network; --route must still send it into the tunnel
 * device, or the server's kernel never hands OpenVPN the packets for that client's site.
 */
export function irouteFindings(
  cfg: OpenvpnServerConfig,
  clients: readonly OpenvpnClientConfig[],
  device: string,
  subject: string,
): Finding[] {
  const covering = [...cfg.routes, ...(cfg.server ? [cfg.server] : [])];
  const out: Finding[] = [];
  for (const c of clients) {
    if (c.disabled) continue;
    for (const r of c.iroutes) {
      if (covering.some((x) => contains(x.value, r.value))) continue;
      const net = formatCidr(r.value);
      out.push({
        id: "vpn/iroute-unrouted",
        severity: "error",
        title: `The network ${net} behind client ${c.commonName} is never sent into the tunnel`,
        subject,
        explanation:
          `${c.file} says ${net} is behind client ${c.commonName} (iroute), but no "route" in ${cfg.file} covers it. ` +
          `iroute only tells OpenVPN which client owns the network; without the server's route the pod's kernel ` +
          `never sends ${net} into ${device}, so replies and traffic to that site never reach OpenVPN.`,
        evidence: [
          refToEvidence(r.source),
          ...(cfg.server ? [refToEvidence(cfg.server.source)] : []),
        ],
        next: [
          `Add "route ${formatIp({ family: r.value.family, value: r.value.start })} ${netmaskOf(r.value)}" to ${cfg.file} (the server config), beside the client's iroute`,
        ],
      });
    }
  }
  return out;
}

/** A v4 block's dotted netmask (`/24` → 255.255.255.0); the prefix length for v6. */
function netmaskOf(c: Cidr): string {
  if (c.family !== 4) return `${c.prefix}`;
  const m = c.prefix === 0 ? 0n : ((1n << 32n) - 1n) ^ ((1n << BigInt(32 - c.prefix)) - 1n);
  return formatIp({ family: 4, value: m });
}

function chartSwitchOf(ctx: KindContext): KindView["chartSwitch"] {
  const wl = ctx.workload;
  const chart = (wl && recognizeChart(wl)) ?? (ctx.pod && recognizeChart(ctx.pod));
  if (!chart) {
    return {
      whyNot: `${wl?.kind} ${wl?.name} carries no chart label (chart: openvpn-X): no chart switch is known; use init-container or pod-sysctls`,
    };
  }
  const release = chart.release ?? "RELEASE";
  return {
    description: `The chart's own switch (stable/openvpn ${chart.version ?? ""}): ipForwardInitContainer: true renders a privileged init container "sysctl" running sysctl -w net.ipv4.ip_forward=1. The override stays small and survives chart upgrades; admission sees the same privileged container as the init-container strategy.`,
    helmValues: { ipForwardInitContainer: true },
    initContainer: CHART_INIT_CONTAINER,
    // nsArg and valuesFile come quoted (plan.ts); the release is the chart label's
    commands: (nsArg, valuesFile) => [
      whole(
        sh`helm upgrade ${release} stable/openvpn ${rawWord(nsArg)} --reuse-values -f ${rawWord(valuesFile)}`,
      ),
      whole(
        sh`# or: helm upgrade ${release} stable/openvpn ${rawWord(nsArg)} --reuse-values --set ipForwardInitContainer=true`,
      ),
    ],
  } satisfies ChartSwitch;
}

function view(ctx: KindContext): KindView {
  const cfg = ctx.evidence?.openvpn;
  const pool = clientPoolOf(ctx);
  const peer = peerOf(ctx, pool);
  const chartValues = ctx.input.chartValues?.[0];
  const chart =
    (ctx.workload && recognizeChart(ctx.workload)) ?? (ctx.pod && recognizeChart(ctx.pod));
  const flag = chartValues?.ipForwardInitContainer;
  const clients = ctx.evidence?.openvpnClients ?? [];
  const { tunnelled, pushedRoutes } = tunnelledOf(cfg, clients);
  const device = tunnelDeviceOf(ctx);
  const clientNetworks = clientNetworksOf(clients);
  return {
    kind: "openvpn",
    displayName: "OpenVPN",
    ...(pool ? { pool } : {}),
    ...(peer ? { peer } : {}),
    tunnelDevice: device,
    tunnelled,
    ...(clients.length > 0
      ? { tunnelledBy: `the server's push "route" lines and the clients' own files (ccd/)` }
      : {}),
    pushedRoutes,
    ...(clientNetworks.length > 0 ? { clientNetworks } : {}),
    pushedDns: cfg?.pushedDns ?? [],
    configMissing: {
      file: `pods/${ctx.namespace}/${ctx.name}/openvpn.conf`,
      would_decide: "the client pool, and so whether replies can find their way back",
      command: whole(
        `${execIn(ctx, "cat /etc/openvpn/openvpn.conf")} > ${sh`${`pods/${ctx.namespace}/${ctx.name}/openvpn.conf`}`}`,
      ),
    },
    readConfig: "cat /etc/openvpn/openvpn.conf",
    poolUnknownWhy: "no openvpn.conf, chart values or tun0 address",
    extraSetters:
      flag?.value === true
        ? [{ kind: "chart-value", value: "ipForwardInitContainer: true", source: flag.source }]
        : [],
    notDurableExtra: chart ? ", and the chart value ipForwardInitContainer is not true" : "",
    chartSwitch: chartSwitchOf(ctx),
    scriptMasquerade: (p) => {
      const s = scriptNatFor(ctx.input.objects, ctx.namespace, p);
      return s
        ? { where: `ConfigMap ${s.configMap} key ${s.key}`, text: s.text, at: s.at }
        : undefined;
    },
    masqueradeFix: (p) => {
      const rule = chartMasqueradeRule(p);
      return {
        rule,
        command: `iptables -t nat ${rule}   # in the VPN container's start script (the chart's configure.sh does this)`,
        next: `Masquerade the pool in the VPN pod: iptables -t nat ${rule}`,
      };
    },
    onlyServicesRouted: cfg !== undefined && tunnelled.kind !== "all",
    findings: ({ subject }) => (cfg ? irouteFindings(cfg, clients, device, subject) : []),
    // client-config-dir named but none of its files beside the pod: iroutes and per-client
    // pushes are unknown, not absent
    missing: () =>
      cfg?.clientConfigDir && clients.length === 0
        ? [
            {
              file: `pods/${ctx.namespace}/${ctx.name}/ccd/<client-cn>`,
              would_decide: `the networks behind clients (iroute) and each client's own pushed routes (${cfg.file}:${cfg.clientConfigDir.source.line})`,
              command: whole(
                `${execIn(ctx, sh`ls ${cfg.clientConfigDir.value}`)}; then for each file F: ${execIn(ctx, sh`cat ${`${cfg.clientConfigDir.value}/F`}`)} > ${sh`${`pods/${ctx.namespace}/${ctx.name}/ccd/F`}`}`,
              ),
            },
          ]
        : [],
  };
}

/** OpenVPN: the first tunnel kind. Its server config is read by the snapshot input (`openvpn`). */
export const openvpnKind: TunnelKind = {
  id: "openvpn",
  displayName: "OpenVPN",
  // the fallback: every config beside a pod that no other kind claims (registered last)
  ownsFile: (base) => /\.(conf|ovpn)$/.test(base),
  readPod: () => undefined,
  detect: ({ evidence, manifests }) => {
    if (evidence?.openvpn) return { kind: "openvpn", strength: "config" };
    const dev = evidence?.ipAddr?.interfaces.find((i) => isTunOrTap(i.name));
    if (dev) return { kind: "openvpn", strength: "device" };
    for (const m of manifests) {
      const chart = recognizeChart(m);
      if (chart) return { kind: "openvpn", strength: "manifest", source: chart.source };
    }
    return undefined;
  },
  view,
};
