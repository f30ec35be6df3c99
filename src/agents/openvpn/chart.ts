/**
 * @module agents/openvpn/chart — the stable/openvpn Helm chart (4.2.5) as it behaves: recognising a
 * workload it rendered, reading its values (`ipForwardInitContainer`, `openvpn.OVPN_NETWORK` /
 * `OVPN_SUBNET`, pod and service networks), and the MASQUERADE rule its `configure.sh` installs.
 * Also the env-style pools of other OpenVPN images (`OVPN_NETWORK`/`OVPN_SUBNET`, `OVPN_SERVER`).
 */

import type { KubeObject } from "../../evidence/kube-objects.ts";
import { readYamlSource } from "../../evidence/yaml-source.ts";
import type { Diagnostic, Located, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, formatIp } from "../../net/cidr.ts";
import { cidrOf, networkAndMask } from "./server-config.ts";

/** values.yaml defaults of stable/openvpn 4.2.5 (helm/charts @390ee66 stable/openvpn/values.yaml). */
export const CHART_DEFAULTS = {
  ipForwardInitContainer: false,
  ovpnNetwork: "10.240.0.0",
  ovpnSubnet: "255.255.0.0",
  podNetwork: "10.0.0.0",
  podSubnet: "255.0.0.0",
  redirectGateway: true,
} as const;

export interface ChartRef {
  readonly chart: "openvpn";
  readonly version?: string;
  readonly release?: string;
  /** The label that identified it. */
  readonly source: SourceRef;
}

/**
 * Recognises a workload rendered by stable/openvpn: label `chart: openvpn-X.Y.Z` (or
 * `helm.sh/chart`), as the chart's templates write it.
 */
export function recognizeChart(obj: KubeObject): ChartRef | undefined {
  for (const key of ["chart", "helm.sh/chart"]) {
    const v = obj.labels[key];
    const m = v === undefined ? null : /^openvpn-(\d+\.\d+\.\d+.*)$/.exec(v);
    if (m) {
      const release = obj.labels["release"] ?? obj.labels["app.kubernetes.io/instance"];
      return {
        chart: "openvpn",
        version: m[1]!,
        ...(release === undefined ? {} : { release }),
        source: obj.locate(["metadata", "labels", key]) ?? obj.source,
      };
    }
  }
  return undefined;
}

export interface OpenvpnChartValues {
  readonly file: string;
  readonly ipForwardInitContainer?: Located<boolean>;
  /** `openvpn.OVPN_NETWORK` + `openvpn.OVPN_SUBNET`: the client pool. */
  readonly clientPool?: Located<Cidr>;
  readonly podNetwork?: Located<Cidr>;
  readonly serviceNetwork?: Located<Cidr>;
  readonly redirectGateway?: Located<boolean>;
}

/** True when a YAML document looks like values for this chart (not a Kubernetes object). */
export function looksLikeChartValues(value: unknown): boolean {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const v = value as Record<string, unknown>;
  if ("kind" in v && "apiVersion" in v) return false;
  const ovpn = v["openvpn"];
  return (
    "ipForwardInitContainer" in v ||
    (typeof ovpn === "object" && ovpn !== null && "OVPN_NETWORK" in (ovpn as object))
  );
}

/**
 * Reads a values file (`helm get values RELEASE -o yaml`, or a `-f` override file). Fields not
 * set keep the chart's defaults only where the caller asks for them ({@link CHART_DEFAULTS}).
 */
