/**
 * @module nftables/test-helpers/nft-gen — seeded random nftables rule sets for the differential test against
 * the kernel, written as `nft -f` scripts for one table: nat prerouting/output (DNAT to an address
 * and port, numgen random endpoint maps, the 0x4000 mark as kube-proxy sets it), nat postrouting
 * and user chains (masquerade, snat to an address or range, return, accept, jump/goto, verdict
 * maps on the destination), and a filter forward chain (accept, drop, reject, policy). Matches:
 * addresses and prefixes (negated), named interval sets, interfaces, protocols, ports and port
 * sets, address . port concatenations, fib daddr type local, the mark. Pure and reproducible.
 */
import { prng } from "../../lab/nat-gen.ts";

export const NFT_GEN_TABLE = "pp";
/** DNAT targets: addresses the flows' destinations are placed at too (beyond the node). */
export const NFT_GEN_ENDPOINTS = ["10.20.30.40", "192.168.1.10", "172.16.5.5"] as const;
/** Addresses the flows go to that a DNAT rule may rewrite (no host holds them). */
export const NFT_GEN_SERVICES = ["10.96.0.10", "10.96.0.20"] as const;

const CIDRS = [
  "10.0.0.0/8",
  "10.4.0.0/14",
  "10.4.1.0/24",
  "8.8.8.0/24",
  "192.168.0.0/16",
  "172.16.0.0/12",
  "100.64.0.0/10",
  "10.20.30.40",
  "10.128.0.0/20",
  "10.96.0.0/16",
] as const;
const PORTS = [53, 80, 443, 5432, 8080] as const;

export interface NftGenSet {
  readonly seed: number;
  /** The `nft -f` script: the table deleted (if there) and written again. */
  readonly script: string;
  /** DNAT targets the rules use, to be placed beyond the node. */
  readonly endpoints: readonly string[];
}

