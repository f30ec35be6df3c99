/**
 * The real tcpdump's texts in fixtures/forms (written by capture/kernel-tcpdump-forms.test.ts,
 * see fixtures/forms/README.md), read back: each gives the packets of the capture it was printed
 * from, with names where tcpdump printed them; conversations, host matching and rendering take
 * named packets without mistaking them for addressed ones. And the tcpdump project's own test
 * captures (fixtures/tcpdump) printed by the installed tcpdump in every `-n` form.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { parseIp } from "../net/cidr.ts";
import { conversations } from "./conversations.ts";
import { hostTalkers } from "./host-talkers.ts";
import type { Packet } from "./packet.ts";
import { describeFrame, packetJson } from "./render.ts";
import { FORMS, formDifferences, type LinkKind, liveViews } from "./test-helpers/forms.ts";
import type { FormsManifest } from "./test-helpers/forms-manifest.ts";
import { collect } from "./test-helpers/projection.ts";

const dir = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "forms");
const manifest: FormsManifest = JSON.parse(readFileSync(join(dir, "forms.json"), "utf8"));
const base = {
  names: manifest.names,
  services: manifest.services,
  ifnames: manifest.ifnames,
  quotedAlwaysPrinted: true,
};
const capture = (link: keyof FormsManifest["captures"]) => join(dir, manifest.captures[link]!);
const warnings = (ds: readonly { severity: string }[]) => ds.filter((d) => d.severity !== "info");

describe("tcpdump's texts of one capture in many forms", () => {
  it("has every kind of form", () => {
    // Each text's flag letters counted (`-netvv` is n1 e1 t1 v2), to be found among all texts.
    const counts = manifest.texts.map((t) => {
      const letters = t.flags.filter((f) => /^-[^-]/.test(f)).join("");
      return (c: string) => letters.split(c).length - 1;
    });
    const has = (c: string, n: number) => counts.some((count) => count(c) === n);
    for (const [c, n] of [
      ["n", 0],
      ["n", 1],
      ["n", 2],
      ["e", 1],
      ["q", 1],
      ["A", 1],
      ["X", 2],
      ["v", 2],
      ["#", 1],
      ...[0, 1, 2, 3, 4, 5].map((k) => ["t", k] as const),
    ] as const)
      assert.ok(has(c, n), `${c} × ${n}`);
    assert.deepEqual(Object.keys(manifest.captures).sort(), ["eth", "sll", "sll2"]);
  });

  for (const t of manifest.texts) {
    it(`${t.file}: the packets of ${manifest.captures[t.link]}`, async () => {
      const bin = await collect(capture(t.link));
      const txt = await collect(join(dir, t.file));
      assert.equal(txt.format, "tcpdump-text");
      assert.deepEqual(warnings(txt.diagnostics), []);
      assert.ok(bin.packets.length > 40);
      assert.deepEqual(
        formDifferences(txt.packets, bin.packets, { ...base, flags: t.flags, link: t.link }),
        [],
      );
      for (const p of txt.packets)
        if (p.ip !== undefined || p.named !== undefined)
          assert.doesNotMatch(describeFrame(p), /not IP/);
    });
  }

  it("reads a live paste: the prompt, tcpdump's banner, ^C and the counts", async () => {
    const txt = await collect(join(dir, manifest.live));
    assert.deepEqual(warnings(txt.diagnostics), []);
    const cmd = txt.diagnostics.find((d) => d.code === "TCPDUMP_COMMAND");
    assert.match(cmd?.message ?? "", /tcpdump -i any -l .*without -n.*interface any/);
    assert.equal(cmd?.source?.line, 1);
    const bin = await collect(capture("sll2"));
    assert.deepEqual(liveViews(txt.packets, "text", base), liveViews(bin.packets, "pcap", base));
  });
});

describe("packets tcpdump printed with names", () => {
  const names = join(dir, manifest.texts.find((t) => t.flags.length === 0)!.file);

  it("are IP packets with the names, ports, flags and lengths printed", async () => {
    const { packets, diagnostics } = await collect(names);
    const syn = packets.find(
      (p) =>
        p.transport?.kind === "tcp" && p.transport.dstPort === 5432 && p.transport.flags === 0x02,
    );
    assert.deepEqual(syn?.named, {
      family: 4,
      protocol: 6,
      srcName: manifest.names["10.99.0.1"],
      dstName: manifest.names["10.99.0.2"],
    });
    assert.equal(syn?.ip, undefined);
    // A service the printing machine knew and podpath's table does not stays a name.
    const local = packets.find(
      (p) => p.transport?.kind === "tcp" && p.transport.dstService !== undefined,
    );
    assert.equal(local?.transport?.kind === "tcp" && local.transport.dstService, "podpath-test");
    assert.equal(local?.transport?.kind === "tcp" && local.transport.dstPort, 0);
    // An end printed as an address keeps it.
    const mixed = packets.find((p) => p.named?.dst === 0x0a630004n);
    assert.equal(mixed?.named?.srcName, manifest.names["10.99.0.1"]);
    const note = diagnostics.find((d) => d.code === "TCPDUMP_NAMES");
    assert.match(note?.message ?? "", /packets name hosts or services/);
    assert.equal(note?.severity, "info");
    assert.match(describeFrame(syn!), /^node-a\.internal:\d+ > db-b\.corp\.example:5432 tcp \[S\]/);
    const json = packetJson(syn!);
    assert.equal(json["srcName"], manifest.names["10.99.0.1"]);
    assert.equal(json["src"], undefined);
    assert.equal(json["dstPort"], 5432);
  });

  it("stay out of conversations, which are keyed on addresses, and the rest are as in the capture", async () => {
    const txt = await collect(names);
    const bin = await collect(capture("sll2"));
    const namedIdx = new Set(txt.packets.filter((p) => p.named !== undefined).map((p) => p.index));
    assert.ok(namedIdx.size > 20);
    const key = (ps: readonly Packet[]) =>
      conversations(ps, { file: "x" }).then((s) =>
        s.conversations.map((c) => [
          c.protocol,
          c.initiator,
          c.responder,
          c.packetsFromInitiator,
          c.packetsFromResponder,
        ]),
      );
    const fromText = await key(txt.packets);
    assert.ok(fromText.length > 0);
    assert.deepEqual(fromText, await key(bin.packets.filter((p) => !namedIdx.has(p.index))));
  });

  it("are not counted for a host they may hide, and the reader says why", async () => {
    const r = await hostTalkers(names, parseIp("10.99.0.4"));
    const fromPcap = await hostTalkers(capture("sll2"), parseIp("10.99.0.4"));
    assert.ok(fromPcap.senders.length > 0);
    assert.deepEqual(r.senders, []);
    assert.ok(r.diagnostics.some((d) => d.code === "TCPDUMP_NAMES"));
  });
});

const oracle = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "tcpdump");

/** Why the installed tcpdump cannot be used (CI must have it), or false. */
function tcpdumpMissing(): string | false {
  try {
    execFileSync("tcpdump", ["--version"], { stdio: "ignore" });
    return false;
  } catch {
    if (process.env["CI"]) throw new Error("tcpdump must be installed in CI");
    return "tcpdump is not installed";
  }
}

