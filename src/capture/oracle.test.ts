/**
 * The tcpdump oracle: for every pair in fixtures/tcpdump (captures with the exact text tcpdump
 * prints for them), reading the capture and reading the text must give the same packets, and
 * both must agree with what the `.out` lines literally say.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { formatIp } from "../net/cidr.ts";
import type { Packet } from "./packet.ts";
import { collect, projectFrame } from "./test-helpers/projection.ts";

const dir = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "tcpdump");

interface OracleTest {
  name: string;
  capture: string;
  out: string;
  flags: string[];
}

const tests: OracleTest[] = readFileSync(join(dir, "TESTLIST.subset"), "utf8")
  .split("\n")
  .filter((l) => l.trim() !== "")
  .map((l) => {
    const [name, capture, out, ...flags] = l.trim().split(/\s+/);
    return { name: name!, capture: capture!, out: out!, flags };
  });

const DAY_NS = 86_400_000_000_000n;

/** The text's time resolution: microseconds unless `--nano`; without a date, time of day. */
function expectedTime(p: Packet, t: OracleTest): bigint {
  const nano = t.flags.includes("--nano");
  let ns = nano ? p.timeNs : (p.timeNs / 1000n) * 1000n;
  const dated = !t.flags.includes("SPECIAL_t") || t.flags.includes("-tttt");
  if (!dated) ns %= DAY_NS;
  return ns;
}

/** Groups the .out text into packets by the `-#` number, as TESTrun's semantics describe. */
function outBlocks(text: string): string[] {
  const blocks: string[] = [];
  for (const line of text.split("\n")) {
    if (/^ *\d+ {2}\S/.test(line)) blocks.push(line);
    else if (blocks.length > 0) blocks[blocks.length - 1] += `\n${line}`;
  }
  return blocks;
}

function endpoint(ip: { family: 4 | 6; value: bigint }, port: number | undefined): string {
  return port === undefined ? formatIp(ip) : `${formatIp(ip)}.${port}`;
}

describe("tcpdump oracle pairs", () => {
  it("has the pairs listed", () => {
    assert.ok(tests.length >= 18);
  });
  for (const t of tests) {
    it(`${t.name}: capture and text give the same packets, as the .out prints them`, async () => {
      const bin = await collect(join(dir, t.capture));
      const txt = await collect(join(dir, t.out));
      assert.notEqual(bin.format, "tcpdump-text");
      assert.equal(txt.format, "tcpdump-text");
      assert.deepEqual(
        bin.diagnostics.filter((d) => d.severity !== "info"),
        [],
        "capture reads cleanly",
      );
      assert.deepEqual(
        txt.diagnostics.filter((d) => d.severity !== "info"),
        [],
        "text reads cleanly",
      );
      const blocks = outBlocks(readFileSync(join(dir, t.out), "utf8"));
      assert.equal(bin.packets.length, blocks.length, "packet count (capture vs .out)");
      assert.equal(txt.packets.length, blocks.length, "packet count (text vs .out)");
      const withFlags = !t.flags.includes("-q");
      for (let i = 0; i < blocks.length; i++) {
        const b = bin.packets[i]!;
        const x = txt.packets[i]!;
        assert.equal(b.index, i + 1);
        assert.equal(x.index, i + 1);
        assert.equal(x.timeNs, expectedTime(b, t), `time of packet ${i + 1}`);
        assert.deepEqual(projectFrame(x, withFlags), projectFrame(b, withFlags), `packet ${i + 1}`);
        // Independently of the text reader: the .out line names the capture's addresses.
        if (b.ip !== undefined) {
          const tr = b.transport;
          const ports = tr?.kind === "tcp" || tr?.kind === "udp" ? [tr.srcPort, tr.dstPort] : [];
          const src = endpoint({ family: b.ip.family, value: b.ip.src }, ports[0]);
          const dst = endpoint({ family: b.ip.family, value: b.ip.dst }, ports[1]);
          assert.ok(blocks[i]!.includes(`${src} > ${dst}:`), `${src} > ${dst} in .out ${i + 1}`);
        }
      }
    });
  }
});

const captured = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "captured");

describe("captures made with the real tcpdump, against its text", () => {
  for (const name of ["any-sll2", "tun0-raw"]) {
    it(`${name}: capture and tcpdump's text give the same packets and directions`, async () => {
      const bin = await collect(join(captured, `${name}.pcap`));
      const txt = await collect(join(captured, `${name}.out`));
      assert.deepEqual(bin.diagnostics, []);
      assert.deepEqual(
        txt.diagnostics.filter((d) => d.severity !== "info"),
        [],
      );
      assert.ok(bin.packets.length > 5);
      assert.equal(txt.packets.length, bin.packets.length);
      for (let i = 0; i < bin.packets.length; i++) {
        const b = bin.packets[i]!;
        const x = txt.packets[i]!;
        assert.equal(x.timeNs, (b.timeNs / 1000n) * 1000n);
        assert.equal(x.direction, b.direction);
        assert.deepEqual(projectFrame(x), projectFrame(b), `packet ${i + 1}`);
      }
    });
  }
});
