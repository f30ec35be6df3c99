/**
 * @module test/components/masqueraded-flows — the kernel's verdict on flows whose source a
 * `--random-fully` masquerade rewrote (kube-proxy's, in both modes). The path sandbox
 * (src/lab/path-sandbox.ts) knows a flow by its source port: a packet leaving with a new port looks
 * silent, and one delivered to the node with a new port misses the delivery counter (and the
 * node's own TCP reset, de-NATed, looks like a rejection). A delivery counter on the flow's
 * original tuple says whether it reached the end of INPUT; the node's conntrack entry says where a
 * forwarded one went and as what (its reply tuple is the translated packet reversed), and captures
 * on the far hosts show that packet leaving, and by which uplink.
 */
import type { ChildProcess } from "node:child_process";
import { mustExec as must, type Namespace } from "../../src/lab/netns.ts";
import type { PathFlow } from "../../src/lab/path-gen.ts";
import { listSecurityInput } from "../../src/lab/path-observers.ts";
import type { KernelPathVerdict } from "../../src/lab/path-sandbox.ts";

/** One TCP or UDP packet a far host received: `src:sport > dst:dport`. */
interface Seen {
  readonly dev: string;
  readonly proto: "tcp" | "udp";
  readonly src: string;
  readonly sport: number;
  readonly dst: string;
  readonly dport: number;
}

export interface FarCaptures {
  /** Waits until each far host saw a sentinel (the sandbox sends them after every flow). */
  settle(): Promise<void>;
  readonly packets: Seen[];
  stop(): void;
}

/** A connection as `conntrack -L` lists it: the original tuple and the reply tuple. */
interface Entry {
  readonly proto: "tcp" | "udp";
  readonly orig: { src: string; dst: string; sport: number; dport: number };
  readonly reply: { src: string; dst: string; sport: number; dport: number };
}

/** `conntrack -L` lines (TCP and UDP) read into tuples. */
export function parseConntrack(text: string): Entry[] {
  const out: Entry[] = [];
  for (const l of text.split("\n")) {
    const proto = /^(tcp|udp) /.exec(l)?.[1] as "tcp" | "udp" | undefined;
    if (!proto) continue;
    const v = (k: string) => [...l.matchAll(new RegExp(`\\b${k}=(\\S+)`, "g"))].map((m) => m[1]!);
    const [src, dst, sport, dport] = [v("src"), v("dst"), v("sport"), v("dport")];
    if (src.length < 2 || dst.length < 2 || sport.length < 2 || dport.length < 2) continue;
    const tuple = (i: number) => ({
      src: src[i]!,
      dst: dst[i]!,
      sport: Number(sport[i]),
      dport: Number(dport[i]),
    });
    out.push({ proto, orig: tuple(0), reply: tuple(1) });
  }
  return out;
}

const LINE = /IP (\d+\.\d+\.\d+\.\d+)\.(\d+) > (\d+\.\d+\.\d+\.\d+)\.(\d+): /;

/**
 * Captures what each far host (`far0` behind eth0, `far1` behind eth1) receives: TCP and UDP (the
 * sandbox's sentinels come from UDP port 9); resolves once both captures listen.
 */
