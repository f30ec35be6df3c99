/**
 * @module lab/nat-sandbox — a three-namespace sandbox that asks the kernel what a nat table does
 * to a flow: `client` sends one packet, `node` (holding the nat table under test, forwarding)
 * routes it out of its egress interface to `far`, and conntrack in `node` tells the translation
 * (the reply tuple's destination is the source the far side sees). Used by `lab replay` and the
 * differential tests. An explicit I/O module. IPv4, or IPv6 (`family: 6`).
 *
 * Addressing uses host addresses (/32, /128) with on-link routes, so any source and destination
 * can be placed without subnets: client SRC/32 → (default via 169.254.77.1 onlink) → node
 * [inIface 169.254.77.1/32 · outIface nodeIp/32] → far DST/32 (default via nodeIp onlink).
 * IPv6 is the same shape with ULA addresses (gateway fd00:77::1, node fd00:128::2), duplicate
 * address detection off so every address is usable at once, and ip6tables for the rules.
 */
import { tryParseIp } from "../net/cidr.ts";
import { createLab, type Lab, mustExec as must, type Namespace } from "./netns.ts";

export type SandboxProto = "tcp" | "udp" | "icmp";

/** One packet to send. `local`: sent by the node itself (OUTPUT path) instead of forwarded. */
export interface SandboxFlow {
  readonly proto: SandboxProto;
  readonly src: string;
  readonly dst: string;
  readonly sport?: number;
  readonly dport?: number;
  readonly local?: boolean;
}

/** What conntrack in the node recorded for the flow. */
export interface KernelObservation {
  /** Source address on the wire after the node (reply tuple's destination). */
  readonly source?: string;
  /** Source port on the wire (TCP/UDP). */
  readonly sport?: number;
  /** Destination after DNAT (reply tuple's source). */
  readonly destination?: string;
  readonly dport?: number;
  /** The conntrack line it was read from. */
  readonly entry?: string;
  /** Why nothing could be observed (packet never reached POSTROUTING, send failed, …). */
  readonly error?: string;
}

export interface NatSandboxOptions {
  /** Interface the forwarded packet arrives on in the node (rules may match `-i`). */
  readonly inIface?: string;
  /** Interface it leaves by (rules may match `-o`; MASQUERADE uses its address). */
  readonly outIface?: string;
  /** The node's address on outIface (default 10.128.0.2, or fd00:128::2 for IPv6). */
  readonly nodeIp?: string;
  /** Address family of every flow and of the rules loaded (default 4). */
  readonly family?: 4 | 6;
}

export interface NatSandbox {
  readonly lab: Lab;
  readonly node: Namespace;
  readonly nodeIp: string;
  readonly family: 4 | 6;
  /**
   * Replaces the node's nat table with an `iptables-restore` nat section (`ip6tables-restore` for
   * IPv6); error text on failure.
   */
  loadNat(restoreText: string): Promise<string | undefined>;
  /** Sends each flow once and reads its translation; flows must have distinct (proto, src, sport). */
  observe(flows: readonly SandboxFlow[]): Promise<KernelObservation[]>;
  destroy(): Promise<void>;
}

/** The sandbox's fixed addresses and tools, per family. */
const FAMILY = {
  4: {
    gateway: "169.254.77.1",
    nodeIp: "10.128.0.2",
    host: 32,
    nodad: "",
    iptables: "iptables",
    restore: "iptables-restore",
    conntrackFamily: "ipv4",
  },
  6: {
    gateway: "fd00:77::1",
    nodeIp: "fd00:128::2",
    host: 128,
    // no duplicate address detection: the address is usable at once, not "tentative"
    nodad: " nodad",
    iptables: "ip6tables",
    restore: "ip6tables-restore",
    conntrackFamily: "ipv6",
  },
} as const;

