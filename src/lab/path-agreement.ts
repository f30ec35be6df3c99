/**
 * @module lab/path-agreement
 *
 * The words the whole-path kernel differentials (lab/path-differential, lab/nft-path-differential)
 * compare in: the kernel's verdict as the sandbox read it, each of podpath's outcomes as a test
 * that admits the kernel's words or not, and podpath's outcomes as one line for a failure message.
 */
import { formatIp } from "../net/cidr.ts";
import type { PathOutcome } from "../path/path-types.ts";
import type { PathFlow } from "./path-gen.ts";
import type { KernelPathVerdict } from "./path-sandbox.ts";

/** The kernel's verdict in words. */
export function kernelWords(v: KernelPathVerdict): string {
  switch (v.kind) {
    case "delivered":
    case "silent":
      return v.kind;
    case "rejected":
      return `rejected ${v.with}`;
    case "forwarded":
      return `forwarded ${v.dev} ${v.src} > ${v.dst}${v.dport !== undefined ? `:${v.dport}` : ""}`;
    case "not-established":
      return `not established (${v.why})`;
  }
}

/**
 * podpath's outcome as a test of the kernel's words; undefined for an undecided outcome (it
 * admits anything). Routing's refusals are named as the kernel answers them: a route of type
 * unreachable with host unreachable, an `ip rule` unreachable or no route with net unreachable,
 * prohibit with admin prohibited, blackhole silently; for the node's own packets the sender
 * gets an error and nothing is on the wire.
 */
export function outcomeTest(o: PathOutcome, f: PathFlow): ((k: string) => boolean) | undefined {
  const v = o.verdict;
  const is = (w: string) => (k: string) => k === w;
  switch (v.kind) {
    case "delivered":
      return is("delivered");
    case "dropped":
      return is("silent");
    case "rejected":
      return is(`rejected ${v.with}`);
    case "undecided":
      return undefined;
    case "unroutable": {
      if (f.origin === "host" || v.how === "blackhole") return is("silent");
      // ip_error sends at most 5 errors, then 1 a second, per source (net.ipv4.route.error_cost,
      // a setting of the root namespace only): the error may not come
      const byRule = v.by?.file.includes("ip-rule") ?? false;
      const code =
        v.how === "prohibit"
          ? "icmp-admin-prohibited"
          : v.how === "unreachable" && !byRule
            ? "icmp-host-unreachable"
            : "icmp-net-unreachable";
      return (k) => k === `rejected ${code}` || k === "silent";
    }
    case "forwarded": {
      const head = `forwarded ${v.dev ?? "?"} `;
      const tail = ` > ${formatIp(v.dst)}${f.proto !== "icmp" && v.port !== undefined ? `:${v.port}` : ""}`;
      if (v.src) return is(`${head}${formatIp(v.src)}${tail}`);
      // the source is not decided: any source, the rest as said
      return (k) => k.startsWith(head) && k.endsWith(tail);
    }
  }
}

export function podpathWords(outcomes: readonly PathOutcome[]): string {
  return outcomes
    .map((o) => {
      const v = o.verdict;
      if (v.kind === "forwarded")
        return `forwarded ${v.dev} ${v.src ? formatIp(v.src) : "?"} > ${formatIp(v.dst)}:${v.port ?? ""}`;
      if (v.kind === "rejected") return `rejected ${v.with}`;
      if (v.kind === "unroutable") return `unroutable ${v.how}`;
      if (v.kind === "undecided") return `undecided (${v.reason})`;
      return v.kind;
    })
    .join(" | ");
}
