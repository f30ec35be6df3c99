import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatIp, parseIp } from "../net/cidr.ts";
import { type Direction, type Packet, TCP, type Transport } from "./packet.ts";
import {
  CopyPairer,
  describeBasis,
  describeCopy,
  describeRewrite,
  findCopies,
  type PacketCopy,
} from "./packet-copies.ts";

const POD = "10.4.0.5";
const NODE = "10.128.0.2";
const FAR = "10.20.30.40";
const T0 = 1_700_000_000_000_000_000n;

interface Spec {
  src: string;
  dst: string;
  /** Microseconds after T0. */
  us: number;
  iface?: string;
  dir?: Direction;
  id?: number;
  t: Transport;
}

function packets(specs: readonly Spec[]): Packet[] {
  return specs.map((s, i) => ({
    index: i + 1,
    timeNs: T0 + BigInt(s.us) * 1000n,
    ...(s.iface === undefined ? {} : { iface: s.iface }),
    ...(s.dir === undefined ? {} : { direction: s.dir }),
    ip: {
      family: 4,
      src: parseIp(s.src).value,
      dst: parseIp(s.dst).value,
      protocol: s.t.kind === "tcp" ? 6 : s.t.kind === "udp" ? 17 : 1,
      length: 60,
      ...(s.id === undefined ? {} : { id: s.id }),
    },
    transport: s.t,
  }));
}

const syn = (sp: number, dp: number, seq = 1000): Transport => ({
  kind: "tcp",
  srcPort: sp,
  dstPort: dp,
  flags: TCP.SYN,
  seq,
  payloadLength: 0,
});
const synAck = (sp: number, dp: number): Transport => ({
  kind: "tcp",
  srcPort: sp,
  dstPort: dp,
  flags: TCP.SYN | TCP.ACK,
  seq: 5000,
  ack: 1001,
  payloadLength: 0,
});
const echo = (id: number, seq: number, type = 8): Transport => ({
  kind: "icmp",
  version: 4,
  type,
  code: 0,
  id,
  seq,
});

async function pairs(specs: readonly Spec[]): Promise<PacketCopy[]> {
  return findCopies(packets(specs));
}

const at = (c: PacketCopy) => [c.first, c.again];
const ip = (e: { ip: { family: 4 | 6; value: bigint } } | undefined) =>
  e === undefined ? undefined : formatIp(e.ip);

