/**
 * @module live/collect-commands — the fixed, read-only commands podpath runs inside pods (pod
 * state) and inside its own collector pods (node state). Nothing else is ever executed; the
 * read-only test checks every exec against these lists.
 */
import type { Artifact } from "../snapshot/layout.ts";

export interface ReadCommand {
  /** The snapshot file it fills: `<artifact>.txt`. */
  readonly artifact: Artifact;
  readonly argv: readonly string[];
  /** Tried when the image lacks the first command (distroless images have no sysctl). */
  readonly fallback?: readonly string[];
}

const SYSCTL_KEYS = [
  "net.ipv4.ip_forward",
  "net.ipv4.conf.all.rp_filter",
  "net.ipv4.conf.default.rp_filter",
] as const;

/** The fallback reads /proc directly; its output is re-rendered as `sysctl` prints it. */
export const SYSCTL_PROC_FALLBACK = ["cat", "/proc/sys/net/ipv4/ip_forward"] as const;

/** Pod state, read in the pod's own network namespace (its first or default container). */
export const POD_COMMANDS: readonly ReadCommand[] = [
  { artifact: "sysctl", argv: ["sysctl", ...SYSCTL_KEYS], fallback: SYSCTL_PROC_FALLBACK },
  { artifact: "iptables-save", argv: ["iptables-save"] },
  { artifact: "ip-route", argv: ["ip", "route"] },
  { artifact: "ip-addr", argv: ["ip", "addr"] },
];

/** Node state, read by a host-network collector pod. */
export const NODE_COMMANDS: readonly ReadCommand[] = [
  { artifact: "iptables-save", argv: ["iptables-save"] },
  { artifact: "ip6tables-save", argv: ["ip6tables-save"] },
  { artifact: "sysctl", argv: ["sysctl", ...SYSCTL_KEYS], fallback: SYSCTL_PROC_FALLBACK },
  { artifact: "ip-route", argv: ["ip", "route"] },
  { artifact: "ip-addr", argv: ["ip", "addr"] },
  { artifact: "conntrack", argv: ["conntrack", "-L"] },
];

/** A bounded capture on the node: `timeout` ends it; tcpdump writes pcap to stdout. */
export function captureCommand(host: string, seconds: number): readonly string[] {
  return ["timeout", String(seconds), "tcpdump", "-i", "any", "-nn", "-U", "-w", "-", "host", host];
}

/** What `sysctl net.ipv4.ip_forward` would have printed, from the /proc file's content. */
export function sysctlFromProc(content: string): string {
  return `net.ipv4.ip_forward = ${content.trim()}\n`;
}

/** Whether argv is one of the fixed read commands (or the bounded capture). */
export function isReadCommand(argv: readonly string[]): boolean {
  const same = (a: readonly string[]) =>
    a.length === argv.length && a.every((x, i) => x === argv[i]);
  for (const c of [...POD_COMMANDS, ...NODE_COMMANDS]) {
    if (same(c.argv) || (c.fallback && same(c.fallback))) return true;
  }
  return (
    argv.length === 11 &&
    argv[0] === "timeout" &&
    /^\d+$/.test(argv[1] ?? "") &&
    same(captureCommand(argv[10] ?? "", Number(argv[1])))
  );
}
