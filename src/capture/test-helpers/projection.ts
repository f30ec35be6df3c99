/**
 * @module capture/test-helpers/projection — what two readings of the same packets must agree on
 * (tests only): addresses, ports, protocol, TCP flags, ICMP type and quoted header, tunnels.
 */
import type { Frame, Packet } from "../packet.ts";
import { readCapture } from "../read-capture.ts";

export function projectFrame(f: Frame, withFlags = true): unknown {
  const t = f.transport;
  return {
    ip:
      f.ip === undefined
        ? undefined
        : { family: f.ip.family, src: f.ip.src, dst: f.ip.dst, protocol: f.ip.protocol },
    arp: f.arp?.op,
    transport:
      t === undefined
        ? undefined
        : t.kind === "tcp"
          ? { kind: t.kind, ports: [t.srcPort, t.dstPort], flags: withFlags ? t.flags : "-" }
          : t.kind === "udp"
            ? { kind: t.kind, ports: [t.srcPort, t.dstPort] }
            : t.kind === "icmp"
              ? {
                  kind: t.kind,
                  type: t.type,
                  quoted: t.quoted && {
                    src: t.quoted.ip.src,
                    dst: t.quoted.ip.dst,
                    dstPort: t.quoted.dstPort,
                  },
                }
              : t.kind === "esp"
                ? { kind: t.kind, spi: t.spi, seq: t.seq }
                : { kind: t.kind },
    tunnel: f.tunnel && {
      kind: f.tunnel.kind,
      vni: f.tunnel.vni,
      inner: projectFrame(f.tunnel.inner, withFlags),
    },
  };
}

export async function collect(input: string | Uint8Array, file?: string) {
  const cap = readCapture(input, file === undefined ? {} : { file });
  const packets: Packet[] = [];
  for await (const p of cap) packets.push(p);
  return { packets, diagnostics: cap.diagnostics, format: cap.format };
}
