/**
 * @module lab/path-traffic — the traffic of a whole-path sandbox run (IPv4 or IPv6): the flows
 * sent for real from the pod or the node (UDP and TCP by the senders, ICMP echo by ping), and the
 * sentinels sent after them, waited for until every capture point has seen its own (to each far
 * host, and to the node, whose ICMP answer reaches the pod): then the run is complete. An
 * explicit I/O module.
 */
import type { SandboxFlow } from "./nat-sandbox.ts";
import type { SandboxPacket } from "./path-capture.ts";
import type { PathFlow } from "./path-gen.ts";
import type { SandboxNet } from "./path-sandbox-net.ts";

/** Empties every capture point. */
export function clearCaptures(sb: SandboxNet): void {
  for (const c of Object.values(sb.caps)) c.packets.length = 0;
}

const toSandbox = (f: PathFlow): SandboxFlow => ({
  proto: f.proto,
  src: f.src,
  dst: f.dst,
  ...(f.sport !== undefined ? { sport: f.sport } : {}),
  ...(f.dport !== undefined ? { dport: f.dport } : {}),
});

/** Sends each flow from where it starts: the pod, or the node itself. */
export async function sendFlows(sb: SandboxNet, flows: readonly PathFlow[]): Promise<void> {
  const podFlows = flows.filter((f) => f.origin === "pod");
  const hostFlows = flows.filter((f) => f.origin === "host");
  const ping = sb.family === 4 ? ["ping"] : ["ping", "-6"];
  await Promise.all([
    sb.senders.pod.send(podFlows.filter((f) => f.proto !== "icmp").map(toSandbox)),
    sb.senders.node.send(hostFlows.filter((f) => f.proto !== "icmp").map(toSandbox)),
    ...flows
      .filter((f) => f.proto === "icmp")
      .map((f) =>
        (f.origin === "pod" ? sb.pod : sb.node).exec(
          [...ping, "-n", "-c", "1", "-W", "0.01", "-I", f.src, f.dst],
          { timeoutMs: 5_000 },
        ),
      ),
  ]);
}

/** Sends the sentinels and waits until every capture point has seen its own. */
export async function settle(sb: SandboxNet): Promise<void> {
  const { caps, net } = sb;
  const sentinel = (dst: string): SandboxFlow => ({
    proto: "udp",
    src: sb.sentinel,
    dst,
    sport: 9,
    dport: 9,
  });
  // one at a time: each binds the same source port
  for (const dst of [net.eth0.gateway, net.eth1.gateway, net.podGateway]) {
    await sb.senders.pod.send([sentinel(dst)]);
  }
  const lo = sb.family === 4 ? "127.0.0.1" : "::1";
  await sb.senders.node.send([{ proto: "udp", src: lo, dst: lo, sport: 9, dport: 9 }]);
  const isSentinel = (p: SandboxPacket) => p.proto === 17 && p.sport === 9;
  const done = () =>
    caps.far0.packets.some(isSentinel) &&
    caps.far1.packets.some(isSentinel) &&
    caps.lo.packets.some(isSentinel) &&
    caps.pod.packets.some((p) => p.inner?.src === sb.sentinel && p.inner.sport === 9);
  const deadline = Date.now() + 15_000;
  while (!done()) {
    if (Date.now() > deadline) {
      const missing = Object.entries(caps)
        .filter(([, c]) => !c.packets.some((p) => isSentinel(p) || p.inner?.sport === 9))
        .map(([k]) => k);
      const which = sb.family === 4 ? "the sentinels" : "the IPv6 sentinels";
      throw new Error(`${which} never reached ${missing.join(", ")}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}
