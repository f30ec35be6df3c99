/**
 * @module cases/masquerade/remote — the far side: which site a destination belongs to, and
 * whether that site routes a given source address back (routesBack and the VPN's cluster-side
 * traffic selectors), with the lines that say so.
 */
import type { RemoteSite } from "../../evidence/remote-site.ts";
import type { Evidence } from "../../model/types.ts";
import { refToEvidence } from "../../model/types.ts";
import { contains, formatCidr, type Ip } from "../../net/cidr.ts";

export interface ReturnPath {
  readonly site: RemoteSite;
  /** Does the site route the source back? undefined when the file does not say. */
  readonly routesBack: boolean | undefined;
  /** Do the VPN's cluster-side selectors carry the source? undefined without a vpn section. */
  readonly selectorsCarry: boolean | undefined;
  /** The lines that decide it. */
  readonly evidence: Evidence[];
  /** What the site does route back, for the explanation. */
  readonly routedText: string;
}

export function siteFor(sites: readonly RemoteSite[], dst: Ip): RemoteSite | undefined {
  return sites.find((s) => s.prefixes.some((p) => contains(p.cidr, dst)));
}

/** Can replies to `source` find their way back from `site`? */
export function returnPath(site: RemoteSite, source: Ip): ReturnPath {
  const evidence: Evidence[] = [];
  let routesBack: boolean | undefined;
  if (site.routesBack !== undefined) {
    const hit = site.routesBack.find((r) => contains(r.cidr, source));
    routesBack = hit !== undefined;
    if (hit) evidence.push(refToEvidence(hit.source));
    else evidence.push(refToEvidence(site.routesBack[0]?.source ?? site.source));
  }
  let selectorsCarry: boolean | undefined;
  const sel = site.vpn?.localTrafficSelectors;
  if (sel !== undefined) {
    const hit = sel.find((r) => contains(r.cidr, source));
    selectorsCarry = hit !== undefined;
    if (hit) evidence.push(refToEvidence(hit.source));
    else evidence.push(refToEvidence(sel[0]?.source ?? site.vpn?.source ?? site.source));
  }
  const routedText = (site.routesBack ?? []).map((r) => formatCidr(r.cidr)).join(", ") || "nothing";
  return { site, routesBack, selectorsCarry, evidence, routedText };
}
