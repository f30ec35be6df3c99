/**
 * @module lab/path-agreement6 — podpath's outcome for an IPv6 packet as a test of the kernel's
 * words (lab/path-agreement), with routing's refusals named as IPv6 answers them: a prohibit
 * route or rule with ICMPv6 administratively prohibited, an unreachable route or rule and no
 * route at all with ICMPv6 no route (ip6_pkt_discard), blackhole silently; for the node's own
 * packets the sender gets an error and nothing is on the wire.
 */
import type { PathOutcome } from "../path/path-types.ts";
import { outcomeTest } from "./path-agreement.ts";
import type { PathFlow } from "./path-gen.ts";

export function outcomeTest6(o: PathOutcome, f: PathFlow): ((k: string) => boolean) | undefined {
  const v = o.verdict;
  if (v.kind !== "unroutable") return outcomeTest(o, f);
  if (f.origin === "host" || v.how === "blackhole") return (k) => k === "silent";
  const code = v.how === "prohibit" ? "icmp6-adm-prohibited" : "icmp6-no-route";
  // the error may be rate limited (icmp_global_allow): silent is allowed too
  return (k) => k === `rejected ${code}` || k === "silent";
}
