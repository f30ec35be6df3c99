/**
 * @module policy/test-helpers/netpol-golden — reads netpol-analyzer's `explain` golden text and
 * checks podpath's verdicts and citations against it, pair by pair. Test code only.
 */
import { parseIp } from "../../net/cidr.ts";
import { formatConnections, NO_CONNECTIONS, parseConnections, union } from "../connection-set.ts";
import { externalIntervals, workloadsOf } from "../connlist.ts";
import { connectionsBetween } from "../evaluate.ts";
import type { Endpoint, PolicyWorld } from "../policy-world.ts";

/** How podpath's citations name an endpoint. */
export function peerLabel(e: Endpoint): string {
  if (e.kind === "pod") return `${e.namespace}/${e.workload.name}[${e.workload.kind}]`;
  const v4 = (x: bigint) => [24n, 16n, 8n, 0n].map((sh) => String((x >> sh) & 255n)).join(".");
  return `${v4(e.ip.value)}-${v4(e.end ?? e.ip.value)}[External]`;
}

/**
 * A golden peer as endpoints: a workload, or an external interval split into the world's atomic
 * intervals. A string is returned when the peer cannot be mapped (a failure to report).
 */
export function goldenEndpoints(world: PolicyWorld, text: string): Endpoint[] | string {
  const m = /^(.*)\[(.*)\]$/.exec(text);
  if (m?.[2] === "External") {
    const [a, b] = m[1]!.split("-");
    const lo = parseIp(a!).value;
    const hi = parseIp(b!).value;
    const atoms = externalIntervals(world).filter(([s, e]) => s >= lo && e <= hi);
    const covered = atoms.reduce((n, [s, e]) => n + (e - s + 1n), 0n);
    if (covered !== hi - lo + 1n) return `${text} is not a union of podpath's intervals`;
    return atoms.map(([s, e]) => ({ kind: "external", ip: { family: 4, value: s }, end: e }));
  }
  const pod = workloadsOf(world).get(text);
  return pod ? [pod] : `${text} is not a workload podpath knows`;
}

/**
 * Compares every `Connections between SRC => DST` block of an explain golden with podpath: the
 * allowed connections, and the exact set of policy lines (NetworkPolicy, AdminNetworkPolicy,
 * BaselineAdminNetworkPolicy) it cites. Returns the mismatches, empty when all agree.
 */
export function explainMismatches(world: PolicyWorld, golden: string): string[] {
  const failures: string[] = [];
  const blocks = golden.split(/^-{20,}$/m).slice(1);
  if (blocks.length === 0) failures.push("no blocks in the golden");
  for (const b of blocks) {
    const head = /Connections between (.*) => (.*):\n/.exec(b);
    if (!head) {
      failures.push(`block without header: ${b.slice(0, 80)}`);
      continue;
    }
    const [, src, dst] = head as unknown as [string, string, string];
    let allowed = NO_CONNECTIONS;
    const allowSection = b.split("Denied connections:")[0]!;
    for (const m of allowSection.matchAll(/^\tAllowed (.*) due to/gm)) {
      const c = parseConnections(m[1]!);
      if (!c) failures.push(`${src} => ${dst}: cannot read ${m[1]}`);
      else allowed = union(allowed, c);
    }
    const cited = [
      ...new Set(
        [...b.matchAll(/^\t+(?:- )?((?:Baseline)?(?:Admin)?NetworkPolicy '.*)$/gm)].map(
          (m) => m[1]!,
        ),
      ),
    ].sort();
    const S = goldenEndpoints(world, src);
    const D = goldenEndpoints(world, dst);
    if (typeof S === "string" || typeof D === "string") {
      failures.push(`${src} => ${dst}: ${typeof S === "string" ? S : D}`);
      continue;
    }
    for (const s of S) {
      for (const d of D) {
        const r = connectionsBetween(world, s, d);
        const mine = [
          ...new Set(
            [...r.egress.citations, ...r.ingress.citations].map((c) =>
              c.text.replaceAll(peerLabel(s), src).replaceAll(peerLabel(d), dst),
            ),
          ),
        ].sort();
        const got = formatConnections(r.connections);
        const want = formatConnections(allowed);
        if (got !== want) failures.push(`${src} => ${dst}: allows ${got}, golden ${want}`);
        if (mine.join("\n") !== cited.join("\n")) {
          failures.push(
            `${src} => ${dst}: cites\n  ${mine.join("\n  ")}\ngolden\n  ${cited.join("\n  ")}`,
          );
        }
      }
    }
  }
  return failures;
}
