import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { Diagnostic } from "../model/types.ts";
import { formatIp } from "../net/cidr.ts";
import type { Packet } from "./packet.ts";
import { parseTcpdumpLines } from "./tcpdump-text.ts";
import { projectFrame } from "./test-helpers/projection.ts";

const dir = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "tcpdump");

async function parse(lines: readonly string[]) {
  const diagnostics: Diagnostic[] = [];
  const packets: Packet[] = [];
  for await (const p of parseTcpdumpLines(lines, "t.txt", (d) => diagnostics.push(d)))
    packets.push(p);
  return { packets, diagnostics };
}

const addr = (p: Packet) =>
  p.ip === undefined
    ? ""
    : `${formatIp({ family: p.ip.family, value: p.ip.src })} > ${formatIp({ family: p.ip.family, value: p.ip.dst })}`;

describe("parseTcpdumpLines", () => {
  it("reads tcpdump 4.99 and master printings of the same packets alike (local replay diffs)", async () => {
    const text = readFileSync(join(dir, "LOCAL-tcpdump-4.99.3-replay.txt"), "utf8");
    const sections = text.split(/^== /m).slice(1);
    let compared = 0;
    for (const s of sections) {
      const old = s
        .split("\n")
        .filter((l) => l.startsWith("< "))
        .map((l) => l.slice(2));
      const cur = s
        .split("\n")
        .filter((l) => l.startsWith("> "))
        .map((l) => l.slice(2));
      if (old.length === 0) continue;
      const a = await parse(old);
      const b = await parse(cur);
      // The replay shows diff hunks, not whole outputs: compare the packets both sides print.
      // Times are part of the key: one section may hold hunks of several captures.
      const key = (p: Packet) => `${p.index}@${p.timeNs}`;
      const theirs = new Map(b.packets.map((p) => [key(p), p]));
      for (const p of a.packets) {
        const q = theirs.get(key(p));
        if (q === undefined) continue;
        assert.deepEqual(projectFrame(p), projectFrame(q), `${s.split("\n")[0]} packet ${p.index}`);
        compared++;
      }
    }
    assert.ok(compared >= 8, `compared ${compared}`);
  });

  it("reads 4.99's OTV printing of UDP 8472 as VXLAN", async () => {
    const { packets } = await parse([
      "    1  2013-05-18 20:21:44.837063 36:dc:85:1e:b3:40 > 00:16:3e:08:71:cf, ethertype IPv4 (0x0800), length 148: 192.168.203.1.45149 > 192.168.202.1.8472: OTV, flags [I] (0x08), overlay 0, instance 100",
      "00:16:3e:37:f6:04 > 00:30:88:01:00:02, ethertype IPv4 (0x0800), length 98: 192.168.203.3 > 192.168.203.5: ICMP echo request, id 1292, seq 1, length 64",
    ]);
    assert.equal(packets.length, 1);
    assert.equal(packets[0]!.tunnel?.kind, "vxlan");
    assert.equal(packets[0]!.tunnel?.vni, 100);
    assert.equal(addr(packets[0]!.tunnel!.inner as Packet), "192.168.203.3 > 192.168.203.5");
  });

  it("reads the live -i any form: interface, direction, ICMP errors naming the original packet", async () => {
    const { packets, diagnostics } = await parse([
      "tcpdump: data link type LINUX_SLL2",
      "listening on any, link-type LINUX_SLL2 (Linux cooked v2), snapshot length 262144 bytes",
      "14:05:01.100200 veth1a2b In  IP 10.4.1.5.40000 > 10.20.30.40.5432: Flags [S], seq 1, win 64240, length 0",
      "14:05:01.100250 eth0  Out IP 10.128.0.20.61000 > 10.20.30.40.5432: Flags [S], seq 1, win 64240, length 0",
      "14:05:01.120000 eth0  In  IP 10.0.0.1 > 10.128.0.20: ICMP host 10.20.30.40 unreachable, length 68",
      "14:05:02.000000 eth0  In  IP 10.20.30.40 > 10.128.0.20: ICMP 10.20.30.40 udp port 53 unreachable, length 36",
      "14:05:03.000000 eth0  Out IP6 fd00::1.5353 > fd00::2.53: 1+ AAAA? x. (20)",
      "3 packets captured",
    ]);
    assert.deepEqual(diagnostics, []);
    assert.deepEqual(
      packets.map((p) => [p.iface, p.direction, p.line]),
      [
        ["veth1a2b", "in", 3],
        ["eth0", "out", 4],
        ["eth0", "in", 5],
        ["eth0", "in", 6],
        ["eth0", "out", 7],
      ],
    );
    const hostUnreach = packets[2]!.transport;
    assert.ok(hostUnreach?.kind === "icmp" && hostUnreach.type === 3 && hostUnreach.code === 1);
    assert.equal(hostUnreach.quoted?.ip.dst, 0x0a141e28n);
    assert.equal(hostUnreach.quoted?.ip.src, 0x0a800014n);
    const portUnreach = packets[3]!.transport;
    assert.ok(portUnreach?.kind === "icmp" && portUnreach.code === 3);
    assert.equal(portUnreach.quoted?.dstPort, 53);
    assert.equal(packets[4]!.ip?.family, 6);
    assert.ok(packets[4]!.transport?.kind === "udp" && packets[4]!.transport.dstPort === 53);
  });

  it("reads -tt epoch times, -e with a VLAN tag and no IP keyword, and -q", async () => {
    const { packets, diagnostics } = await parse([
      "1700000000.123456 aa:bb:cc:dd:ee:ff > 11:22:33:44:55:66, ethertype 802.1Q (0x8100), length 78: vlan 100, p 0, ethertype IPv4 (0x0800), 10.0.0.1.22 > 10.0.0.2.50000: Flags [P.], seq 1:13, ack 1, win 501, length 12",
      "1700000000.223456 IP 10.0.0.2.50000 > 10.0.0.1.22: tcp 0",
    ]);
    assert.deepEqual(diagnostics, []);
    assert.equal(packets[0]!.timeNs, 1_700_000_000_123_456_000n);
    assert.equal(packets[0]!.length, 78);
    assert.equal(addr(packets[0]!), "10.0.0.1 > 10.0.0.2");
    assert.ok(packets[0]!.transport?.kind === "tcp" && packets[0]!.transport.flags === 0x18);
    assert.ok(packets[1]!.transport?.kind === "tcp" && packets[1]!.transport.flags === undefined);
  });

  it("restores absolute sequence numbers from tcpdump's relative ones", async () => {
    const { packets } = await parse([
      "10:00:00.000001 IP 10.0.0.1.1000 > 10.0.0.2.80: Flags [S], seq 1000000, win 1, length 0",
      "10:00:00.000002 IP 10.0.0.2.80 > 10.0.0.1.1000: Flags [S.], seq 5000, ack 1000001, win 1, length 0",
      "10:00:00.000003 IP 10.0.0.1.1000 > 10.0.0.2.80: Flags [P.], seq 1:11, ack 1, win 1, length 10",
    ]);
    const t = packets[2]!.transport;
    assert.ok(t?.kind === "tcp");
    assert.equal(t.seq, 1_000_001);
  });

  it("keeps sequence numbers printed absolute (-S)", async () => {
    const { packets } = await parse([
      "10:00:00.000001 IP 10.0.0.1.1000 > 10.0.0.2.80: Flags [S], seq 3000000000, win 1, length 0",
      "10:00:00.000003 IP 10.0.0.1.1000 > 10.0.0.2.80: Flags [P.], seq 3000000001:3000000011, ack 77, win 1, length 10",
    ]);
    const t = packets[1]!.transport;
    assert.ok(t?.kind === "tcp");
    assert.equal(t.seq, 3_000_000_001);
  });
});
