/**
 * @module policy/policy-world — what NetworkPolicy evaluation needs from a set of manifests:
 * namespaces and their labels (plus the automatic `kubernetes.io/metadata.name`), pods as
 * endpoints (from Pods, or one representative per Deployment/DaemonSet/StatefulSet/ReplicaSet/
 * Job/CronJob/ReplicationController template) with labels, IPs and named container ports, grouped
 * by owning workload, and the policies.
 */
import type { Diagnostic, Parsed } from "../model/types.ts";
import { type Ip, tryParseIp } from "../net/cidr.ts";
import { type AdminNetworkPolicy, readAdminNetworkPolicies } from "./admin-network-policy.ts";
import {
  type NetworkPolicy,
  type PolicyObject,
  type Protocol,
  readNetworkPolicies,
} from "./network-policy.ts";

export interface ContainerPort {
  readonly name?: string;
  readonly port: number;
  readonly protocol: Protocol;
}

export interface PodEndpoint {
  readonly kind: "pod";
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly ips: readonly Ip[];
  readonly ports: readonly ContainerPort[];
  /** The owning workload (or the Pod itself), as netpol-analyzer groups peers. */
  readonly workload: { readonly kind: string; readonly name: string };
}

/** An address (or, for listings, an inclusive address range) outside the pod network. */
export interface ExternalEndpoint {
  readonly kind: "external";
  readonly ip: Ip;
  /** Last address of a range; absent for a single address. */
  readonly end?: bigint;
}

export type Endpoint = PodEndpoint | ExternalEndpoint;

export interface PolicyWorld {
  readonly namespaces: ReadonlyMap<string, Readonly<Record<string, string>>>;
  readonly pods: readonly PodEndpoint[];
  readonly policies: readonly NetworkPolicy[];
  /** AdminNetworkPolicies by priority, then the BaselineAdminNetworkPolicy if any. */
  readonly adminPolicies: readonly AdminNetworkPolicy[];
}

const TEMPLATE: Readonly<Record<string, readonly string[]>> = {
  Deployment: ["spec", "template"],
  DaemonSet: ["spec", "template"],
  StatefulSet: ["spec", "template"],
  ReplicaSet: ["spec", "template"],
  ReplicationController: ["spec", "template"],
  Job: ["spec", "template"],
  CronJob: ["spec", "jobTemplate", "spec", "template"],
};

const rec = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;

function stringMap(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(rec(v) ?? {})) out[k] = String(x);
  return out;
}

function containerPorts(spec: Record<string, unknown> | undefined): ContainerPort[] {
  const out: ContainerPort[] = [];
  for (const key of ["initContainers", "containers"]) {
    const list = spec?.[key];
    for (const c of Array.isArray(list) ? list : []) {
      const ports = rec(c)?.["ports"];
      for (const p of Array.isArray(ports) ? ports : []) {
        const x = rec(p) ?? {};
        const port = Number(x["containerPort"]);
        if (!Number.isInteger(port)) continue;
        const protocol = String(x["protocol"] ?? "TCP");
        if (protocol !== "TCP" && protocol !== "UDP" && protocol !== "SCTP") continue;
        out.push({ port, protocol, ...(typeof x["name"] === "string" ? { name: x["name"] } : {}) });
      }
    }
  }
  return out;
}

/** Builds the evaluation world from manifest objects (any mix of kinds; others are ignored). */
export function buildPolicyWorld(objects: readonly PolicyObject[]): Parsed<PolicyWorld> {
  const diagnostics: Diagnostic[] = [];
  const namespaces = new Map<string, Record<string, string>>();
  const pods: PodEndpoint[] = [];
  for (const o of objects) {
    if (o.kind === "Namespace") {
      const labels = stringMap(rec(o.raw["metadata"])?.["labels"]);
      namespaces.set(o.name, { ...labels, "kubernetes.io/metadata.name": o.name });
      continue;
    }
    const ns = o.namespace ?? "default";
    if (o.kind === "Pod") {
      const meta = rec(o.raw["metadata"]) ?? {};
      const status = rec(o.raw["status"]) ?? {};
      const ips: Ip[] = [];
      for (const entry of Array.isArray(status["podIPs"]) ? status["podIPs"] : []) {
        const ip = tryParseIp(String(rec(entry)?.["ip"] ?? ""));
        if (ip && !ips.some((x) => x.family === ip.family && x.value === ip.value)) ips.push(ip);
      }
      const single = tryParseIp(String(status["podIP"] ?? ""));
      if (single && !ips.some((x) => x.family === single.family && x.value === single.value))
        ips.push(single);
      const owners = Array.isArray(meta["ownerReferences"]) ? meta["ownerReferences"].map(rec) : [];
      const found = owners.find((x) => x?.["controller"] === true) ?? owners[0];
      // static (mirror) pods are owned by their Node: they stand for themselves
      const owner = found?.["kind"] === "Node" ? undefined : found;
      pods.push({
        kind: "pod",
        namespace: ns,
        name: o.name,
        labels: stringMap(meta["labels"]),
        ips,
        ports: containerPorts(rec(o.raw["spec"])),
        workload: owner
          ? { kind: String(owner["kind"] ?? "Pod"), name: String(owner["name"] ?? o.name) }
          : { kind: "Pod", name: o.name },
      });
      continue;
    }
    const path = TEMPLATE[o.kind];
    if (path) {
      let node: Record<string, unknown> | undefined = o.raw;
      for (const k of path) node = rec(node?.[k]);
      if (!node) {
        diagnostics.push({
          code: "SCHEMA",
          severity: "warning",
          message: `${o.source.file}:${o.source.line}: ${o.kind} ${ns}/${o.name} has no pod template; it is not an endpoint`,
          source: o.source,
        });
        continue;
      }
      pods.push({
        kind: "pod",
        namespace: ns,
        name: o.name,
        labels: stringMap(rec(node["metadata"])?.["labels"]),
        ips: [],
        ports: containerPorts(rec(node["spec"])),
        workload: { kind: o.kind, name: o.name },
      });
    }
  }
  const policies = readNetworkPolicies(objects);
  diagnostics.push(...policies.diagnostics);
  const adminPolicies = readAdminNetworkPolicies(objects, diagnostics);
  const all = new Map(namespaces);
  for (const n of [...pods.map((p) => p.namespace), ...policies.value.map((p) => p.namespace)]) {
    if (!all.has(n)) all.set(n, { "kubernetes.io/metadata.name": n });
  }
  return { value: { namespaces: all, pods, policies: policies.value, adminPolicies }, diagnostics };
}
