/**
 * Every manifest `plan vpn --write` writes, for each strategy, on the lab snapshots, is read by
 * the API server's strict field validation without an unknown field: the full patched manifests
 * as they are, and the strategic-merge patches merged into nothing (the workload's apiVersion and
 * kind around them, as the server decodes a patch's result). The patched manifests also pass
 * through `admission check` with no strict-decoding rejection.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import * as models from "@kubernetes/client-node";
import { parse } from "yaml";
import { strictDecoding } from "../../agents/kube-apiserver/strict-decoding.ts";
import { parseVersion } from "../../agents/pod-security/policy-level.ts";
import { memoryIo } from "../../cli/io.ts";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { checkAdmission } from "../../questions/admission.ts";

const LAB = new URL("./testdata/vpn-lab/", import.meta.url).pathname;
const tmp = mkdtempSync(join(tmpdir(), "podpath-plan-vpn-strict-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

describe("plan vpn --write: every manifest passes the API server's strict decoding", () => {
  for (const lab of ["baseline-ns", "forwarding-off", "set-by-hand", "no-masquerade"]) {
    for (const strategy of ["init-container", "pod-sysctls", "chart-value"]) {
      it(`${lab}, ${strategy}`, async () => {
        const dir = join(tmp, `${lab}-${strategy}`);
        const { run } = await import("../../cli/commands/plan-vpn.ts");
        const io = memoryIo();
        assert.equal(await run([join(LAB, lab)], { strategy, write: dir, output: "json" }, io), 0);
        const files = readdirSync(dir);
        const manifests = files.filter((f) => f.endsWith("-patched.yaml"));
        assert.ok(manifests.length > 0, files.join(", "));
        for (const f of files) {
          if (f.startsWith("values-")) continue; // Helm values, not an object
          const text = readFileSync(join(dir, f), "utf8");
          let doc = parse(text) as Record<string, unknown>;
          if (f.startsWith("patch-")) {
            const whole = parse(readFileSync(join(dir, manifests[0]!), "utf8"));
            doc = { apiVersion: whole.apiVersion, kind: whole.kind, ...doc };
          }
          const [obj] = readKubeObjects(JSON.stringify(doc), f).value;
          assert.ok(obj, f);
          const d = strictDecoding(models, obj);
          assert.equal(d.state, "ok", `${f}: ${d.state === "rejected" ? d.message : ""}`);
        }
        for (const f of manifests) {
          const { results } = await checkAdmission(join(dir, f), {
            versionText: "latest",
            version: parseVersion("latest").version,
            level: "privileged",
            platform: "generic",
          });
          assert.ok(results.length > 0);
          assert.ok(
            results.every((r) => r.strictDecoding === undefined),
            f,
          );
        }
      });
    }
  }
});