export function readChartValues(text: string, file: string): Parsed<OpenvpnChartValues> {
  const { source, diagnostics: yamlDiags } = readYamlSource(text, file);
  const diagnostics: Diagnostic[] = [...yamlDiags];
  const doc = source.documents.find((d) => d.ok);
  const root = doc?.doc.contents;
  const v = (doc?.value ?? {}) as Record<string, unknown>;
  const ovpn = (
    typeof v["openvpn"] === "object" && v["openvpn"] !== null ? v["openvpn"] : {}
  ) as Record<string, unknown>;
  const at = (path: (string | number)[]): SourceRef =>
    source.locate(root, path) ?? { file, line: doc?.line ?? 1 };
  const out: { -readonly [K in keyof OpenvpnChartValues]?: OpenvpnChartValues[K] } = { file };
  const flag = v["ipForwardInitContainer"];
  if (typeof flag === "boolean") {
    out.ipForwardInitContainer = { value: flag, source: at(["ipForwardInitContainer"]) };
  } else if (flag !== undefined && flag !== null) {
    diagnostics.push({
      code: "CHART_VALUES",
      severity: "warning",
      message: `ipForwardInitContainer is ${JSON.stringify(flag)}; the chart tests it as a boolean (true/false)`,
      source: at(["ipForwardInitContainer"]),
    });
  }
  const pair = (netKey: string, maskKey: string): Located<Cidr> | undefined => {
    const net = ovpn[netKey];
    if (net === undefined || net === null || net === "") return undefined;
    const c = networkAndMask(
      String(net),
      ovpn[maskKey] === undefined ? undefined : String(ovpn[maskKey]),
    );
    if (c === undefined) {
      diagnostics.push({
        code: "CHART_VALUES",
        severity: "warning",
        message: `openvpn.${netKey}/${maskKey} is not NETWORK and NETMASK (e.g. 10.240.0.0 and 255.255.0.0)`,
        source: at(["openvpn", netKey]),
      });
      return undefined;
    }
    return { value: c, source: at(["openvpn", netKey]) };
  };
  const pool = pair("OVPN_NETWORK", "OVPN_SUBNET");
  if (pool) out.clientPool = pool;
  const pods = pair("OVPN_K8S_POD_NETWORK", "OVPN_K8S_POD_SUBNET");
  if (pods) out.podNetwork = pods;
  const svc = pair("OVPN_K8S_SVC_NETWORK", "OVPN_K8S_SVC_SUBNET");
  if (svc) out.serviceNetwork = svc;
  if (typeof ovpn["redirectGateway"] === "boolean") {
    out.redirectGateway = {
      value: ovpn["redirectGateway"],
      source: at(["openvpn", "redirectGateway"]),
    };
  }
  return { value: out as OpenvpnChartValues, diagnostics };
}

/** A netmask as dotted quad, as the chart writes it in its rule (`255.255.0.0`). */
export function dottedMask(prefix: number): string {
  const v = prefix === 0 ? 0n : ((1n << 32n) - 1n) ^ ((1n << BigInt(32 - prefix)) - 1n);
  return formatIp({ family: 4, value: v });
}

/**
 * The rule `configure.sh` adds at start: `iptables -t nat -A POSTROUTING -s NET/MASK -o eth0 -j
 * MASQUERADE`, in iptables-save form as the kernel then lists it (`-s 10.240.0.0/16`).
 */
export function chartMasqueradeRule(pool: Cidr, outIface = "eth0"): string {
  return `-A POSTROUTING -s ${formatIp({ family: pool.family, value: pool.start })}/${pool.prefix} -o ${outIface} -j MASQUERADE`;
}

/**
 * The pool from a container's env, as OpenVPN images take it: `OVPN_NETWORK` + `OVPN_SUBNET`
 * (jfelten/openvpn-docker style), or `OVPN_SERVER` (kylemanna/openvpn, `192.168.255.0/24`).
 */
export function envClientPool(
  obj: KubeObject,
  containerPath: readonly (string | number)[],
): Located<Cidr> | undefined {
  let c: Record<string, unknown> | undefined = obj.raw as Record<string, unknown>;
  for (const p of containerPath) {
    c = (c as Record<string | number, unknown> | undefined)?.[p] as
      | Record<string, unknown>
      | undefined;
  }
  const env = Array.isArray(c?.["env"]) ? (c["env"] as unknown[]) : [];
  const get = (name: string) => {
    const i = env.findIndex((e) => (e as { name?: unknown })?.name === name);
    const value = i < 0 ? undefined : (env[i] as { value?: unknown }).value;
    return i < 0 || typeof value !== "string"
      ? undefined
      : { value, source: obj.locate([...containerPath, "env", i, "value"]) ?? obj.source };
  };
  const server = get("OVPN_SERVER");
  if (server) {
    const cidr = cidrOf(server.value);
    if (cidr) return { value: cidr, source: server.source };
  }
  const net = get("OVPN_NETWORK");
  if (net) {
    const cidr = networkAndMask(net.value, get("OVPN_SUBNET")?.value);
    if (cidr) return { value: cidr, source: net.source };
  }
  return undefined;
}
