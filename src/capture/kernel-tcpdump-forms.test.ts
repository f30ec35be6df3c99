/**
 * tcpdump's text in every form its flags produce, read back and compared with the capture it was
 * printed from: real traffic (ICMP, UDP, TCP handshakes, an IPv6 ping, ARP, IPv6 neighbour
 * noise) between two throwaway namespaces, captured by the real tcpdump as LINUX_SLL2 (`-i any`),
 * LINUX_SLL (`-y LINUX_SLL -i any`) and Ethernet (one interface), printed by the real tcpdump
 * with and without `-n` (the namespace's /etc/hosts and /etc/services give names), with every
 * time column, `-e`, `-v`…`-vvv`, `-A`, `-X`, `-XX`, `-q`, `-#` and combinations, as a terminal
 * paste with the prompt and tcpdump's stderr, and live (`listening on`, counts at the end).
 *
 * With UPDATE_CAPTURE_FIXTURES=1 the captures and a selection of their texts are written to
 * fixtures/forms (see its README), which capture/tcpdump-forms.test.ts reads without root.
 */
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { kernelSkip } from "../lab/kernel-guard.ts";
import { describeFrame } from "./render.ts";
import { FORMS, type FormContext, formDifferences, liveViews } from "./test-helpers/forms.ts";
import {
  type FormsCaptures,
  HOST_NAMES,
  LOCAL_SERVICE,
  makeFormsCaptures,
  tcpdumpText,
} from "./test-helpers/forms-lab.ts";
import { FIXTURE_TEXTS, type FormsManifest } from "./test-helpers/forms-manifest.ts";
import { collect } from "./test-helpers/projection.ts";

const fixtures = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "forms");
const LINKS = ["sll2", "sll", "eth"] as const;
const encode = (s: string) => new TextEncoder().encode(s);

