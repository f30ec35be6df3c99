import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { parse } from "yaml";
import { readKubeletSysctlConfig } from "./kubelet-config.ts";
import {
  kubeletAdmitSysctls,
  kubeletSafeSysctls,
  normalizeSysctlName,
  sysctlNamespace,
  sysctlPatternError,
} from "./kubelet-sysctls.ts";
import type { JsonObject } from "./pod-spec.ts";
import { predictAdmission } from "./predict.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "openvpn");
const load = (f: string) => parse(readFileSync(join(FIXTURES, f), "utf8")) as JsonObject;
const sysctlPod = load("openvpn-pod-sysctl-variant.yaml");
const initDeployment = load("stable-openvpn-4.2.5-rendered-ipForwardInitContainer.yaml");

describe("kubelet sysctl rules", () => {
  it("keeps net.ipv4.ip_forward out of the safe set at every version", () => {
    for (let minor = 0; minor <= 37; minor++) {
      assert.equal(kubeletSafeSysctls(minor).includes("net.ipv4.ip_forward"), false);
    }
    assert.equal(kubeletSafeSysctls(26).length, 5);
    assert.equal(kubeletSafeSysctls(32).includes("net.ipv4.tcp_rmem"), true);
    assert.equal(kubeletSafeSysctls(32, "4.14.0").includes("net.ipv4.tcp_rmem"), false);
  });

  it("normalises slash notation as the kubelet does", () => {
    assert.equal(
      normalizeSysctlName("net/ipv4/conf/eno2.100/rp_filter"),
      "net.ipv4.conf.eno2/100.rp_filter",
    );
    assert.equal(normalizeSysctlName("net.ipv4.ip_forward"), "net.ipv4.ip_forward");
  });

  it("classifies namespaced and node-level sysctls", () => {
    assert.equal(sysctlNamespace("net.ipv4.ip_forward"), "net");
    assert.equal(sysctlNamespace("kernel.msgmax"), "ipc");
    assert.equal(sysctlNamespace("fs.mqueue.msg_max"), "ipc");
    assert.equal(sysctlNamespace("vm.swappiness"), undefined);
    assert.equal(sysctlNamespace("network.x"), undefined);
  });

  it("rejects an unlisted sysctl with the kubelet's words, and admits it through a pattern", () => {
    const s = [{ name: "net.ipv4.ip_forward", value: "1" }];
    const no = kubeletAdmitSysctls(s, { allowedUnsafe: [], kubernetesMinor: 30 });
    assert.deepEqual(no, {
      kind: "forbidden",
      sysctl: "net.ipv4.ip_forward",
      message: 'forbidden sysctl: "net.ipv4.ip_forward" not allowlisted',
    });
    for (const p of ["net.ipv4.ip_forward", "net.ipv4.*", "net.*"]) {
      assert.equal(
        kubeletAdmitSysctls(s, { allowedUnsafe: [p], kubernetesMinor: 30 }).kind,
        "ok",
        p,
      );
    }
    assert.equal(
      kubeletAdmitSysctls(s, { allowedUnsafe: ["net.ipv6.*"], kubernetesMinor: 30 }).kind,
      "forbidden",
    );
  });

  it("refuses net sysctls on hostNetwork pods, wording the namespace per version", () => {
    const s = [{ name: "net.ipv4.ip_local_port_range", value: "1024 65535" }];
    const old = kubeletAdmitSysctls(s, {
      allowedUnsafe: [],
      kubernetesMinor: 27,
      hostNetwork: true,
    });
    assert.equal(
      old.kind === "forbidden" && old.message,
      'forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host net enabled',
    );
    const now = kubeletAdmitSysctls(s, {
      allowedUnsafe: [],
      kubernetesMinor: 30,
      hostNetwork: true,
    });
    assert.equal(
      now.kind === "forbidden" && now.message,
      'forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host Net enabled',
    );
  });

  it("names the IPC namespace as the kubelet prints it", () => {
    const s = [{ name: "kernel.shm_rmid_forced", value: "1" }];
    const v = kubeletAdmitSysctls(s, { allowedUnsafe: [], kubernetesMinor: 30, hostIPC: true });
    assert.equal(
      v.kind === "forbidden" && v.message,
      'forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled',
    );
  });

  it("validates allowlist patterns as the kubelet does at start", () => {
    assert.equal(sysctlPatternError("net.*"), undefined);
    assert.equal(sysctlPatternError("kernel.msg*"), undefined);
    assert.match(sysctlPatternError("vm.swappiness") ?? "", /not known to be namespaced/);
    assert.match(sysctlPatternError("net.*.x") ?? "", /must have at most 253 characters/);
  });
});

