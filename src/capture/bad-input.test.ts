/**
 * Damaged and hostile input: every reader reports damage with its byte offset or line, keeps the
 * packets before it, and never hangs or throws. Fuzzed with fast-check.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { formatTcpFlags, parseTcpFlags } from "./packet.ts";
import { buildPcap, buildPcapng, ipv4Packet } from "./test-helpers/pcap-writer.ts";
import { collect } from "./test-helpers/projection.ts";

const here = dirname(fileURLToPath(import.meta.url));
const fixture = (n: string) => readFileSync(join(here, "fixtures", "tcpdump", n));

const codes = (d: { code: string }[]) => d.map((x) => x.code);

describe("pcap damage", () => {
  const good = fixture("dns_tcp.pcap");

  it("keeps every record before a truncation and names the byte offset", async () => {
    // Records of dns_tcp.pcap start at 24, 114, 190, 260, 388, ...; cut inside the fifth.
    const r = await collect(good.subarray(0, 400), "cut.pcap");
    assert.equal(r.packets.length, 4);
    assert.deepEqual(codes(r.diagnostics), ["PCAP_TRUNCATED"]);
    assert.match(r.diagnostics[0]!.message, /record 5 at byte offset 388 is cut off/);
  });

  it("stops at a caplen beyond the snapshot length, with the packets before", async () => {
    const bytes = Buffer.from(good);
    bytes.writeUInt32LE(10_000_000, 190 + 8);
    const r = await collect(bytes, "bad.pcap");
    assert.equal(r.packets.length, 2);
    assert.deepEqual(codes(r.diagnostics), ["PCAP_BAD_LENGTH"]);
    assert.match(
      r.diagnostics[0]!.message,
      /record 3 at byte offset 190 claims 10000000 captured bytes/,
    );
  });

  it("reads big-endian and nanosecond files", async () => {
    const data = ipv4Packet({
      src: 0x0a000001,
      dst: 0x0a000002,
      protocol: 6,
      srcPort: 1,
      dstPort: 2,
    });
    for (const [le, nano] of [
      [false, false],
      [false, true],
      [true, true],
    ] as const) {
      const r = await collect(buildPcap([{ sec: 10, frac: 5, data }], { littleEndian: le, nano }));
      assert.equal(r.packets.length, 1);
      assert.equal(r.packets[0]!.timeNs, 10_000_000_000n + (nano ? 5n : 5000n));
      assert.equal(r.packets[0]!.ip?.src, 0x0a000001n);
    }
  });

  it("masks the FCS bits of the link type and warns about unknown link types", async () => {
    const data = ipv4Packet({ src: 1, dst: 2, protocol: 17, srcPort: 1, dstPort: 2 });
    const masked = await collect(buildPcap([{ sec: 1, frac: 0, data }], { linkType: 0x10000001 }));
    assert.equal(masked.packets[0]!.linkType, 1);
    assert.equal(masked.packets[0]!.ip?.dst, 2n);
    const unknown = await collect(buildPcap([{ sec: 1, frac: 0, data }], { linkType: 147 }));
    assert.equal(unknown.packets.length, 1);
    assert.equal(unknown.packets[0]!.ip, undefined);
    assert.deepEqual(codes(unknown.diagnostics), ["CAPTURE_UNKNOWN_LINKTYPE"]);
  });

  it("refuses binary that is no capture, naming the magic", async () => {
    const r = await collect(Buffer.from([0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]), "x.bin");
    assert.equal(r.packets.length, 0);
    assert.deepEqual(codes(r.diagnostics), ["CAPTURE_UNKNOWN_FORMAT"]);
    assert.match(r.diagnostics[0]!.message, /byte offset 0: magic 0xdeadbeef/);
  });
});

describe("pcapng damage", () => {
  const data = ipv4Packet({ src: 1, dst: 2, protocol: 6, srcPort: 1, dstPort: 2 });
  const two = () =>
    Buffer.from(
      buildPcapng(
        [
          { linkType: 1, name: "eth0", tsresol: 9 },
          { linkType: 101, name: "tun0" },
        ],
        [
          { iface: 0, ts: 1_000_000_123n, data, flags: 2 },
          { iface: 1, ts: 2_000_000n, data: data.subarray(14), flags: 1 },
          { iface: 0, ts: 3_000_000_000n, data },
        ],
      ),
    );

  it("reads several interfaces with their link types, names, resolutions and directions", async () => {
    const r = await collect(two());
    assert.deepEqual(r.diagnostics, []);
    assert.deepEqual(
      r.packets.map((p) => [p.iface, p.linkType, p.timeNs, p.direction, p.ip?.dst]),
      [
        ["eth0", 1, 1_000_000_123n, "out", 2n],
        ["tun0", 101, 2_000_000_000n, "in", 2n],
        ["eth0", 1, 3_000_000_000n, undefined, 2n],
      ],
    );
  });

  it("starts over with each section's own interfaces", async () => {
    const first = buildPcapng([{ linkType: 1, name: "eth0" }], [{ iface: 0, ts: 1n, data }]);
    const second = buildPcapng(
      [{ linkType: 101, name: "tun0" }],
      [{ iface: 0, ts: 2n, data: data.subarray(14) }],
    );
    const r = await collect(Buffer.concat([first, second]));
    assert.deepEqual(r.diagnostics, []);
    assert.deepEqual(
      r.packets.map((p) => [p.index, p.iface, p.linkType, p.ip?.dst]),
      [
        [1, "eth0", 1, 2n],
        [2, "tun0", 101, 2n],
      ],
    );
  });

  it("stops at a zero block length without looping", async () => {
    const b = two();
    // the third block (first EPB) starts after SHB (28) and two IDBs
    const firstEpb = r0(b);
    b.writeUInt32LE(0, firstEpb + 4);
    const r = await collect(b, "z.pcapng");
    assert.equal(r.packets.length, 0);
    assert.deepEqual(codes(r.diagnostics), ["PCAPNG_BAD_LENGTH"]);
    assert.match(r.diagnostics[0]!.message, new RegExp(`byte offset ${firstEpb} has length 0`));
  });

  it("keeps the packets before an absurd block length", async () => {
    const b = two();
    const second = r0(b) + b.readUInt32LE(r0(b) + 4);
    b.writeUInt32LE(0x7ffffff0, second + 4);
    const r = await collect(b, "big.pcapng");
    assert.equal(r.packets.length, 1);
    assert.equal(r.diagnostics[0]!.code, "PCAPNG_BAD_LENGTH");
  });

  it("names a packet's unknown interface and goes on", async () => {
    const b = buildPcapng(
      [{ linkType: 1 }],
      [
        { iface: 3, ts: 1n, data },
        { iface: 0, ts: 2n, data },
      ],
    );
    const r = await collect(b, "i.pcapng");
    assert.equal(r.packets.length, 1);
    assert.deepEqual(codes(r.diagnostics), ["PCAPNG_BAD_BLOCK"]);
  });
});

/** Offset of the first enhanced packet block. */
function r0(b: Buffer): number {
  let o = 0;
  while (o < b.length) {
    if (b.readUInt32LE(o) === 6) return o;
    o += b.readUInt32LE(o + 4);
  }
  throw new Error("no EPB");
}

