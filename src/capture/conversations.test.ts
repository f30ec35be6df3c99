import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { formatIp, parseIp } from "../net/cidr.ts";
import { conversations, formatTime } from "./conversations.ts";
import { type Packet, TCP } from "./packet.ts";
import { readCapture } from "./read-capture.ts";

const dir = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "tcpdump");

let n = 0;
function tcp(
  src: string,
  sp: number,
  dst: string,
  dp: number,
  flags: number,
  seq: number,
  len = 0,
  extra: Partial<Packet> = {},
): Packet {
  n++;
  return {
    index: n,
    timeNs: BigInt(n) * 1_000_000_000n,
    ip: { family: 4, src: parseIp(src).value, dst: parseIp(dst).value, protocol: 6 },
    transport: { kind: "tcp", srcPort: sp, dstPort: dp, flags, seq, payloadLength: len },
    ...extra,
  };
}

describe("conversations", () => {
  it("reads a DNS-over-TCP exchange as data both ways, closed with FIN by both", async () => {
    const s = await conversations(readCapture(join(dir, "dns_tcp.pcap")), { file: "dns_tcp.pcap" });
    assert.equal(s.conversations.length, 1);
    const c = s.conversations[0]!;
    assert.equal(formatIp(c.initiator.ip), "192.168.1.11");
    assert.equal(c.initiator.port, 33779);
    assert.equal(c.responder.port, 53);
    assert.equal(c.initiatorBasis, "syn");
    assert.equal(c.tcp?.progress, "data-both-ways");
    assert.deepEqual([...(c.tcp?.finFrom ?? [])].sort(), ["initiator", "responder"]);
    assert.equal(c.tcp?.retransmissions, 0);
    assert.equal(c.packetsFromInitiator, 6);
    assert.equal(c.packetsFromResponder, 5);
    assert.equal(c.first.ref.line, 1);
    assert.equal(c.firstReply?.index, 2);
  });

  it("gives the same answer for the capture and for tcpdump's text of it", async () => {
    const a = await conversations(readCapture(join(dir, "dns_tcp.pcap")), { file: "a" });
    const b = await conversations(readCapture(join(dir, "dns_tcp.out")), { file: "b" });
    const strip = (s: typeof a) =>
      s.conversations.map((c) => ({ i: c.initiator, r: c.responder, v: c.verdict, t: c.tcp }));
    assert.deepEqual(strip(b), strip(a));
  });

  it("counts SYN retransmissions and says no reply for a SYN-only conversation", async () => {
    const pkts = [0, 1, 3].map((k) =>
      tcp("10.4.1.5", 40000, "10.20.30.40", 5432, TCP.SYN, 1000, 0, {
        timeNs: BigInt(k) * 1_000_000_000n,
      }),
    );
    const s = await conversations(pkts, { file: "x" });
    const c = s.conversations[0]!;
    assert.equal(c.tcp?.progress, "syn-only");
    assert.equal(c.tcp?.synCount, 3);
    assert.equal(c.tcp?.retransmissions, 2);
    assert.equal(c.replied, false);
    assert.match(c.verdict, /SYN only \(3 sent\).*2 retransmissions.*no reply/);
  });

  it("does not count one packet seen on two interfaces as a retransmission", async () => {
    const pkts = [
      tcp("10.4.1.5", 40000, "10.20.30.40", 5432, TCP.SYN, 7, 0, {
        iface: "veth1",
        direction: "in",
      }),
      tcp("10.4.1.5", 40000, "10.20.30.40", 5432, TCP.SYN, 7, 0, {
        iface: "eth0",
        direction: "out",
      }),
    ];
    const c = (await conversations(pkts, { file: "x" })).conversations[0]!;
    assert.equal(c.tcp?.retransmissions, 0);
    assert.deepEqual(c.seenOn, ["veth1 in", "eth0 out"]);
  });

  it("takes the SYN-ACK sender as responder when the SYN was not captured", async () => {
    const pkts = [
      tcp("10.20.30.40", 5432, "10.4.1.5", 40000, TCP.SYN | TCP.ACK, 1),
      tcp("10.4.1.5", 40000, "10.20.30.40", 5432, TCP.ACK, 2),
    ];
    const c = (await conversations(pkts, { file: "x" })).conversations[0]!;
    assert.equal(formatIp(c.initiator.ip), "10.4.1.5");
    assert.equal(c.initiatorBasis, "syn-ack");
    assert.equal(c.tcp?.progress, "established");
  });

  it("attaches an ICMP error to the conversation it quotes", async () => {
    const syn = tcp("10.4.1.5", 40000, "10.20.30.40", 5432, TCP.SYN, 1);
    const err: Packet = {
      index: 99,
      timeNs: 5n,
      ip: {
        family: 4,
        src: parseIp("10.0.0.1").value,
        dst: parseIp("10.4.1.5").value,
        protocol: 1,
      },
      transport: {
        kind: "icmp",
        version: 4,
        type: 3,
        code: 1,
        quoted: {
          ip: {
            family: 4,
            src: parseIp("10.4.1.5").value,
            dst: parseIp("10.20.30.40").value,
            protocol: 6,
          },
          srcPort: 40000,
          dstPort: 5432,
        },
      },
    };
    const s = await conversations([syn, err], { file: "x" });
    assert.equal(s.conversations.length, 1);
    assert.equal(s.conversations[0]!.icmpErrors[0]?.what, "host unreachable");
    assert.match(s.conversations[0]!.verdict, /ICMP host unreachable from 10\.0\.0\.1/);
  });

  it("pairs echo requests and replies and filters by host", async () => {
    const s = await conversations(readCapture(join(dir, "vxlan.pcap")), {
      file: "vxlan.pcap",
      host: parseIp("192.168.203.5"),
    });
    const icmp = s.conversations.filter((c) => c.protocol === "icmp");
    assert.equal(icmp.length, 1);
    assert.equal(formatIp(icmp[0]!.initiator.ip), "192.168.203.3");
    assert.equal(icmp[0]!.packetsFromInitiator, 4);
    assert.equal(icmp[0]!.packetsFromResponder, 4);
    assert.equal(icmp[0]!.tunnel?.kind, "vxlan");
    assert.ok(s.assumptions.some((a) => /tunnel/.test(a)));
  });

  it("formats times with nanoseconds, dated or time of day", () => {
    assert.equal(formatTime(1418145369924505488n), "2014-12-09T17:16:09.924505488Z");
    assert.equal(formatTime(62169924505000n, true), "17:16:09.924505000");
  });
});

