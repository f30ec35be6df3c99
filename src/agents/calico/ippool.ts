/**
 * @module agents/calico/ippool — Calico IPPool objects as kubectl prints them, either API group
 * (`projectcalico.org/v3` through the Calico API server or calicoctl, `crd.projectcalico.org/v1`
 * as stored in CRDs): spec.cidr, spec.natOutgoing (default false), spec.disabled, spec.allowedUses,
 * each with the line it is written on. Felix's NAT-outgoing rule reads natOutgoing only: a
 * disabled pool stays in the IP sets (libcalico-go k8s/resources/ippool.go: Masquerade =
 * natOutgoing whatever Disabled says; Disabled only stops IPAM allocating from it).
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { Diagnostic, SourceRef } from "../../model/types.ts";
import { type Cidr, tryParseCidr } from "../../net/cidr.ts";

export const IPPOOL_API_GROUPS = ["projectcalico.org", "crd.projectcalico.org"] as const;

/** One pool as written. */
export interface CalicoIpPool {
  readonly name: string;
  readonly object: KubeObject;
  /** spec.cidr as written; `cidr` when it reads as one. */
  readonly cidrText: string;
  readonly cidr?: Cidr;
  readonly cidrSource: SourceRef;
  readonly natOutgoing: boolean;
  /** Where natOutgoing is written; undefined when not set (Calico's default false applies). */
  readonly natOutgoingSource?: SourceRef;
  readonly disabled: boolean;
  /** spec.allowedUses; Calico's default is Workload and Tunnel. */
  readonly allowedUses: readonly string[];
}

/** Is this object a Calico IPPool (either API group)? */
export function isIpPool(o: KubeObject): boolean {
  return o.kind === "IPPool" && IPPOOL_API_GROUPS.some((g) => o.apiVersion.startsWith(`${g}/`));
}

/** Every IPPool of the snapshot, with Diagnostics for fields Calico would refuse. */
export function readIpPools(objects: readonly KubeObject[]): {
  pools: CalicoIpPool[];
  diagnostics: Diagnostic[];
} {
  const pools: CalicoIpPool[] = [];
  const diagnostics: Diagnostic[] = [];
  for (const o of objects.filter(isIpPool)) {
    const spec = (o.raw["spec"] ?? {}) as Record<string, unknown>;
    const cidrText = typeof spec["cidr"] === "string" ? spec["cidr"] : "";
    const cidrSource = o.locate(["spec", "cidr"]) ?? o.source;
    const parsed = cidrText ? tryParseCidr(cidrText) : { error: "spec.cidr is missing" };
    if ("error" in parsed) {
      diagnostics.push({
        code: "SCHEMA",
        severity: "warning",
        message: `IPPool ${o.name}: spec.cidr ${JSON.stringify(cidrText)} is not a CIDR (${parsed.error}); Calico refuses such a pool, so podpath leaves it out of the IP sets`,
        source: cidrSource,
      });
    }
    const nat = spec["natOutgoing"];
    const natSource = o.locate(["spec", "natOutgoing"]);
    if (nat !== undefined && typeof nat !== "boolean") {
      diagnostics.push({
        code: "SCHEMA",
        severity: "warning",
        message: `IPPool ${o.name}: spec.natOutgoing is ${JSON.stringify(nat)}, not a boolean; the API server refuses it, so podpath reads it as not set (false)`,
        source: natSource ?? o.source,
      });
    }
    const uses = Array.isArray(spec["allowedUses"])
      ? spec["allowedUses"].filter((u): u is string => typeof u === "string")
      : ["Workload", "Tunnel"];
    pools.push({
      name: o.name,
      object: o,
      cidrText,
      ...("cidr" in parsed ? { cidr: parsed.cidr } : {}),
      cidrSource,
      natOutgoing: nat === true,
      ...(natSource ? { natOutgoingSource: natSource } : {}),
      disabled: spec["disabled"] === true,
      allowedUses: uses,
    });
  }
  return { pools, diagnostics };
}

/** Does only LoadBalancer use this pool (Felix >= v3.32 leaves it out of the all-pools set)? */
export function isLoadBalancerOnly(p: CalicoIpPool): boolean {
  return p.allowedUses.length === 1 && p.allowedUses[0] === "LoadBalancer";
}
