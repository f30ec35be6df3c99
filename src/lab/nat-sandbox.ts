/**
 * @module lab/nat-sandbox — a three-namespace sandbox that asks the kernel what a nat table does
 * to a flow: `client` sends one packet, `node` (holding the nat table under test, forwarding)
 * routes it out of its egress interface to `far`, and conntrack in `node` tells the translation
 * (the reply tuple's destination is the source the far side sees). Used by `lab replay` and the
 * differential tests. An explicit I/O module. IPv4.
 *
 * Addressing uses /32 host addresses with on-link routes, so any source and destination can be
 * placed without subnets: client SRC/32 → (default via 169.254.77.1 onlink) → node
 * [inIface 169.254.77.1/32 · outIface nodeIp/32] → far DST/32 (default via nodeIp onlink).
 */
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
  /** The node's address on outIface. */
  readonly nodeIp?: string;
}

export interface NatSandbox {
  readonly lab: Lab;
  readonly node: Namespace;
  readonly nodeIp: string;
  /** Replaces the node's nat table with an `iptables-restore` nat section; error text on failure. */
  loadNat(restoreText: string): Promise<string | undefined>;
  /** Sends each flow once and reads its translation; flows must have distinct (proto, src, sport). */
  observe(flows: readonly SandboxFlow[]): Promise<KernelObservation[]>;
  destroy(): Promise<void>;
}

const GATEWAY = "169.254.77.1";

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
  const inIface = opts.inIface ?? "cbr0";
  const outIface = opts.outIface ?? "eth0";
  const nodeIp = opts.nodeIp ?? "10.128.0.2";
  const lab = await createLab();
  try {
    const client = await lab.addNamespace("client");
    const node = await lab.addNamespace("node");
    const far = await lab.addNamespace("far");
    await lab.link(client, "eth0", node, inIface);
    await lab.link(node, outIface, far, "eth0");
    await batch(client, ["link set eth0 up", `route add default via ${GATEWAY} dev eth0 onlink`]);
    await batch(node, [
      `addr add ${GATEWAY}/32 dev ${inIface}`,
      `link set ${inIface} up`,
      `addr add ${nodeIp}/32 dev ${outIface}`,
      `link set ${outIface} up`,
    ]);
    await batch(far, [
      "link set eth0 up",
      `route add ${nodeIp}/32 dev eth0`,
      `route add default via ${nodeIp} dev eth0 onlink`,
    ]);
    // no answers: an RST or ICMP error would end an unconfirmed conntrack entry before it is read
    await must(far, ["iptables", "-w", "-A", "INPUT", "-j", "DROP"]);
    await must(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
    // conntrack runs in a namespace only while some rule needs it; a nat table with no
    // MASQUERADE/SNAT target does not, so a filter-table conntrack match keeps it on
    await must(node, ["iptables", "-w", "-A", "FORWARD", "-m", "conntrack", "--ctstate", "NEW"]);
    const senders = { client: startSender(client), node: startSender(node) };
    return sandbox(lab, client, node, far, senders, { inIface, outIface, nodeIp });
  } catch (e) {
    await lab.destroy();
    throw e;
  }
}

/** The sandbox's addresses: which namespace holds each (see {@link addressPlacer}). */
type SandboxConfig = { inIface: string; outIface: string; nodeIp: string };

function sandbox(
  lab: Lab,
  client: Namespace,
  node: Namespace,
  far: Namespace,
  senders: { client: Sender; node: Sender },
  cfg: SandboxConfig,
): NatSandbox {
  const place = addressPlacer(client, node, far, cfg);
  return {
    lab,
    node,
    nodeIp: cfg.nodeIp,
    async loadNat(restoreText) {
      const r = await node.exec(["iptables-restore", "-w"], { input: restoreText });
      return r.code === 0 ? undefined : r.stderr.trim() || `iptables-restore exited ${r.code}`;
    },
    async observe(flows) {
      await place(flows);
      await node.exec(["conntrack", "-F"]);
      const sendErrors = await sendFlows(flows, client, node, senders);
      const listing = await node.exec(["conntrack", "-L"]);
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
  const undo: { readonly [R in Role]: (a: string) => [Namespace, string][] } = {
    src: (a) => [
      [client, `addr del ${a}/32 dev eth0`],
      [node, `route del ${a}/32 dev ${cfg.inIface}`],
    ],
    local: (a) => [[node, `addr del ${a}/32 dev ${cfg.outIface}`]],
    dst: (a) => [
      [far, `addr del ${a}/32 dev eth0`],
      [node, `route del ${a}/32 dev ${cfg.outIface}`],
    ],
  };
  const todo: { readonly [R in Role]: (a: string) => [Namespace, string][] } = {
    src: (a) => [
      [client, `addr add ${a}/32 dev eth0`],
      [node, `route replace ${a}/32 dev ${cfg.inIface}`],
    ],
    local: (a) => [[node, `addr add ${a}/32 dev ${cfg.outIface}`]],
    dst: (a) => [
      [far, `addr add ${a}/32 dev eth0`],
      [node, `route replace ${a}/32 dev ${cfg.outIface}`],
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
        if (f.src !== cfg.nodeIp) claim(f.src, "local");
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

/** What the kernel did to each flow, from its conntrack entry (`conntrack -L` text). */
function observationsOf(
  flows: readonly SandboxFlow[],
  conntrackList: string,
  sendErrors: readonly string[],
): KernelObservation[] {
  const entries = conntrackList.split("\n").map((l) => ({ l, p: parseConntrackLine(l) }));
  return flows.map((f): KernelObservation => {
    const hit = entries.find(
      ({ p }) =>
        p !== undefined &&
        p.proto === f.proto &&
        p.orig["src"] === f.src &&
        p.orig["dst"] === f.dst &&
        (f.proto === "icmp" || Number(p.orig["sport"]) === f.sport),
    );
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
      const u = dgram.createSocket("udp4");
      u.on("error", (e) => { try { u.close(); } catch {} done(String(e.message)); });
      u.bind(f.sport ?? 0, f.src, () => u.send("x", f.dport ?? 9, f.dst, () => { u.close(); done(); }));
    }
  }
}`;

interface Sender {
  /** Sends the flows; resolves with undefined or the sender's errors. */
  send(flows: readonly SandboxFlow[]): Promise<string | undefined>;
}

function startSender(ns: Namespace): Sender {
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