/** The sandbox's gateway address on the node's inIface, per family. */
export const SANDBOX_GATEWAY = { 4: FAMILY[4].gateway, 6: FAMILY[6].gateway } as const;
/** The node's default address on outIface, per family. */
export const SANDBOX_NODE_IP = { 4: FAMILY[4].nodeIp, 6: FAMILY[6].nodeIp } as const;

type Role = "src" | "local" | "dst";

const batch = (ns: Namespace, lines: readonly string[]) =>
  lines.length === 0
    ? Promise.resolve("")
    : must(ns, ["ip", "-force", "-batch", "-"], `${lines.join("\n")}\n`);

/** Extracts the `*nat … COMMIT` section of an iptables-save dump (undefined when absent). */
export function natSection(dump: string): string | undefined {
  const lines = dump.split(/\r?\n/);
  const start = lines.findIndex((l) => l.trim() === "*nat");
  if (start < 0) return undefined;
  const end = lines.findIndex((l, i) => i > start && l.trim() === "COMMIT");
  if (end < 0) return undefined;
  return `${lines.slice(start, end + 1).join("\n")}\n`;
}

/** Parses one `conntrack -L` line into its original and reply tuples. */
export function parseConntrackLine(line: string):
  | {
      proto: string;
      orig: Record<string, string>;
      reply: Record<string, string>;
    }
  | undefined {
  const proto = /^(\S+)/.exec(line)?.[1];
  if (!proto) return undefined;
  const orig: Record<string, string> = {};
  const reply: Record<string, string> = {};
  let target = orig;
  for (const m of line.matchAll(/\b(src|dst|sport|dport|type|code|id)=(\S+)/g)) {
    const [, k, v] = m as unknown as [string, string, string];
    if (k === "src" && "src" in orig) target = reply;
    if (!(k in target)) target[k] = v;
  }
  return "src" in orig ? { proto, orig, reply } : undefined;
}

export async function createNatSandbox(opts: NatSandboxOptions = {}): Promise<NatSandbox> {
  const family = opts.family ?? 4;
  const fam = FAMILY[family];
  const inIface = opts.inIface ?? "cbr0";
  const outIface = opts.outIface ?? "eth0";
  const nodeIp = opts.nodeIp ?? fam.nodeIp;
  const { gateway, host, nodad } = fam;
  const lab = await createLab();
  try {
    const client = await lab.addNamespace("client");
    const node = await lab.addNamespace("node");
    const far = await lab.addNamespace("far");
    if (family === 6) {
      // set before the links exist, so their link-local addresses skip detection too
      for (const ns of [client, node, far]) {
        await must(ns, [
          "sysctl",
          "-q",
          "-w",
          "net.ipv6.conf.all.accept_dad=0",
          "net.ipv6.conf.default.accept_dad=0",
        ]);
      }
    }
    await lab.link(client, "eth0", node, inIface);
    await lab.link(node, outIface, far, "eth0");
    await batch(client, [
      "link set eth0 up",
      ...(family === 6 ? [`route add ${gateway}/${host} dev eth0`] : []),
      `route add default via ${gateway} dev eth0 onlink`,
    ]);
    await batch(node, [
      `addr add ${gateway}/${host} dev ${inIface}${nodad}`,
      `link set ${inIface} up`,
      `addr add ${nodeIp}/${host} dev ${outIface}${nodad}`,
      `link set ${outIface} up`,
    ]);
    await batch(far, [
      "link set eth0 up",
      `route add ${nodeIp}/${host} dev eth0`,
      `route add default via ${nodeIp} dev eth0 onlink`,
    ]);
    if (family === 6) {
      // neighbour discovery is ICMPv6, which a DROP would stop (ARP never meets iptables)
      for (const type of ["neighbour-solicitation", "neighbour-advertisement"]) {
        await must(far, [
          fam.iptables,
          "-w",
          "-A",
          "INPUT",
          "-p",
          "icmpv6",
          "--icmpv6-type",
          type,
          "-j",
          "ACCEPT",
        ]);
      }
    }
    // no answers: an RST or ICMP error would end an unconfirmed conntrack entry before it is read
    await must(far, [fam.iptables, "-w", "-A", "INPUT", "-j", "DROP"]);
    await must(node, [
      "sysctl",
      "-q",
      "-w",
      family === 6 ? "net.ipv6.conf.all.forwarding=1" : "net.ipv4.ip_forward=1",
    ]);
    // conntrack runs in a namespace only while some rule needs it; a nat table with no
    // MASQUERADE/SNAT target does not, so a filter-table conntrack match keeps it on
    await must(node, [fam.iptables, "-w", "-A", "FORWARD", "-m", "conntrack", "--ctstate", "NEW"]);
    const senders = { client: startSender(client), node: startSender(node) };
    return sandbox(lab, client, node, far, senders, { inIface, outIface, nodeIp, family });
  } catch (e) {
    await lab.destroy();
    throw e;
  }
}