describe("tcpdump text damage", () => {
  it("reports garbage lines by number and keeps the packets around them", async () => {
    const text = [
      "10:00:00.000001 IP 10.0.0.1.1 > 10.0.0.2.2: Flags [S], seq 1, win 1, length 0",
      "this is not tcpdump",
      "10:00:00.000002 IP 10.0.0.2.2 > 10.0.0.1.1: Flags [S.], seq 5, ack 2, win 1, length 0",
    ].join("\n");
    const r = await collect(new TextEncoder().encode(text), "paste.txt");
    assert.equal(r.packets.length, 2);
    assert.deepEqual(codes(r.diagnostics), ["TCPDUMP_UNPARSED"]);
    assert.equal(r.diagnostics[0]!.source?.line, 2);
    assert.equal(r.packets[1]!.line, 3);
  });

  it("text in which no line is tcpdump output is an error, not an empty capture", async () => {
    const r = await collect(new TextEncoder().encode("hello\nworld: 1\n"), "notes.txt");
    assert.equal(r.packets.length, 0);
    assert.deepEqual(codes(r.diagnostics), [
      "TCPDUMP_UNPARSED",
      "TCPDUMP_UNPARSED",
      "TCPDUMP_NOT_TEXT",
    ]);
    assert.equal(r.diagnostics[2]!.severity, "error");
    assert.match(r.diagnostics[2]!.message, /^notes\.txt: none of its 2 lines is tcpdump output/);
    const empty = await collect(new Uint8Array(0), "empty.txt");
    assert.deepEqual(empty.diagnostics, []);
  });

  it("reads a paste saved as UTF-16 by PowerShell", async () => {
    const text =
      "\ufeff10:00:00.000001 IP 10.0.0.1 > 10.0.0.2: ICMP echo request, id 1, seq 1, length 64\r\n";
    const r = await collect(Buffer.from(text, "utf16le"), "ps.txt");
    assert.equal(r.packets.length, 1);
    assert.equal(r.packets[0]!.transport?.kind, "icmp");
  });

  it("reads the -i any columns and -t lines without times", async () => {
    const text = [
      "IP 10.0.0.1.1 > 10.0.0.2.53: 1+ A? x. (20)",
      "IP 10.0.0.2.53 > 10.0.0.1.1: 1 0/0/0 (20)",
    ].join("\n");
    const r = await collect(new TextEncoder().encode(text));
    assert.equal(r.packets.length, 2);
    const any = await collect(
      new TextEncoder().encode(
        "12:00:00.000001 eth0  Out IP 10.4.1.5.40000 > 10.20.30.40.5432: Flags [S], seq 1, win 1, length 0\n",
      ),
    );
    assert.equal(any.packets[0]!.iface, "eth0");
    assert.equal(any.packets[0]!.direction, "out");
  });
});

