import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { readIptablesText } from "./read-iptables-text.ts";
import { renderDump } from "./render.ts";
import { parseIptablesSave } from "./save-parser.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
const FILE = "nodes/gke-a-1/iptables-save.txt";
const SAVE = fixture("list/kube-proxy.save-c.txt");
const LISTING = fixture("list/kube-proxy.nat-Lnvx.txt");

describe("readIptablesText", () => {
  it("reads a real iptables-save file exactly as the iptables-save reader does", () => {
    const a = readIptablesText(SAVE, FILE, { family: 4 });
    const b = parseIptablesSave(SAVE, FILE, { family: 4 });
    assert.deepEqual(a.diagnostics, b.diagnostics);
    assert.equal(renderDump(a.value!, { counters: true }), renderDump(b.value, { counters: true }));
    assert.equal(a.value?.format, "save");
  });

  it("strips a prompt line and iptables' warnings, keeping the file's line numbers", () => {
    const text = `$ sudo iptables-save -c\n# Warning: iptables-legacy tables present, use iptables-legacy-save to see them\n${SAVE}`;
    const r = readIptablesText(text, FILE, { family: 4 });
    assert.deepEqual(r.diagnostics, []);
    assert.equal(r.value?.legacyTablesPresent, true);
    const rule = r.value?.tables.get("nat")?.chains.get("POSTROUTING")?.rules[0];
    assert.equal(text.split("\n")[rule!.source.line - 1], rule!.source.text);
  });

  it("reads iptables -S output with its command line's table", () => {
    const spec = fixture("list/kube-proxy.nat-S-POSTROUTING.txt");
    const r = readIptablesText(spec, FILE, { family: 4 });
    assert.equal(r.value?.format, "spec");
    assert.ok(r.value?.tables.has("nat"));
    assert.equal(
      r.diagnostics.find((d) => d.code === "IPTABLES_TABLE_ASSUMED"),
      undefined,
    );
  });

  it("reads several listings in one file into one dump", () => {
    const text = `${fixture("list/kube-proxy.filter-L.txt")}\n# iptables -t nat -L -n -v -x\n${LISTING}`;
    const r = readIptablesText(text, FILE, { family: 4 });
    assert.deepEqual(
      r.diagnostics.filter((d) => d.severity !== "info"),
      [],
    );
    assert.deepEqual([...r.value!.tables.keys()].sort(), ["filter", "nat"]);
  });

  it("marks output that went through grep as an excerpt with every chain partial", () => {
    const text = `$ iptables-save | grep MASQ\n${SAVE.split("\n")
      .filter((l) => l.includes("MASQ"))
      .join("\n")}\n`;
    const r = readIptablesText(text, FILE, { family: 4 });
    assert.ok(r.value?.excerpt?.reasons.some((x) => x.includes("grep MASQ")));
    const chains = [...r.value!.tables.get("nat")!.chains.values()];
    assert.ok(chains.length > 0 && chains.every((c) => c.partial === true));
  });

  it("names the file, the line and the command to run when nothing is iptables output", () => {
    const r = readIptablesText("\nhello\nworld\n", FILE, { family: 4 });
    assert.equal(r.value, undefined);
    assert.equal(r.diagnostics.length, 1);
    const d = r.diagnostics[0]!;
    assert.equal(d.code, "IPTABLES_UNRECOGNISED");
    assert.equal(d.severity, "error");
    assert.deepEqual(d.source, { file: FILE, line: 2, text: "hello" });
    assert.match(d.message, /iptables-save -t nat > nodes\/gke-a-1\/iptables-save\.txt/);
  });

  it("reads an empty file as iptables-save's output with no table loaded, and says so", () => {
    const empty = readIptablesText("", FILE, { family: 6 });
    const rules = [...(empty.value?.tables.values() ?? [])].flatMap((t) =>
      [...t.chains.values()].flatMap((c) => c.rules),
    );
    assert.ok(empty.value);
    assert.equal(rules.length, 0);
    assert.equal(empty.diagnostics[0]?.code, "IPTABLES_NO_TABLES");
    assert.equal(empty.diagnostics[0]?.severity, "info");
    assert.match(empty.diagnostics[0]?.message ?? "", /no table is loaded.*ip6tables-save > /);
  });

  it("does not read ip6tables output as the IPv4 rules", () => {
    const text = fixture("list/masq6.nat-Lnv.txt");
    const r = readIptablesText(text, FILE, { family: 4 });
    assert.equal(r.value, undefined);
    assert.equal(r.diagnostics[0]?.code, "IPTABLES_FAMILY");
    assert.match(r.diagnostics[0]?.message ?? "", /ip6tables-save\.txt/);
    assert.ok(readIptablesText(text, "nodes/a/ip6tables-save.txt", { family: 6 }).value);
  });
});
