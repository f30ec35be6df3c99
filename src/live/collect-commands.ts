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
  /**
   * The tool is often absent and that is normal (a node without ipset or nft): its absence is
   * recorded as not available, not as a failure.
   */
  readonly optional?: boolean;
  /**
   * An error the command prints when the node cannot have what it reads (IPv6 turned off with
   * `ipv6.disable=1`, a kernel without IPv6 policy routing): recorded as not available, with
   * `unavailableWhy`, not as a failure.
   */
  readonly unavailableWhen?: RegExp;
  readonly unavailableWhy?: string;
}

const SYSCTL_KEYS = [
  "net.ipv4.ip_forward",
  "net.ipv4.conf.all.rp_filter",
  "net.ipv4.conf.default.rp_filter",
] as const;

/** The fallback reads /proc directly; its output is re-rendered as `sysctl` prints it. */
export const SYSCTL_PROC_FALLBACK = ["cat", "/proc/sys/net/ipv4/ip_forward"] as const;

/**
 * A node without IPv6 (`ipv6.disable=1`) or without IPv6 policy routing
 * (CONFIG_IPV6_MULTIPLE_TABLES off) answers `ip -6 rule` with `RTNETLINK answers: Address family
 * not supported by protocol` and `Dump terminated`: nothing to read there, not a failure.
 */
const NO_IPV6 = {
  unavailableWhen: /Address family not supported by protocol/,
  unavailableWhy: "the node's kernel has no IPv6 (or no IPv6 policy routing)",
} as const;

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
  // every table (local, main, policy routing's own) and the rules that choose among them
  { artifact: "ip-route", argv: ["ip", "route", "show", "table", "all"] },
  { artifact: "ip-rule", argv: ["ip", "rule"] },
  { artifact: "ip6-route", argv: ["ip", "-6", "route", "show", "table", "all"], ...NO_IPV6 },
  { artifact: "ip6-rule", argv: ["ip", "-6", "rule"], ...NO_IPV6 },
  { artifact: "ip-addr", argv: ["ip", "addr"] },
  { artifact: "conntrack", argv: ["conntrack", "-L"] },
  // Calico's and kube-proxy's IP sets, and nftables rules (kube-proxy nftables mode, firewalls)
  { artifact: "ipset", argv: ["ipset", "save"], optional: true },
  { artifact: "nft-ruleset", argv: ["nft", "list", "ruleset"], optional: true },
];

/**
 * Cilium's own view, read inside its agent pod (DaemonSet `cilium`, or `anetd` on GKE Dataplane
 * V2): the datapath status (masquerading mode) and the BPF ip-masq-agent map. Images before
 * Cilium 1.15 call the binary `cilium`.
 */
export const CILIUM_COMMANDS: readonly ReadCommand[] = [
  {
    artifact: "cilium-status",
    argv: ["cilium-dbg", "status", "--verbose"],
    fallback: ["cilium", "status", "--verbose"],
  },
  {
    artifact: "cilium-bpf-ipmasq",
    argv: ["cilium-dbg", "bpf", "ipmasq", "list"],
    fallback: ["cilium", "bpf", "ipmasq", "list"],
  },
];

const MARK = "\x1epodpath";

/**
 * All node commands in one exec: on a real cluster every exec is a round trip through the API
 * server to the kubelet, so one per node instead of eleven is what makes fleets fast. Each command's
 * stdout, stderr and exit code are framed by marker lines that start with an ASCII record
 * separator (0x1e), which none of these tools prints. The script is fixed text; only the
 * commands of NODE_COMMANDS run.
 */
export const NODE_SCRIPT = [
  `e=$(mktemp 2>/dev/null || echo /tmp/podpath-collect.err)`,
  `for c in ${NODE_COMMANDS.map((c) => `'${c.argv.join(" ")}'`).join(" ")}; do`,
  String.raw`  printf '\036podpath-begin %s\n' "$c"`,
  `  $c 2>"$e"; rc=$?`,
  String.raw`  printf '\n\036podpath-stderr\n'`,
  `  cat "$e"`,
  String.raw`  printf '\n\036podpath-end %s\n' "$rc"`,
  "done",
  `rm -f "$e"`,
].join("\n");

