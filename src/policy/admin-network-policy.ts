/**
 * @module policy/admin-network-policy — AdminNetworkPolicy and BaselineAdminNetworkPolicy
 * (policy.networking.k8s.io/v1alpha1): cluster-scoped rules with actions. ANPs are evaluated
 * before NetworkPolicies in priority order (lower first; Allow and Deny are final, Pass hands the
 * connection to NetworkPolicy); the BANP only decides what no NetworkPolicy isolates.
 */
import type { Diagnostic, SourceRef } from "../model/types.ts";
import { type Cidr, tryParseCidr } from "../net/cidr.ts";
import { type LabelSelector, parseLabelSelector } from "./label-selector.ts";
import type { PolicyObject, Protocol } from "./network-policy.ts";

/** Who a rule or subject names: namespaces by label, pods by namespace and pod labels, or CIDRs. */
export type AdminPeer =
  | { readonly kind: "namespaces"; readonly namespaceSelector: LabelSelector }
  | {
      readonly kind: "pods";
      readonly namespaceSelector: LabelSelector;
      readonly podSelector: LabelSelector;
    }
  | { readonly kind: "networks"; readonly cidrs: readonly Cidr[] };

export type AdminPort =
  | { readonly kind: "number"; readonly protocol: Protocol; readonly port: number }
  | { readonly kind: "named"; readonly name: string }
  | {
      readonly kind: "range";
      readonly protocol: Protocol;
      readonly start: number;
      readonly end: number;
    };

export interface AdminRule {
  readonly name: string;
  readonly action: "Allow" | "Deny" | "Pass";
  readonly peers: readonly AdminPeer[];
  /** Undefined: all ports. */
  readonly ports?: readonly AdminPort[];
  readonly source: SourceRef;
}

export interface AdminNetworkPolicy {
  readonly kind: "AdminNetworkPolicy" | "BaselineAdminNetworkPolicy";
  readonly name: string;
  /** Lower is evaluated first; the BANP has none. */
  readonly priority: number;
  readonly subject: AdminPeer;
  readonly ingress: readonly AdminRule[];
  readonly egress: readonly AdminRule[];
  readonly source: SourceRef;
}

const rec = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;

function readPeer(
  raw: Record<string, unknown>,
  where: SourceRef,
  diagnostics: Diagnostic[],
): AdminPeer | undefined {
  if (raw["namespaces"] !== undefined) {
    return {
      kind: "namespaces",
      namespaceSelector: parseLabelSelector(raw["namespaces"] ?? {}, where, diagnostics),
    };
  }
  const pods = rec(raw["pods"]);
  if (pods) {
    return {
      kind: "pods",
      namespaceSelector: parseLabelSelector(pods["namespaceSelector"] ?? {}, where, diagnostics),
      podSelector: parseLabelSelector(pods["podSelector"] ?? {}, where, diagnostics),
    };
  }
  if (Array.isArray(raw["networks"])) {
    const cidrs: Cidr[] = [];
    for (const n of raw["networks"]) {
      const c = tryParseCidr(String(n));
      if ("cidr" in c) cidrs.push(c.cidr);
      else {
        diagnostics.push({
          code: "SCHEMA",
          severity: "error",
          message: `${where.file}:${where.line}: networks entry ${JSON.stringify(n)}: ${c.error}`,
          source: where,
        });
      }
    }
    return { kind: "networks", cidrs };
  }
  diagnostics.push({
    code: "SCHEMA",
    severity: "warning",
    message: `${where.file}:${where.line}: peer ${JSON.stringify(raw)} is not understood (namespaces, pods or networks expected); it matches nothing`,
    source: where,
  });
  return undefined;
}

function readPorts(raw: unknown): AdminPort[] | undefined {
  if (!Array.isArray(raw) || raw.length === 0) return undefined;
  const out: AdminPort[] = [];
  for (const p of raw) {
    const x = rec(p) ?? {};
    const num = rec(x["portNumber"]);
    const range = rec(x["portRange"]);
    const proto = (v: unknown): Protocol => (v === "UDP" || v === "SCTP" ? v : "TCP");
    if (num)
      out.push({ kind: "number", protocol: proto(num["protocol"]), port: Number(num["port"]) });
    else if (range) {
      out.push({
        kind: "range",
        protocol: proto(range["protocol"]),
        start: Number(range["start"]),
        end: Number(range["end"]),
      });
    } else if (typeof x["namedPort"] === "string")
      out.push({ kind: "named", name: x["namedPort"] });
  }
  return out;
}

/** Reads every AdminNetworkPolicy and BaselineAdminNetworkPolicy among `objects`. */
export function readAdminNetworkPolicies(
  objects: readonly PolicyObject[],
  diagnostics: Diagnostic[],
): AdminNetworkPolicy[] {
  const out: AdminNetworkPolicy[] = [];
  for (const o of objects) {
    if (o.kind !== "AdminNetworkPolicy" && o.kind !== "BaselineAdminNetworkPolicy") continue;
    const at = (path: readonly (string | number)[]) => o.locate(path) ?? o.source;
    const spec = rec(o.raw["spec"]) ?? {};
    const subjectRaw = rec(spec["subject"]) ?? {};
    const subject = readPeer(subjectRaw, at(["spec", "subject"]), diagnostics);
    if (!subject) continue;
    const rules = (dir: "ingress" | "egress"): AdminRule[] => {
      const list = spec[dir];
      const peerKey = dir === "ingress" ? "from" : "to";
      return (Array.isArray(list) ? list : []).map((r, i) => {
        const x = rec(r) ?? {};
        const where = at(["spec", dir, i]);
        const action =
          x["action"] === "Allow" || x["action"] === "Deny" || x["action"] === "Pass"
            ? x["action"]
            : "Deny";
        const peers = (Array.isArray(x[peerKey]) ? (x[peerKey] as unknown[]) : [])
          .map((p) => readPeer(rec(p) ?? {}, where, diagnostics))
          .filter((p): p is AdminPeer => p !== undefined);
        const ports = readPorts(x["ports"]);
        return {
          name: String(x["name"] ?? `#${i + 1}`),
          action,
          peers,
          ...(ports ? { ports } : {}),
          source: {
            ...where,
            text: `${o.kind} ${o.name} ${dir} rule ${String(x["name"] ?? i + 1)}`,
          },
        };
      });
    };
    out.push({
      kind: o.kind,
      name: o.name,
      priority:
        o.kind === "AdminNetworkPolicy" ? Number(spec["priority"] ?? 0) : Number.POSITIVE_INFINITY,
      subject,
      ingress: rules("ingress"),
      egress: rules("egress"),
      source: { ...o.source, text: `${o.kind} ${o.name}` },
    });
  }
  return out.sort((a, b) => a.priority - b.priority);
}