describe("the tcpdump project's test captures in every -n form", { skip: tcpdumpMissing() }, () => {
  const captures = [
    ...new Set(
      readFileSync(join(oracle, "TESTLIST.subset"), "utf8")
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => l.trim().split(/\s+/)[1]!),
    ),
  ];
  const LINKS: Readonly<Record<number, LinkKind>> = { 1: "eth", 113: "sll", 276: "sll2" };
  for (const c of captures) {
    it(`${c}: the installed tcpdump's text in every -n form reads as the capture`, async () => {
      const bin = await collect(join(oracle, c));
      const nano = readFileSync(join(oracle, c)).readUInt32LE(0) === 0xa1b23c4d;
      const link = LINKS[bin.packets[0]?.linkType ?? -1] ?? "other";
      for (const form of FORMS.filter((f) => f.some((x) => x.includes("n")))) {
        const flags = nano ? [...form, "--nano"] : form;
        // Names are never asked for here: they would need a resolver (-n forms only).
        const text = execFileSync("tcpdump", [...flags, "-r", c], {
          cwd: oracle,
          env: { ...process.env, TZ: "UTC" },
          stdio: ["ignore", "pipe", "ignore"],
        });
        const txt = await collect(new Uint8Array(text), "text");
        const at = `tcpdump ${flags.join(" ")} -r ${c}`;
        assert.deepEqual(warnings(txt.diagnostics), [], at);
        const ctx = { flags, link, names: {}, services: {}, ifnames: {} };
        assert.deepEqual(formDifferences(txt.packets, bin.packets, ctx), [], at);
      }
    });
  }
});