export const NODE_SCRIPT_ARGV = ["sh", "-c", NODE_SCRIPT] as const;

export interface ScriptSection {
  readonly command: string;
  readonly stdout: Buffer;
  readonly stderr: string;
  /** Undefined when the section was cut off (timeout). */
  readonly code: number | undefined;
}

/** Splits the node script's output into its commands' sections; a cut-off last section is kept. */
export function parseScriptOutput(out: Buffer): ScriptSection[] {
  const sections: ScriptSection[] = [];
  const begin = Buffer.from(`${MARK}-begin `);
  const errMark = Buffer.from(`\n${MARK}-stderr\n`);
  const endMark = Buffer.from(`\n${MARK}-end `);
  let at = out.indexOf(begin);
  while (at >= 0) {
    const nl = out.indexOf(10, at + begin.length);
    if (nl < 0) break;
    const command = out.subarray(at + begin.length, nl).toString("utf8");
    const bodyStart = nl + 1;
    const errAt = out.indexOf(errMark, bodyStart);
    if (errAt < 0) {
      sections.push({ command, stdout: out.subarray(bodyStart), stderr: "", code: undefined });
      break;
    }
    const endAt = out.indexOf(endMark, errAt + errMark.length);
    const stdout = out.subarray(bodyStart, errAt);
    if (endAt < 0) {
      const stderr = out.subarray(errAt + errMark.length).toString("utf8");
      sections.push({ command, stdout, stderr, code: undefined });
      break;
    }
    const stderr = out.subarray(errAt + errMark.length, endAt).toString("utf8");
    const codeEnd = out.indexOf(10, endAt + endMark.length);
    const codeText = out
      .subarray(endAt + endMark.length, codeEnd < 0 ? undefined : codeEnd)
      .toString("utf8");
    const code = /^\d+$/.test(codeText) ? Number(codeText) : undefined;
    sections.push({ command, stdout, stderr, code });
    if (codeEnd < 0) break;
    at = out.indexOf(begin, codeEnd + 1);
  }
  return sections;
}

/**
 * A bounded capture on the node: `timeout` ends it; tcpdump writes pcap to stdout. `-Z root`
 * keeps tcpdump root: a build that changes to its own user after opening the device (Debian's,
 * Ubuntu's) would otherwise run as that user, whom `timeout` (root without CAP_KILL, as the
 * collector runs) may not signal, and the capture would never end.
 */
export function captureCommand(host: string, seconds: number): readonly string[] {
  return [
    ...["timeout", String(seconds), "tcpdump", "-Z", "root", "-i", "any", "-nn", "-U"],
    ...["-w", "-", "host", host],
  ];
}

/** What `sysctl net.ipv4.ip_forward` would have printed, from the /proc file's content. */
export function sysctlFromProc(content: string): string {
  return `net.ipv4.ip_forward = ${content.trim()}\n`;
}

/** Whether argv is one of the fixed read commands (or the bounded capture). */
export function isReadCommand(argv: readonly string[]): boolean {
  const same = (a: readonly string[]) =>
    a.length === argv.length && a.every((x, i) => x === argv[i]);
  if (same(NODE_SCRIPT_ARGV)) return true;
  for (const c of [...POD_COMMANDS, ...NODE_COMMANDS, ...CILIUM_COMMANDS]) {
    if (same(c.argv) || (c.fallback && same(c.fallback))) return true;
  }
  return (
    argv[0] === "timeout" &&
    /^\d+$/.test(argv[1] ?? "") &&
    same(captureCommand(argv.at(-1) ?? "", Number(argv[1])))
  );
}
