/**
 * The checks the upstream fixtures do not cover, against the expected reasons and details of
 * upstream's own unit tests (k8s.io/pod-security-admission policy/check_*_test.go @8f84a87c):
 * the pods below restate those test cases' inputs.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkPodSecurity } from "./evaluate.ts";
import type { JsonObject } from "./pod-spec.ts";
import { parseVersion } from "./policy-level.ts";

function violation(
  spec: JsonObject,
  check: string,
  opts: { level?: "baseline" | "restricted"; version?: string; annotations?: JsonObject } = {},
) {
  const pod = { kind: "Pod", metadata: { name: "p", annotations: opts.annotations ?? {} }, spec };
  const r = checkPodSecurity(pod, {
    level: opts.level ?? "baseline",
    version: parseVersion(opts.version ?? "latest").version,
  });
  return r?.violations.find((v) => v.check === check);
}

describe("Baseline checks worded as upstream", () => {
  it("seLinuxOptions: pod and containers with bad type, user and role", () => {
    const c = (name: string, o: JsonObject) => ({ name, securityContext: { seLinuxOptions: o } });
    const v = violation(
      {
        securityContext: { seLinuxOptions: { type: "foo", user: "bar", role: "baz" } },
        containers: [
          c("a", { type: "container_t" }),
          c("b", { type: "container_init_t" }),
          c("c", { type: "container_kvm_t" }),
          c("d", { type: "container_engine_t" }),
          c("e", { type: "bar" }),
          c("f", { user: "bar" }),
          c("g", { role: "baz" }),
        ],
      },
      "seLinuxOptions",
    );
    assert.equal(v?.reason, "seLinuxOptions");
    assert.equal(
      v?.detail,
      'pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set',
    );
    // container_engine_t is allowed from v1.31 only
    const old = violation(
      { containers: [c("d", { type: "container_engine_t" })] },
      "seLinuxOptions",
      { version: "v1.30" },
    );
    assert.equal(
      old?.detail,
      'container "d" set forbidden securityContext.seLinuxOptions: type "container_engine_t"',
    );
  });

  it("procMount: only non-Default values, sorted and de-duplicated", () => {
    const v = violation(
      {
        hostUsers: true,
        containers: [
          { name: "a" },
          { name: "b", securityContext: {} },
          { name: "c", securityContext: { procMount: "Default" } },
          { name: "d", securityContext: { procMount: "Unmasked" } },
          { name: "e", securityContext: { procMount: "other" } },
        ],
      },
      "procMount",
    );
    assert.equal(
      v?.detail,
      'containers "d", "e" must not set securityContext.procMount to "Unmasked", "other"',
    );
    const userns = violation(
      { hostUsers: false, containers: [{ name: "d", securityContext: { procMount: "Unmasked" } }] },
      "procMount",
    );
    assert.equal(userns, undefined);
  });

  it("appArmorProfile: forbidden annotations, sorted, and profile types", () => {
    const v = violation({ containers: [] }, "appArmorProfile", {
      annotations: {
        "container.apparmor.security.beta.kubernetes.io/": "bogus",
        "container.apparmor.security.beta.kubernetes.io/a": "",
        "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
        "container.apparmor.security.beta.kubernetes.io/c": "localhost/",
        "container.apparmor.security.beta.kubernetes.io/d": "localhost/foo",
        "container.apparmor.security.beta.kubernetes.io/e": "unconfined",
        "container.apparmor.security.beta.kubernetes.io/f": "unknown",
      },
    });
    assert.equal(v?.reason, "forbidden AppArmor profiles");
    assert.equal(
      v?.detail,
      'annotations must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/="bogus"", "container.apparmor.security.beta.kubernetes.io/e="unconfined"", "container.apparmor.security.beta.kubernetes.io/f="unknown""',
    );
    const pod = violation(
      { securityContext: { appArmorProfile: { type: "Unconfined" } }, containers: [] },
      "appArmorProfile",
    );
    assert.equal(pod?.reason, "forbidden AppArmor profile");
    assert.equal(pod?.detail, 'pod must not set AppArmor profile type to "Unconfined"');
    const init = violation(
      {
        initContainers: [
          { name: "bar", securityContext: { appArmorProfile: { type: "Unconfined" } } },
        ],
        containers: [],
      },
      "appArmorProfile",
    );
    assert.equal(
      init?.detail,
      'container "bar" must not set AppArmor profile type to "Unconfined"',
    );
  });

  it("seccompProfile_baseline: alpha annotations before v1.19, fields after", () => {
    const ann = violation(
      { containers: [{ name: "a" }, { name: "b" }] },
      "seccompProfile_baseline",
      {
        version: "v1.18",
        annotations: {
          "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
          "container.seccomp.security.alpha.kubernetes.io/a": "unconfined",
          "container.seccomp.security.alpha.kubernetes.io/b": "unknown",
        },
      },
    );
    assert.equal(
      ann?.detail,
      'forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", container.seccomp.security.alpha.kubernetes.io/b="unknown", seccomp.security.alpha.kubernetes.io/pod="unconfined"',
    );
    const fields = violation(
      {
        securityContext: { seccompProfile: { type: "Unconfined" } },
        containers: [
          { name: "a" },
          { name: "b", securityContext: { seccompProfile: { type: "RuntimeDefault" } } },
          { name: "c", securityContext: { seccompProfile: { type: "Unconfined" } } },
          { name: "d", securityContext: { seccompProfile: { type: "Unconfined" } } },
        ],
      },
      "seccompProfile_baseline",
    );
    assert.equal(
      fields?.detail,
      'pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"',
    );
  });

  it("windowsHostProcess: pod and containers", () => {
    const hp = { windowsOptions: { hostProcess: true } };
    const v = violation(
      {
        securityContext: hp,
        containers: [
          { name: "a" },
          { name: "b", securityContext: {} },
          { name: "c", securityContext: { windowsOptions: {} } },
          { name: "d", securityContext: { windowsOptions: { hostProcess: false } } },
          { name: "e", securityContext: hp },
          { name: "f", securityContext: hp },
        ],
      },
      "windowsHostProcess",
    );
    assert.equal(v?.reason, "hostProcess");
    assert.equal(
      v?.detail,
      'pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true',
    );
  });

  it("hostProbesAndHostLifecycle: from v1.34, hosts sorted across probes", () => {
    const spec = {
      containers: [
        {
          name: "a",
          livenessProbe: { httpGet: { host: "localhost" } },
          readinessProbe: { tcpSocket: { host: "127.0.0.1" } },
          startupProbe: { httpGet: { host: "::1" } },
        },
      ],
    };
    assert.equal(
      violation(spec, "hostProbesAndHostLifecycle")?.detail,
      'container "a" uses probe or lifecycle hosts "127.0.0.1", "::1", "localhost"',
    );
    assert.equal(violation(spec, "hostProbesAndHostLifecycle", { version: "v1.33" }), undefined);
    const two = violation(
      {
        containers: [
          { name: "invalid1", lifecycle: { postStart: { tcpSocket: { host: "a.com" } } } },
          { name: "invalid2", lifecycle: { preStop: { httpGet: { host: "b.com" } } } },
        ],
      },
      "hostProbesAndHostLifecycle",
    );
    assert.equal(
      two?.detail,
      'containers "invalid1", "invalid2" use probe or lifecycle hosts "a.com", "b.com"',
    );
  });
});

describe("Restricted checks worded as upstream", () => {
  it("runAsUser=0 from v1.23, pod and containers", () => {
    const spec = {
      securityContext: { runAsUser: 0 },
      containers: [{ name: "a", securityContext: { runAsUser: 0 } }],
    };
    assert.equal(
      violation(spec, "runAsUser", { level: "restricted" })?.detail,
      'pod and container "a" must not set runAsUser=0',
    );
    assert.equal(
      violation(spec, "runAsUser", { level: "restricted", version: "v1.22" }),
      undefined,
    );
  });

  it("runAsNonRoot=false names every setter", () => {
    const v = violation(
      {
        securityContext: { runAsNonRoot: false },
        containers: [{ name: "a", securityContext: { runAsNonRoot: false } }, { name: "b" }],
      },
      "runAsNonRoot",
      { level: "restricted" },
    );
    assert.equal(
      v?.detail,
      'pod and container "a" must not set securityContext.runAsNonRoot=false',
    );
  });

  it("exempts Windows pods from capabilities, allowPrivilegeEscalation and seccomp from v1.25", () => {
    const spec = {
      os: { name: "windows" },
      securityContext: { runAsNonRoot: true },
      containers: [{ name: "w" }],
    };
    const r = checkPodSecurity(
      { kind: "Pod", metadata: { name: "w" }, spec },
      { level: "restricted" },
    );
    assert.equal(r?.allowed, true, r?.detail);
    const old = checkPodSecurity(
      { kind: "Pod", metadata: { name: "w" }, spec },
      { level: "restricted", version: parseVersion("v1.24").version },
    );
    assert.deepEqual(
      old?.violations.map((v) => v.check),
      ["allowPrivilegeEscalation", "capabilities_restricted", "seccompProfile_restricted"],
    );
  });
});
