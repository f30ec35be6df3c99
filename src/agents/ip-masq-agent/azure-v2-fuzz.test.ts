/**
 * Azure ip-masq-agent-v2's readers on mutated AKS objects and random config files: the volume
 * layout, the merge and the unread-key report never throw, and every diagnostic with a source
 * names a line inside its input.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { mutatedText } from "../../lab/test-helpers/text-mutations.ts";
import { readAzureV2Config } from "./azure-v2-config.ts";
import { unreadKeys } from "./config-keys.ts";
import { mergeConfigDir } from "./config-merge.ts";

const dir = fileURLToPath(new URL("./fixtures/aks/", import.meta.url));
const DS = readFileSync(`${dir}daemonset.yaml`, "utf8");
const CMS = readFileSync(`${dir}configmaps.yaml`, "utf8");
const PIECES = ["\n", ":", "- ", "  ", "configMap:", "items:", "optional: false", "{", "ip-masq"];
const flags = { nomasqAllReservedRanges: false, enableIpv6: true };

describe("Azure ip-masq-agent-v2 readers under fuzz", () => {
  it("mutated DaemonSet and ConfigMaps: no throw, diagnostics inside their file", () => {
    fc.assert(
      fc.property(mutatedText([DS], PIECES, 40), mutatedText([CMS], PIECES, 40), (ds, cms) => {
        const objects = [
          ...readKubeObjects(ds, "ds.yaml").value,
          ...readKubeObjects(cms, "cms.yaml").value,
        ];
        const r = readAzureV2Config(
          objects.find((o) => o.kind === "DaemonSet"),
          objects,
        );
        const lines = { "ds.yaml": ds.split("\n").length, "cms.yaml": cms.split("\n").length };
        for (const d of r.diagnostics) {
          if (!d.source) continue;
          const max = lines[d.source.file as keyof typeof lines];
          assert.ok(max !== undefined, d.source.file);
          assert.ok(d.source.line >= 1 && d.source.line <= max, `${d.code} ${d.source.line}`);
        }
      }),
      { numRuns: 150 },
    );
  });

  it("random config files: the merge and the key report never throw", () => {
    fc.assert(
      fc.property(fc.array(fc.string(), { maxLength: 3 }), (texts) => {
        const files = texts.map((content, i) => ({ name: `ip-masq-${i}`, content }));
        const r = mergeConfigDir(files, flags);
        assert.ok(r.error !== undefined || r.config.nonMasqueradeCIDRs !== null);
        for (const t of texts) unreadKeys(t, "azure-v2", undefined, "f");
      }),
      { numRuns: 300 },
    );
  });
});
