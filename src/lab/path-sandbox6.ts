/**
 * @module lab/path-sandbox6 — asks the kernel where an IPv6 packet ends on a node: the sandbox of
 * lab/path-sandbox carried over to IPv6 (lab/path-gen6's addresses: a `pod` namespace behind
 * pod0, the `node` with the rules, `ip -6 rule` entries and routes under test, two far hosts
 * behind eth0 and eth1). Addresses are added without duplicate address detection and every
 * neighbour is known up front, so no packet waits for neighbour discovery. For each flow: delivered
 * (a counting rule in ip6tables' security table, after filter INPUT), forwarded out of which
 * interface with which source and destination, rejected with which ICMPv6 destination-unreachable
 * code or a TCP reset, or silent. A run is complete when sentinel packets sent after the flows are
 * seen at every capture point. Kernel-only rules are marked and left out of the snapshot. An
 * explicit I/O module.
 */
import type { ChildProcess } from "node:child_process";
import { formatIp, parseIp } from "../net/cidr.ts";
import { type SandboxFlow, type Sender, startSender } from "./nat-sandbox.ts";
import { createLab, type Lab, mustExec as must, type Namespace } from "./netns.ts";
import { PATH_NET, type PathCase, type PathFlow } from "./path-gen.ts";
import { toIpv6 } from "./path-gen6.ts";
import { type KernelPathVerdict, withoutObservers } from "./path-sandbox.ts";

/** The sandbox's fixed shape in IPv6 (each address lab/path-gen6's carry-over of IPv4's). */
export const PATH_NET6 = {
  podIface: PATH_NET.podIface,
  podGateway: toIpv6(PATH_NET.podGateway),
  pods: PATH_NET.pods.map(toIpv6),
  eth0: {
    iface: "eth0",
    node: toIpv6(PATH_NET.eth0.node),
    gateway: toIpv6(PATH_NET.eth0.gateway),
  },
  eth1: {
    iface: "eth1",
    node: toIpv6(PATH_NET.eth1.node),
    gateway: toIpv6(PATH_NET.eth1.gateway),
  },
} as const;

/** A /24 of the IPv4 sandbox is a /120 here. */
const LEN = 120;
const SENTINEL = toIpv6("10.244.0.99");
const POD_NET = `${toIpv6("10.244.0.0")}/${LEN}`;
const OBSERVER = "podpath-observer";
/** Kernel-only `ip -6 rule` priorities (left out of the snapshot). */
const OBSERVER_PRIORITIES = ["1", "2"];

/** The node's IPv6 state as a snapshot holds it, beside its (untouched) IPv4 state. */
export interface NodeFiles6 {
  readonly ip6tablesSave: string;
  readonly ip6Rule: string;
  readonly ip6Route: string;
  readonly ipAddr: string;
  readonly iptablesSave: string;
  readonly ipRule: string;
  readonly ipRoute: string;
}

export interface PathSandbox6 {
  readonly lab: Lab;
  /** Loads an IPv6 case (lab/path-gen6): ip6tables rules with the observers, rules, routes. */
  load(c: PathCase, flows: readonly PathFlow[]): Promise<string | undefined>;
  nodeFiles(): Promise<NodeFiles6>;
  observe(flows: readonly PathFlow[]): Promise<KernelPathVerdict[]>;
  destroy(): Promise<void>;
}

const BUILTIN: Readonly<Record<string, readonly string[]>> = {
  raw: ["PREROUTING", "OUTPUT"],
  mangle: ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"],
  nat: ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"],
  filter: ["INPUT", "FORWARD", "OUTPUT"],
};

/**
 * The ip6tables-restore text with the observers: first in every built-in chain, ACCEPT for the
 * sentinels (UDP port 9), ICMPv6 destination-unreachable, neighbour discovery and TCP resets
 * (never a generated flow), and a security table counting each flow that reaches the end of INPUT.
 */
