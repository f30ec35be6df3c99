/**
 * A node read from its nftables listing answers diagnose's path questions as the node read from
 * the same rules' iptables dump: the seed example's node with iptables-nft's fixture rules (a
 * FORWARD REJECT that only `-i cbr0` escapes, a Service's DNAT), once as `iptables-save` and once
 * as the real `nft list ruleset` of the same rules. The findings are the same; the nftables
 * node's cite its listing.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseIp } from "../net/cidr.ts";
import { diagnose } from "../questions/diagnose.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { nftPathRuleset } from "./node-path.ts";

const EXAMPLE = join(import.meta.dirname, "../../examples/snat-exception-list");
const NODE = "gke-lab-default-0";
const fixture = (name: string) =>
  readFileSync(new URL(`../nftables/fixtures/${name}`, import.meta.url), "utf8");
const tmp = mkdtempSync(join(tmpdir(), "pp-nftpath-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

function snapshotWith(files: Record<string, string>) {
  const root = mkdtempSync(join(tmp, "s-"));
  cpSync(EXAMPLE, root, { recursive: true });
  rmSync(join(root, "nodes", NODE, "iptables-save.txt"));
  for (const [name, text] of Object.entries(files))
    writeFileSync(join(root, "nodes", NODE, name), text);
  return loadSnapshot(openSnapshot(root));
}

describe("nodePathEvaluator on a node whose rules are read from nftables", () => {
  const ipt = snapshotWith({ "iptables-save.txt": fixture("iptables-nft.save.txt") });
  const nft = snapshotWith({ "nft-ruleset.txt": fixture("iptables-nft.nft") });

  it("reads the whole path from the listing when the kernel's rules are all in it", () => {
    const node = nft.nodes.get(NODE)!;
    assert.equal(node.natFrom, "nftables");
    assert.ok(nftPathRuleset(node));
    assert.equal(nftPathRuleset(ipt.nodes.get(NODE)!), undefined);
  });

  for (const dest of ["10.20.30.40:5432", "10.96.0.10:53"]) {
    it(`gives the same findings as the iptables-mode node toward ${dest}`, async () => {
      const [ip, port] = dest.split(":");
      const opts = { dest: { ip: parseIp(ip!), port: Number(port), text: dest } };
      const a = await diagnose(ipt, opts);
      const b = await diagnose(nft, opts);
      // intent-rules-drift compares the ip-masq-agent ConfigMap with the IP-MASQ-AGENT chain of
      // an iptables dump: a question of the dump, not of the path
      const ids = (x: typeof a) =>
        x.findings
          .filter((f) => f.id !== "masq/intent-rules-drift")
          .map((f) => `${f.id} ${f.severity}`)
          .sort();
      assert.deepEqual(ids(b), ids(a));
      const blocks = b.findings.find((f) => f.id === "masq/filter-blocks");
      assert.ok(blocks, ids(b).join(", "));
      assert.ok(
        blocks.evidence.some((e) => e.file.endsWith("nft-ruleset.txt")),
        JSON.stringify(blocks.evidence),
      );
    });
  }
});
