/**
 * @module policy/network-policy — NetworkPolicy objects (networking.k8s.io/v1) as a typed model:
 * pod selector, policy types (defaulted as the API server does), ingress and egress rules with
 * peers (pod/namespace selectors, ipBlock with except) and ports (protocol, number or name,
 * endPort), each rule with the file and line it is written at.
 */
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { type Cidr, contains, formatCidr, tryParseCidr } from "../net/cidr.ts";
import { type LabelSelector, parseLabelSelector } from "./label-selector.ts";

export type Protocol = "TCP" | "UDP" | "SCTP";
export const PROTOCOLS: readonly Protocol[] = ["TCP", "UDP", "SCTP"];

export type PolicyPeer =
  | {
      readonly kind: "selector";
      /** Absent: every pod (in the selected namespaces). */
      readonly podSelector?: LabelSelector;
      /** Absent: the policy's own namespace only. */
      readonly namespaceSelector?: LabelSelector;
      readonly source: SourceRef;
    }
  | {
      readonly kind: "ipBlock";
      readonly cidr: Cidr;
      readonly except: readonly Cidr[];
      readonly source: SourceRef;
    };

export interface PolicyPort {
  readonly protocol: Protocol;
  /** Absent: every port of the protocol. A string is a named container port. */
  readonly port?: number | string;
  readonly endPort?: number;
  readonly source: SourceRef;
}

export interface PolicyRule {
  readonly direction: "ingress" | "egress";
  /** 0-based position in its list; explanations print it 1-based (`Ingress rule #1`). */
  readonly index: number;
  /** Undefined: every peer (the rule has no from/to, or an empty one). */
  readonly peers?: readonly PolicyPeer[];
  /** Undefined: every port and protocol. */
  readonly ports?: readonly PolicyPort[];
  readonly source: SourceRef;
}

export interface NetworkPolicy {
  readonly name: string;
  readonly namespace: string;
  readonly podSelector: LabelSelector;
  readonly affectsIngress: boolean;
  readonly affectsEgress: boolean;
  readonly ingress: readonly PolicyRule[];
  readonly egress: readonly PolicyRule[];
  readonly source: SourceRef;
}

/** The few fields of a manifest object the policy reader needs (evidence/kube-objects shape). */
export interface PolicyObject {
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
  readonly raw: Readonly<Record<string, unknown>>;
  readonly source: SourceRef;
  locate(path: readonly (string | number)[]): SourceRef | undefined;
}

const rec = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;

/** Reads every NetworkPolicy among `objects`. Invalid parts are reported and made to match nothing. */
export function readNetworkPolicies(objects: readonly PolicyObject[]): Parsed<NetworkPolicy[]> {
  const diagnostics: Diagnostic[] = [];
  const out: NetworkPolicy[] = [];
  for (const o of objects) {
    if (o.kind !== "NetworkPolicy") continue;
    const at = (path: readonly (string | number)[]): SourceRef => o.locate(path) ?? o.source;
    const spec = rec(o.raw["spec"]) ?? {};
    const namespace = o.namespace ?? "default";
    const podSelector = parseLabelSelector(
      spec["podSelector"],
      at(["spec", "podSelector"]),
      diagnostics,
    );
    const rules = (dir: "ingress" | "egress"): PolicyRule[] => {
      const list = spec[dir];
      if (list === undefined || list === null) return [];
      if (!Array.isArray(list)) {
        const where = at(["spec", dir]);
        diagnostics.push({
          code: "SCHEMA",
          severity: "error",
          message: `${where.file}:${where.line}: spec.${dir} must be a list of rules; ignored`,
          source: where,
        });
        return [];
      }
      return list.map((r, index) => readRule(rec(r) ?? {}, dir, index, at, diagnostics));
    };
    const ingress = rules("ingress");
    const egress = rules("egress");
    // API defaulting: Ingress always; Egress when the policy has egress rules.
    let affectsIngress = true;
    let affectsEgress = egress.length > 0;
    const types = spec["policyTypes"];
    if (Array.isArray(types) && types.length > 0) {
      affectsIngress = types.includes("Ingress");
      affectsEgress = types.includes("Egress");
      for (const [i, t] of types.entries()) {
        if (t !== "Ingress" && t !== "Egress") {
          const where = at(["spec", "policyTypes", i]);
          diagnostics.push({
            code: "SCHEMA",
            severity: "error",
            message: `${where.file}:${where.line}: policyTypes entry ${JSON.stringify(t)}: expected Ingress or Egress`,
            source: where,
          });
        }
      }
    }
    out.push({
      name: o.name,
      namespace,
      podSelector,
      affectsIngress,
      affectsEgress,
      ingress,
      egress,
      source: { ...o.source, text: `NetworkPolicy ${namespace}/${o.name}` },
    });
  }
  return { value: out, diagnostics };
}