/** The sandbox's addresses: which namespace holds each (see {@link addressPlacer}). */
type SandboxConfig = { inIface: string; outIface: string; nodeIp: string; family: 4 | 6 };

function sandbox(
  lab: Lab,
  client: Namespace,
  node: Namespace,
  far: Namespace,
  senders: { client: Sender; node: Sender },
  cfg: SandboxConfig,
): NatSandbox {
  const place = addressPlacer(client, node, far, cfg);
  const fam = FAMILY[cfg.family];
  // IPv4 as before: conntrack's default family, one listing
  const ct = cfg.family === 6 ? ["-f", fam.conntrackFamily] : [];
  return {
    lab,
    node,
    nodeIp: cfg.nodeIp,
    family: cfg.family,
    async loadNat(restoreText) {
      const r = await node.exec([fam.restore, "-w"], { input: restoreText });
      return r.code === 0 ? undefined : r.stderr.trim() || `${fam.restore} exited ${r.code}`;
    },
    async observe(flows) {
      const wrong = flows.find(
        (f) => isV6(f.src) !== (cfg.family === 6) || isV6(f.dst) !== isV6(f.src),
      );
      if (wrong) {
        throw new Error(
          `flow ${wrong.src} -> ${wrong.dst} is not IPv${cfg.family} like the sandbox`,
        );
      }
      await place(flows);
      await node.exec(["conntrack", "-F", ...ct]);
      const sendErrors = await sendFlows(flows, client, node, senders);
      let listing = await node.exec(["conntrack", "-L", ...ct]);
      if (cfg.family === 6) {
        // a first packet may wait for neighbour discovery: wait until every flow is listed
        // (or a bound passes, for a flow that never leaves the node)
        const deadline = Date.now() + 2_000;
        while (Date.now() < deadline && !allListed(flows, listing.stdout)) {
          await new Promise((r) => setTimeout(r, 20));
          listing = await node.exec(["conntrack", "-L", ...ct]);
        }
      }
      return observationsOf(flows, listing.stdout, sendErrors);
    },
    destroy: () => lab.destroy(),
  };
}

/**
 * Where each address lives: a forwarded source in `client`, a second local address of `node`,
 * or a destination in `far`. Addresses stay in place between calls (setting them up is most of
 * a call's cost); one whose role changes is moved. The function places a batch of flows' addresses.
 */
