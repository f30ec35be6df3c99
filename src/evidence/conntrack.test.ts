/** @module evidence/conntrack.test — readConntrack on real conntrack listings, and translatedSource. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { formatIp } from "../net/cidr.ts";
import {
  type ConntrackEntry,
  readConntrack,
  translatedDestination,
  translatedSource,
} from "./conntrack.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`fixtures/${name}`, import.meta.url), "utf8");
const show = (e: ConntrackEntry) =>
  `${e.l3} ${e.proto} ${formatIp(e.orig.src)}>${formatIp(e.orig.dst)} [${e.flags.join(",")}] ${e.state ?? "-"}`;

describe("readConntrack", () => {
  it("reads `conntrack -L`: protocols, states, flags, tuples", () => {
    const text = fixture("conntrack-L.txt");
    const { value, diagnostics } = readConntrack(text, "nodes/n1/conntrack.txt");
    assert.deepEqual(diagnostics, []);
    assert.equal(value.length, text.trim().split("\n").length);
    const tcp = value.find((e) => e.proto === "tcp")!;
    assert.equal(tcp.protoNumber, 6);
    assert.equal(tcp.state, "TIME_WAIT");
    assert.deepEqual(tcp.flags, ["ASSURED"]);
    assert.equal(tcp.orig.dport, 8080);
    assert.equal(tcp.reply.sport, 8080);
    assert.equal(tcp.reply.dport, tcp.orig.sport);
    assert.equal(tcp.mark, 0);
    assert.equal(tcp.extra.use !== undefined, true);
    const unreplied = value.find((e) => e.proto === "icmp" && e.flags.includes("UNREPLIED"))!;
    assert.equal(formatIp(unreplied.orig.dst), "10.20.30.99");
    assert.equal(unreplied.orig.type, 8);
    const udp = value.find((e) => e.proto === "udp")!;
    assert.deepEqual(udp.flags, ["UNREPLIED"]);
    assert.equal(udp.state, undefined);
    assert.equal(udp.orig.dport, 5353);
    assert.equal(udp.reply.sport, 5353);
    const v6 = value.find((e) => e.l3 === 6)!;
    assert.equal(v6.proto, "icmpv6");
    assert.equal(v6.orig.type, 128);
    for (const e of value)
      assert.equal(text.split("\n")[e.source.line - 1]?.trimEnd(), e.source.text);
  });

  it("reads -o extended and /proc/net/nf_conntrack to the same entries", () => {
    const plain = readConntrack(fixture("conntrack-L.txt"), "a").value.map(show);
    for (const name of ["conntrack-L-extended.txt", "proc-nf_conntrack.txt"]) {
      const { value, diagnostics } = readConntrack(fixture(name), name);
      assert.deepEqual(diagnostics, []);
      assert.deepEqual(value.map(show), plain);
    }
    assert.equal(readConntrack(fixture("proc-nf_conntrack.txt"), "p").value[0]?.zone, 0);
  });

  it("checks the trailer's count", () => {
    const entries = fixture("conntrack-L.txt");
    const trailer = fixture("conntrack-L.stderr.txt");
    assert.deepEqual(readConntrack(entries + trailer, "both").diagnostics, []);
    const cut = entries.split("\n").slice(1).join("\n") + trailer;
    const d = readConntrack(cut, "cut").diagnostics;
    assert.equal(d.length, 1);
    assert.equal(d[0]?.code, "CONNTRACK_COUNT");
  });

  it("reports unreadable lines with the line and what was expected, and keeps going", () => {
    const text =
      "garbage here\ntcp 6 10 ESTABLISHED src=10.0.0.1 dst=10.0.0.2 sport=1 dport=2\ntcp 6 10 ESTABLISHED src=10.0.0.1 dst=10.0.0.2 sport=1 dport=2 src=10.0.0.2 dst=10.0.0.1 sport=2 dport=1 mark=0 use=1\nudp 17 5 src=10.0.0.300 dst=1.1.1.1 src=1.1.1.1 dst=10.0.0.1\n";
    const { value, diagnostics } = readConntrack(text, "c.txt");
    assert.equal(value.length, 1);
    assert.equal(value[0]?.source.line, 3);
    assert.deepEqual(
      diagnostics.map((d) => d.source?.line),
      [1, 2, 4],
    );
    assert.match(diagnostics[0]!.message, /expected "PROTO NUMBER TIMEOUT"/);
    assert.match(diagnostics[1]!.message, /expected an original and a reply tuple/);
    assert.match(diagnostics[2]!.message, /original tuple: expected src= and dst= addresses/);
  });
});

describe("translatedSource", () => {
  const entries = readConntrack(fixture("conntrack-L.txt"), "a").value;

  it("gives the masquerade address of a pod's connection", () => {
    const masq = entries.filter((e) => e.l3 === 4);
    assert.ok(masq.length >= 4);
    for (const e of masq) assert.equal(formatIp(translatedSource(e)!), "10.20.30.1");
  });

  it("is undefined when the source was kept", () => {
    const v6 = entries.find((e) => e.l3 === 6)!;
    assert.equal(translatedSource(v6), undefined);
    assert.equal(translatedDestination(v6), undefined);
  });

  it("sees DNAT (a Service VIP) on the destination side", () => {
    const [e] = readConntrack(
      "tcp 6 86399 ESTABLISHED src=10.244.1.5 dst=10.96.0.10 sport=40000 dport=53 src=10.244.2.7 dst=10.244.1.5 sport=53 dport=40000 [ASSURED] mark=0 use=1\n",
      "d",
    ).value;
    assert.equal(formatIp(translatedDestination(e!)!), "10.244.2.7");
    assert.equal(translatedSource(e!), undefined);
  });
});
