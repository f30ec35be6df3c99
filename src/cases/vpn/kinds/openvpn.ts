/**
 * @module cases/vpn/kinds/openvpn — OpenVPN as a tunnel kind: a pod with an OpenVPN server config
 * (`pods/NS/POD/openvpn.conf` or the chart's ConfigMap key), a tun/tap device, or a workload the
 * stable/openvpn chart rendered; its pool from the config, the chart values, the image's env or
 * tun0; its chart switch `ipForwardInitContainer` and the MASQUERADE its `configure.sh` installs.
 */

import {
  chartMasqueradeRule,
  envClientPool,
  recognizeChart,
} from "../../../agents/openvpn/chart.ts";
import { cidrOf, clientPools } from "../../../agents/openvpn/server-config.ts";
import type { KubeObject } from "../../../evidence/kube-objects.ts";
import type { Located } from "../../../model/types.ts";
import { type Cidr, formatCidr, type Ip } from "../../../net/cidr.ts";
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

/** The client pool: the server's own config decides; then the chart values; then env; then tun0. */
function clientPoolOf(ctx: KindContext): Located<Cidr> | undefined {
  const evidence = ctx.evidence;
  let pool: Located<Cidr> | undefined = evidence?.openvpn
    ? clientPools(evidence.openvpn)[0]
    : undefined;
  pool ??= ctx.input.chartValues?.[0]?.clientPool;
  const workload = ctx.workload;
  if (!pool && workload) {
    const { path, containers } = containersOf(workload);
    for (let i = 0; i < containers.length && !pool; i++) {
      pool = envClientPool(workload, [...path, "containers", i]);
    }
  }
  return pool ?? devicePool(evidence, isTunOrTap);
}

/** The server's tunnel address: tun0's, else the first of `server`, else the first of the pool. */
function peerOf(ctx: KindContext, pool: Located<Cidr> | undefined): Located<Ip> | undefined {
  const tunAddr = deviceAddress(ctx.evidence, isTunOrTap);
  if (tunAddr) return { value: tunAddr.local, source: tunAddr.source };
  const s = ctx.evidence?.openvpn?.server;
  if (s) return { value: { family: 4, value: s.value.start + 1n }, source: s.source };
  if (pool && pool.value.family === 4)
    return { value: { family: 4, value: pool.value.start + 1n }, source: pool.source };
  return undefined;
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
    commands: (nsArg, valuesFile) => [
      `helm upgrade ${release} stable/openvpn ${nsArg} --reuse-values -f ${valuesFile}`,
      `# or: helm upgrade ${release} stable/openvpn ${nsArg} --reuse-values --set ipForwardInitContainer=true`,
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
  return {
    kind: "openvpn",
    displayName: "OpenVPN",
    ...(pool ? { pool } : {}),
    ...(peer ? { peer } : {}),
    tunnelDevice: "tun0",
    tunnelled: cfg?.redirectGateway
      ? { kind: "all", source: cfg.redirectGateway }
      : cfg
        ? { kind: "prefixes", prefixes: cfg.pushedRoutes }
        : { kind: "unknown" },
    pushedRoutes: cfg?.pushedRoutes ?? [],
    pushedDns: cfg?.pushedDns ?? [],
    configMissing: {
      file: `pods/${ctx.namespace}/${ctx.name}/openvpn.conf`,
      would_decide: "the client pool, and so whether replies can find their way back",
      command: `${execIn(ctx, "cat /etc/openvpn/openvpn.conf")} > pods/${ctx.namespace}/${ctx.name}/openvpn.conf`,
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
    onlyServicesRouted: cfg !== undefined && !cfg.redirectGateway,
    findings: () => [],
    missing: () => [],
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