export function withObservers6(restore: string, flows: readonly PathFlow[]): string {
  const c = `-m comment --comment ${OBSERVER}`;
  const observers = (chain: string) => [
    `-A ${chain} -p udp -m udp --sport 9 ${c} -j ACCEPT`,
    ...[1, 135, 136].map(
      (t) => `-A ${chain} -p ipv6-icmp -m icmp6 --icmpv6-type ${t} ${c} -j ACCEPT`,
    ),
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
  const count = flows.map((f) =>
    f.proto === "icmp"
      ? `-A INPUT -d ${f.dst}/128 -p ipv6-icmp -m icmp6 --icmpv6-type 128 ${c}`
      : `-A INPUT -p ${f.proto} -m ${f.proto} --sport ${f.sport} ${c}`,
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

const batch6 = (ns: Namespace, lines: readonly string[]) =>
  lines.length === 0
    ? Promise.resolve("")
    : must(ns, ["ip", "-6", "-force", "-batch", "-"], `${lines.join("\n")}\n`);

const sysctl = (ns: Namespace, ...kv: string[]) => must(ns, ["sysctl", "-q", "-w", ...kv]);

async function macOf(ns: Namespace, iface: string): Promise<string> {
  return (await must(ns, ["cat", `/sys/class/net/${iface}/address`])).trim();
}

export async function createPathSandbox6(): Promise<PathSandbox6> {
  const lab = await createLab({ prefix: "pppat6" });
  try {
    const pod = await lab.addNamespace("pod");
    const node = await lab.addNamespace("node");
    const far0 = await lab.addNamespace("far0");
    const far1 = await lab.addNamespace("far1");
    for (const ns of [pod, node, far0, far1]) {
      // before the links exist: their link-local addresses skip detection too
      await sysctl(ns, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0");
    }
    const { eth0, eth1 } = PATH_NET6;
    await lab.link(pod, "eth0", node, PATH_NET6.podIface);
    await lab.link(node, eth0.iface, far0, "eth0");
    await lab.link(node, eth1.iface, far1, "eth0");
    await batch6(pod, [
      "link set lo up",
      "link set eth0 up",
      ...[...PATH_NET6.pods, SENTINEL].map((a) => `addr add ${a}/${LEN} dev eth0 nodad`),
      `route add default via ${PATH_NET6.podGateway} dev eth0`,
    ]);
    await batch6(node, [
      "link set lo up",
      `addr add ${PATH_NET6.podGateway}/${LEN} dev ${PATH_NET6.podIface} nodad`,
      `link set ${PATH_NET6.podIface} up`,
      `addr add ${eth0.node}/${LEN} dev ${eth0.iface} nodad`,
      `link set ${eth0.iface} up`,
      `addr add ${eth1.node}/${LEN} dev ${eth1.iface} nodad`,
      `link set ${eth1.iface} up`,
      `route add default via ${eth0.gateway} dev ${eth0.iface}`,
    ]);
    for (const [far, net] of [
      [far0, eth0],
      [far1, eth1],
    ] as const) {
      await batch6(far, ["link set eth0 up", `addr add ${net.gateway}/${LEN} dev eth0 nodad`]);
      // silent: no answer may come back and be mistaken for the node's
      await must(far, ["ip6tables", "-w", "-A", "INPUT", "-j", "DROP"]);
      await must(far, ["ip6tables", "-w", "-A", "OUTPUT", "-j", "DROP"]);
    }
    // every neighbour known up front: no packet waits for neighbour discovery
    const podMac = await macOf(pod, "eth0");
    await batch6(node, [
      ...[...PATH_NET6.pods, SENTINEL].map(
        (a) => `neigh replace ${a} lladdr ${podMac} dev ${PATH_NET6.podIface} nud permanent`,
      ),
      `neigh replace ${eth0.gateway} lladdr ${await macOf(far0, "eth0")} dev ${eth0.iface} nud permanent`,
      `neigh replace ${eth1.gateway} lladdr ${await macOf(far1, "eth0")} dev ${eth1.iface} nud permanent`,
    ]);
    await batch6(pod, [
      `neigh replace ${PATH_NET6.podGateway} lladdr ${await macOf(node, PATH_NET6.podIface)} dev eth0 nud permanent`,
    ]);
    await sysctl(
      node,
      "net.ipv6.conf.all.forwarding=1",
      // every ICMPv6 error sent, however many a run asks for
      "net.ipv6.icmp.ratelimit=0",
      "net.ipv4.icmp_msgs_per_sec=100000",
      "net.ipv4.icmp_msgs_burst=100000",
    );
    // the kernel's own: sentinels by the main table, replies to the pods too
    await batch6(node, [
      `rule add priority 1 from ${SENTINEL} lookup main`,
      `rule add priority 2 to ${POD_NET} lookup main`,
      `route add default via ${eth1.gateway} dev ${eth1.iface} table 100`,
    ]);
    const caps = {
      far0: await startCapture(far0, ["-i", "eth0", "-Q", "in", "ip6"]),
      far1: await startCapture(far1, ["-i", "eth0", "-Q", "in", "ip6"]),
      pod: await startCapture(pod, ["-i", "eth0", "-Q", "in", "icmp6 or tcp"]),
      lo: await startCapture(node, ["-i", "lo", "icmp6 or tcp or udp port 9"]),
    };
    const senders = { pod: startSender(pod), node: startSender(node) };
    return sandbox(lab, pod, node, caps, senders);
  } catch (e) {
    await lab.destroy();
    throw e;
  }
}

type Caps = Record<"far0" | "far1" | "pod" | "lo", Capture>;

function sandbox(
  lab: Lab,
  pod: Namespace,
  node: Namespace,
  caps: Caps,
  senders: { pod: Sender; node: Sender },
): PathSandbox6 {
  let undo: string[] = [];
  return {
    lab,
    async load(c, flows) {
      await batch6(node, undo);
      undo = [];
      const r = await node.exec(["ip6tables-restore", "-w"], {
        input: withObservers6(c.restore, flows),
      });
      if (r.code !== 0) return r.stderr.trim() || `ip6tables-restore exited ${r.code}`;
      for (const route of c.routes) {
        const res = await node.exec(["ip", "-6", "route", "add", ...route.split(" ")]);
        if (res.code !== 0) return `ip -6 route add ${route}: ${res.stderr.trim()}`;
        undo.push(`route del ${route}`);
      }
      for (const rule of c.ipRules) {
        const res = await node.exec(["ip", "-6", "rule", "add", ...rule.split(" ")]);
        if (res.code !== 0) return `ip -6 rule add ${rule}: ${res.stderr.trim()}`;
        undo.push(`rule del ${rule}`);
      }
      return undefined;
    },
    async nodeFiles() {
      const [save6, rule6, route6, addr, save, rule, route] = await Promise.all([
        must(node, ["ip6tables-save"]),
        must(node, ["ip", "-6", "rule"]),
        must(node, ["ip", "-6", "route", "show", "table", "all"]),
        must(node, ["ip", "addr"]),
        must(node, ["iptables-save"]),
        must(node, ["ip", "rule"]),
        must(node, ["ip", "route", "show", "table", "all"]),
      ]);
      return {
        ip6tablesSave: withoutObservers(save6),
        ip6Rule: rule6
          .split("\n")
          .filter((l) => !OBSERVER_PRIORITIES.includes(l.split(":")[0] ?? ""))
          .join("\n"),
        ip6Route: route6,
        ipAddr: addr,
        iptablesSave: save,
        ipRule: rule,
        ipRoute: route,
      };
    },
    async observe(flows) {
      await node.exec(["conntrack", "-F", "-f", "ipv6"]);
      for (const c of Object.values(caps)) c.packets.length = 0;
      const toSandbox = (f: PathFlow): SandboxFlow => ({
        proto: f.proto,
        src: f.src,
        dst: f.dst,
        ...(f.sport !== undefined ? { sport: f.sport } : {}),
        ...(f.dport !== undefined ? { dport: f.dport } : {}),
      });
      const podFlows = flows.filter((f) => f.origin === "pod");
      const hostFlows = flows.filter((f) => f.origin === "host");
      await Promise.all([
        senders.pod.send(podFlows.filter((f) => f.proto !== "icmp").map(toSandbox)),
        senders.node.send(hostFlows.filter((f) => f.proto !== "icmp").map(toSandbox)),
        ...flows
          .filter((f) => f.proto === "icmp")
          .map((f) =>
            (f.origin === "pod" ? pod : node).exec(
              ["ping", "-6", "-n", "-c", "1", "-W", "0.01", "-I", f.src, f.dst],
              { timeoutMs: 5_000 },
            ),
          ),
      ]);
      const sentinel = (dst: string): SandboxFlow => ({
        proto: "udp",
        src: SENTINEL,
        dst,
        sport: 9,
        dport: 9,
      });
      // one at a time: each binds the same source port
      for (const dst of [PATH_NET6.eth0.gateway, PATH_NET6.eth1.gateway, PATH_NET6.podGateway]) {
        await senders.pod.send([sentinel(dst)]);
      }
      await senders.node.send([{ proto: "udp", src: "::1", dst: "::1", sport: 9, dport: 9 }]);
      const isSentinel = (p: Packet6) => p.proto === 17 && p.sport === 9;
      const done = () =>
        caps.far0.packets.some(isSentinel) &&
        caps.far1.packets.some(isSentinel) &&
        caps.lo.packets.some(isSentinel) &&
        caps.pod.packets.some((p) => p.inner?.src === SENTINEL && p.inner.sport === 9);
      const deadline = Date.now() + 15_000;
      while (!done()) {
        if (Date.now() > deadline) {
          const missing = Object.entries(caps)
            .filter(([, c]) => !c.packets.some((p) => isSentinel(p) || p.inner?.sport === 9))
            .map(([k]) => k);
          throw new Error(`the IPv6 sentinels never reached ${missing.join(", ")}`);
        }
        await new Promise((r) => setTimeout(r, 5));
      }
      const counters = await must(node, [
        "ip6tables",
        "-w",
        "-t",
        "security",
        "-L",
        "INPUT",
        "-v",
        "-n",
        "-x",
      ]);
      const hits = counters
        .split("\n")
        .slice(2)
        .filter((l) => l.trim() !== "")
        .map((l) => Number(l.trim().split(/\s+/)[0]));
      return flows.map((f, i) => verdictOf(f, (hits[i] ?? 0) > 0, caps));
    },
    destroy: () => lab.destroy(),
  };
}

/** ICMPv6 destination-unreachable codes (RFC 4443) in ip6tables' `--reject-with` words. */
const ICMP6_CODES: Readonly<Record<number, string>> = {
  0: "icmp6-no-route",
  1: "icmp6-adm-prohibited",
  3: "icmp6-addr-unreachable",
  4: "icmp6-port-unreachable",
  5: "icmp6-policy-fail",
  6: "icmp6-reject-route",
};

function verdictOf(f: PathFlow, delivered: boolean, caps: Caps): KernelPathVerdict {
  if (delivered) return { kind: "delivered" };
  const proto = { tcp: 6, udp: 17, icmp: 58 }[f.proto];
  for (const [dev, cap] of [
    ["eth0", caps.far0],
    ["eth1", caps.far1],
  ] as const) {
    const p = cap.packets.find((x) =>
      x.proto !== proto
        ? false
        : proto === 58
          ? x.icmpType === 128 && x.dst === f.dst
          : x.sport === f.sport,
    );
    if (p) {
      return {
        kind: "forwarded",
        dev,
        src: p.src,
        dst: p.dst,
        ...(p.dport !== undefined && proto !== 58 ? { dport: p.dport } : {}),
      };
    }
  }
  const at = f.origin === "pod" ? caps.pod : caps.lo;
  for (const p of at.packets) {
    if (p.proto === 58 && p.icmpType === 1 && p.inner && p.inner.proto === proto) {
      const same =
        proto === 58
          ? p.inner.src === f.src && p.inner.dst === f.dst && p.inner.icmpType === 128
          : p.inner.src === f.src && p.inner.sport === f.sport;
      if (same)
        return {
          kind: "rejected",
          with: ICMP6_CODES[p.icmpCode ?? -1] ?? `icmp6-code-${p.icmpCode}`,
        };
    }
    if (p.proto === 6 && p.rst && p.dst === f.src && p.dport === f.sport && proto === 6) {
      return { kind: "rejected", with: "tcp-reset" };
    }
  }
  return { kind: "silent" };
}

/** One captured IPv6 packet's headers (and, for an ICMPv6 error, the packet it quotes). */
export interface Packet6 {
  /** The next header after the fixed header (no extension headers are sent here). */
  readonly proto: number;
  readonly src: string;
  readonly dst: string;
  readonly sport?: number;
  readonly dport?: number;
  readonly rst?: boolean;
  readonly icmpType?: number;
  readonly icmpCode?: number;
  readonly inner?: {
    readonly proto: number;
    readonly src: string;
    readonly dst: string;
    readonly sport?: number;
    /** The quoted packet's ICMPv6 type (128: the echo request a flow sends). */
    readonly icmpType?: number;
  };
}

/** An IPv6 address at `at`, as podpath prints it (RFC 5952). */
function ip6(b: readonly number[], at: number): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2)
    groups.push((((b[at + i] ?? 0) << 8) | (b[at + i + 1] ?? 0)).toString(16));
  return formatIp(parseIp(groups.join(":")));
}
const u16 = (b: readonly number[], at: number) => ((b[at] ?? 0) << 8) | (b[at + 1] ?? 0);

/** Reads an IPv6 packet's headers from its bytes (tcpdump -x prints them from the IP header). */
export function parsePacket6(b: readonly number[]): Packet6 | undefined {
  if (b.length < 40 || b[0]! >> 4 !== 6) return undefined;
  const proto = b[6]!;
  const base = { proto, src: ip6(b, 8), dst: ip6(b, 24) };
  const l4 = 40;
  if (proto === 6 || proto === 17) {
    return {
      ...base,
      sport: u16(b, l4),
      dport: u16(b, l4 + 2),
      ...(proto === 6 ? { rst: ((b[l4 + 13] ?? 0) & 4) !== 0 } : {}),
    };
  }
  if (proto === 58) {
    const icmpType = b[l4]!;
    const icmpCode = b[l4 + 1]!;
    if (icmpType !== 1 || b.length < l4 + 8 + 40) return { ...base, icmpType, icmpCode };
    const q = l4 + 8;
    const qproto = b[q + 6] ?? 0;
    return {
      ...base,
      icmpType,
      icmpCode,
      inner: {
        proto: qproto,
        src: ip6(b, q + 8),
        dst: ip6(b, q + 24),
        ...(qproto === 6 || qproto === 17 ? { sport: u16(b, q + 40) } : {}),
        ...(qproto === 58 ? { icmpType: b[q + 40] ?? -1 } : {}),
      },
    };
  }
  return base;
}

const SNAPLEN = 300;

interface Capture {
  readonly packets: Packet6[];
  readonly proc: ChildProcess;
}

/** tcpdump -x in a namespace, its IPv6 packets parsed as they come; resolves once it listens. */
async function startCapture(ns: Namespace, args: readonly string[]): Promise<Capture> {
  const proc = ns.spawn(["tcpdump", "-l", "-nn", "-x", "-s", String(SNAPLEN), ...args]);
  const packets: Packet6[] = [];
  let buf = "";
  let bytes: number[] = [];
  const flush = () => {
    const p = parsePacket6(bytes);
    if (p) packets.push(p);
    bytes = [];
  };
  proc.stdout?.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    const lines = buf.split("\n");
    buf = lines.pop() ?? "";
    for (const l of lines) {
      const m = /^\s+0x([0-9a-f]+):\s+(.*)$/.exec(l);
      if (!m) {
        flush();
        continue;
      }
      // a dump from offset 0 starts a packet: tcpdump first dumps the payload of an ICMPv6 code
      // it cannot name (policy-fail, reject-route) from the ICMPv6 header, then -x's own dump
      if (Number.parseInt(m[1]!, 16) === 0) flush();
      for (const w of m[2]!.trim().split(/\s+/)) {
        for (let i = 0; i + 1 < w.length; i += 2)
          bytes.push(Number.parseInt(w.slice(i, i + 2), 16));
      }
      // complete at its payload length plus the fixed header, or at the snapshot length
      if (bytes.length >= 6 && bytes.length >= Math.min(40 + u16(bytes, 4), SNAPLEN - 14)) flush();
    }
  });
  let err = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`tcpdump did not start in ${ns.name}: ${err}`)),
      20_000,
    );
    proc.stderr?.setEncoding("utf8").on("data", (d: string) => {
      err += d;
      if (/listening on/.test(err)) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.on("exit", () => reject(new Error(`tcpdump exited in ${ns.name}: ${err}`)));
  });
  return { packets, proc };
}
