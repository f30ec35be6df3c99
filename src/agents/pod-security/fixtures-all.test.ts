/**
 * Every upstream Pod Security fixture (all levels, versions v1.0–v1.37 and checks), packed in
 * fixtures/psa-upstream-testdata.json (see fixtures/README.md), judged by upstream's own criterion
 * (test/run.go): pass fixtures are admitted; fail fixtures are rejected with an error containing
 * the check's expectErrorSubstring (test/fixtures_*.go; default: the check id).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { checkPodSecurity } from "./evaluate.ts";
import type { JsonObject } from "./pod-spec.ts";

const data = JSON.parse(
  readFileSync(join(import.meta.dirname, "fixtures", "psa-upstream-testdata.json"), "utf8"),
) as { commit: string; files: Record<string, string>; contents: Record<string, string> };

/** expectErrorSubstring per fixture file prefix (lower-cased check id), from test/fixtures_*.go. */
const EXPECT: Readonly<Record<string, string>> = {
  allowprivilegeescalation: "allowPrivilegeEscalation",
  apparmorprofile: "forbidden AppArmor profile",
  capabilities_baseline: "capabilities",
  capabilities_restricted: "unrestricted capabilities",
  hostnamespaces: "host namespaces",
  hostpathvolumes: "hostPath",
  hostports: "hostPort",
  hostprobesandhostlifecycle: "probe or lifecycle host",
  privileged: "privileged",
  procmount: "procMount",
  procmount_restricted: "procMount",
  restrictedvolumes: "restricted volume types",
  runasnonroot: "runAsNonRoot",
  runasuser: "runAsUser",
  seccompprofile_baseline: "seccompProfile",
  seccompprofile_restricted: "seccompProfile",
  selinuxoptions: "seLinuxOptions",
  sysctls: "forbidden sysctl",
  windowshostprocess: "hostProcess",
};

const paths = Object.keys(data.files).sort();

describe(`all upstream Pod Security fixtures (kubernetes/pod-security-admission@${data.commit.slice(0, 8)})`, () => {
  it("holds the whole upstream set", () => {
    assert.equal(paths.length, 4537);
    const versions = new Set(paths.map((p) => p.split("/")[1]));
    assert.equal(versions.size, 38); // v1.0 … v1.37
  });

  const byVersion = new Map<string, string[]>();
  for (const p of paths) {
    const [level, version] = p.split("/");
    const key = `${level}:${version}`;
    byVersion.set(key, [...(byVersion.get(key) ?? []), p]);
  }
  for (const [key, list] of byVersion) {
    it(`${key}: ${list.length} fixtures`, () => {
      const failures: string[] = [];
      for (const p of list) {
        const [level, version, expect, file] = p.split("/") as [string, string, string, string];
        const pod = parse(data.contents[data.files[p]!]!) as JsonObject;
        const r = checkPodSecurity(pod, { level: level as "baseline" | "restricted", version });
        if (!r) {
          failures.push(`${p}: not read as a pod`);
          continue;
        }
        if (expect === "pass") {
          if (!r.allowed) failures.push(`${p}: expected allowed, got ${r.message}`);
          continue;
        }
        const check = file.replace(/[0-9]*\.yaml$/, "");
        const want = EXPECT[check];
        if (want === undefined) failures.push(`${p}: no expectation for check ${check}`);
        else if (r.allowed)
          failures.push(`${p}: expected rejection containing ${JSON.stringify(want)}`);
        else if (!r.message.includes(want))
          failures.push(`${p}: ${r.message} lacks ${JSON.stringify(want)}`);
      }
      assert.deepEqual(failures, []);
    });
  }
});
