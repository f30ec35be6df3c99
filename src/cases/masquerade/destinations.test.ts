/**
 * Which destinations diagnose explains without `--dest`: on the lab's Service scenario
 * (fixtures/service-probes, a real kernel's snapshot with no Service objects and no far site), the
 * client pod's probes to Service addresses are traced, so their findings are given and no probe is
 * left unplaced; a probe to an address no evidence names as a Service stays untraced.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { unplacedFindings } from "../evidence/unplaced.ts";
import { explainMasquerade } from "./explain.ts";

const FIX = join(import.meta.dirname, "fixtures/service-probes");
const PROBES = "probes/pod-client-7c9d5b8f4-k2p9q.txt";
const tmp = mkdtempSync(join(tmpdir(), "pp-dests-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

const load = (root: string) => loadSnapshot(openSnapshot(root));
const toOf = (r: { paths: readonly { to: string; port?: number }[] }) =>
  r.paths.map((p) => `${p.to}:${p.port ?? ""}`);

describe("destinations without --dest: probes to Service addresses", () => {
  it("traces each probed Service address and gives its finding, citing the rule", async () => {
    const r = await explainMasquerade(load(FIX), {});
    const traced = toOf(r);
    for (const t of ["10.96.0.50:80", "10.96.0.1:443", "10.96.0.60:80"])
      assert.ok(
        traced.some((x) => x.includes(t)),
        `${t} traced: ${traced.join(" | ")}`,
      );
    const ids = r.findings.map((f) => f.id);
    assert.ok(ids.includes("masq/service-no-endpoints"), ids.join(","));
    assert.ok(ids.includes("masq/service-node-rejects"), ids.join(","));
    const rejects = r.findings.find((f) => f.id === "masq/service-node-rejects");
    assert.ok(
      rejects?.evidence.some(
        (e) => e.file === "nodes/worker-1/iptables-save.txt" && e.text?.includes("REJECT"),
      ),
    );
  });

  it("leaves no probe unplaced once its Service address is traced", async () => {
    const snap = load(FIX);
    const masq = await explainMasquerade(snap, {});
    const ev = unplacedFindings(snap, {}, masq);
    assert.ok(!ev.findings.some((f) => f.id === "evidence/unplaced"));
  });

  it("does not trace a probe target that no evidence names as a Service address", async () => {
    const root = mkdtempSync(join(tmp, "s-"));
    cpSync(FIX, root, { recursive: true });
    const file = join(root, PROBES);
    writeFileSync(file, readFileSync(file, "utf8").replaceAll("10.96.0.60", "10.97.0.60"));
    const r = await explainMasquerade(load(root), {});
    const traced = toOf(r);
    assert.ok(!traced.some((x) => x.includes("10.97.0.60")), traced.join(" | "));
    assert.ok(
      traced.some((x) => x.includes("10.96.0.1:443")),
      traced.join(" | "),
    );
  });

  it("with only a grep of the nat table's Service chains, traces the probed Services and says the excerpt decides", async () => {
    const root = mkdtempSync(join(tmp, "s-"));
    cpSync(FIX, root, { recursive: true });
    const file = join(root, "nodes/worker-1/iptables-save.txt");
    const lines = readFileSync(file, "utf8").split("\n");
    const nat = lines.slice(lines.indexOf("*nat"), lines.indexOf("COMMIT", lines.indexOf("*nat")));
    // as `iptables-save -t nat | grep -E 'KUBE-(SERVICES|SVC|SEP)'` prints it
    writeFileSync(file, `${nat.filter((l) => /KUBE-(SERVICES|SVC|SEP)/.test(l)).join("\n")}\n`);
    const r = await explainMasquerade(load(root), {});
    const traced = toOf(r);
    assert.ok(
      traced.some((x) => x.includes("10.96.0.50:80")),
      traced.join(" | "),
    );
    const undecided = r.findings.find((f) => f.id === "masq/source-undecided");
    assert.ok(undecided, r.findings.map((f) => f.id).join(","));
    assert.match(undecided.title, /it is an excerpt/);
  });

  it("leaves a VPN client's probes to the VPN case", async () => {
    const root = mkdtempSync(join(tmp, "s-"));
    cpSync(FIX, root, { recursive: true });
    const file = join(root, PROBES);
    const text = readFileSync(file, "utf8").split("\n").slice(1).join("\n");
    writeFileSync(file, `# client: laptop vpn-address: 10.8.0.2\n${text}`);
    const r = await explainMasquerade(load(root), {});
    assert.deepEqual(toOf(r), []);
  });
});
