/**
 * @module cases/masquerade/plan-impact — what names pod addresses and silently stops matching once
 * a `narrow` plan masquerades more: far-side allowlists that admit pod addresses toward a range
 * that is now masqueraded, return routes for the pod range, and NetworkPolicy ipBlocks that name
 * pod addresses; each with its file and line.
 */
import { goParseCidr } from "../../agents/ip-masq-agent/go-net.ts";
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { RemoteSite } from "../../evidence/remote-site.ts";
import { readNetworkPolicy } from "../../k8s/objects.ts";
import { type Cidr, formatCidr, overlaps } from "../../net/cidr.ts";
import type { PodAddressReference } from "./plan.ts";

/** The far sites' allowlists and return routes that name pod addresses. */
function siteReferences(
  sites: readonly RemoteSite[],
  podRanges: readonly Cidr[],
  changed: readonly Cidr[],
): PodAddressReference[] {
  const out: PodAddressReference[] = [];
  for (const s of sites) {
    for (const a of s.allowlists) {
      const podSources = a.sources.filter((x) => podRanges.some((p) => overlaps(p, x.cidr)));
      const affected =
        a.destinations.length === 0 ||
        a.destinations.some((d) => changed.some((c) => overlaps(c, d.cidr)));
      for (const src of podSources) {
        if (!affected) continue;
        out.push({
          what: `allowlist ${a.name} of ${s.name}`,
          file: src.source.file,
          line: src.source.line,
          ...(src.source.text ? { text: src.source.text } : {}),
          consequence: `admits ${formatCidr(src.cidr)} (pod addresses); after the change the requests arrive from node addresses and stop matching`,
        });
      }
    }
    for (const r of s.routesBack ?? []) {
      if (podRanges.some((p) => overlaps(p, r.cidr))) {
        out.push({
          what: `return route of ${s.name}`,
          file: r.source.file,
          line: r.source.line,
          ...(r.source.text ? { text: r.source.text } : {}),
          consequence:
            "routes pod addresses back; harmless afterwards, but no longer used for the destinations that now see node addresses",
        });
      }
    }
  }
  return out;
}

type PolicyPeers = { from?: unknown[]; to?: unknown[] }[] | undefined;

/** One NetworkPolicy's ipBlocks (of `dir`) that name pod addresses. */
function policyReferences(
  o: KubeObject,
  dir: "ingress" | "egress",
  rules: PolicyPeers,
  podRanges: readonly Cidr[],
  out: PodAddressReference[],
): void {
  (rules ?? []).forEach((rule, i) => {
    const peers = ((dir === "ingress" ? rule.from : rule.to) ?? []) as {
      ipBlock?: { cidr?: string };
    }[];
    peers.forEach((peer, j) => {
      const text = peer.ipBlock?.cidr;
      if (!text) return;
      const r = goParseCidr(text);
      if (!("ok" in r) || !podRanges.some((p) => overlaps(p, r.ok.cidr))) return;
      const ref =
        o.locate(["spec", dir, i, dir === "ingress" ? "from" : "to", j, "ipBlock", "cidr"]) ??
        o.source;
      out.push({
        what: `NetworkPolicy ${o.namespace ?? "default"}/${o.name} ${dir} ipBlock`,
        file: ref.file,
        line: ref.line,
        ...(ref.text ? { text: ref.text } : {}),
        consequence:
          "names pod addresses in an ipBlock; traffic that is now masqueraded carries a node address instead",
      });
    });
  });
}

/** Every NetworkPolicy ipBlock that names pod addresses, ingress then egress, in object order. */
function networkPolicyReferences(
  objects: readonly KubeObject[],
  podRanges: readonly Cidr[],
): PodAddressReference[] {
  const out: PodAddressReference[] = [];
  for (const o of objects) {
    if (o.kind !== "NetworkPolicy") continue;
    const np = readNetworkPolicy(o).value;
    if (!np) continue;
    const raw = o.raw as { spec?: { ingress?: PolicyPeers; egress?: PolicyPeers } };
    policyReferences(o, "ingress", raw.spec?.ingress, podRanges, out);
    policyReferences(o, "egress", raw.spec?.egress, podRanges, out);
  }
  return out;
}

/**
 * What names pod addresses and will silently stop matching when the ranges `changed` are
 * masqueraded: far sites first, then NetworkPolicies.
 */
export function podAddressReferences(
  objects: readonly KubeObject[],
  sites: readonly RemoteSite[],
  podRanges: readonly Cidr[],
  changed: readonly Cidr[],
): PodAddressReference[] {
  return [
    ...siteReferences(sites, podRanges, changed),
    ...networkPolicyReferences(objects, podRanges),
  ];
}