describe("CopyPairer", () => {
  it("pairs a pod's SYN on its veth (in) with its masqueraded copy on eth0 (out), and the reply", async () => {
    const found = await pairs([
      { src: POD, dst: FAR, us: 0, iface: "veth1", dir: "in", id: 7, t: syn(40000, 5432) },
      { src: NODE, dst: FAR, us: 40, iface: "eth0", dir: "out", id: 7, t: syn(40000, 5432) },
      { src: FAR, dst: NODE, us: 300, iface: "eth0", dir: "in", id: 0, t: synAck(5432, 40000) },
      { src: FAR, dst: POD, us: 310, iface: "veth1", dir: "out", id: 0, t: synAck(5432, 40000) },
    ]);
    assert.deepEqual(found.map(at), [
      [1, 2],
      [3, 4],
    ]);
    const [req, rep] = found;
    assert.equal(req!.basis, "direction");
    assert.equal(ip(req!.source?.from), POD);
    assert.equal(ip(req!.source?.to), NODE);
    assert.equal(req!.destination, undefined);
    assert.equal(req!.gapNs, 40_000n);
    // the reply is un-NATed on its way back: its destination changes
    assert.equal(ip(rep!.destination?.from), NODE);
    assert.equal(ip(rep!.destination?.to), POD);
    assert.equal(describeCopy(req!), `packets 1 and 2: source ${POD} → ${NODE}`);
  });

  it("pairs copies not rewritten (the pod address on both interfaces)", async () => {
    const [c] = await pairs([
      { src: POD, dst: FAR, us: 0, iface: "veth1", dir: "in", id: 9, t: syn(40000, 5432) },
      { src: POD, dst: FAR, us: 25, iface: "eth0", dir: "out", id: 9, t: syn(40000, 5432) },
    ]);
    assert.deepEqual(at(c!), [1, 2]);
    assert.equal(c!.source, undefined);
    assert.equal(c!.destination, undefined);
    assert.equal(describeCopy(c!), "packets 1 and 2: not rewritten");
  });

  it("names a DNAT (Service VIP to endpoint) with the ports that changed", async () => {
    const [c] = await pairs([
      { src: POD, dst: "10.96.0.10", us: 0, iface: "veth1", dir: "in", id: 3, t: syn(41000, 80) },
      { src: POD, dst: "10.4.2.7", us: 30, iface: "veth2", dir: "out", id: 3, t: syn(41000, 8080) },
    ]);
    assert.equal(c!.source, undefined);
    assert.equal(describeRewrite(c!.destination!), "10.96.0.10:80 → 10.4.2.7:8080");
  });

  it("does not pair a retransmission (new IP id), nor copies further apart than the window", async () => {
    const found = await pairs([
      { src: POD, dst: FAR, us: 0, iface: "veth1", dir: "in", id: 1, t: syn(40000, 5432) },
      { src: POD, dst: FAR, us: 1_000_000, iface: "veth1", dir: "in", id: 2, t: syn(40000, 5432) },
      { src: NODE, dst: FAR, us: 1_150_000, iface: "eth0", dir: "out", id: 2, t: syn(40000, 5432) },
    ]);
    assert.deepEqual(found, []);
    // the same, inside a wider window, pairs
    const wide = await findCopies(
      packets([
        { src: POD, dst: FAR, us: 0, iface: "veth1", dir: "in", id: 2, t: syn(40000, 5432) },
        { src: NODE, dst: FAR, us: 150_000, iface: "eth0", dir: "out", id: 2, t: syn(40000, 5432) },
      ]),
      { windowNs: 200_000_000n },
    );
    assert.deepEqual(wide.map(at), [[1, 2]]);
  });

  it("never pairs out then in, or the same interface the same way twice", async () => {
    assert.deepEqual(
      await pairs([
        { src: NODE, dst: FAR, us: 0, iface: "eth0", dir: "out", id: 5, t: syn(40000, 5432) },
        { src: POD, dst: FAR, us: 10, iface: "veth1", dir: "in", id: 5, t: syn(40000, 5432) },
      ]),
      [],
    );
    assert.deepEqual(
      await pairs([
        { src: POD, dst: FAR, us: 0, iface: "eth0", dir: "out", id: 5, t: syn(40000, 5432) },
        { src: POD, dst: FAR, us: 10, iface: "eth0", dir: "out", id: 5, t: syn(40000, 5432) },
      ]),
      [],
    );
  });

  it("pairs by direction alone on LINUX_SLL (no interface), and by IP id where nothing says where", async () => {
    const [sll] = await pairs([
      { src: POD, dst: FAR, us: 0, dir: "in", id: 11, t: syn(40000, 5432) },
      { src: NODE, dst: FAR, us: 20, dir: "out", id: 11, t: syn(40000, 5432) },
    ]);
    assert.equal(sll!.basis, "direction");
    const [text] = await pairs([
      { src: POD, dst: FAR, us: 0, id: 11, t: syn(40000, 5432) },
      { src: NODE, dst: FAR, us: 20, id: 11, t: syn(40000, 5432) },
    ]);
    assert.equal(text!.basis, "id");
    assert.equal(text!.ipId, 11);
    assert.match(describeCopy(text!), /paired by IP identification \(id 11\), sequence and time/);
    // without the id, the TCP sequence number still says one packet
    const [seq] = await pairs([
      { src: POD, dst: FAR, us: 0, t: syn(40000, 5432) },
      { src: NODE, dst: FAR, us: 20, t: syn(40000, 5432) },
    ]);
    assert.equal(seq!.ipId, undefined);
    assert.equal(
      describeBasis(seq!.basis, seq!.ipId),
      "paired by sequence numbers, lengths and time",
    );
  });

  it("needs more than equal fields where nothing says where and nothing changed", async () => {
    // two identical SYNs with no id, interface or direction: a copy or the next packet? unknown
    assert.deepEqual(
      await pairs([
        { src: POD, dst: FAR, us: 0, t: syn(40000, 5432) },
        { src: POD, dst: FAR, us: 20, t: syn(40000, 5432) },
      ]),
      [],
    );
    // a packet and one going the other way with the same sequence fields (tcpdump's relative
    // numbers) are not one packet with both ends rewritten
    assert.deepEqual(
      await pairs([
        { src: POD, dst: FAR, us: 0, t: synAck(40000, 5432) },
        { src: FAR, dst: NODE, us: 20, t: synAck(5432, 40000) },
      ]),
      [],
    );
    // UDP without the id: only interfaces or directions tell a copy from the next datagram
    const udp: Transport = { kind: "udp", srcPort: 5353, dstPort: 53, payloadLength: 40 };
    assert.deepEqual(
      await pairs([
        { src: POD, dst: FAR, us: 0, t: udp },
        { src: NODE, dst: FAR, us: 20, t: udp },
      ]),
      [],
    );
    assert.equal(
      (
        await pairs([
          { src: POD, dst: FAR, us: 0, id: 4, t: udp },
          { src: NODE, dst: FAR, us: 20, id: 4, t: udp },
        ])
      ).length,
      1,
    );
  });

  it("pairs an echo whose identifier NAT rewrote, by the IP id", async () => {
    const [c] = await pairs([
      { src: POD, dst: FAR, us: 0, iface: "veth1", dir: "in", id: 77, t: echo(100, 1) },
      { src: NODE, dst: FAR, us: 20, iface: "eth0", dir: "out", id: 77, t: echo(101, 1) },
    ]);
    assert.deepEqual(c!.echoId, { from: 100, to: 101 });
    assert.deepEqual(
      await pairs([
        { src: POD, dst: FAR, us: 0, iface: "veth1", dir: "in", t: echo(100, 1) },
        { src: NODE, dst: FAR, us: 20, iface: "eth0", dir: "out", t: echo(101, 1) },
      ]),
      [],
    );
  });

  it("follows one packet across a bridge: veth in, bridge in, eth0 out", async () => {
    const found = await pairs([
      { src: POD, dst: FAR, us: 0, iface: "veth1", dir: "in", id: 8, t: syn(40000, 5432) },
      { src: POD, dst: FAR, us: 5, iface: "cbr0", dir: "in", id: 8, t: syn(40000, 5432) },
      { src: NODE, dst: FAR, us: 30, iface: "eth0", dir: "out", id: 8, t: syn(40000, 5432) },
    ]);
    assert.deepEqual(found.map(at), [
      [1, 2],
      [1, 3],
    ]);
    assert.equal(found[0]!.source, undefined);
    assert.equal(ip(found[1]!.source?.to), NODE);
    // without interface names, in then in is not a copy
    const sll = await pairs([
      { src: POD, dst: FAR, us: 0, dir: "in", id: 8, t: syn(40000, 5432) },
      { src: POD, dst: FAR, us: 5, dir: "in", id: 8, t: syn(40000, 5432) },
    ]);
    assert.deepEqual(sll, []);
  });

  it("remembers only the window: a long capture keeps few first copies", () => {
    const pairer = new CopyPairer<number>({ windowNs: 1_000_000n });
    let matched = 0;
    for (let i = 0; i < 20_000; i++) {
      const [a, b] = packets([
        {
          src: POD,
          dst: FAR,
          us: i * 10,
          iface: "veth1",
          dir: "in",
          id: i & 0xffff,
          t: syn(40000, 5432, i),
        },
        {
          src: NODE,
          dst: FAR,
          us: i * 10 + 2,
          iface: "eth0",
          dir: "out",
          id: i & 0xffff,
          t: syn(40000, 5432, i),
        },
      ]);
      pairer.add(a!, i);
      if (pairer.add(b!, i)?.first.tag === i) matched++;
    }
    assert.equal(matched, 20_000);
    assert.ok(pairer.remembered <= 101, `kept ${pairer.remembered}`);
  });
});