/** One random rule set as an nft script for table ip {@link NFT_GEN_TABLE}. */
export function generateNftRuleSet(seed: number): NftGenSet {
  const r = prng(seed ^ 0x1f2e3d4c);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const chance = (p: number) => r() < p;
  const neg = (p: number) => (chance(p) ? "!= " : "");
  const endpoints = new Set<string>();
  const users = ["c1", "c2", "c3"].slice(0, Math.floor(r() * 4));

  /** Random matches; `l4` says which protocol was matched (ports only after one). */
  const matches = (hook: "pre" | "post" | "fwd"): { text: string[]; l4?: string } => {
    const out: string[] = [];
    if (chance(0.3)) out.push(`ip saddr ${neg(0.25)}${pick(CIDRS)}`);
    if (chance(0.35)) out.push(`ip daddr ${neg(0.25)}${pick(CIDRS)}`);
    if (chance(0.12)) out.push(`ip saddr ${neg(0.2)}@pods`);
    if (hook !== "pre" && chance(0.15)) {
      out.push(`oifname ${neg(0.3)}"${pick(["eth0", "cbr0", "eth*"])}"`);
    }
    if (hook !== "post" && chance(0.1)) out.push(`iifname ${neg(0.3)}"${pick(["cbr0", "eth0"])}"`);
    let l4: string | undefined;
    if (chance(0.45)) {
      l4 = pick(["tcp", "udp", "icmp"]);
      out.push(`meta l4proto ${l4}`);
      if (l4 !== "icmp") {
        const roll = r();
        if (roll < 0.3) out.push(`th dport ${neg(0.2)}${pick(PORTS)}`);
        else if (roll < 0.45) out.push(`th dport { ${pick(PORTS)}, ${pick(PORTS)} }`);
        else if (roll < 0.55) {
          const p = pick(PORTS);
          out.push(`${l4} dport ${p}-${p + 1000}`);
        } else if (roll < 0.65) {
          out.push(
            `ip daddr . th dport { ${pick(NFT_GEN_ENDPOINTS)} . ${pick(PORTS)}, 8.8.8.8 . ${pick(PORTS)} }`,
          );
        }
      }
    }
    if (chance(0.2)) out.push(`fib daddr type ${neg(0.5)}local`);
    return { text: out, ...(l4 ? { l4 } : {}) };
  };

  const natRule = (ci: number): string => {
    const m = matches("post");
    const later = users.slice(ci);
    const roll = r();
    let verdict = "";
    if (roll < 0.15) verdict = "return";
    else if (roll < 0.25) verdict = "accept";
    else if (roll < 0.45) {
      verdict =
        m.l4 && m.l4 !== "icmp" && chance(0.3) ? "masquerade to :30000-30999" : "masquerade";
      if (chance(0.3)) verdict += " fully-random";
    } else if (roll < 0.6) {
      verdict = `snat to ${pick(["192.0.2.7", "192.0.2.10-192.0.2.12"])}`;
    } else if (roll < 0.75 && later.length > 0) {
      verdict = `${chance(0.2) ? "goto" : "jump"} ${pick(later)}`;
    } else if (roll < 0.85 && later.length > 0) {
      verdict = `ip daddr vmap { ${pick(CIDRS.slice(3, 6))} : jump ${pick(later)}, 10.20.30.40 : ${chance(0.5) ? "return" : `goto ${pick(later)}`} }`;
    } else verdict = "counter";
    return [...m.text, verdict].join(" ");
  };

  const chains: string[] = [];
  const post: string[] = [];
  const nPost = Math.floor(r() * 6);
  // kube-proxy's pattern: marked in prerouting/output, masqueraded in postrouting
  const marks = chance(0.4);
  if (marks) {
    post.push(
      chance(0.5)
        ? "meta mark & 0x00004000 == 0x00004000 masquerade"
        : "meta mark & 0x00004000 != 0x00004000 return",
    );
  }
  for (let i = 0; i < nPost; i++) post.push(natRule(0));
  chains.push(base("postrouting", "nat hook postrouting priority srcnat", post));
  users.forEach((c, i) => {
    const rules = Array.from({ length: Math.floor(r() * 5) }, () => natRule(i + 1));
    chains.push(base(c, undefined, rules));
  });
  for (const [name, hook] of [
    ["prerouting", "prerouting priority dstnat"],
    ["output", "output priority -100"],
  ] as const) {
    const rules: string[] = [];
    if (marks && chance(0.7)) {
      const m = chance(0.5)
        ? `ip saddr ${pick(CIDRS)} `
        : chance(0.5)
          ? `ip daddr ${pick(CIDRS)} `
          : "";
      rules.push(`${m}meta mark set meta mark | 0x00004000`);
    }
    const n = Math.floor(r() * 3);
    for (let i = 0; i < n; i++) {
      const svc = pick(NFT_GEN_SERVICES);
      const proto = pick(["tcp", "udp"]);
      const port = pick(PORTS);
      const a = pick(NFT_GEN_ENDPOINTS);
      endpoints.add(a);
      if (chance(0.4)) {
        const b = pick(NFT_GEN_ENDPOINTS);
        endpoints.add(b);
        rules.push(
          `ip daddr ${svc} meta l4proto ${proto} th dport ${port} dnat ip to numgen random mod 2 map { 0 : ${a} . 8080, 1 : ${b} . 8080 }`,
        );
      } else {
        rules.push(
          `ip daddr ${svc} meta l4proto ${proto} th dport ${port} dnat to ${a}${chance(0.6) ? ":8080" : ""}`,
        );
      }
    }
    chains.push(base(name, `nat hook ${hook}`, rules));
  }
  const fwd: string[] = [];
  const nFwd = Math.floor(r() * 4);
  for (let i = 0; i < nFwd; i++) {
    const m = matches("fwd");
    const v = pick([
      "accept",
      "drop",
      "reject",
      "reject with icmp type host-prohibited",
      "counter",
    ]);
    fwd.push([...m.text, v].join(" "));
  }
  chains.push(
    base("forward", "filter hook forward priority filter", fwd, chance(0.15) ? "drop" : "accept"),
  );
  const pods = `\tset pods {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\telements = { 10.4.0.4/30, 10.4.1.0/24, 172.17.0.3 }\n\t}\n`;
  const script = [
    `table ip ${NFT_GEN_TABLE}`,
    `delete table ip ${NFT_GEN_TABLE}`,
    `table ip ${NFT_GEN_TABLE} {`,
    pods,
    ...chains,
    "}",
    "",
  ].join("\n");
  return { seed, script, endpoints: [...endpoints] };
}

function base(
  name: string,
  hook: string | undefined,
  rules: readonly string[],
  policy = "accept",
): string {
  const head = hook ? [`\t\ttype ${hook}; policy ${policy};`] : [];
  return [`\tchain ${name} {`, ...head, ...rules.map((x) => `\t\t${x}`), "\t}"].join("\n");
}