describe("fuzzing the readers", () => {
  const seeds = [
    "dns_tcp.pcap",
    "vxlan.pcap",
    "bgp-extended-msg.pcapng",
    "nflog.pcap",
    "geneve-gcp.pcap",
  ].map(fixture);

  it("never throws on mutated captures and keeps packets in order", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: seeds.length - 1 }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 12 }),
        fc.nat(),
        async (which, flips, cut) => {
          const b = Buffer.from(seeds[which]!);
          for (const [pos, v] of flips) b[4 + (pos % Math.max(1, b.length - 4))] = v;
          const bytes = b.subarray(0, 4 + (cut % b.length));
          const r = await collect(bytes, "fuzz");
          r.packets.forEach((p, i) => {
            assert.ok(p.index >= 1);
            if (i > 0) assert.ok(p.index > r.packets[i - 1]!.index);
          });
          for (const d of r.diagnostics) assert.ok(d.message.length > 0);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("delivers exactly the records that end before a truncation", async () => {
    const full = await collect(seeds[0]!);
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 24, max: seeds[0]!.length }), async (cut) => {
        const r = await collect(seeds[0]!.subarray(0, cut), "cut");
        const expected = full.packets.filter((p) => p.offset! + 16 + p.capturedLength! <= cut);
        assert.equal(r.packets.length, expected.length);
        const onBoundary = full.packets.some((p) => p.offset === cut) || cut === seeds[0]!.length;
        assert.equal(r.diagnostics.length, onBoundary ? 0 : 1);
      }),
      { numRuns: 200 },
    );
  });

  it("never throws on random text made of tcpdump's own tokens", async () => {
    const tokens = fc.constantFrom(
      "    1  ",
      "10:00:00.000001 ",
      "2024-01-01 10:00:00.000001 ",
      "IP ",
      "IP6 ",
      "eth0  In  ",
      "(tos 0x0, ttl 64, proto TCP (6), length 40)",
      "10.0.0.1.80 > 10.0.0.2.1: ",
      "::1.5 > ::2.6: ",
      "Flags [S.], ",
      "seq 1:5, ",
      "ack 9, ",
      "ICMP ",
      "ICMP6, ",
      "echo request, id 1, seq 2, ",
      "10.0.0.9 udp port 53 unreachable, ",
      "VXLAN, flags [I] (0x08), vni 5",
      "\n",
      "\n\t",
      "\n    ",
      "length 3",
      "ARP, ",
      "Request who-has 1.2.3.4 tell 1.2.3.5, ",
      "00:11:22:33:44:55 > 66:77:88:99:aa:bb, ethertype IPv4 (0x0800), length 60: ",
      "vlan 5, p 0, ",
      "(",
      ")",
      ": ",
      "Geneve, Flags [none], vni 0x1",
    );
    await fc.assert(
      fc.asyncProperty(fc.array(tokens, { maxLength: 40 }), fc.string(), async (parts, noise) => {
        const text = parts.join("") + noise;
        const r = await collect(new TextEncoder().encode(text), "t");
        for (const p of r.packets) assert.ok(p.line !== undefined && p.line >= 1);
      }),
      { numRuns: 400 },
    );
  });

  it("reads back what it wrote: pcap write then read", async () => {
    const arbPacket = fc.record({
      src: fc.integer({ min: 0, max: 0xffffffff }),
      dst: fc.integer({ min: 0, max: 0xffffffff }),
      protocol: fc.constantFrom(6 as const, 17 as const, 1 as const),
      srcPort: fc.integer({ min: 0, max: 65535 }),
      dstPort: fc.integer({ min: 0, max: 65535 }),
      flags: fc.integer({ min: 0, max: 255 }),
      icmpType: fc.constantFrom(0, 8),
      payload: fc.integer({ min: 0, max: 64 }),
      sec: fc.integer({ min: 0, max: 0xffffffff }),
      usec: fc.integer({ min: 0, max: 999_999 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(arbPacket, { maxLength: 20 }), fc.boolean(), async (ps, le) => {
        // VXLAN and Geneve ports would make the payload a tunnel; keep them out of this property.
        const plain = ps.filter(
          (p) => ![4789, 8472, 6081].includes(p.srcPort) && ![4789, 8472, 6081].includes(p.dstPort),
        );
        const bytes = buildPcap(
          plain.map((p) => ({ sec: p.sec, frac: p.usec, data: ipv4Packet(p) })),
          { littleEndian: le },
        );
        const r = await collect(bytes);
        assert.deepEqual(r.diagnostics, []);
        assert.equal(r.packets.length, plain.length);
        plain.forEach((p, i) => {
          const got = r.packets[i]!;
          assert.equal(got.timeNs, BigInt(p.sec) * 1_000_000_000n + BigInt(p.usec) * 1000n);
          assert.equal(got.ip?.src, BigInt(p.src));
          assert.equal(got.ip?.dst, BigInt(p.dst));
          const t = got.transport!;
          if (p.protocol === 6) {
            assert.equal(t.kind, "tcp");
            if (t.kind === "tcp")
              assert.deepEqual(
                [t.srcPort, t.dstPort, t.flags, t.payloadLength],
                [p.srcPort, p.dstPort, p.flags, p.payload],
              );
          } else if (p.protocol === 17) {
            assert.equal(t.kind, "udp");
            if (t.kind === "udp")
              assert.deepEqual(
                [t.srcPort, t.dstPort, t.payloadLength],
                [p.srcPort, p.dstPort, p.payload],
              );
          } else assert.equal(t.kind === "icmp" && t.type, p.icmpType);
        });
      }),
      { numRuns: 200 },
    );
  });

  it("prints and parses TCP flags as tcpdump does", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 255 }), (f) => parseTcpFlags(formatTcpFlags(f)) === f),
    );
    assert.equal(formatTcpFlags(0x12), "S.");
    assert.equal(formatTcpFlags(0x52), "S.E");
    assert.equal(formatTcpFlags(0), "none");
  });
});
