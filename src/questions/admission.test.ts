/**
 * checkAdmission on the committed Pod Security fixtures: the policy each workload is checked
 * against and where it comes from, and unreadable input as AdmissionInputError.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseVersion } from "../agents/pod-security/policy-level.ts";
import { AdmissionInputError, checkAdmission } from "./admission.ts";

const MANIFESTS = join(
  import.meta.dirname,
  "..",
  "agents",
  "pod-security",
  "fixtures",
  "manifests",
);
const LATEST = { versionText: "latest", version: parseVersion("latest").version } as const;

describe("checkAdmission", () => {
  it("checks each workload against its Namespace's labels, or the level given", async () => {
    const file = join(MANIFESTS, "vpn-namespace-baseline.yaml");
    const byLabels = await checkAdmission(file, { ...LATEST, platform: "generic" });
    const dep = byLabels.results.find((r) => r.object.kind === "Deployment");
    assert.ok(dep);
    assert.match(dep.policySource, /^labels of Namespace vpn \(/);
    assert.equal(dep.prediction.podSecurity.level, "baseline");
    assert.equal(dep.denied, true);
    const given = await checkAdmission(file, {
      ...LATEST,
      level: "privileged",
      platform: "generic",
    });
    assert.ok(given.results.every((r) => r.policySource === "--level privileged --version latest"));
    assert.ok(given.results.every((r) => !r.denied));
  });

  it("throws AdmissionInputError for a file it cannot read", async () => {
    await assert.rejects(
      checkAdmission("/nonexistent/m.yaml", { ...LATEST, platform: "generic" }),
      (e: unknown) => e instanceof AdmissionInputError && /no such file/.test(e.message),
    );
  });
});
