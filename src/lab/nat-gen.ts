/**
 * @module lab/nat-gen — seeded random nat rule sets and flows for the differential tests of the
 * evaluator against the kernel: user chains reached by jumps and gotos (acyclic), RETURN, ACCEPT,
 * MASQUERADE (with --to-ports), SNAT (address ranges and ports), negated addresses, protocols and
 * interfaces, addrtype, ports and multiport, packet marks set before nat POSTROUTING (kube-proxy's
 * pattern), and counting rules without a target. Rendered as
 * iptables-restore input for the nat table. Pure and reproducible: the same seed gives the same
 * cases.
 */

/** mulberry32: a small, well-distributed 32-bit PRNG; reproducible across platforms. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface GenRule {
  readonly chain: string;
  /** The rule's text after `-A CHAIN ` (iptables-restore syntax). */
  readonly spec: string;
}

export interface GenRuleSet {
  readonly seed: number;
  readonly chains: readonly string[];
  readonly rules: readonly GenRule[];
}

export interface GenFlow {
  readonly proto: "tcp" | "udp" | "icmp";
  readonly src: string;
  readonly dst: string;
  readonly sport?: number;
  readonly dport?: number;
  /** Sent by the node itself (its own address as source). */
  readonly local: boolean;
}

/** The sandbox's fixed shape the generator writes rules against. */
export const GEN_NODE_IP = "10.128.0.2";
export const GEN_IN_IFACE = "cbr0";
export const GEN_OUT_IFACE = "eth0";
const SOURCES = ["10.4.0.5", "10.4.0.6", "10.4.1.7", "172.17.0.3", GEN_NODE_IP] as const;
const DESTS = ["10.20.30.40", "8.8.8.8", "192.168.1.10", "172.16.5.5", "100.64.0.1"] as const;
const CIDRS = [
  "10.0.0.0/8",
  "10.4.0.0/14",
  "10.4.0.4/30",
  "10.4.1.0/24",
  "8.8.8.0/24",
  "192.168.0.0/16",
  "172.16.0.0/12",
  "100.64.0.0/10",
  "10.20.30.40/32",
  "10.128.0.0/20",
] as const;
const PORTS = [53, 80, 443, 5432, 8080] as const;
const SNAT_TO = ["192.0.2.7", "192.0.2.10-192.0.2.12", "198.51.100.1:20000-20999"] as const;

