/**
 * @module agents/cilium/egress-nat-policy — GKE's EgressNATPolicy objects
 * (`networking.gke.io/v1`, cluster-scoped), with which GKE Dataplane V2 (anetd, Cilium inside)
 * configures IP masquerade on Autopilot clusters: `spec.action: NoSNAT` and `spec.destinations`,
 * a list of `{cidr: …}`; packets from pods to those destinations keep the pod's address. GKE
 * writes managed policies (names starting `gke-`, not editable) and a `default` one that users
 * edit (docs: cloud.google.com/kubernetes-engine/docs/how-to/egress-nat-policy-ip-masq-autopilot).
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, contains, type Ip, tryParseCidr } from "../../net/cidr.ts";

export interface EgressNatDestination {
  readonly policy: string;
  readonly text: string;
  readonly cidr: Cidr;
  readonly source: SourceRef;
  /** A GKE-managed policy (`gke-…`): not editable by users. */
  readonly managed: boolean;
}

export interface EgressNatPolicy {
  readonly object: KubeObject;
  readonly action: string;
  readonly destinations: readonly EgressNatDestination[];
}

export const isEgressNatPolicy = (o: KubeObject) =>
  o.kind === "EgressNATPolicy" && o.apiVersion.startsWith("networking.gke.io/");

/** Every EgressNATPolicy of the snapshot with its NoSNAT destinations, each cited. */
export function readEgressNatPolicies(objects: readonly KubeObject[]): Parsed<EgressNatPolicy[]> {
  const diagnostics: Diagnostic[] = [];
  const out: EgressNatPolicy[] = [];
  for (const o of objects.filter(isEgressNatPolicy)) {
    const spec = (o.raw["spec"] ?? {}) as Record<string, unknown>;
    const action = typeof spec["action"] === "string" ? spec["action"] : "";
    if (action !== "NoSNAT") {
      diagnostics.push({
        code: "GKE_EGRESS_NAT_ACTION",
        severity: "warning",
        message: `EgressNATPolicy ${o.name}: expected spec.action NoSNAT (the only action GKE documents), got "${action}"; its destinations are not read`,
        source: o.locate(["spec", "action"]) ?? o.source,
      });
      out.push({ object: o, action, destinations: [] });
      continue;
    }
    const list = Array.isArray(spec["destinations"]) ? (spec["destinations"] as unknown[]) : [];
    const destinations: EgressNatDestination[] = [];
    list.forEach((d, i) => {
      const text =
        typeof d === "string"
          ? d
          : typeof d === "object" &&
              d !== null &&
              typeof (d as Record<string, unknown>)["cidr"] === "string"
            ? ((d as Record<string, unknown>)["cidr"] as string)
            : undefined;
      const source =
        o.locate(["spec", "destinations", i, "cidr"]) ??
        o.locate(["spec", "destinations", i]) ??
        o.source;
      const r =
        text === undefined ? undefined : tryParseCidr(text.trim(), { allowBareAddress: false });
      if (!r || !("cidr" in r)) {
        diagnostics.push({
          code: "GKE_EGRESS_NAT_CIDR",
          severity: "warning",
          message: `EgressNATPolicy ${o.name}: expected spec.destinations[${i}].cidr to be a CIDR, got ${JSON.stringify(d)}`,
          source,
        });
        return;
      }
      destinations.push({
        policy: o.name,
        text: text!.trim(),
        cidr: r.cidr,
        source,
        managed: o.name.startsWith("gke-"),
      });
    });
    out.push({ object: o, action, destinations });
  }
  return { value: out, diagnostics };
}

/** The NoSNAT destination that holds `dst`, longest prefix first. */
export function noSnatDestinationFor(
  policies: readonly EgressNatPolicy[],
  dst: Ip,
): EgressNatDestination | undefined {
  return policies
    .flatMap((p) => p.destinations)
    .filter((d) => d.cidr.family === dst.family && contains(d.cidr, dst))
    .sort((a, b) => b.cidr.prefix - a.cidr.prefix)[0];
}
