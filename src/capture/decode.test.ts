import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeLink, LINKTYPE } from "./decode.ts";

function ipv6Udp(src: number, dst: number, sp: number, dp: number): Buffer {
  const b = Buffer.alloc(48);
  b[0] = 0x60;
  b.writeUInt16BE(8, 4);
  b[6] = 17;
  b[7] = 64;
  b[8] = 0xfd;
  b[23] = src;
  b[24] = 0xfd;
  b[39] = dst;
  b.writeUInt16BE(sp, 40);
  b.writeUInt16BE(dp, 42);
  b.writeUInt16BE(8, 44);
  return b;
}

describe("decodeLink", () => {
  const inner = Buffer.from("450000140000000040060000c0a80001c0a80002", "hex");

  it("reads NULL (host byte order) and LOOP (network order) families", () => {
    const nullLe = Buffer.concat([Buffer.from([2, 0, 0, 0]), inner]);
    const loop = Buffer.concat([Buffer.from([0, 0, 0, 2]), inner]);
    for (const [bytes, lt] of [
      [nullLe, LINKTYPE.NULL],
      [loop, LINKTYPE.LOOP],
    ] as const) {
      const { frame } = decodeLink(bytes, 0, bytes.length, lt);
      assert.equal(frame.ip?.src, 0xc0a80001n);
      assert.equal(frame.ip?.protocol, 6);
    }
  });

  it("walks IPv6 extension headers to the upper layer and reads ICMPv6 errors quoting the original", () => {
    const orig = ipv6Udp(1, 2, 40000, 53);
    const icmp = Buffer.alloc(8);
    icmp[0] = 1; // destination unreachable
    icmp[1] = 4; // port unreachable
    const hbh = Buffer.alloc(8);
    hbh[0] = 58; // next: ICMPv6
    const payload = Buffer.concat([hbh, icmp, orig]);
    const outer = Buffer.alloc(40);
    outer[0] = 0x60;
    outer.writeUInt16BE(payload.length, 4);
    outer[6] = 0; // hop-by-hop first
    outer[7] = 64;
    outer[8] = 0xfd;
    outer[23] = 2;
    outer[24] = 0xfd;
    outer[39] = 1;
    const pkt = Buffer.concat([outer, payload]);
    const { frame } = decodeLink(pkt, 0, pkt.length, LINKTYPE.RAW);
    assert.equal(frame.ip?.protocol, 58);
    const t = frame.transport;
    assert.ok(t?.kind === "icmp");
    assert.deepEqual([t.version, t.type, t.code], [6, 1, 4]);
    assert.equal(t.quoted?.dstPort, 53);
    assert.equal(t.quoted?.srcPort, 40000);
    assert.equal(t.quoted?.ip.dst & 0xffn, 2n);
  });

  it("decodes Geneve with an Ethernet payload and stops at truncation without throwing", () => {
    const eth = Buffer.concat([Buffer.alloc(12), Buffer.from([0x08, 0x00]), inner]);
    const gen = Buffer.concat([Buffer.from([0, 0, 0x65, 0x58, 0, 0, 7, 0]), eth]);
    const udp = Buffer.alloc(8);
    udp.writeUInt16BE(5000, 0);
    udp.writeUInt16BE(6081, 2);
    udp.writeUInt16BE(8 + gen.length, 4);
    const ip = Buffer.from(inner);
    ip[9] = 17;
    ip.writeUInt16BE(20 + 8 + gen.length, 2);
    const pkt = Buffer.concat([ip, udp, gen]);
    const { frame } = decodeLink(pkt, 0, pkt.length, LINKTYPE.RAW);
    assert.equal(frame.tunnel?.kind, "geneve");
    assert.equal(frame.tunnel?.vni, 7);
    assert.equal(frame.tunnel?.inner.ip?.dst, 0xc0a80002n);
    for (let cut = 0; cut < pkt.length; cut++) decodeLink(pkt, 0, cut, LINKTYPE.RAW);
  });
});
