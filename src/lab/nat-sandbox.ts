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
import { createLab, type Lab, type Namespace } from "./netns.ts";

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

async function must(ns: Namespace, argv: readonly string[], input?: string): Promise<string> {
  const r = await ns.exec(argv, input === undefined ? {} : { input });
  if (r.code !== 0) {
    throw new Error(`${argv.join(" ")} in ${ns.name} exited ${r.code}: ${r.stderr.trim()}`);
  }
  return r.stdout;
}

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
    await batch(client, ["link set eth0 up"]);
    await batch(node, [
      `addr add ${GATEWAY}/32 dev ${inIface}`,
      `link set ${inIface} up`,
      `addr add ${nodeIp}/32 dev ${outIface}`,
      `link set ${outIface} up`,
    ]);
    await batch(far, ["link set eth0 up", `route add ${nodeIp}/32 dev eth0`]);
    // no answers: an RST or ICMP error would end an unconfirmed conntrack entry before it is read
    await must(far, ["iptables", "-w", "-A", "INPUT", "-j", "DROP"]);
    await must(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
    // conntrack runs in a namespace only while some rule needs it; a nat table with no
    // MASQUERADE/SNAT target does not, so a filter-table conntrack match keeps it on
    await must(node, ["iptables", "-w", "-A", "FORWARD", "-m", "conntrack", "--ctstate", "NEW"]);
    return sandbox(lab, client, node, far, { inIface, outIface, nodeIp });
  } catch (e) {
    await lab.destroy();
    throw e;
  }
}

function sandbox(
  lab: Lab,
  client: Namespace,
  node: Namespace,
  far: Namespace,
  cfg: { inIface: string; outIface: string; nodeIp: string },
): NatSandbox {
  return {
    lab,
    node,
    nodeIp: cfg.nodeIp,
    async loadNat(restoreText) {
      const r = await node.exec(["iptables-restore", "-w"], { input: restoreText });
      return r.code === 0 ? undefined : r.stderr.trim() || `iptables-restore exited ${r.code}`;
    },
    async observe(flows) {
      const srcs = [...new Set(flows.filter((f) => !f.local).map((f) => f.src))];
      const locals = [...new Set(flows.filter((f) => f.local).map((f) => f.src))].filter(
        (a) => a !== cfg.nodeIp,
      );
      const dsts = [...new Set(flows.map((f) => f.dst))];
      await batch(client, [
        ...srcs.map((s) => `addr add ${s}/32 dev eth0`),
        `route replace default via ${GATEWAY} dev eth0 onlink`,
      ]);
      await batch(node, [
        ...srcs.map((s) => `route replace ${s}/32 dev ${cfg.inIface}`),
        ...locals.map((s) => `addr add ${s}/32 dev ${cfg.outIface}`),
        ...dsts.map((d) => `route replace ${d}/32 dev ${cfg.outIface}`),
      ]);
      await batch(far, [
        ...dsts.map((d) => `addr add ${d}/32 dev eth0`),
        `route replace default via ${cfg.nodeIp} dev eth0 onlink`,
      ]);
      await node.exec(["conntrack", "-F"]);
      const sendErrors: string[] = [];
      for (const [ns, local] of [
        [client, false],
        [node, true],
      ] as const) {
        const mine = flows.filter((f) => (f.local ?? false) === local);
        const sockets = mine.filter((f) => f.proto !== "icmp");
        if (sockets.length > 0) {
          const r = await ns.exec([process.execPath, "-e", SENDER], {
            input: JSON.stringify(sockets),
            timeoutMs: 10_000,
          });
          if (r.code !== 0) sendErrors.push(`sender exited ${r.code}: ${r.stderr.trim()}`);
        }
        for (const f of mine.filter((x) => x.proto === "icmp")) {
          await ns.exec(["ping", "-c", "1", "-W", "0.1", "-I", f.src, f.dst], { timeoutMs: 5_000 });
        }
      }
      const listing = await node.exec(["conntrack", "-L"]);
      const entries = listing.stdout.split("\n").map((l) => ({ l, p: parseConntrackLine(l) }));
      const result = flows.map((f): KernelObservation => {
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
      await batch(
        client,
        srcs.map((s) => `addr del ${s}/32 dev eth0`),
      );
      await batch(node, [
        ...srcs.map((s) => `route del ${s}/32 dev ${cfg.inIface}`),
        ...locals.map((s) => `addr del ${s}/32 dev ${cfg.outIface}`),
        ...dsts.map((d) => `route del ${d}/32 dev ${cfg.outIface}`),
      ]);
      await batch(
        far,
        dsts.map((d) => `addr del ${d}/32 dev eth0`),
      );
      return result;
    },
    destroy: () => lab.destroy(),
  };
}

/**
 * Sends one TCP SYN (connect, then close before any answer) or one UDP datagram per flow, from
 * the flow's source address and port; flows arrive as JSON on stdin. Inline so it also runs from
 * the built CLI. The far side drops everything, so no RST or ICMP error ends the conntrack entry.
 */
const SENDER = `
const flows = JSON.parse(require("fs").readFileSync(0, "utf8"));
const net = require("net"), dgram = require("dgram");
let pending = flows.length;
const done = () => { if (--pending === 0) setTimeout(() => process.exit(0), 20); };
for (const f of flows) {
  if (f.proto === "tcp") {
    const s = net.connect({ host: f.dst, port: f.dport ?? 9, localAddress: f.src, localPort: f.sport });
    s.on("error", () => {});
    setTimeout(() => { s.destroy(); done(); }, 30);
  } else {
    const u = dgram.createSocket("udp4");
    u.on("error", () => { done(); });
    u.bind(f.sport ?? 0, f.src, () => u.send("x", f.dport ?? 9, f.dst, () => { u.close(); done(); }));
  }
}`;
