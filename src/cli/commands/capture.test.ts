import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { memoryIo, UsageError } from "../io.ts";
import { run as flows } from "./capture-flows.ts";
import { run as read } from "./capture-read.ts";

const fixtures = join(import.meta.dirname, "..", "..", "capture", "fixtures");

describe("podpath capture read", () => {
  it("prints one line per packet with time, direction, addresses, flags and length", async () => {
    const io = memoryIo();
    const code = await read([join(fixtures, "captured", "any-sll2.pcap")], { output: "text" }, io);
    assert.equal(code, 0);
    const lines = io.stdout().trim().split("\n");
    const syn = lines.find((l) => l.includes(":5432 tcp [S]"))!;
    assert.match(
      syn,
      /^ +\d+ {2}\d{4}-\d\d-\d\dT[\d:.]+Z {2}ifindex \d+ out {2}10\.99\.0\.1:\d+ > 10\.99\.0\.2:5432 tcp \[S\] len 0 {2}length \d+$/,
    );
    assert.equal(io.stderr(), "");
  });

  it("writes JSON lines with the tunnel's inner packet", async () => {
    const io = memoryIo();
    await read([join(fixtures, "tcpdump", "vxlan.pcap")], { output: "jsonl" }, io);
    const first = JSON.parse(io.stdout().split("\n")[0]!);
    assert.equal(first.index, 1);
    assert.equal(first.dstPort, 4789);
    assert.deepEqual(
      [
        first.encapsulation.kind,
        first.encapsulation.vni,
        first.encapsulation.inner.src,
        first.encapsulation.inner.icmpType,
      ],
      ["vxlan", 100, "192.168.203.3", 8],
    );
  });

  it("prints the packets before damage, reports the byte offset on stderr and exits 2", async () => {
    const dir = mkdtempSync(join(tmpdir(), "podpath-capture-cli-"));
    try {
      const cut = join(dir, "cut.pcap");
      writeFileSync(cut, readFileSync(join(fixtures, "tcpdump", "dns_tcp.pcap")).subarray(0, 400));
      const io = memoryIo();
      assert.equal(await read([cut], { output: "text" }, io), 2);
      assert.equal(io.stdout().trim().split("\n").length, 4);
      assert.match(io.stderr(), /record 5 at byte offset 388 is cut off/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a missing file as a usage error", async () => {
    await assert.rejects(read(["/nonexistent.pcap"], {}, memoryIo()), UsageError);
  });
});

describe("podpath capture flows", () => {
  it("lists conversations with verdicts and says what it assumed", async () => {
    const io = memoryIo();
    const code = await flows(
      [join(fixtures, "captured", "any-sll2.pcap")],
      { output: "text", host: "10.99.0.2" },
      io,
    );
    assert.equal(code, 0);
    const out = io.stdout();
    assert.match(
      out,
      /tcp 10\.99\.0\.1:\d+ → 10\.99\.0\.2:5432\n {4}data in both directions; FIN from/,
    );
    assert.match(
      out,
      /udp 10\.99\.0\.1:\d+ → 10\.99\.0\.2:9999\n {4}no reply; ICMP port unreachable from 10\.99\.0\.2/,
    );
    assert.match(out, /assumed:\n {2}- where the capture was taken is not stated/);
  });

  it("emits JSON with the source on the wire and evidence", async () => {
    const io = memoryIo();
    await flows([join(fixtures, "tcpdump", "dns_tcp.out")], { output: "json" }, io);
    const j = JSON.parse(io.stdout());
    assert.equal(j.schemaVersion, 1);
    assert.equal(j.format, "tcpdump-text");
    assert.equal(j.conversations[0].sourceOnWire, "192.168.1.11");
    assert.deepEqual(j.conversations[0].first, {
      file: j.file,
      line: 1,
      packet: 1,
      time: "2020-06-10T09:21:03.720289000Z",
    });
  });

  it("counts talkers to a host, with replies", async () => {
    const io = memoryIo();
    await flows(
      [join(fixtures, "captured", "any-sll2.pcap")],
      { output: "json", host: "10.99.0.2", talkers: true },
      io,
    );
    const j = JSON.parse(io.stdout());
    assert.deepEqual(
      j.senders.map((s: { address: string; replied: boolean }) => [s.address, s.replied]),
      [["10.99.0.1", true]],
    );
    await assert.rejects(
      flows([join(fixtures, "captured", "any-sll2.pcap")], { talkers: true }, memoryIo()),
      UsageError,
    );
    await assert.rejects(
      flows([join(fixtures, "captured", "any-sll2.pcap")], { host: "nope" }, memoryIo()),
      UsageError,
    );
  });
});