export async function startFarCaptures(
  far: readonly { ns: Namespace; dev: string }[],
): Promise<FarCaptures> {
  const packets: Seen[] = [];
  const sentinel = new Set<string>();
  const children: ChildProcess[] = [];
  await Promise.all(
    far.map(
      ({ ns, dev }) =>
        new Promise<void>((resolve, reject) => {
          const c = ns.spawn([
            // -q: no decoding of what the ports suggest (DNS, mDNS): "UDP, length N" / "tcp N"
            ...["tcpdump", "-i", "eth0", "-n", "-q", "-l", "-Q", "in"],
            "tcp or udp",
          ]);
          children.push(c);
          let out = "";
          c.stdout?.setEncoding("utf8").on("data", (d: string) => {
            out += d;
            for (let nl = out.indexOf("\n"); nl >= 0; nl = out.indexOf("\n")) {
              const line = out.slice(0, nl);
              out = out.slice(nl + 1);
              const m = LINE.exec(line);
              if (!m) continue;
              const udp = line.includes(": UDP");
              if (udp && m[2] === "9") sentinel.add(dev);
              else {
                packets.push({
                  dev,
                  proto: udp ? "udp" : "tcp",
                  src: m[1]!,
                  sport: Number(m[2]),
                  dst: m[3]!,
                  dport: Number(m[4]),
                });
              }
            }
          });
          c.stderr?.setEncoding("utf8").on("data", (d: string) => {
            if (d.includes("listening on")) resolve();
          });
          c.once("exit", (code) => reject(new Error(`tcpdump in ${ns.name} exited ${code}`)));
        }),
    ),
  );
  return {
    packets,
    async settle() {
      const deadline = Date.now() + 15_000;
      while (!far.every((f) => sentinel.has(f.dev))) {
        if (Date.now() > deadline) throw new Error("the far hosts' captures saw no sentinel");
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    stop() {
      for (const c of children) c.kill();
    },
  };
}

const COUNTER = "podpath-unmask";

/**
 * A delivery counter for each TCP and UDP flow, known by its original tuple (conntrack's, which NAT does
 * not change): appended to the security table's INPUT chain, after the sandbox's own counters (its
 * counters are read by position) and left out of the snapshot with that table. Call after the
 * sandbox's `load`, which restores the security table.
 */
export async function addDeliveryCounters(
  node: Namespace,
  flows: readonly PathFlow[],
): Promise<void> {
  for (const [i, f] of flows.entries()) {
    if (f.proto === "icmp") continue;
    await must(node, [
      ...["iptables", "-w", "-t", "security", "-A", "INPUT", "-p", f.proto, "-m", "conntrack"],
      ...["--ctorigsrc", f.src, "--ctorigsrcport", String(f.sport)],
      ...["--ctorigdst", f.dst, "--ctorigdstport", String(f.dport)],
      ...["-m", "comment", "--comment", `${COUNTER}-${i}`],
    ]);
  }
}

/**
 * The sandbox's verdicts, with each flow the masquerade hid read again: a flow seen silent or
 * reset is delivered when its delivery counter ({@link addDeliveryCounters}) counted it, and
 * forwarded when its conntrack entry shows its source rewritten and a far host received the packet
 * as the entry says; else it is left as seen.
 */
export async function unmasked(
  node: Namespace,
  flows: readonly PathFlow[],
  seen: readonly KernelPathVerdict[],
  caps: FarCaptures,
): Promise<KernelPathVerdict[]> {
  await caps.settle();
  const entries = parseConntrack(await must(node, ["conntrack", "-L"]));
  const counters = await listSecurityInput(node, 4);
  const delivered = new Set<number>();
  for (const l of counters.split("\n")) {
    const m = new RegExp(`^\\s*(\\d+) .*/\\* ${COUNTER}-(\\d+) \\*/`).exec(l);
    if (m && Number(m[1]) > 0) delivered.add(Number(m[2]));
  }
  return flows.map((f, i) => {
    const v = seen[i]!;
    const hidden = v.kind === "silent" || (v.kind === "rejected" && v.with === "tcp-reset");
    if (!hidden || f.proto === "icmp") return v;
    if (delivered.has(i)) return { kind: "delivered" };
    const e = entries.find(
      (x) =>
        x.proto === f.proto &&
        x.orig.src === f.src &&
        x.orig.sport === f.sport &&
        x.orig.dst === f.dst &&
        x.orig.dport === f.dport,
    );
    if (!e || (e.reply.dst === f.src && e.reply.dport === f.sport)) return v;
    const p = caps.packets.find(
      (x) =>
        x.proto === f.proto &&
        x.src === e.reply.dst &&
        x.sport === e.reply.dport &&
        x.dst === e.reply.src &&
        x.dport === e.reply.sport,
    );
    return p ? { kind: "forwarded", dev: p.dev, src: p.src, dst: p.dst, dport: p.dport } : v;
  });
}
