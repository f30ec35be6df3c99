import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { parse } from "yaml";
import { admit, checkPodSecurity } from "./evaluate.ts";
import type { JsonObject } from "./pod-spec.ts";
import { parseVersion, policyFromLabels } from "./policy-level.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
const UPSTREAM = join(FIXTURES, "psa-upstream");

interface FixtureEntry {
  path: string;
  level: "baseline" | "restricted";
  version: string;
  expect: "pass" | "fail";
  check: string;
  expectErrorSubstring: string | null;
}

const index = JSON.parse(readFileSync(join(UPSTREAM, "index.json"), "utf8")) as {
  fixtures: FixtureEntry[];
};

function load(path: string): JsonObject {
  return parse(readFileSync(path, "utf8")) as JsonObject;
}

describe("checkPodSecurity against the upstream PSA fixtures", () => {
  it("has the whole fixture set", () => {
    assert.equal(index.fixtures.length, 614);
  });
  for (const f of index.fixtures) {
    it(`${f.path} ${f.expect}s at ${f.level}:${f.version}`, () => {
      const { version, error } = parseVersion(f.version);
      assert.equal(error, undefined);
      const r = checkPodSecurity(load(join(UPSTREAM, f.path)), { level: f.level, version });
      assert.ok(r);
      if (f.expect === "pass") {
        assert.equal(r.allowed, true, r.message);
        assert.equal(r.message, "");
      } else {
        assert.equal(r.allowed, false);
        // the named check is among the failures (restricted >= v1.22 replaces capabilities_baseline
        // by capabilities_restricted; some tweaks, e.g. privileged, also drop other settings)
        const failed = r.violations.map((v) => v.check.toLowerCase());
        const named =
          f.check === "capabilities_baseline" &&
          f.level === "restricted" &&
          version.latest === false &&
          version.minor >= 22
            ? "capabilities_restricted"
            : f.check;
        assert.ok(failed.includes(named), `${f.check} not in ${failed.join(",")}`);
        assert.ok(
          r.message.includes(f.expectErrorSubstring ?? f.check),
          `${r.message} lacks ${f.expectErrorSubstring}`,
        );
        assert.ok(
          r.message.startsWith(
            `pods "${f.path.split("/").at(-1)!.replace(".yaml", "")}" is forbidden: violates PodSecurity "${f.level}:${f.version}": `,
          ),
        );
      }
      // the privileged level admits everything
      assert.equal(
        checkPodSecurity(load(join(UPSTREAM, f.path)), { level: "privileged", version })?.allowed,
        true,
      );
    });
  }
});

