/**
 * @module lab/translation — compares the evaluator's answer for a flow (a NatTrace) with what the
 * kernel did to it (a conntrack observation): same source address (within an SNAT range, and its
 * port range when one is given), same destination after DNAT, or an explicit "cannot decide".
 * Pure.
 */
import type { NatTrace, SourceOut } from "../iptables/nat-trace.ts";
import { formatIp, type Ip, tryParseIp } from "../net/cidr.ts";
import type { KernelObservation } from "./nat-sandbox.ts";

export interface Agreement {
  /** undefined: the evaluator said it cannot decide (allowed, never a disagreement). */
  readonly agree: boolean | undefined;
  /** The evaluator's answer in one line. */
  readonly predicted: string;
  /** The kernel's answer in one line. */
  readonly observed: string;
  /** Why they differ (empty when they agree). */
  readonly why: string;
}

function describeSource(s: SourceOut | undefined): string {
  if (!s?.ip) return "source unknown";
  const range = s.rangeEnd && s.rangeEnd.value !== s.ip.value ? `-${formatIp(s.rangeEnd)}` : "";
  const ports = s.ports ? `:${s.ports.from}-${s.ports.to}` : "";
  return `${s.how} ${formatIp(s.ip)}${range}${ports}`;
}

/** One line for a trace: decision and resulting source (and destination when rewritten). */
export function describeTrace(t: NatTrace): string {
  if (t.decision === "cannot-decide") {
    return `cannot decide: ${t.undecided?.reason ?? t.notes[0] ?? "unknown"}`;
  }
  const dst = t.dstOut && t.dstOut.how !== "unchanged" ? `, dst ${formatIp(t.dstOut.ip)}` : "";
  if (t.decision === "branches" && !t.sourceOut) {
    const alts = (t.branches ?? []).map((b) => describeSource(b.trace.sourceOut));
    return `branches: ${[...new Set(alts)].join(" | ")}${dst}`;
  }
  return `${t.decision}: ${describeSource(t.sourceOut)}${dst}`;
}

function within(s: SourceOut, ip: Ip, sport: number | undefined): boolean {
  if (!s.ip || s.ip.family !== ip.family) return false;
  const end = s.rangeEnd ?? s.ip;
  if (ip.value < s.ip.value || ip.value > end.value) return false;
  if (s.ports && sport !== undefined && (sport < s.ports.from || sport > s.ports.to)) return false;
  return true;
}

/** Whether the kernel's translation is one the trace allows. */
export function compareTranslation(t: NatTrace, obs: KernelObservation): Agreement {
  const predicted = describeTrace(t);
  const observed = obs.error
    ? `no translation observed (${obs.error})`
    : `source ${obs.source}${obs.sport === undefined ? "" : `:${obs.sport}`}, dst ${obs.destination}`;
  const result = (agree: boolean | undefined, why = "") => ({ agree, predicted, observed, why });
  if (t.decision === "cannot-decide") return result(undefined);
  if (obs.error || obs.source === undefined) {
    return t.decision === "dropped" ? result(true) : result(false, "the kernel recorded no flow");
  }
  if (t.decision === "dropped")
    return result(false, "the evaluator drops it; the kernel passed it");
  const src = tryParseIp(obs.source);
  if (!src) return result(false, `unreadable kernel source ${obs.source}`);
  const dst = obs.destination === undefined ? undefined : tryParseIp(obs.destination);
  // compared as addresses: an IPv6 address has more than one spelling
  if (
    t.dstOut &&
    obs.destination !== undefined &&
    !(dst?.family === t.dstOut.ip.family && dst.value === t.dstOut.ip.value)
  ) {
    return result(false, `destination ${obs.destination} is not ${formatIp(t.dstOut.ip)}`);
  }
  const options =
    t.sourceOut !== undefined ? [t.sourceOut] : (t.branches ?? []).map((b) => b.trace.sourceOut);
  if (options.length === 0 || options.some((s) => s?.ip === undefined)) {
    // the evaluator did not name an address: not a claim that can be checked
    return result(undefined);
  }
  const ok = options.some((s) => s !== undefined && within(s, src, obs.sport));
  return ok ? result(true) : result(false, `kernel source ${obs.source} is not ${predicted}`);
}
