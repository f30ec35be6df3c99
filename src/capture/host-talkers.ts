/**
 * @module capture/host-talkers — the fast question over a whole capture: which addresses
 * exchanged packets with HOST, how many each way, and did each sender get replies. The answer
 * `tcpdump -nr F 'host X' | awk | sort | uniq -c` gives, without building a packet object per
 * record: IPv4 addresses are compared in the reader's buffer, so a 1 GB capture streams at
 * close to disk-cache speed in constant memory.
 *
 * Like tcpdump's `host X`, it matches the outer IP header (not packets inside tunnels).
 */
import type { Diagnostic } from "../model/types.ts";
import type { Ip } from "../net/cidr.ts";
import { ByteWindow, type CaptureInput } from "./byte-window.ts";
import { decodeLink, LINKTYPE } from "./decode.ts";
import { scanPcap } from "./pcap.ts";
import { scanPcapng } from "./pcapng.ts";
import type { RawRecord } from "./raw-record.ts";
import { detectFormat, readCapture } from "./read-capture.ts";

export interface TalkerRow {
  readonly src: Ip;
  readonly dst: Ip;
  readonly packets: number;
}

export interface Talker {
  /** An address that sent to HOST. */
  readonly peer: Ip;
  readonly sent: number;
  /** Packets HOST sent back to it. */
  readonly received: number;
}

export interface HostTalkers {
  readonly host: Ip;
  /** `uniq -c` rows: every (src, dst) pair with HOST on one side, sorted by src then dst. */
  readonly rows: TalkerRow[];
  /** Per address that sent to HOST: how much it sent and whether replies came. */
  readonly senders: Talker[];
  readonly records: number;
  readonly diagnostics: Diagnostic[];
}

/** Scans a capture (pcap, pcapng or tcpdump text) for the traffic of one host. */
export async function hostTalkers(
  input: CaptureInput,
  host: Ip,
  opts: { readonly file?: string } = {},
): Promise<HostTalkers> {
  const file = opts.file ?? (typeof input === "string" ? input : "capture");
  const diagnostics: Diagnostic[] = [];
  // Keyed by the other address (IPv4: the number; IPv6: its decimal string) → [to host, from host].
  const v4 = new Map<number, [number, number]>();
  const v6 = new Map<bigint, [number, number]>();
  const target4 = host.family === 4 ? Number(host.value) : -1;
  let records = 0;
  const count6 = (other: bigint, toHost: boolean) => {
    let e = v6.get(other);
    if (e === undefined) {
      e = [0, 0];
      v6.set(other, e);
    }
    e[toHost ? 0 : 1]++;
  };
  const countFrame = (src: bigint, dst: bigint, family: 4 | 6) => {
    if (family !== host.family) return;
    if (family === 4) {
      if (dst === host.value) bump(v4, Number(src), 0);
      if (src === host.value) bump(v4, Number(dst), 1);
    } else {
      if (dst === host.value) count6(src, true);
      if (src === host.value) count6(dst, false);
    }
  };
  const slow = (r: RawRecord) => {
    const { frame } = decodeLink(r.buf, r.start, r.start + r.capLen, r.linkType);
    if (frame.ip !== undefined) countFrame(frame.ip.src, frame.ip.dst, frame.ip.family);
  };
  const visit = (r: RawRecord) => {
    records++;
    if (target4 < 0) return slow(r);
    const b = r.buf;
    const s = r.start;
    const end = s + r.capLen;
    let l3: number;
    let et: number;
    switch (r.linkType) {
      case LINKTYPE.LINUX_SLL2:
        et = (b[s]! << 8) | b[s + 1]!;
        l3 = s + 20;
        break;
      case LINKTYPE.LINUX_SLL:
        et = (b[s + 14]! << 8) | b[s + 15]!;
        l3 = s + 16;
        break;
      case LINKTYPE.EN10MB:
        et = (b[s + 12]! << 8) | b[s + 13]!;
        l3 = s + 14;
        if (et === 0x8100 || et === 0x88a8) return slow(r);
        break;
      case LINKTYPE.RAW:
        et = 0x0800;
        l3 = s;
        break;
      default:
        return slow(r);
    }
    if (et !== 0x0800 || l3 + 20 > end || b[l3]! >> 4 !== 4) return;
    const src =
      ((b[l3 + 12]! << 24) | (b[l3 + 13]! << 16) | (b[l3 + 14]! << 8) | b[l3 + 15]!) >>> 0;
    const dst =
      ((b[l3 + 16]! << 24) | (b[l3 + 17]! << 16) | (b[l3 + 18]! << 8) | b[l3 + 19]!) >>> 0;
    if (dst === target4) bump(v4, src, 0);
    if (src === target4) bump(v4, dst, 1);
  };
  const sink = (d: Diagnostic) => diagnostics.push(d);
  const win = await ByteWindow.open(input);
  try {
    await win.ensure(4);
    const format = detectFormat(win.buf.subarray(win.pos, win.end));
    if (format === "pcap") await scanPcap(win, file, visit, sink);
    else if (format === "pcapng") await scanPcapng(win, file, visit, sink);
    else {
      const cap = readCapture(input, { file, onDiagnostic: sink });
      for await (const p of cap) {
        records++;
        if (p.ip !== undefined) countFrame(p.ip.src, p.ip.dst, p.ip.family);
      }
    }
  } finally {
    await win.close();
  }
  const rows: TalkerRow[] = [];
  const senders: Talker[] = [];
  const entries: [Ip, [number, number]][] = [
    ...[...v4].map(([k, v]): [Ip, [number, number]] => [{ family: 4, value: BigInt(k) }, v]),
    ...[...v6].map(([k, v]): [Ip, [number, number]] => [{ family: 6, value: k }, v]),
  ];
  for (const [peer, [toHost, fromHost]] of entries) {
    if (toHost > 0) {
      rows.push({ src: peer, dst: host, packets: toHost });
      senders.push({ peer, sent: toHost, received: fromHost });
    }
    if (fromHost > 0) rows.push({ src: host, dst: peer, packets: fromHost });
  }
  const cmp = (a: Ip, b: Ip) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0);
  rows.sort((a, b) => cmp(a.src, b.src) || cmp(a.dst, b.dst));
  senders.sort((a, b) => cmp(a.peer, b.peer));
  return { host, rows, senders, records, diagnostics };
}

function bump(m: Map<number, [number, number]>, k: number, i: 0 | 1): void {
  let e = m.get(k);
  if (e === undefined) {
    e = [0, 0];
    m.set(k, e);
  }
  e[i]++;
}
