/**
 * @module capture/test-helpers/pcap-writer — builds pcap and pcapng files and IPv4 packets for
 * tests (write, then read back with the real readers).
 */

export interface TestRecord {
  readonly sec: number;
  /** Microseconds (or nanoseconds with `nano`). */
  readonly frac: number;
  readonly data: Uint8Array;
  readonly origLen?: number;
}

export function buildPcap(
  records: readonly TestRecord[],
  opts: { linkType?: number; littleEndian?: boolean; nano?: boolean; snapLen?: number } = {},
): Uint8Array {
  const le = opts.littleEndian ?? true;
  const parts: Buffer[] = [];
  const h = Buffer.alloc(24);
  const w32 = (b: Buffer, v: number, o: number) =>
    le ? b.writeUInt32LE(v >>> 0, o) : b.writeUInt32BE(v >>> 0, o);
  const w16 = (b: Buffer, v: number, o: number) =>
    le ? b.writeUInt16LE(v, o) : b.writeUInt16BE(v, o);
  w32(h, opts.nano ? 0xa1b23c4d : 0xa1b2c3d4, 0);
  w16(h, 2, 4);
  w16(h, 4, 6);
  w32(h, opts.snapLen ?? 262144, 16);
  w32(h, opts.linkType ?? 1, 20);
  parts.push(h);
  for (const r of records) {
    const rh = Buffer.alloc(16);
    w32(rh, r.sec, 0);
    w32(rh, r.frac, 4);
    w32(rh, r.data.length, 8);
    w32(rh, r.origLen ?? r.data.length, 12);
    parts.push(rh, Buffer.from(r.data));
  }
  return Buffer.concat(parts);
}

function block(type: number, body: Buffer): Buffer {
  const len = 12 + body.length + ((4 - (body.length % 4)) % 4);
  const b = Buffer.alloc(len);
  b.writeUInt32LE(type, 0);
  b.writeUInt32LE(len, 4);
  body.copy(b, 8);
  b.writeUInt32LE(len, len - 4);
  return b;
}

/** pcapng with one section and the given interfaces (link type, name, tsresol exponent). */
export function buildPcapng(
  ifaces: readonly { linkType: number; name?: string; tsresol?: number }[],
  packets: readonly { iface: number; ts: bigint; data: Uint8Array; flags?: number }[],
): Uint8Array {
  const shb = Buffer.alloc(16);
  shb.writeUInt32LE(0x1a2b3c4d, 0);
  shb.writeUInt16LE(1, 4);
  shb.writeUInt16LE(0, 6);
  shb.writeBigInt64LE(-1n, 8);
  const parts = [block(0x0a0d0d0a, shb)];
  for (const i of ifaces) {
    const opts: Buffer[] = [];
    if (i.name !== undefined) opts.push(option(2, Buffer.from(i.name)));
    if (i.tsresol !== undefined) opts.push(option(9, Buffer.from([i.tsresol])));
    if (opts.length > 0) opts.push(Buffer.alloc(4));
    const body = Buffer.alloc(8);
    body.writeUInt16LE(i.linkType, 0);
    body.writeUInt32LE(262144, 4);
    parts.push(block(1, Buffer.concat([body, ...opts])));
  }
  for (const p of packets) {
    const head = Buffer.alloc(20);
    head.writeUInt32LE(p.iface, 0);
    head.writeUInt32LE(Number(p.ts >> 32n), 4);
    head.writeUInt32LE(Number(p.ts & 0xffffffffn), 8);
    head.writeUInt32LE(p.data.length, 12);
    head.writeUInt32LE(p.data.length, 16);
    const pad = Buffer.alloc((4 - (p.data.length % 4)) % 4);
    const opts: Buffer[] = [];
    if (p.flags !== undefined) {
      const f = Buffer.alloc(4);
      f.writeUInt32LE(p.flags, 0);
      opts.push(option(2, f), Buffer.alloc(4));
    }
    parts.push(block(6, Buffer.concat([head, Buffer.from(p.data), pad, ...opts])));
  }
  return Buffer.concat(parts);
}

function option(code: number, value: Buffer): Buffer {
  const b = Buffer.alloc(4 + value.length + ((4 - (value.length % 4)) % 4));
  b.writeUInt16LE(code, 0);
  b.writeUInt16LE(value.length, 2);
  value.copy(b, 4);
  return b;
}

/** An Ethernet + IPv4 + TCP/UDP/ICMP packet. */
export function ipv4Packet(p: {
  src: number;
  dst: number;
  protocol: 6 | 17 | 1;
  srcPort?: number;
  dstPort?: number;
  flags?: number;
  seq?: number;
  icmpType?: number;
  payload?: number;
  ethernet?: boolean;
}): Uint8Array {
  const l4len = p.protocol === 6 ? 20 : 8;
  const payload = p.payload ?? 0;
  const ip = Buffer.alloc(20 + l4len + payload);
  ip[0] = 0x45;
  ip.writeUInt16BE(ip.length, 2);
  ip[8] = 64;
  ip[9] = p.protocol;
  ip.writeUInt32BE(p.src >>> 0, 12);
  ip.writeUInt32BE(p.dst >>> 0, 16);
  if (p.protocol === 6 || p.protocol === 17) {
    ip.writeUInt16BE(p.srcPort ?? 0, 20);
    ip.writeUInt16BE(p.dstPort ?? 0, 22);
  }
  if (p.protocol === 6) {
    ip.writeUInt32BE((p.seq ?? 0) >>> 0, 24);
    ip[32] = 0x50;
    ip[33] = p.flags ?? 0x02;
  } else if (p.protocol === 17) ip.writeUInt16BE(8 + payload, 24);
  else ip[20] = p.icmpType ?? 8;
  if (p.ethernet === false) return ip;
  const eth = Buffer.alloc(14);
  eth.writeUInt16BE(0x0800, 12);
  return Buffer.concat([eth, ip]);
}