describe("tcpdump text in every form, against the capture it was printed from", {
  skip: kernelSkip(),
}, () => {
  let dir: string;
  let caps: FormsCaptures;
  let base: Omit<FormContext, "flags" | "link">;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "podpath-forms-"));
    caps = await makeFormsCaptures(dir);
    base = {
      names: HOST_NAMES,
      services: { [LOCAL_SERVICE.port]: LOCAL_SERVICE.name },
      ifnames: Object.fromEntries([...caps.ifnames].map(([k, v]) => [String(k), v])),
      quotedAlwaysPrinted: true,
    };
    if (process.env["UPDATE_CAPTURE_FIXTURES"] === "1") writeFixtures(caps, base);
  });

  after(async () => {
    await caps?.lab.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("captured every packet (no tcpdump dropped any)", () => {
    assert.deepEqual(caps.dropped, [0, 0, 0]);
  });

  for (const link of LINKS) {
    for (const flags of FORMS) {
      it(`${link}: tcpdump ${flags.join(" ") || "(names)"} reads as the capture`, async () => {
        const file = caps.files[link];
        const bin = await collect(file);
        const txt = await collect(encode(tcpdumpText(caps.a, file, flags)), "text");
        assert.ok(bin.packets.length > 40, `${bin.packets.length} packets`);
        assert.deepEqual(
          txt.diagnostics.filter((d) => d.severity !== "info"),
          [],
        );
        assert.deepEqual(formDifferences(txt.packets, bin.packets, { ...base, flags, link }), []);
        // Every IP packet is reported as one, names or not.
        for (const p of txt.packets)
          if (p.ip !== undefined || p.named !== undefined)
            assert.doesNotMatch(describeFrame(p), /not IP/);
      });
    }
  }

  it("keeps names as names and numbers what the service table knows", async () => {
    const txt = await collect(encode(tcpdumpText(caps.a, caps.files.eth, ["-v"])), "names");
    const tcp = txt.packets.filter((p) => p.named !== undefined && p.transport?.kind === "tcp");
    const syn = tcp.find((p) => p.transport?.kind === "tcp" && p.transport.dstPort === 5432)!;
    assert.equal(syn.named?.srcName, HOST_NAMES["10.99.0.1"]);
    assert.equal(syn.named?.dstName, HOST_NAMES["10.99.0.2"]);
    assert.equal(syn.named?.src, undefined);
    assert.equal(syn.named?.protocol, 6);
    assert.ok(syn.named?.id !== undefined && syn.named.ttl === 64);
    const local = tcp.find(
      (p) => p.transport?.kind === "tcp" && p.transport.dstService === LOCAL_SERVICE.name,
    )!;
    assert.equal(local.transport?.kind === "tcp" && local.transport.dstPort, 0);
    const error = txt.packets.find(
      (p) => p.transport?.kind === "icmp" && p.transport.quotedNamed?.dstPort === 53,
    );
    assert.equal(
      error?.transport?.kind === "icmp" && error.transport.quotedNamed?.ip.dstName,
      HOST_NAMES["10.99.0.2"],
    );
    assert.ok(txt.diagnostics.some((d) => d.code === "TCPDUMP_NAMES"));
  });

  it("reads a terminal paste: the prompt with the command, tcpdump's stderr, then packets", async () => {
    for (const link of LINKS) {
      const file = caps.files[link];
      const flags = ["-netvv"];
      const paste = `root@node-a:~# tcpdump ${flags.join(" ")} -r ${basename(file)}\n${tcpdumpText(caps.a, file, flags, { withStderr: true })}root@node-a:~# \n`;
      const txt = await collect(encode(paste), "paste");
      const bin = await collect(file);
      assert.deepEqual(
        txt.diagnostics.filter((d) => d.severity !== "info"),
        [],
      );
      assert.ok(txt.diagnostics.some((d) => d.code === "TCPDUMP_COMMAND"));
      assert.deepEqual(formDifferences(txt.packets, bin.packets, { ...base, flags, link }), []);
    }
  });

  it("reads tcpdump's live output pasted with its banner and counts", async () => {
    const paste = `$ sudo ${caps.liveCommand.join(" ")}\n${caps.live.replace(/\n\n(\d+ packets captured)/, "\n^C$1")}`;
    const txt = await collect(encode(paste), "live");
    assert.deepEqual(
      txt.diagnostics.filter((d) => d.severity !== "info"),
      [],
    );
    const bin = await collect(caps.files.sll2);
    assert.deepEqual(liveViews(txt.packets, "text", base), liveViews(bin.packets, "pcap", base));
  });
});

/** Writes the captures, the selected texts and their manifest to fixtures/forms. */
function writeFixtures(caps: FormsCaptures, base: Omit<FormContext, "flags" | "link">): void {
  mkdirSync(fixtures, { recursive: true });
  const manifest: FormsManifest = { ...base, captures: {}, texts: [], live: "any-live.txt" };
  for (const link of LINKS) {
    const name = basename(caps.files[link]);
    copyFileSync(caps.files[link], join(fixtures, name));
    manifest.captures[link] = name;
  }
  for (const t of FIXTURE_TEXTS) {
    const file = caps.files[t.link];
    const name = `${basename(file, ".pcap")}.${t.name}.txt`;
    const body = tcpdumpText(caps.a, file, t.flags, { withStderr: t.prompt !== undefined });
    const text =
      t.prompt === undefined
        ? body
        : `${t.prompt}tcpdump ${t.flags.join(" ")} -r ${basename(file)}\n${body}`;
    writeFileSync(join(fixtures, name), text);
    manifest.texts.push({ file: name, link: t.link, flags: t.flags });
  }
  writeFileSync(
    join(fixtures, manifest.live),
    `$ sudo ${caps.liveCommand.join(" ")}\n${caps.live.replace(/\n\n(\d+ packets captured)/, "\n^C$1")}`,
  );
  writeFileSync(join(fixtures, "forms.json"), `${JSON.stringify(manifest, null, 2)}\n`);
}
