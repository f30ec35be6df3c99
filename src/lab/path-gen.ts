/**
 * @module lab/path-gen — seeded random node configurations for the whole-path differential test:
 * raw (NOTRACK, ACCEPT), mangle (MARK), nat (kube-proxy-shaped Service chains with statistic
 * branches, DNAT to far hosts and to the node itself; POSTROUTING SNAT, MASQUERADE, RETURN), filter
 * (INPUT, FORWARD, OUTPUT: ACCEPT, DROP, REJECT of every IPv4 type, policies, -i/-o, conntrack
 * states, a user chain), plus `ip rule` entries and routes in several tables; and flows from a pod
 * and from the node itself. Written against the fixed shape of lab/path-sandbox. Pure and
 * reproducible: the same seed gives the same case.
 */
import { prng } from "./nat-gen.ts";

/** The sandbox's fixed shape the generator writes rules against. */
export const PATH_NET = {
  podIface: "pod0",
  podGateway: "10.244.0.1",
  pods: ["10.244.0.5", "10.244.0.6"],
  /** eth0 (main table's default route) and eth1 (table 100's), each toward one far host. */
  eth0: { iface: "eth0", node: "192.168.10.2", gateway: "192.168.10.1" },
  eth1: { iface: "eth1", node: "192.168.20.2", gateway: "192.168.20.1" },
} as const;

const DESTS = ["10.20.30.40", "10.20.31.5", "8.8.8.8", "172.16.5.5", "100.64.0.1"] as const;
const NODE_OWN = [PATH_NET.podGateway, PATH_NET.eth1.node] as const;
const HOST_SOURCES = [PATH_NET.podGateway, PATH_NET.eth0.node, PATH_NET.eth1.node] as const;

interface Service {
  readonly ip: string;
  readonly proto: "tcp" | "udp";
  readonly port: number;
}
const SERVICES: readonly Service[] = [
  { ip: "10.96.0.10", proto: "udp", port: 53 },
  { ip: "10.96.0.20", proto: "tcp", port: 80 },
  { ip: "10.96.0.30", proto: "tcp", port: 443 },
];
const PORTS = [53, 80, 443, 8080] as const;
/** NodePorts: service i's is NODE_PORT + i. */
const NODE_PORT = 30080;
const CIDRS = [
  "10.244.0.0/24",
  "10.244.0.4/30",
  "10.244.0.6/32",
  "10.20.0.0/16",
  "10.20.30.40/32",
  "8.8.8.0/24",
  "172.16.0.0/12",
  "100.64.0.0/10",
  "10.96.0.0/12",
  "192.168.20.2/32",
  "10.0.0.0/8",
] as const;
const REJECT_TYPES = [
  "icmp-net-unreachable",
  "icmp-host-unreachable",
  "icmp-port-unreachable",
  "icmp-proto-unreachable",
  "icmp-net-prohibited",
  "icmp-host-prohibited",
  "icmp-admin-prohibited",
] as const;
const CTSTATES = ["NEW", "ESTABLISHED,RELATED", "DNAT", "UNTRACKED", "INVALID"] as const;

/** One generated node configuration. */
export interface PathCase {
  readonly seed: number;
  /** iptables-restore input for raw, mangle, nat and filter. */
  readonly restore: string;
  /** `ip rule add` arguments, each starting with `priority N`. */
  readonly ipRules: readonly string[];
  /** `ip route add` arguments, each naming its table. */
  readonly routes: readonly string[];
}

/** One packet: from a pod (forwarded or delivered) or sent by the node itself. */
export interface PathFlow {
  readonly proto: "tcp" | "udp" | "icmp";
  readonly src: string;
  readonly dst: string;
  readonly sport?: number;
  readonly dport?: number;
  readonly origin: "pod" | "host";
  /**
   * Sent as a later packet of its connection: the sandbox first sends the same packet, answers
   * it from where it went (so conntrack holds the connection ESTABLISHED), then sends it again
   * and observes that one. UDP only (a TCP connection needs its handshake's sequence numbers).
   */
  readonly established?: boolean;
}

