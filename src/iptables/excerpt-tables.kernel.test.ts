/**
 * @module iptables/excerpt-tables.kernel.test — a headless excerpt made by the real tools: kube-proxy
 * shaped rules (fixtures/excerpt/kube-proxy-tables.rules: mangle canaries, filter's KUBE-FORWARD,
 * KUBE-FIREWALL and the no-endpoints REJECT, nat's Service chains; KUBE-SERVICES and KUBE-NODEPORTS
 * in both) loaded with iptables-restore in a lab namespace, then `iptables-save | grep KUBE` (and
 * the same sorted, which loses the dump's order). Every rule podpath places must be in that table
 * as `iptables-save -t TABLE` prints it; the lines it leaves out must be ones their chain and
 * target allow in more than one table. `diagnose` on a snapshot holding such a grep cites lines of
 * the excerpt and concludes nothing the whole dump does not. Kernel test: needs root.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { kernelSkip } from "../lab/kernel-guard.ts";
import { createLab, type Lab, type Namespace } from "../lab/netns.ts";
import type { Answer } from "../model/answer.ts";
import { diagnose } from "../questions/diagnose.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import type { TableName } from "./dump.ts";
import { lineTables } from "./excerpt-tables.ts";
import { readIptablesText } from "./read-iptables-text.ts";

const RULES = join(import.meta.dirname, "fixtures/excerpt/kube-proxy-tables.rules");
const SERVICE_PROBES = join(import.meta.dirname, "../cases/masquerade/fixtures/service-probes");
const NODE_DUMP = "nodes/worker-1/iptables-save.txt";
const TABLES: readonly TableName[] = ["mangle", "nat", "filter"];

describe("a grep of iptables-save mixing tables, from the real tools", {
  skip: kernelSkip(),
}, () => {
  let lab: Lab;
  let node: Namespace;
  const tmp = mkdtempSync(join(tmpdir(), "pp-excerpt-"));
  const run = async (argv: string[], input?: string) => {
    const r = await node.exec(argv, input === undefined ? {} : { input });
    assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
    return r.stdout;
  };
  /** Each table's `-A` lines as `iptables-save -t TABLE` prints them. */
  const byTable = async () => {
    const m = new Map<TableName, Set<string>>();
    for (const t of TABLES) {
      const lines = (await run(["iptables-save", "-t", t])).split("\n");
      m.set(t, new Set(lines.filter((l) => l.startsWith("-A "))));
    }
    return m;
  };

  before(async () => {
    lab = await createLab({ prefix: "ppexc" });
    node = await lab.addNamespace("node");
  });
  after(async () => {
    await lab?.destroy();
    rmSync(tmp, { recursive: true, force: true });
  });

  /** Checks every rule read against the tables the kernel holds it in; the lines left out. */
  function check(text: string, truth: Map<TableName, Set<string>>) {
    const r = readIptablesText(text, "iptables-save.txt", { family: 4 });
    assert.ok(r.value);
    const lines = text.split("\n");
    let placed = 0;
    for (const [t, table] of r.value.tables) {
      for (const c of table.chains.values()) {
        for (const rule of c.rules) {
          const at = lines[rule.source.line - 1]!;
          assert.ok(truth.get(t)?.has(at), `line ${rule.source.line} read as ${t}: ${at}`);
          placed++;
        }
      }
    }
    const left = r.diagnostics.filter((d) => d.code === "IPTABLES_TABLE_UNKNOWN");
    for (const d of left) {
      const at = lines[d.source!.line - 1]!;
      assert.ok(lineTables(at).length > 1, `left out, yet its table is certain: ${at}`);
      if (at.startsWith("-A ")) {
        assert.equal(d.severity, "warning");
        assert.ok([...truth].some(([t, s]) => s.has(at) && lineTables(at).includes(t)));
        assert.match(d.message, /iptables-save -t nat` \/ `iptables-save -t filter`/);
      }
    }
    const rules = lines.filter((l) => l.startsWith("-A ")).length;
    const leftRules = left.filter((d) => lines[d.source!.line - 1]!.startsWith("-A ")).length;
    assert.equal(placed + leftRules, rules, "every rule line is read or named as left out");
    return { r, leftRules };
  }

  it("reads each line into the table iptables-save -t shows it in, or names it as left out", async () => {
    await run(["iptables-restore"], readFileSync(RULES, "utf8"));
    const truth = await byTable();
    const grep = await run(["sh", "-c", "iptables-save | grep KUBE"]);
    const whole = check(grep, truth);
    // in the dump's order every line is placed: by its chain, its target, or its block
    assert.equal(whole.leftRules, 0);
    const nat = whole.r.value!.tables.get("nat")!;
    const filter = whole.r.value!.tables.get("filter")!;
    assert.ok(nat.chains.get("KUBE-SERVICES")!.rules.some((x) => /KUBE-SVC-/.test(x.source.text!)));
    assert.ok(!nat.chains.get("KUBE-SERVICES")!.rules.some((x) => /REJECT/.test(x.source.text!)));
    assert.ok(filter.chains.get("KUBE-SERVICES")!.rules.some((x) => /REJECT/.test(x.source.text!)));
    assert.equal(filter.chains.get("KUBE-NODEPORTS")!.rules.length, 1);
    assert.equal(nat.chains.get("KUBE-NODEPORTS")!.rules.length, 1);
    // sorted: the order that tells the tables apart is gone; what chains and targets leave open is
    // named, with the command that decides
    const sorted = await run(["sh", "-c", "iptables-save | grep KUBE | LC_ALL=C sort"]);
    const s = check(sorted, truth);
    assert.ok(s.leftRules > 0, "some lines of a sorted grep cannot be placed");
    assert.ok(s.r.value!.excerpt?.reasons.some((x) => /left out: `iptables-save -t nat`/.test(x)));
  });

  it("diagnose on a snapshot holding the grep cites its lines and concludes nothing the whole dump does not", async () => {
    await run(["iptables-restore"], readFileSync(join(SERVICE_PROBES, NODE_DUMP), "utf8"));
    const grep = await run(["sh", "-c", "iptables-save | grep KUBE"]);
    const root = join(tmp, "snap");
    cpSync(SERVICE_PROBES, root, { recursive: true });
    writeFileSync(join(root, NODE_DUMP), grep);
    const answer = async (dir: string): Promise<Answer> =>
      diagnose(loadSnapshot(openSnapshot(dir)));
    const whole = await answer(SERVICE_PROBES);
    const part = await answer(root);
    const serious = (a: Answer) =>
      new Set(a.findings.filter((f) => f.severity !== "info").map((f) => `${f.id} ${f.subject}`));
    for (const k of serious(part)) assert.ok(serious(whole).has(k), `only on the excerpt: ${k}`);
    // the no-endpoints REJECT is filter's, and cited at its line of the excerpt
    const lines = grep.split("\n");
    const noEp = part.findings.find((f) => f.id === "masq/service-no-endpoints");
    assert.ok(noEp, JSON.stringify(part.findings.map((f) => f.id)));
    for (const f of part.findings) {
      for (const e of f.evidence) {
        if (e.file !== NODE_DUMP || e.text === undefined) continue;
        assert.equal(lines[e.line - 1], e.text, `${f.id} cites line ${e.line} of the excerpt`);
      }
    }
    assert.ok(noEp.evidence.some((e) => e.file === NODE_DUMP && /-j REJECT/.test(e.text ?? "")));
  });
});