describe("conversations across a node's NAT (copies of one packet)", () => {
  const POD = "10.4.0.5";
  const NODE = "10.128.0.2";
  const FAR = "10.20.30.40";
  const T0 = 1_700_000_000_000_000_000n;
  function pkt(
    index: number,
    us: number,
    src: string,
    sp: number,
    dst: string,
    dp: number,
    flags: number,
    where: Partial<Packet>,
    id: number,
  ): Packet {
    return {
      index,
      timeNs: T0 + BigInt(us) * 1000n,
      ...where,
      ip: { family: 4, src: parseIp(src).value, dst: parseIp(dst).value, protocol: 6, id },
      transport: {
        kind: "tcp",
        srcPort: sp,
        dstPort: dp,
        flags,
        seq: flags & TCP.ACK ? 9000 : 1000,
        ...(flags & TCP.ACK ? { ack: 1001 } : {}),
        payloadLength: 0,
      },
    };
  }
  const vethIn = { iface: "veth1", direction: "in" } as const;
  const vethOut = { iface: "veth1", direction: "out" } as const;
  const ethIn = { iface: "eth0", direction: "in" } as const;
  const ethOut = { iface: "eth0", direction: "out" } as const;

  it("links the pod's conversation and its masqueraded copy, with both packet numbers", async () => {
    const s = await conversations(
      [
        pkt(1, 0, POD, 40000, FAR, 5432, TCP.SYN, vethIn, 21),
        pkt(2, 30, NODE, 40000, FAR, 5432, TCP.SYN, ethOut, 21),
        pkt(3, 400, FAR, 5432, NODE, 40000, TCP.SYN | TCP.ACK, ethIn, 0),
        pkt(4, 410, FAR, 5432, POD, 40000, TCP.SYN | TCP.ACK, vethOut, 0),
      ],
      { file: "node.pcap" },
    );
    assert.equal(s.conversations.length, 2);
    const [pod, node] = s.conversations;
    assert.equal(formatIp(pod!.initiator.ip), POD);
    assert.equal(formatIp(node!.initiator.ip), NODE);
    const t = pod!.translation!;
    assert.equal(t.side, "before");
    assert.equal(t.basis, "direction");
    assert.equal(formatIp(t.source!.from.ip), POD);
    assert.equal(formatIp(t.source!.to.ip), NODE);
    assert.equal(t.destination, undefined);
    assert.deepEqual([t.request!.first.index, t.request!.again.index], [1, 2]);
    // the reply: first as it came back to the node address, then handed to the pod
    assert.deepEqual([t.reply!.first.index, t.reply!.again.index], [3, 4]);
    assert.equal(t.pairs, 2);
    assert.equal(formatIp(t.peer.initiator.ip), NODE);
    assert.equal(t.peer.replied, true);
    assert.equal(node!.translation?.side, "after");
    assert.equal(formatIp(node!.translation!.peer.initiator.ip), POD);
    assert.match(
      pod!.verdict,
      /leaves the node rewritten: source 10\.4\.0\.5 → 10\.128\.0\.2 \(packets 1 and 2\)$/,
    );
    assert.match(node!.verdict, /rewritten by the node: source 10\.4\.0\.5 → 10\.128\.0\.2/);
  });

  it("credits a reply seen only on eth0 (to the node address) to the pod's request", async () => {
    const s = await conversations(
      [
        pkt(1, 0, POD, 40000, FAR, 5432, TCP.SYN, vethIn, 21),
        pkt(2, 30, NODE, 40000, FAR, 5432, TCP.SYN, ethOut, 21),
        pkt(3, 400, FAR, 5432, NODE, 40000, TCP.SYN | TCP.ACK, ethIn, 0),
      ],
      { file: "node.pcap" },
    );
    const pod = s.conversations.find((c) => formatIp(c.initiator.ip) === POD)!;
    assert.equal(pod.replied, false, "no reply was seen going back to the pod");
    assert.equal(pod.translation?.peer.replied, true);
    assert.equal(pod.translation?.peer.firstReply?.index, 3);
  });

  it("counts a copy once where the capture names no interface (LINUX_SLL, tcpdump text)", async () => {
    const s = await conversations(
      [
        pkt(1, 0, POD, 40000, FAR, 5432, TCP.SYN, { direction: "in" }, 5),
        pkt(2, 30, POD, 40000, FAR, 5432, TCP.SYN, { direction: "out" }, 5),
        pkt(3, 1_000_000, POD, 40000, FAR, 5432, TCP.SYN, { direction: "in" }, 6),
        pkt(4, 1_000_030, POD, 40000, FAR, 5432, TCP.SYN, { direction: "out" }, 6),
      ],
      { file: "sll.pcap" },
    );
    const [c] = s.conversations;
    assert.equal(s.conversations.length, 1);
    assert.equal(c!.packetsFromInitiator, 2);
    assert.equal(c!.tcp?.synCount, 2);
    assert.equal(c!.tcp?.retransmissions, 1);
    assert.equal(c!.copies?.count, 2);
    assert.deepEqual([c!.copies!.pair.first.index, c!.copies!.pair.again.index], [1, 2]);
    assert.deepEqual(c!.seenOn, ["in", "out"]);
    assert.equal(c!.translation, undefined);
  });

  it("keeps the endpoint's side of a Service VIP conversation when filtering by the VIP", async () => {
    const VIP = "10.96.0.10";
    const EP = "10.4.2.7";
    const s = await conversations(
      [
        pkt(1, 0, POD, 41000, VIP, 80, TCP.SYN, vethIn, 31),
        pkt(2, 20, POD, 41000, EP, 8080, TCP.SYN, { iface: "veth2", direction: "out" }, 31),
        pkt(
          3,
          300,
          EP,
          8080,
          POD,
          41000,
          TCP.SYN | TCP.ACK,
          { iface: "veth2", direction: "in" },
          0,
        ),
        pkt(4, 310, VIP, 80, POD, 41000, TCP.SYN | TCP.ACK, vethOut, 0),
      ],
      { file: "node.pcap", host: parseIp(VIP) },
    );
    assert.equal(s.conversations.length, 2);
    const vip = s.conversations.find((c) => formatIp(c.responder.ip) === VIP)!;
    const ep = s.conversations.find((c) => formatIp(c.responder.ip) === EP)!;
    assert.equal(vip.translation?.side, "before");
    assert.equal(ep.translation?.side, "after");
    assert.equal(vip.translation?.source, undefined);
    assert.equal(
      `${formatIp(vip.translation!.destination!.from.ip)}:${vip.translation!.destination!.from.port}`,
      `${VIP}:80`,
    );
    assert.equal(vip.translation!.destination!.to.port, 8080);
    // the endpoint's side (not involving the VIP) was taken in once the request paired: its SYN-ACK
    assert.equal(ep.replied, true);
    assert.equal(ep.packetsFromResponder, 1);
    assert.deepEqual(
      [vip.translation!.reply!.first.index, vip.translation!.reply!.again.index],
      [3, 4],
    );
  });
});
