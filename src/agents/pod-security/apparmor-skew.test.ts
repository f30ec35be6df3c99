/**
 * The API server's AppArmor annotation-to-field sync before admission (checked against the real
 * kube-apiserver by test/components/admission-dry-run.test.ts), and the prediction that uses it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { withAppArmorSkew } from "./apparmor-skew.ts";
import type { JsonObject } from "./pod-spec.ts";
import { predictAdmission } from "./predict.ts";

const pod = (annotation: string, extra: JsonObject = {}): JsonObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: "p",
    annotations: { "container.apparmor.security.beta.kubernetes.io/c": annotation },
  },
  spec: { ...extra, containers: [{ name: "c", image: "busybox" }] },
});

const profileOf = (p: JsonObject) =>
  (p["spec"] as { containers: { securityContext?: { appArmorProfile?: unknown } }[] })
    .containers[0]!.securityContext?.appArmorProfile;

describe("AppArmor annotations synced to fields, as the API server does (>= 1.30)", () => {
  it("copies each valid annotation value into the container's field", () => {
    assert.deepEqual(profileOf(withAppArmorSkew(pod("unconfined"), 36)), { type: "Unconfined" });
    assert.deepEqual(profileOf(withAppArmorSkew(pod("runtime/default"), 36)), {
      type: "RuntimeDefault",
    });
    assert.deepEqual(profileOf(withAppArmorSkew(pod("localhost/x"), 36)), {
      type: "Localhost",
      localhostProfile: "x",
    });
  });
  it("leaves invalid values, older clusters, Windows pods and pod-level duplicates alone", () => {
    for (const p of [
      withAppArmorSkew(pod("localhost/"), 36),
      withAppArmorSkew(pod("bogus"), 36),
      withAppArmorSkew(pod("unconfined"), 29),
      withAppArmorSkew(pod("unconfined", { os: { name: "windows" } }), 36),
      withAppArmorSkew(
        pod("unconfined", { securityContext: { appArmorProfile: { type: "Unconfined" } } }),
        36,
      ),
    ])
      assert.equal(profileOf(p), undefined);
  });
  it("so Pod Security names the field and the annotation, as the server's message does", () => {
    const p = predictAdmission(pod("unconfined"), {
      namespaceLabels: { "pod-security.kubernetes.io/enforce": "baseline" },
      version: "v1.36",
    });
    assert.equal(
      p?.podSecurity.message,
      'pods "p" is forbidden: violates PodSecurity "baseline:latest": forbidden AppArmor profiles (container "c" and annotation must not set AppArmor profile type to "Unconfined", "container.apparmor.security.beta.kubernetes.io/c="unconfined"")',
    );
  });
});

describe("procMount Unmasked needs hostUsers: false (API validation, >= 1.30)", () => {
  const unmasked = (hostUsers: boolean | undefined): JsonObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "u" },
    spec: {
      ...(hostUsers === undefined ? {} : { hostUsers }),
      containers: [{ name: "c", image: "i", securityContext: { procMount: "Unmasked" } }],
    },
  });
  it("rejects it in the host's user namespace with the server's words", () => {
    const p = predictAdmission(unmasked(undefined), { version: "v1.36" });
    assert.equal(p?.apiValidation.allowed, false);
    assert.equal(
      p?.apiValidation.message,
      'Pod "u" is invalid: spec.containers[0].securityContext.procMount: Invalid value: "Unmasked": `hostUsers` must be false to use `Unmasked`',
    );
    assert.equal(p?.allowed, "no");
  });
  it("accepts it with hostUsers: false, and does not claim it for older clusters", () => {
    assert.equal(
      predictAdmission(unmasked(false), { version: "v1.36" })?.apiValidation.allowed,
      true,
    );
    assert.equal(
      predictAdmission(unmasked(true), { version: "v1.29" })?.apiValidation.allowed,
      true,
    );
  });
});