function addressPlacer(
  client: Namespace,
  node: Namespace,
  far: Namespace,
  cfg: SandboxConfig,
): (flows: readonly SandboxFlow[]) => Promise<void> {
  const placed = new Map<string, Role>();
  const { host: h, nodad } = FAMILY[cfg.family];
  const undo: { readonly [R in Role]: (a: string) => [Namespace, string][] } = {
    src: (a) => [
      [client, `addr del ${a}/${h} dev eth0`],
      [node, `route del ${a}/${h} dev ${cfg.inIface}`],
    ],
    local: (a) => [[node, `addr del ${a}/${h} dev ${cfg.outIface}`]],
    dst: (a) => [
      [far, `addr del ${a}/${h} dev eth0`],
      [node, `route del ${a}/${h} dev ${cfg.outIface}`],
    ],
  };
  const todo: { readonly [R in Role]: (a: string) => [Namespace, string][] } = {
    src: (a) => [
      [client, `addr add ${a}/${h} dev eth0${nodad}`],
      [node, `route replace ${a}/${h} dev ${cfg.inIface}`],
    ],
    local: (a) => [[node, `addr add ${a}/${h} dev ${cfg.outIface}${nodad}`]],
    dst: (a) => [
      [far, `addr add ${a}/${h} dev eth0${nodad}`],
      [node, `route replace ${a}/${h} dev ${cfg.outIface}`],
    ],
  };
  return async (flows) => {
    const want = new Map<string, Role>();
    const claim = (a: string, role: Role) => {
      const had = want.get(a);
      if (had !== undefined && had !== role) {
        throw new Error(`address ${a} is both a ${had} and a ${role} in one batch of flows`);
      }
      want.set(a, role);
    };
    for (const f of flows) {
      if (f.local) {
        if (!sameIp(f.src, cfg.nodeIp)) claim(f.src, "local");
      } else claim(f.src, "src");
      claim(f.dst, "dst");
    }
    const steps: [Namespace, string][] = [];
    for (const [a, role] of want) {
      const was = placed.get(a);
      if (was === role) continue;
      if (was !== undefined) steps.push(...undo[was](a));
      steps.push(...todo[role](a));
      placed.set(a, role);
    }
    for (const ns of [client, node, far]) {
      await batch(
        ns,
        steps.filter(([n]) => n === ns).map(([, line]) => line),
      );
    }
  };
}

/** Sends each flow once, forwarded ones from `client`, local ones from `node`: the send errors. */
async function sendFlows(
  flows: readonly SandboxFlow[],
  client: Namespace,
  node: Namespace,
  senders: { client: Sender; node: Sender },
): Promise<string[]> {
  const sendErrors: string[] = [];
  for (const [ns, local] of [
    [client, false],
    [node, true],
  ] as const) {
    const mine = flows.filter((f) => (f.local ?? false) === local);
    const sockets = mine.filter((f) => f.proto !== "icmp");
    if (sockets.length > 0) {
      const err = await senders[local ? "node" : "client"].send(sockets);
      if (err !== undefined) sendErrors.push(err);
    }
    for (const f of mine.filter((x) => x.proto === "icmp")) {
      // the far side drops everything: no need to wait for a reply
      await ns.exec(["ping", "-c", "1", "-W", "0.01", "-I", f.src, f.dst], {
        timeoutMs: 5_000,
      });
    }
  }
  return sendErrors;
}

const isV6 = (a: string) => a.includes(":");

/** The same address in one spelling (conntrack and podpath may compress IPv6 differently). */
const sameIp = (a: string | undefined, b: string) => {
  if (a === undefined) return false;
  if (a === b) return true;
  const [x, y] = [tryParseIp(a), tryParseIp(b)];
  return x !== undefined && y !== undefined && x.family === y.family && x.value === y.value;
};

/** The conntrack entry of a flow in a parsed listing. */
function entryOf(
  f: SandboxFlow,
  entries: readonly { l: string; p: ReturnType<typeof parseConntrackLine> }[],
) {
  // conntrack names ICMP over IPv6 "icmpv6"
  const proto = f.proto === "icmp" && isV6(f.src) ? "icmpv6" : f.proto;
  return entries.find(
    ({ p }) =>
      p !== undefined &&
      p.proto === proto &&
      sameIp(p.orig["src"], f.src) &&
      sameIp(p.orig["dst"], f.dst) &&
      (f.proto === "icmp" || Number(p.orig["sport"]) === f.sport),
  );
}