type Rand = {
  pick: <T>(xs: readonly T[]) => T;
  chance: (p: number) => boolean;
  int: (n: number) => number;
};

function rand(seed: number): Rand {
  const r = prng(seed);
  return {
    pick: (xs) => xs[Math.floor(r() * xs.length)]!,
    chance: (p) => r() < p,
    int: (n) => Math.floor(r() * n),
  };
}

/** A random match: addresses, protocol and port, interfaces where the hook has them. */
function match(g: Rand, opts: { in?: boolean; out?: boolean; ct?: boolean; mark?: boolean }) {
  const parts: string[] = [];
  const not = (p: number) => (g.chance(p) ? "! " : "");
  let proto: string | undefined;
  if (g.chance(0.3)) parts.push(`${not(0.2)}-s ${g.pick(CIDRS)}`);
  if (g.chance(0.35)) parts.push(`${not(0.2)}-d ${g.pick(CIDRS)}`);
  if (opts.in && g.chance(0.2))
    parts.push(`${not(0.3)}-i ${g.pick(["pod0", "eth0", "eth+", "lo"])}`);
  if (opts.out && g.chance(0.25))
    parts.push(`${not(0.3)}-o ${g.pick(["eth0", "eth1", "eth+", "lo"])}`);
  if (g.chance(0.4)) {
    proto = g.pick(["tcp", "udp", "icmp"]);
    parts.push(`-p ${proto}`);
    if (proto !== "icmp" && g.chance(0.4))
      parts.push(`-m ${proto} ${not(0.2)}--dport ${g.pick(PORTS)}`);
  }
  if (g.chance(0.08)) parts.push(`-m addrtype ${not(0.4)}--dst-type LOCAL`);
  if (opts.ct && g.chance(0.25))
    parts.push(`-m conntrack ${not(0.2)}--ctstate ${g.pick(CTSTATES)}`);
  if (opts.mark && g.chance(0.15))
    parts.push(`-m mark --mark ${g.pick(["0x10/0x10", "0x4000/0x4000", "0x0"])}`);
  return { spec: parts.join(" "), proto };
}

const line = (chain: string, spec: string) => `-A ${chain}${spec ? ` ${spec}` : ""}`;

function rawTable(g: Rand): string[] {
  const out = ["*raw", ":PREROUTING ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]"];
  for (const chain of ["PREROUTING", "OUTPUT"]) {
    for (let i = g.int(3); i > 0; i--) {
      const m = match(g, { in: chain === "PREROUTING" });
      out.push(line(chain, `${m.spec} -j ${g.chance(0.7) ? "CT --notrack" : "ACCEPT"}`.trim()));
    }
  }
  return [...out, "COMMIT"];
}

function mangleTable(g: Rand): string[] {
  const chains = ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"];
  const out = ["*mangle", ...chains.map((c) => `:${c} ACCEPT [0:0]`)];
  for (const chain of ["PREROUTING", "OUTPUT"]) {
    for (let i = g.int(3); i > 0; i--) {
      const m = match(g, { in: chain === "PREROUTING", ct: true });
      const target = g.chance(0.1)
        ? "DROP"
        : g.pick([
            "MARK --set-xmark 0x10/0xffffffff",
            "MARK --set-xmark 0x10/0x10",
            "MARK --set-xmark 0x20/0x30",
          ]);
      out.push(line(chain, `${m.spec} -j ${target}`.trim()));
    }
  }
  for (const chain of ["FORWARD", "POSTROUTING"]) {
    if (!g.chance(0.3)) continue;
    const m = match(g, { in: chain === "FORWARD", out: true, ct: true, mark: true });
    const target = g.chance(0.2) ? "DROP" : "MARK --set-xmark 0x4000/0x4000";
    out.push(line(chain, `${m.spec} -j ${target}`.trim()));
  }
  if (g.chance(0.2)) {
    // Calico's pattern: the connection's mark restored on entry, saved after
    out.push(
      line("PREROUTING", "-j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff"),
    );
    out.push(
      line(
        "OUTPUT",
        "-m mark --mark 0x10/0x10 -j CONNMARK --save-mark --nfmask 0xffffffff --ctmask 0xffffffff",
      ),
    );
  }
  return [...out, "COMMIT"];
}

