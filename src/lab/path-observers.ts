/**
 * @module lab/path-observers — the kernel-only rules a whole-path sandbox adds to the rules under
 * test (IPv4 or IPv6): observers first in every built-in chain letting the sentinels, ICMP(v6)
 * errors and TCP resets through, and a security table counting each flow that reaches the end of
 * INPUT; and their removal from what the node's snapshot holds (iptables-save, `nft list
 * ruleset`, `ip rule`). An explicit I/O module (it reads the counters).
 */
import { mustExec as must, type Namespace } from "./netns.ts";
import type { PathFlow } from "./path-gen.ts";

/** The comment every observer rule carries. */
export const OBSERVER = "podpath-observer";
/** Kernel-only `ip rule` / `ip -6 rule` priorities (left out of the snapshot). */
const OBSERVER_PRIORITIES = ["1", "2"];

const BUILTIN: Readonly<Record<string, readonly string[]>> = {
  raw: ["PREROUTING", "OUTPUT"],
  mangle: ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"],
  nat: ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"],
  filter: ["INPUT", "FORWARD", "OUTPUT"],
};

/**
 * The restore text with the observers: first in every built-in chain, ACCEPT for the sentinels
 * (UDP port 9), ICMP destination-unreachable (IPv6: ICMPv6 destination-unreachable and neighbour
 * discovery) and TCP resets (never a generated flow), and a security table counting each flow
 * that reaches the end of INPUT.
 */
export function withObservers(restore: string, flows: readonly PathFlow[], family: 4 | 6): string {
  const c = `-m comment --comment ${OBSERVER}`;
  const observers = (chain: string) => [
    `-A ${chain} -p udp -m udp --sport 9 ${c} -j ACCEPT`,
    ...(family === 4
      ? [`-A ${chain} -p icmp -m icmp --icmp-type 3 ${c} -j ACCEPT`]
      : [1, 135, 136].map(
          (t) => `-A ${chain} -p ipv6-icmp -m icmp6 --icmpv6-type ${t} ${c} -j ACCEPT`,
        )),
    `-A ${chain} -p tcp -m tcp --tcp-flags RST RST ${c} -j ACCEPT`,
  ];
  const out: string[] = [];
  let table = "";
  let inserted = false;
  for (const l of restore.split("\n")) {
    if (l.startsWith("*")) {
      table = l.slice(1);
      inserted = false;
    }
    if (!inserted && (l.startsWith("-A ") || l === "COMMIT")) {
      for (const chain of BUILTIN[table] ?? []) out.push(...observers(chain));
      inserted = true;
    }
    out.push(l);
  }
  // by what NAT keeps: the source port (unique in a batch), or an echo's destination (unique too)
  const count = flows.map((f) =>
    f.proto !== "icmp"
      ? `-A INPUT -p ${f.proto} -m ${f.proto} --sport ${f.sport} ${c}`
      : family === 4
        ? `-A INPUT -p icmp -d ${f.dst}/32 -m icmp --icmp-type 8 ${c}`
        : `-A INPUT -d ${f.dst}/128 -p ipv6-icmp -m icmp6 --icmpv6-type 128 ${c}`,
  );
  return [
    ...out.filter((l) => l !== ""),
    "*security",
    ":INPUT ACCEPT [0:0]",
    ":FORWARD ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ...count,
    "COMMIT",
    "",
  ].join("\n");
}

/** iptables-save (or ip6tables-save) output without the observers and the security table. */
export function withoutObservers(saved: string): string {
  const out: string[] = [];
  let skip = false;
  for (const l of saved.split("\n")) {
    if (l === "*security") skip = true;
    if (!skip && !l.includes(OBSERVER)) out.push(l);
    if (skip && l === "COMMIT") skip = false;
  }
  return out.join("\n");
}

/** A restore text without its security table (the sandbox's counters stay in iptables). */
export function withoutSecurity(restore: string): string {
  const out: string[] = [];
  let skip = false;
  for (const l of restore.split("\n")) {
    if (l === "*security") skip = true;
    if (!skip) out.push(l);
    if (skip && l === "COMMIT") skip = false;
  }
  return out.join("\n");
}

/** `nft list ruleset` without the observers' rules and the sandbox's security table. */
export function listingWithoutSandbox(listing: string, family: 4 | 6): string {
  const security = family === 4 ? /^table ip security \{/ : /^table ip6? security \{/;
  const out: string[] = [];
  let skip = false;
  for (const l of listing.split("\n")) {
    if (security.test(l)) skip = true;
    if (!skip && !l.includes(OBSERVER)) out.push(l);
    if (skip && l === "}") skip = false;
  }
  return out.join("\n");
}

/** `ip rule` (or `ip -6 rule`) output without the sandbox's own rules. */
export function ipRuleWithoutObservers(rules: string): string {
  return rules
    .split("\n")
    .filter((l) => !OBSERVER_PRIORITIES.includes(l.split(":")[0] ?? ""))
    .join("\n");
}

/** Sets the security table's INPUT counters to zero. */
export async function zeroDeliveries(node: Namespace, family: 4 | 6): Promise<void> {
  await must(node, [
    family === 4 ? "iptables" : "ip6tables",
    "-w",
    "-t",
    "security",
    "-Z",
    "INPUT",
  ]);
}

/** `iptables -t security -L INPUT -v -n -x`: the counters of the rules at the end of INPUT. */
export function listSecurityInput(node: Namespace, family: 4 | 6): Promise<string> {
  const tool = family === 4 ? "iptables" : "ip6tables";
  return must(node, [tool, "-w", "-t", "security", "-L", "INPUT", "-v", "-n", "-x"]);
}

/** The security table's INPUT counters, in rule order: packets that reached the end of INPUT. */
export async function readDeliveries(node: Namespace, family: 4 | 6): Promise<number[]> {
  const counters = await listSecurityInput(node, family);
  return counters
    .split("\n")
    .slice(2)
    .filter((l) => l.trim() !== "")
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}