describe("checkPodSecurity messages", () => {
  const pod = (spec: JsonObject, name = "sec-ctx-demo"): JsonObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec,
  });

  it("words a privileged container under restricted exactly as the API server (rancher/k3k#294)", () => {
    const r = checkPodSecurity(
      pod({
        containers: [
          { name: "sec-ctx-demo", image: "busybox", securityContext: { privileged: true } },
        ],
      }),
      { level: "restricted" },
    );
    assert.equal(
      r?.message,
      'pods "sec-ctx-demo" is forbidden: violates PodSecurity "restricted:latest": privileged (container "sec-ctx-demo" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container "sec-ctx-demo" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "sec-ctx-demo" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "sec-ctx-demo" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "sec-ctx-demo" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
    );
  });

  it("rejects the OpenVPN sysctl pod under baseline with both reasons, sorted by check id", () => {
    const obj = load(join(FIXTURES, "openvpn", "openvpn-pod-sysctl-variant.yaml"));
    const r = checkPodSecurity(obj, { level: "baseline" });
    assert.equal(
      r?.message,
      'pods "vpn-openvpn-sysctl" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities (container "openvpn" must not include "NET_ADMIN" in securityContext.capabilities.add), forbidden sysctls (net.ipv4.ip_forward)',
    );
  });

  it("warns for the rendered chart Deployment and names the privileged init container", () => {
    const obj = load(
      join(FIXTURES, "openvpn", "stable-openvpn-4.2.5-rendered-ipForwardInitContainer.yaml"),
    );
    const r = checkPodSecurity(obj, { level: "baseline" });
    assert.equal(
      r?.message,
      'Warning: would violate PodSecurity "baseline:latest": non-default capabilities (container "openvpn" must not include "NET_ADMIN" in securityContext.capabilities.add), privileged (container "sysctl" must not set securityContext.privileged=true)',
    );
    const rr = checkPodSecurity(obj, { level: "restricted" });
    assert.match(
      rr?.detail ?? "",
      /unrestricted capabilities \(containers "sysctl", "openvpn" must set securityContext.capabilities.drop=\["ALL"\]; container "openvpn" must not include "NET_ADMIN" in securityContext.capabilities.add\)/,
    );
  });

  it("knows which policy version first allows a sysctl", () => {
    const p = pod({
      securityContext: { sysctls: [{ name: "net.ipv4.tcp_rmem", value: "4096 87380 6291456" }] },
      containers: [{ name: "c" }],
    });
    const at = (v: string) =>
      checkPodSecurity(p, { level: "baseline", version: parseVersion(v).version });
    assert.equal(at("v1.31")?.detail, "forbidden sysctls (net.ipv4.tcp_rmem)");
    assert.equal(checkPodSecurity(p, { level: "baseline", version: "v1.31" })?.allowed, false);
    assert.equal(at("v1.32")?.allowed, true);
    assert.equal(at("latest")?.allowed, true);
  });

  it("does not normalise slash-separated sysctl names (upstream compares the raw name)", () => {
    const p = pod({
      securityContext: { sysctls: [{ name: "net/ipv4/tcp_syncookies", value: "1" }] },
      containers: [{ name: "c" }],
    });
    assert.equal(
      checkPodSecurity(p, { level: "baseline" })?.detail,
      "forbidden sysctls (net/ipv4/tcp_syncookies)",
    );
  });

  it("words hostPort, hostPath and volume types with upstream plurals", () => {
    const p = pod({
      containers: [
        { name: "a", ports: [{ containerPort: 80, hostPort: 8080 }, { hostPort: 443 }] },
        { name: "b", ports: [{ hostPort: 8080 }] },
      ],
      volumes: [
        { name: "h", hostPath: { path: "/" } },
        { name: "n", nfs: { server: "x" } },
      ],
    });
    const r = checkPodSecurity(p, { level: "baseline" });
    assert.equal(
      r?.detail,
      'hostPath volumes (volume "h"), hostPort (containers "a", "b" use hostPorts 443, 8080)',
    );
    const rr = checkPodSecurity(p, { level: "restricted", version: parseVersion("v1.0").version });
    assert.match(
      rr?.detail ?? "",
      /restricted volume types \(volumes "h", "n" use restricted volume types "hostPath", "nfs"\)/,
    );
    assert.doesNotMatch(rr?.detail ?? "", /hostPath volumes/);
  });

  it("relaxes runAsNonRoot for user-namespace pods from v1.35 only", () => {
    const p = pod({
      hostUsers: false,
      securityContext: { seccompProfile: { type: "RuntimeDefault" } },
      containers: [
        {
          name: "c",
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
        },
      ],
    });
    assert.equal(
      checkPodSecurity(p, { level: "restricted", version: parseVersion("v1.35").version })?.allowed,
      true,
    );
    assert.equal(
      checkPodSecurity(p, { level: "restricted", version: parseVersion("v1.34").version })?.detail,
      'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)',
    );
  });

  it("covers every pod controller kind", () => {
    const spec = { containers: [{ name: "c", securityContext: { privileged: true } }] };
    const template = { metadata: {}, spec };
    const objs: JsonObject[] = [
      { kind: "Deployment", metadata: { name: "d" }, spec: { template } },
      { kind: "DaemonSet", metadata: { name: "d" }, spec: { template } },
      { kind: "StatefulSet", metadata: { name: "d" }, spec: { template } },
      { kind: "ReplicaSet", metadata: { name: "d" }, spec: { template } },
      { kind: "Job", metadata: { name: "d" }, spec: { template } },
      { kind: "CronJob", metadata: { name: "d" }, spec: { jobTemplate: { spec: { template } } } },
    ];
    for (const o of objs) {
      const r = checkPodSecurity(o, { level: "baseline" });
      assert.equal(r?.allowed, false, String(o["kind"]));
      assert.match(
        r?.message ?? "",
        /^Warning: would violate PodSecurity "baseline:latest": privileged/,
      );
    }
    assert.equal(
      checkPodSecurity({ kind: "ConfigMap", metadata: { name: "x" } }, { level: "baseline" }),
      undefined,
    );
  });

  it("checks a bare PodSpec as an unnamed pod", () => {
    const r = checkPodSecurity(
      { hostNetwork: true, containers: [{ name: "c" }] },
      { level: "baseline" },
    );
    assert.equal(
      r?.message,
      'pods is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)',
    );
  });

  it("never throws on arbitrary JSON shaped like a pod", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (spec, sc) => {
        const o = {
          kind: "Pod",
          metadata: { name: "x" },
          spec: { containers: [{ name: "c", securityContext: sc }], securityContext: spec },
        };
        const r = checkPodSecurity(o as JsonObject, { level: "restricted" });
        assert.ok(r);
      }),
    );
  });
});

describe("policyFromLabels and admit", () => {
  it("defaults warn to a stricter enforce level, as upstream", () => {
    const { policy } = policyFromLabels({ "pod-security.kubernetes.io/enforce": "baseline" });
    assert.equal(policy.warn.level, "baseline");
    assert.equal(policy.audit.level, "privileged");
  });

  it("treats a bad enforce level as restricted and reports the label", () => {
    const { policy, errors } = policyFromLabels({ "pod-security.kubernetes.io/enforce": "strict" });
    assert.equal(policy.enforce.level, "restricted");
    assert.equal(errors.length, 1);
    assert.match(errors[0]!, /must be one of privileged, baseline, restricted/);
  });

  it("rejects a violating pod under enforce but only warns for its Deployment", () => {
    const { policy } = policyFromLabels({ "pod-security.kubernetes.io/enforce": "baseline" });
    const spec = { containers: [{ name: "c", securityContext: { privileged: true } }] };
    const podR = admit({ kind: "Pod", metadata: { name: "p" }, spec }, policy);
    assert.equal(podR?.allowed, false);
    assert.match(
      podR?.error ?? "",
      /^pods "p" is forbidden: violates PodSecurity "baseline:latest": privileged/,
    );
    assert.deepEqual(podR?.warnings, []);
    const depR = admit(
      { kind: "Deployment", metadata: { name: "d" }, spec: { template: { spec } } },
      policy,
    );
    assert.equal(depR?.allowed, true);
    assert.equal(depR?.warnings.length, 1);
    assert.match(depR?.podError ?? "", /forbidden: violates PodSecurity "baseline:latest"/);
  });
});