function natTable(g: Rand): { lines: string[]; noEndpoints: Service[] } {
  const noEndpoints: Service[] = [];
  const head = [
    "*nat",
    ":PREROUTING ACCEPT [0:0]",
    ":INPUT ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ":POSTROUTING ACCEPT [0:0]",
  ];
  const chains: string[] = [];
  const rules: string[] = [];
  const svcIn = g.chance(0.75);
  const svcOut = g.chance(0.5);
  if (svcIn || svcOut) {
    chains.push("KUBE-SERVICES");
    if (svcIn) rules.push(line("PREROUTING", "-j KUBE-SERVICES"));
    if (svcOut) rules.push(line("OUTPUT", "-j KUBE-SERVICES"));
    for (const [si, s] of SERVICES.entries()) {
      const n = g.pick([0, 1, 1, 2]);
      if (n === 0) {
        noEndpoints.push(s);
        continue;
      }
      const svc = `KUBE-SVC-${si}`;
      chains.push(svc);
      if (s.proto === "tcp" && g.chance(0.5)) {
        if (!chains.includes("KUBE-NODEPORTS")) chains.push("KUBE-NODEPORTS");
        rules.push(line("KUBE-NODEPORTS", `-p tcp -m tcp --dport ${NODE_PORT + si} -j ${svc}`));
      }
      rules.push(
        line(
          "KUBE-SERVICES",
          `-d ${s.ip}/32 -p ${s.proto} -m ${s.proto} --dport ${s.port} -j ${svc}`,
        ),
      );
      for (let e = 0; e < n; e++) {
        const sep = `KUBE-SEP-${si}${e}`;
        chains.push(sep);
        const ep = g.chance(0.25) ? g.pick(NODE_OWN) : g.pick(DESTS);
        const port = g.pick([s.port, 8080]);
        // kube-proxy: every endpoint but the last behind a statistic rule
        const stat =
          e < n - 1 ? `-m statistic --mode random --probability ${(1 / (n - e)).toFixed(11)} ` : "";
        rules.push(line(svc, `${stat}-j ${sep}`));
        rules.push(line(sep, `-s ${ep}/32 -j MARK --set-xmark 0x4000/0x4000`));
        rules.push(line(sep, `-p ${s.proto} -m ${s.proto} -j DNAT --to-destination ${ep}:${port}`));
      }
    }
  }
  if (chains.includes("KUBE-NODEPORTS")) {
    // kube-proxy: the last rule of KUBE-SERVICES
    rules.push(line("KUBE-SERVICES", "-m addrtype --dst-type LOCAL -j KUBE-NODEPORTS"));
  }
  if (g.chance(0.4)) {
    // kube-proxy's KUBE-POSTROUTING: masquerade what KUBE-MARK-MASQ marked
    chains.push("KUBE-POSTROUTING");
    rules.push(line("POSTROUTING", "-j KUBE-POSTROUTING"));
    rules.push(line("KUBE-POSTROUTING", "-m mark ! --mark 0x4000/0x4000 -j RETURN"));
    rules.push(line("KUBE-POSTROUTING", "-j MARK --set-xmark 0x4000/0x0"));
    rules.push(line("KUBE-POSTROUTING", "-j MASQUERADE"));
  }
  for (let i = g.int(5); i > 0; i--) {
    const m = match(g, { out: true, mark: true });
    const roll = g.chance(0.35)
      ? "MASQUERADE"
      : g.chance(0.4)
        ? "SNAT --to-source 192.0.2.7"
        : g.chance(0.6)
          ? "RETURN"
          : "ACCEPT";
    rules.push(line("POSTROUTING", `${m.spec} -j ${roll}`.trim()));
  }
  return {
    lines: [...head, ...chains.map((c) => `:${c} - [0:0]`), ...rules, "COMMIT"],
    noEndpoints,
  };
}

