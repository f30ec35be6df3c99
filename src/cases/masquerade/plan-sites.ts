/**
 * @module cases/masquerade/plan-sites — what a `keep-pod-identity` plan asks of the far side: per
 * site that holds a destination, the pod ranges its return routes, VPN traffic selectors and
 * firewall allowlists must learn, and the site file's fields before and after as a diff.
 */
import type { RemoteSite } from "../../evidence/remote-site.ts";
import { type Cidr, contains, excludeCidrs, formatCidr, mergeCidrs } from "../../net/cidr.ts";
import type { TracedDestination } from "./destinations.ts";
import type { SiteChange } from "./plan.ts";

type AllowlistAdd = SiteChange["allowlistSourcesAdd"][number];

export function siteDiff(
  site: RemoteSite,
  routesAdd: readonly string[],
  selAdd: readonly string[],
  allowAdd: readonly AllowlistAdd[],
): string[] {
  const lines = [`# ${site.source.file}`];
  const list = (
    name: string,
    indent: string,
    before: readonly string[],
    add: readonly string[],
  ) => {
    if (add.length === 0) return;
    lines.push(`${indent}${name}:`);
    for (const b of before) lines.push(`  ${indent}  - ${b}`);
    for (const a of add) lines.push(`+ ${indent}  - ${a}`);
  };
  list(
    "routesBack",
    "",
    (site.routesBack ?? []).map((r) => formatCidr(r.cidr)),
    routesAdd,
  );
  if (site.vpn) {
    if (selAdd.length > 0) lines.push("vpn:");
    list(
      "localTrafficSelectors",
      "  ",
      (site.vpn.localTrafficSelectors ?? []).map((r) => formatCidr(r.cidr)),
      selAdd,
    );
  }
  if (allowAdd.length > 0) lines.push("allowlists:");
  for (const a of allowAdd) {
    const al = site.allowlists.find((x) => x.name === a.name);
    lines.push(`  - name: ${a.name}`);
    list(
      "sources",
      "    ",
      (al?.sources ?? []).map((r) => formatCidr(r.cidr)),
      a.add,
    );
  }
  return lines;
}

/** The pod ranges not yet in `have`, as text. */
const podRangesMissing = (podRanges: readonly Cidr[], have: readonly Cidr[]): string[] =>
  excludeCidrs(mergeCidrs(podRanges), have).map(formatCidr);

/** One site's change: the pod ranges its routes, selectors and allowlists must learn. */
function siteChange(
  s: RemoteSite,
  targets: readonly TracedDestination[],
  podRanges: readonly Cidr[],
): SiteChange {
  const routesAdd = podRangesMissing(
    podRanges,
    (s.routesBack ?? []).map((r) => r.cidr),
  );
  const selAdd = s.vpn?.localTrafficSelectors
    ? podRangesMissing(
        podRanges,
        s.vpn.localTrafficSelectors.map((r) => r.cidr),
      )
    : [];
  // firewall scope: an allowlist toward the destination that names sources admits pods too
  const allowAdd = s.allowlists
    .filter(
      (a) =>
        a.sources.length > 0 &&
        (a.destinations.length === 0 ||
          a.destinations.some((d) => targets.some((t) => contains(d.cidr, t.ip)))),
    )
    .map((a) => ({
      name: a.name,
      add: podRangesMissing(
        podRanges,
        a.sources.map((x) => x.cidr),
      ),
    }))
    .filter((a) => a.add.length > 0);
  return {
    site: s.name,
    file: s.source.file,
    routesBackAdd: routesAdd,
    selectorsAdd: selAdd,
    allowlistSourcesAdd: allowAdd,
    diff: siteDiff(s, routesAdd, selAdd, allowAdd),
  };
}

/** keep-pod-identity: what each far site that holds a destination must learn. */
export function siteChanges(
  sites: readonly RemoteSite[],
  targets: readonly TracedDestination[],
  podRanges: readonly Cidr[],
): SiteChange[] {
  return sites
    .filter((s) => targets.some((t) => s.prefixes.some((p) => contains(p.cidr, t.ip))))
    .map((s) => siteChange(s, targets, podRanges));
}
