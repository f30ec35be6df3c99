/**
 * Every form iptables prints, made by the real iptables from the example node's rules (loaded into
 * a throwaway network namespace, `unshare -n`), handed to diagnose in place of iptables-save: no
 * form gives an error or warning finding that iptables-save does not, and the forms that show every
 * part the question needs (`-L -n -v`, `-S`, `iptables-save -c`) give the same exemption, citing
 * their own line of the RETURN for 10.0.0.0/8. Forms that hide parts leave the source undecided
 * with the command that decides it, or answer when what they hide does not matter.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { kernelSkip } from "../../lab/kernel-guard.ts";
import type { Answer } from "../../model/answer.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";

const EXAMPLE = join(import.meta.dirname, "../../../examples/snat-exception-list");
const NODE_DUMP = "nodes/gke-lab-default-0/iptables-save.txt";
const tmp = mkdtempSync(join(tmpdir(), "pp-forms-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

const FORMS: readonly { readonly args: string; readonly whole: boolean }[] = [
  { args: "iptables-save -c", whole: true },
  { args: "iptables -t nat -S", whole: true },
  { args: "iptables -t nat -L -n -v", whole: true },
  { args: "iptables -t nat -L -n -v -x --line-numbers", whole: true },
  { args: "iptables -t nat -L", whole: false },
  { args: "iptables -t nat -L -n", whole: false },
  { args: "iptables -t nat -L -v", whole: false },
  { args: "iptables -t nat -L --line-numbers", whole: false },
  { args: "iptables -t nat -L POSTROUTING -n -v", whole: false },
];

/** Loads the rules into a fresh network namespace and prints them with each form. */
function printForms(rules: string): Map<string, string> {
  const script = [
    "set -e",
    'iptables-restore -w < "$1"',
    ...FORMS.map((f, i) => `${f.args} > "$2/form-${i}.txt"`),
  ].join("\n");
  const rulesFile = join(tmp, "rules.txt");
  writeFileSync(rulesFile, rules);
  const r = spawnSync("unshare", ["-n", "sh", "-c", script, "sh", rulesFile, tmp], {
    encoding: "utf8",
    timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return new Map(FORMS.map((f, i) => [f.args, readFileSync(join(tmp, `form-${i}.txt`), "utf8")]));
}

async function diagnoseWith(text: string): Promise<Answer> {
  const root = mkdtempSync(join(tmp, "s-"));
  cpSync(EXAMPLE, root, { recursive: true });
  writeFileSync(join(root, NODE_DUMP), text);
  return diagnose(loadSnapshot(openSnapshot(root)));
}

const serious = (a: Answer) =>
  new Set(a.findings.filter((f) => f.severity !== "info").map((f) => `${f.id} ${f.subject}`));

describe("diagnose on every iptables listing form (real iptables)", { skip: kernelSkip() }, () => {
  it("no form gives an error or warning iptables-save does not; the whole forms give the same exemption", async () => {
    const save = readFileSync(join(EXAMPLE, NODE_DUMP), "utf8");
    const rules = save
      .split("\n")
      .filter((l) => !l.startsWith("#"))
      .join("\n");
    const baseline = await diagnoseWith(save);
    const whole = serious(baseline);
    assert.ok(whole.has("masq/exempt-destination node/gke-lab-default-0"));
    const forms = printForms(rules);
    for (const f of FORMS) {
      const text = forms.get(f.args)!;
      const a = await diagnoseWith(text);
      for (const k of serious(a)) assert.ok(whole.has(k), `${f.args}: ${k} only from this form`);
      const ex = a.findings.find((x) => x.id === "masq/exempt-destination");
      if (f.whole) {
        assert.ok(ex, `${f.args}: ${JSON.stringify(a.findings.map((x) => x.id))}`);
        const cited = text.split("\n")[(ex.evidence[0]?.line ?? 0) - 1] ?? "";
        assert.match(cited, /RETURN/, `${f.args} cites ${cited}`);
        assert.match(cited, /10\.0\.0\.0\/8/, `${f.args} cites ${cited}`);
      } else {
        const u = a.findings.find((x) => x.id === "masq/source-undecided");
        assert.ok(ex || u, `${f.args}: neither answered nor said what decides it`);
        if (u)
          assert.ok(
            u.next.some((n) => n.startsWith("iptables-save")),
            f.args,
          );
      }
    }
  });
});
