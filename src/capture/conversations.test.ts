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