const parseListing = (text: string) =>
  text.split("\n").map((l) => ({ l, p: parseConntrackLine(l) }));

function allListed(flows: readonly SandboxFlow[], conntrackList: string): boolean {
  const entries = parseListing(conntrackList);
  return flows.every((f) => entryOf(f, entries) !== undefined);
}

/** What the kernel did to each flow, from its conntrack entry (`conntrack -L` text). */
function observationsOf(
  flows: readonly SandboxFlow[],
  conntrackList: string,
  sendErrors: readonly string[],
): KernelObservation[] {
  const entries = parseListing(conntrackList);
  return flows.map((f): KernelObservation => {
    const hit = entryOf(f, entries);
    if (!hit?.p) {
      return {
        error: sendErrors[0] ?? "no conntrack entry: the packet never left the node",
      };
    }
    const { reply } = hit.p;
    return {
      ...(reply["dst"] === undefined ? {} : { source: reply["dst"] }),
      ...(reply["dport"] === undefined ? {} : { sport: Number(reply["dport"]) }),
      ...(reply["src"] === undefined ? {} : { destination: reply["src"] }),
      ...(reply["sport"] === undefined ? {} : { dport: Number(reply["sport"]) }),
      entry: hit.l,
    };
  });
}

/**
 * A sender process per namespace (Node starts slowly, so it is started once): each stdin line is a
 * JSON array of flows; for each it sends one TCP SYN (connect, then close before any answer) or
 * one UDP datagram from the flow's source address and port, then prints one line: "ok" or the
 * errors. Inline so it also runs from the built CLI. The far side drops everything, so no RST or
 * ICMP error ends the conntrack entry before it is read.
 */
const SENDER = `
const net = require("net"), dgram = require("dgram");
let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => {
  buf += d;
  let nl;
  while ((nl = buf.indexOf("\\n")) >= 0) { const line = buf.slice(0, nl); buf = buf.slice(nl + 1); sendAll(JSON.parse(line)); }
});
process.stdin.on("end", () => process.exit(0));
function sendAll(flows) {
  let pending = flows.length;
  const errors = [];
  const done = (e) => { if (e) errors.push(e); if (--pending === 0) process.stdout.write((errors.length ? errors.join("; ") : "ok") + "\\n"); };
  if (pending === 0) return process.stdout.write("ok\\n");
  for (const f of flows) {
    if (f.proto === "tcp") {
      const s = net.connect({ host: f.dst, port: f.dport ?? 9, localAddress: f.src, localPort: f.sport });
      s.on("error", () => {});
      setTimeout(() => { s.destroy(); done(); }, 15);
    } else {
      const u = dgram.createSocket(f.src.includes(":") ? "udp6" : "udp4");
      u.on("error", (e) => { try { u.close(); } catch {} done(String(e.message)); });
      u.bind(f.sport ?? 0, f.src, () => u.send("x", f.dport ?? 9, f.dst, () => { u.close(); done(); }));
    }
  }
}`;

export interface Sender {
  /** Sends the flows; resolves with undefined or the sender's errors. */
  send(flows: readonly SandboxFlow[]): Promise<string | undefined>;
}

export function startSender(ns: Namespace): Sender {
  const child = ns.spawn([process.execPath, "-e", SENDER], { stdin: "pipe" });
  let out = "";
  const waiting: ((line: string) => void)[] = [];
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    for (let nl = out.indexOf("\n"); nl >= 0; nl = out.indexOf("\n")) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      waiting.shift()?.(line);
    }
  });
  child.on("exit", () => {
    for (const w of waiting.splice(0)) w(`sender in ${ns.name} exited`);
  });
  return {
    send(flows) {
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(`sender in ${ns.name} timed out`), 10_000);
        waiting.push((line) => {
          clearTimeout(timer);
          resolve(line === "ok" ? undefined : line);
        });
        child.stdin?.write(`${JSON.stringify(flows)}\n`);
      });
    },
  };
}