function filterTable(g: Rand, noEndpoints: readonly Service[]): string[] {
  const policy = (p: number) => (g.chance(p) ? "DROP" : "ACCEPT");
  const out = [
    "*filter",
    `:INPUT ${policy(0.2)} [0:0]`,
    `:FORWARD ${policy(0.25)} [0:0]`,
    `:OUTPUT ${policy(0.15)} [0:0]`,
  ];
  const user = g.chance(0.4);
  if (user) out.push(":F1 - [0:0]");
  const kube = noEndpoints.length > 0 && g.chance(0.8);
  if (kube) {
    // kube-proxy: a Service without endpoints is rejected in filter, before any other rule
    out.push(":KUBE-SERVICES - [0:0]");
    for (const chain of ["FORWARD", "OUTPUT"]) {
      out.push(line(chain, "-m conntrack --ctstate NEW -j KUBE-SERVICES"));
    }
    for (const s of noEndpoints) {
      out.push(
        line(
          "KUBE-SERVICES",
          `-d ${s.ip}/32 -p ${s.proto} -m ${s.proto} --dport ${s.port} -j REJECT --reject-with icmp-port-unreachable`,
        ),
      );
    }
  }
  const target = (proto: string | undefined, inUser: boolean) => {
    const roll = g.int(10);
    if (roll < 3) return "ACCEPT";
    if (roll < 5) return "DROP";
    if (roll < 8) {
      if (proto === "tcp" && g.chance(0.3)) return "REJECT --reject-with tcp-reset";
      return g.chance(0.2) ? "REJECT" : `REJECT --reject-with ${g.pick(REJECT_TYPES)}`;
    }
    if (inUser) return "RETURN";
    return user ? "F1" : "ACCEPT";
  };
  for (const chain of ["INPUT", "FORWARD", "OUTPUT", ...(user ? ["F1"] : [])]) {
    for (let i = g.int(chain === "F1" ? 4 : 5); i > 0; i--) {
      const m = match(g, {
        in: chain !== "OUTPUT",
        out: chain !== "INPUT",
        ct: true,
        mark: true,
      });
      out.push(line(chain, `${m.spec} -j ${target(m.proto, chain === "F1")}`.trim()));
    }
  }
  return [...out, "COMMIT"];
}

const ROUTE_POOL = [
  "10.20.0.0/16 via 192.168.20.1 dev eth1",
  "8.8.8.0/24 via 192.168.20.1 dev eth1",
  "172.16.0.0/12 via 192.168.10.1 dev eth0",
  "10.96.0.0/12 via 192.168.20.1 dev eth1",
  "blackhole 100.64.0.0/10",
  "unreachable 10.20.31.0/24",
  "prohibit 172.16.5.0/24",
  "blackhole 8.8.8.8/32",
] as const;
const RULE_SELECTORS = [
  "from 10.244.0.6",
  "from 10.244.0.4/30",
  "to 8.8.8.0/24",
  "to 10.20.0.0/16",
  "to 172.16.0.0/12",
  "fwmark 0x10",
  "fwmark 0x10/0x30",
  "iif pod0",
  "iif pod0 from 10.244.0.5",
  "from 192.168.20.2",
  "iif lo",
  "not from 10.244.0.5",
  "ipproto udp",
  "ipproto tcp dport 443",
  "from 10.244.0.4/30 fwmark 0x20/0x30",
] as const;