function readRule(
  r: Record<string, unknown>,
  direction: "ingress" | "egress",
  index: number,
  at: (path: readonly (string | number)[]) => SourceRef,
  diagnostics: Diagnostic[],
): PolicyRule {
  const base = ["spec", direction, index];
  const peerKey = direction === "ingress" ? "from" : "to";
  const source = { ...at(base), text: `${direction} rule #${index + 1}` };
  const rawPeers = r[peerKey];
  let peers: PolicyPeer[] | undefined;
  if (Array.isArray(rawPeers) && rawPeers.length > 0) {
    peers = [];
    for (const [i, p] of rawPeers.entries()) {
      const peer = readPeer(rec(p) ?? {}, peerKey, [...base, peerKey, i], at, diagnostics);
      if (peer) peers.push(peer);
    }
  }
  const rawPorts = r["ports"];
  let ports: PolicyPort[] | undefined;
  if (Array.isArray(rawPorts) && rawPorts.length > 0) {
    ports = [];
    for (const [i, p] of rawPorts.entries()) {
      const port = readPort(rec(p) ?? {}, at([...base, "ports", i]), diagnostics);
      if (port) ports.push(port);
    }
    if (ports.length === 0) ports = [];
  }
  return {
    direction,
    index,
    ...(peers === undefined ? {} : { peers }),
    ...(ports === undefined ? {} : { ports }),
    source,
  };
}

/** One `from`/`to` peer at `path`: an ipBlock or selectors; undefined (with a diagnostic) when it matches nothing. */
function readPeer(
  peer: Record<string, unknown>,
  peerKey: "from" | "to",
  path: readonly (string | number)[],
  at: (path: readonly (string | number)[]) => SourceRef,
  diagnostics: Diagnostic[],
): PolicyPeer | undefined {
  const where = at(path);
  const ipBlock = rec(peer["ipBlock"]);
  if (ipBlock) return readIpBlock(ipBlock, where, diagnostics);
  const hasPod = peer["podSelector"] !== undefined && peer["podSelector"] !== null;
  const hasNs = peer["namespaceSelector"] !== undefined && peer["namespaceSelector"] !== null;
  if (!hasPod && !hasNs) {
    diagnostics.push({
      code: "SCHEMA",
      severity: "error",
      message: `${where.file}:${where.line}: a ${peerKey} peer needs podSelector, namespaceSelector or ipBlock; this peer matches nothing`,
      source: where,
    });
    return undefined;
  }
  return {
    kind: "selector",
    ...(hasPod
      ? {
          podSelector: parseLabelSelector(
            peer["podSelector"],
            at([...path, "podSelector"]),
            diagnostics,
          ),
        }
      : {}),
    ...(hasNs
      ? {
          namespaceSelector: parseLabelSelector(
            peer["namespaceSelector"],
            at([...path, "namespaceSelector"]),
            diagnostics,
          ),
        }
      : {}),
    source: where,
  };
}

/** `ipBlock: {cidr, except}`; a bad cidr matches nothing, a bad except entry is left out. */
function readIpBlock(
  ipBlock: Record<string, unknown>,
  where: SourceRef,
  diagnostics: Diagnostic[],
): PolicyPeer | undefined {
  const parsed = tryParseCidr(String(ipBlock["cidr"] ?? ""));
  if ("error" in parsed) {
    diagnostics.push({
      code: "SCHEMA",
      severity: "error",
      message: `${where.file}:${where.line}: ipBlock.cidr ${JSON.stringify(ipBlock["cidr"])}: ${parsed.error}; this peer matches nothing`,
      source: where,
    });
    return undefined;
  }
  const except: Cidr[] = [];
  for (const e of Array.isArray(ipBlock["except"]) ? ipBlock["except"] : []) {
    const x = tryParseCidr(String(e));
    if ("error" in x || !contains(parsed.cidr, x.cidr)) {
      diagnostics.push({
        code: "SCHEMA",
        severity: "error",
        message: `${where.file}:${where.line}: ipBlock.except ${JSON.stringify(e)}: ${"error" in x ? x.error : `not inside ${formatCidr(parsed.cidr)}`}`,
        source: where,
      });
      if ("error" in x) continue;
    }
    except.push(x.cidr);
  }
  return { kind: "ipBlock", cidr: parsed.cidr, except, source: where };
}

/** One `ports` entry; undefined (with a diagnostic) for a protocol other than TCP, UDP, SCTP. */
function readPort(
  x: Record<string, unknown>,
  where: SourceRef,
  diagnostics: Diagnostic[],
): PolicyPort | undefined {
  const protocol = String(x["protocol"] ?? "TCP");
  if (protocol !== "TCP" && protocol !== "UDP" && protocol !== "SCTP") {
    diagnostics.push({
      code: "SCHEMA",
      severity: "error",
      message: `${where.file}:${where.line}: protocol ${JSON.stringify(protocol)}: expected TCP, UDP or SCTP; this port matches nothing`,
      source: where,
    });
    return undefined;
  }
  const port = x["port"];
  const endPort = x["endPort"];
  const entry: {
    protocol: Protocol;
    port?: number | string;
    endPort?: number;
    source: SourceRef;
  } = {
    protocol,
    source: where,
  };
  if (typeof port === "number" || (typeof port === "string" && port !== "")) {
    entry.port = typeof port === "string" && /^[0-9]+$/.test(port) ? Number(port) : port;
  }
  if (typeof endPort === "number") {
    if (typeof entry.port !== "number" || endPort < entry.port) {
      diagnostics.push({
        code: "SCHEMA",
        severity: "error",
        message: `${where.file}:${where.line}: endPort ${endPort} needs a numeric port not above it; endPort ignored`,
        source: where,
      });
    } else {
      entry.endPort = endPort;
    }
  }
  return entry;
}