/** Generates one rule set: POSTROUTING plus up to three user chains. */
export function generateRuleSet(seed: number): GenRuleSet {
  const r = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const chance = (p: number) => r() < p;
  const userChains = ["C1", "C2", "C3"].slice(0, Math.floor(r() * 4));
  const chains = ["POSTROUTING", ...userChains];
  const rules: GenRule[] = [];
  for (const [ci, chain] of chains.entries()) {
    const count = Math.floor(r() * 6);
    for (let i = 0; i < count; i++) {
      const parts: string[] = [];
      const not = (p: number) => (chance(p) ? "! " : "");
      if (chance(0.35)) parts.push(`${not(0.25)}-s ${pick(CIDRS)}`);
      if (chance(0.4)) parts.push(`${not(0.25)}-d ${pick(CIDRS)}`);
      if (chance(0.15)) parts.push(`${not(0.3)}-o ${pick([GEN_OUT_IFACE, GEN_IN_IFACE, "eth+"])}`);
      let proto: string | undefined;
      if (chance(0.45)) {
        proto = pick(["tcp", "udp", "icmp"]);
        parts.push(`${chance(0.1) ? "! " : ""}-p ${proto}`);
        if (proto !== "icmp" && !parts.at(-1)!.startsWith("!")) {
          if (chance(0.4)) {
            const p = pick(PORTS);
            parts.push(
              chance(0.5)
                ? `-m ${proto} ${not(0.2)}--dport ${p}`
                : `-m ${proto} --dport ${p}:${p + 1000}`,
            );
          } else if (chance(0.2)) {
            parts.push(`-m multiport ${not(0.2)}--dports ${pick(PORTS)},${pick(PORTS)}`);
          } else if (chance(0.15)) {
            parts.push(`-m ${proto} --sport 20000:29999`);
          }
        } else {
          proto = undefined;
        }
      }
      if (chance(0.3)) {
        const which = chance(0.7) ? "--dst-type" : "--src-type";
        parts.push(`-m addrtype ${not(0.6)}${which} ${pick(["LOCAL", "UNICAST", "LOCAL"])}`);
      }
      // only jumps to later chains: the graph stays acyclic, as the kernel requires
      const laterChains = userChains.slice(ci);
      const roll = r();
      if (roll < 0.2) parts.push("-j RETURN");
      else if (roll < 0.3) parts.push("-j ACCEPT");
      else if (roll < 0.5) {
        parts.push(proto && chance(0.3) ? "-j MASQUERADE --to-ports 30000-30999" : "-j MASQUERADE");
        if (chance(0.3)) parts[parts.length - 1] += " --random-fully";
      } else if (roll < 0.65) {
        const to = pick(SNAT_TO);
        // ports in --to-source need -p tcp/udp
        parts.push(`-j SNAT --to-source ${to.includes(":") && !proto ? to.split(":")[0] : to}`);
      } else if (roll < 0.9 && laterChains.length > 0) {
        parts.push(`${chance(0.2) ? "-g" : "-j"} ${pick(laterChains)}`);
      }
      rules.push({ chain, spec: parts.join(" ") });
    }
  }
  // kube-proxy's pattern: mark in PREROUTING/OUTPUT, masquerade marked packets in POSTROUTING
  for (const hook of ["PREROUTING", "OUTPUT"]) {
    const count = chance(0.35) ? 1 + Math.floor(r() * 2) : 0;
    for (let i = 0; i < count; i++) {
      const m = chance(0.5) ? `-s ${pick(CIDRS)} ` : chance(0.5) ? `-d ${pick(CIDRS)} ` : "";
      rules.push({ chain: hook, spec: `${m}-j MARK --set-xmark 0x4000/0x4000` });
    }
  }
  if (rules.some((x) => x.spec.includes("MARK --set"))) {
    const spec = chance(0.5)
      ? "-m mark --mark 0x4000/0x4000 -j MASQUERADE"
      : "-m mark ! --mark 0x4000/0x4000 -j RETURN";
    const at = rules.findIndex((x) => x.chain === "POSTROUTING");
    rules.splice(at < 0 ? rules.length : at, 0, { chain: "POSTROUTING", spec });
  }
  return { seed, chains, rules };
}

/** iptables-restore input replacing the nat table with the rule set (chains listed, then rules). */
export function renderRuleSet(set: Pick<GenRuleSet, "chains" | "rules">): string {
  const lines = [
    "*nat",
    ":PREROUTING ACCEPT [0:0]",
    ":INPUT ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ":POSTROUTING ACCEPT [0:0]",
    ...set.chains.filter((c) => c !== "POSTROUTING").map((c) => `:${c} - [0:0]`),
    ...set.rules.map((x) => `-A ${x.chain}${x.spec === "" ? "" : ` ${x.spec}`}`),
    "COMMIT",
    "",
  ];
  return lines.join("\n");
}

/**
 * Flows for one rule set: distinct (proto, src, sport) so each conntrack entry is unambiguous;
 * sources from pod ranges, another CNI's range and the node itself.
 */
export function generateFlows(seed: number, count: number): GenFlow[] {
  const r = prng(seed ^ 0x5bd1e995);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const flows: GenFlow[] = [];
  const usedIcmp = new Set<string>();
  for (let i = 0; i < count; i++) {
    const src = pick(SOURCES);
    const dst = pick(DESTS);
    let proto = pick(["tcp", "tcp", "udp", "udp", "icmp"] as const);
    if (proto === "icmp" && usedIcmp.has(`${src}>${dst}`)) proto = "udp";
    if (proto === "icmp") {
      usedIcmp.add(`${src}>${dst}`);
      flows.push({ proto, src, dst, local: src === GEN_NODE_IP });
      continue;
    }
    flows.push({
      proto,
      src,
      dst,
      sport: 20000 + ((seed * 131 + i * 17) % 15000) + (i % 2 === 0 ? 0 : 15000),
      dport: pick(PORTS),
      local: src === GEN_NODE_IP,
    });
  }
  // sports must be unique per (proto, src): re-space collisions deterministically
  const seen = new Set<string>();
  return flows.map((f) => {
    if (f.sport === undefined) return f;
    let sport = f.sport;
    while (seen.has(`${f.proto}/${f.src}/${sport}`)) sport = sport >= 64999 ? 20000 : sport + 1;
    seen.add(`${f.proto}/${f.src}/${sport}`);
    return { ...f, sport };
  });
}