/** Generates one node configuration. */
export function generatePathCase(seed: number): PathCase {
  const g = rand(seed);
  const raw = rawTable(g);
  const mangle = mangleTable(g);
  const nat = natTable(g);
  const restore = [...raw, ...mangle, ...nat.lines, ...filterTable(g, nat.noEndpoints), ""].join(
    "\n",
  );
  const routes: string[] = [];
  for (const r of ROUTE_POOL) {
    if (g.chance(0.3)) routes.push(`${r} table ${g.pick(["main", "100", "200"])}`);
  }
  const ipRules: string[] = [];
  for (let i = 0, n = g.int(4); i < n; i++) {
    const priority = 100 + i * 10 + g.int(10);
    const action = g.chance(0.8)
      ? `lookup ${g.pick(["100", "100", "200"])}`
      : g.pick(["blackhole", "unreachable", "prohibit"]);
    ipRules.push(`priority ${priority} ${g.pick(RULE_SELECTORS)} ${action}`);
  }
  return { seed, restore, ipRules, routes };
}

/**
 * Flows for one case: from the pods (forwarded, or delivered to the node) and from the node
 * itself, to far hosts, Service addresses and the node's own addresses. Source ports are unique
 * in the batch and an ICMP flow's destination is unique, so each packet is recognised after NAT.
 */
export function generatePathFlows(seed: number, count: number): PathFlow[] {
  const g = rand(seed ^ 0x27d4eb2d);
  const flows: PathFlow[] = [];
  const icmpDsts = new Set<string>();
  for (let i = 0; i < count; i++) {
    const origin = g.chance(0.7) ? "pod" : "host";
    const src = origin === "pod" ? g.pick(PATH_NET.pods) : g.pick(HOST_SOURCES);
    const roll = g.int(10);
    if (roll < 4) {
      const s = g.pick(SERVICES);
      flows.push({
        proto: s.proto,
        src,
        dst: s.ip,
        sport: 20000 + (seed % 1000) * 40 + i,
        dport: s.port,
        origin,
      });
      continue;
    }
    const dst = roll < 8 ? g.pick(DESTS) : g.pick(NODE_OWN);
    let proto = g.pick(["tcp", "udp", "icmp"] as const);
    if (proto === "icmp" && icmpDsts.has(dst)) proto = "udp";
    if (proto === "icmp") {
      icmpDsts.add(dst);
      flows.push({ proto, src, dst, origin });
    } else {
      flows.push({
        proto,
        src,
        dst,
        sport: 20000 + (seed % 1000) * 40 + i,
        dport:
          NODE_OWN.includes(dst as never) && g.chance(0.4) ? NODE_PORT + g.int(3) : g.pick(PORTS),
        origin,
      });
    }
  }
  return flows;
}

/**
 * Flows sent as later packets of a connection ({@link PathFlow.established}): UDP from a pod or
 * the node to Services, far hosts and the node itself. Their source ports follow the `after` new
 * flows' (unique in the batch); their own generator, so the new flows stay as they were.
 */
export function generateEstablishedFlows(seed: number, count: number, after: number): PathFlow[] {
  const g = rand(seed ^ 0x5bd1e995);
  const flows: PathFlow[] = [];
  for (let i = 0; i < count; i++) {
    const origin = g.chance(0.7) ? "pod" : "host";
    const src = origin === "pod" ? g.pick(PATH_NET.pods) : g.pick(HOST_SOURCES);
    const sport = 20000 + (seed % 1000) * 40 + after + i;
    const roll = g.int(10);
    const udpSvc = SERVICES.filter((s) => s.proto === "udp");
    if (roll < 3) {
      const s = g.pick(udpSvc);
      flows.push({ proto: "udp", src, dst: s.ip, sport, dport: s.port, origin, established: true });
      continue;
    }
    const dst = roll < 8 ? g.pick(DESTS) : g.pick(NODE_OWN);
    flows.push({ proto: "udp", src, dst, sport, dport: g.pick(PORTS), origin, established: true });
  }
  return flows;
}

/**
 * The same packets again as later packets of their connections ({@link PathFlow.established}),
 * UDP ones only (not already later packets), each on its own connection: its source port moved
 * by `shift` (past the batch's ports, so each stays unique).
 */
export function laterPacketsOf(flows: readonly PathFlow[], shift: number): PathFlow[] {
  return flows
    .filter((f) => f.proto === "udp" && f.sport !== undefined && f.established !== true)
    .map((f) => ({ ...f, sport: f.sport! + shift, established: true }));
}