describe("readKubeletSysctlConfig", () => {
  it("reads a KubeletConfiguration with the line of the field", () => {
    const text =
      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nallowedUnsafeSysctls:\n  - net.ipv4.ip_forward\n";
    const r = readKubeletSysctlConfig(text, "nodes/n1/kubelet-config.yaml");
    assert.deepEqual(r.value?.allowedUnsafeSysctls, ["net.ipv4.ip_forward"]);
    assert.equal(r.value?.source.line, 3);
    assert.deepEqual(r.diagnostics, []);
  });

  it("reads configz JSON and the command-line flag", () => {
    const z = readKubeletSysctlConfig(
      '{"kubeletconfig":{"allowedUnsafeSysctls":["net.*"],"clusterDNS":["10.0.0.10"]}}',
      "configz.json",
    );
    assert.deepEqual(z.value?.allowedUnsafeSysctls, ["net.*"]);
    const f = readKubeletSysctlConfig(
      "/usr/bin/kubelet --v=2\n  --allowed-unsafe-sysctls='kernel.msg*,net.core.somaxconn'\n",
      "kubelet.cmdline",
    );
    assert.deepEqual(f.value?.allowedUnsafeSysctls, ["kernel.msg*", "net.core.somaxconn"]);
    assert.equal(f.value?.source.line, 2);
  });

  it("defaults to an empty list and flags patterns the kubelet would refuse", () => {
    const d = readKubeletSysctlConfig(
      "kind: KubeletConfiguration\nclusterDNS: [10.0.0.10]\n",
      "k.yaml",
    );
    assert.deepEqual(d.value?.allowedUnsafeSysctls, []);
    const bad = readKubeletSysctlConfig(
      "kind: KubeletConfiguration\nallowedUnsafeSysctls: [vm.swappiness]\n",
      "k.yaml",
    );
    assert.equal(bad.diagnostics[0]?.code, "KUBELET_SYSCTL_PATTERN");
    assert.match(bad.diagnostics[0]?.message ?? "", /^k\.yaml:2: /);
  });

  it("never throws on arbitrary text", () => {
    fc.assert(
      fc.property(fc.string(), (t) => {
        readKubeletSysctlConfig(t, "x");
      }),
    );
  });
});

describe("predictAdmission", () => {
  it("without a kubelet config, calls the sysctl fix unknown and names the command", () => {
    const p = predictAdmission(sysctlPod);
    assert.equal(p?.podSecurity.allowed, true); // no labels: privileged
    assert.equal(p?.kubelet.outcome, "unknown");
    assert.equal(p?.kubelet.command, "kubectl get --raw /api/v1/nodes/NODE/proxy/configz");
    assert.match(p?.kubelet.needs ?? "", /allowedUnsafeSysctls: \["net.ipv4.ip_forward"\]/);
    assert.equal(p?.allowed, "unknown");
  });

  it("predicts SysctlForbidden with the kubelet's message when the node does not allow it", () => {
    const cfg = readKubeletSysctlConfig(
      "kind: KubeletConfiguration\nallowedUnsafeSysctls: []\n",
      "nodes/n1/kubelet.yaml",
      "n1",
    ).value!;
    const p = predictAdmission(sysctlPod, { kubeletConfig: cfg });
    assert.equal(p?.kubelet.outcome, "SysctlForbidden");
    assert.match(
      p?.kubelet.message ?? "",
      /Pod was rejected: forbidden sysctl: "net.ipv4.ip_forward" not allowlisted/,
    );
    assert.equal(p?.kubelet.command, "kubectl get --raw /api/v1/nodes/n1/proxy/configz");
    assert.equal(p?.allowed, "no");
    const ok = predictAdmission(sysctlPod, {
      kubeletConfig: readKubeletSysctlConfig(
        "kind: KubeletConfiguration\nallowedUnsafeSysctls: ['net.ipv4.*']\n",
        "k.yaml",
      ).value!,
    });
    assert.equal(ok?.allowed, "yes");
  });

  it("takes level and version from namespace labels", () => {
    const p = predictAdmission(sysctlPod, {
      namespaceLabels: {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": "v1.29",
      },
    });
    assert.equal(p?.podSecurity.allowed, false);
    assert.equal(
      p?.podSecurity.message,
      'pods "vpn-openvpn-sysctl" is forbidden: violates PodSecurity "baseline:v1.29": non-default capabilities (container "openvpn" must not include "NET_ADMIN" in securityContext.capabilities.add), forbidden sysctls (net.ipv4.ip_forward)',
    );
  });

  it("rejects the privileged init container on GKE Autopilot with Warden's message", () => {
    const p = predictAdmission(initDeployment, { platform: "gke-autopilot" });
    assert.equal(p?.autopilot?.allowed, false);
    assert.deepEqual(
      p?.autopilot?.violations.map((v) => v.constraint),
      ["autogke-disallow-privilege", "autogke-default-linux-capabilities"],
    );
    assert.match(
      p?.autopilot?.message ?? "",
      /\[denied by autogke-disallow-privilege\]":\["container sysctl is privileged; not allowed in Autopilot"\]/,
    );
    assert.equal(p?.allowed, "no");
    const withNetAdmin = predictAdmission(initDeployment, {
      platform: "gke-autopilot",
      allowNetAdmin: true,
    });
    assert.equal(withNetAdmin?.autopilot?.violations.length, 1);
  });

  it("reports API validation for net sysctls on hostNetwork pods from 1.29", () => {
    const pod = {
      kind: "Pod",
      metadata: { name: "h" },
      spec: {
        hostNetwork: true,
        securityContext: { sysctls: [{ name: "net.ipv4.ip_forward", value: "1" }] },
        containers: [{ name: "c" }],
      },
    };
    const p = predictAdmission(pod, { version: "v1.30" });
    assert.equal(
      p?.apiValidation.message,
      `Pod "h" is invalid: spec.securityContext.sysctls[0].name: Invalid value: "net.ipv4.ip_forward": may not be specified when 'hostNetwork' is true`,
    );
    assert.equal(predictAdmission(pod, { version: "v1.28" })?.apiValidation.allowed, true);
  });

  it("accepts a bare PodSpec", () => {
    const p = predictAdmission(
      { containers: [{ name: "c", securityContext: { privileged: true } }] },
      {
        namespaceLabels: { "pod-security.kubernetes.io/enforce": "restricted" },
      },
    );
    assert.equal(p?.podSecurity.allowed, false);
    assert.equal(p?.podSecurity.violations[0]?.check, "privileged");
  });
});

describe("predictAdmission and the cluster version", () => {
  it("evaluates `latest` as the cluster's own minor version", () => {
    const pod = {
      kind: "Pod",
      metadata: { name: "k" },
      spec: {
        securityContext: { sysctls: [{ name: "net.ipv4.tcp_keepalive_time", value: "600" }] },
        containers: [{ name: "c" }],
      },
    };
    const labels = { "pod-security.kubernetes.io/enforce": "baseline" };
    assert.equal(
      predictAdmission(pod, { namespaceLabels: labels, version: "v1.28" })?.podSecurity.allowed,
      false,
    );
    assert.equal(
      predictAdmission(pod, { namespaceLabels: labels, version: "v1.28" })?.podSecurity.message,
      'pods "k" is forbidden: violates PodSecurity "baseline:latest": forbidden sysctls (net.ipv4.tcp_keepalive_time)',
    );
    assert.equal(
      predictAdmission(pod, { namespaceLabels: labels, version: "v1.29" })?.podSecurity.allowed,
      true,
    );
  });
});

describe("predictAdmission on arbitrary input", () => {
  it("never throws, whatever the spec holds", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), fc.boolean(), (sc, containers, hostNetwork) => {
        const spec = {
          hostNetwork,
          securityContext: sc,
          containers: Array.isArray(containers) ? containers : [containers],
        };
        predictAdmission({ kind: "Pod", metadata: { name: "x" }, spec } as JsonObject, {
          namespaceLabels: { "pod-security.kubernetes.io/enforce": "restricted" },
          platform: "gke-autopilot",
          version: "v1.30",
        });
      }),
    );
  });
});
