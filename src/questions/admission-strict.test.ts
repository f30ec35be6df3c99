/**
 * checkAdmission reads manifests as the API server does (strict field validation before
 * admission, with the server's own messages from the upstream reports in
 * agents/kube-apiserver/fixtures), and a kubelet config the kubelet refuses admits no pod.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseVersion } from "../agents/pod-security/policy-level.ts";
import { memoryIo } from "../cli/io.ts";
import { checkAdmission } from "./admission.ts";

const LATEST = { versionText: "latest", version: parseVersion("latest").version } as const;
const PRIVILEGED = { ...LATEST, level: "privileged", platform: "generic" } as const;
const FIXTURES = join(import.meta.dirname, "../agents/kube-apiserver/fixtures");
const tmp = mkdtempSync(join(tmpdir(), "podpath-admission-strict-"));
after(() => rmSync(tmp, { recursive: true, force: true }));
const write = (name: string, text: string) => {
  const f = join(tmp, name);
  writeFileSync(f, text);
  return f;
};

const MISPLACED = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: vpn-openvpn
  namespace: vpn
spec:
  selector:
    matchLabels: {app: openvpn}
  template:
    metadata:
      labels: {app: openvpn}
    spec:
      containers:
        - name: openvpn
          image: jfelten/openvpn-docker:1.1.0
          sysctls:
            - name: net.ipv4.ip_forward
              value: "1"
`;

describe("admission check: strict field validation before admission", () => {
  it("sysctls under a container: rejected with the server's message and the field's line, though Pod Security would allow it", async () => {
    const file = write("misplaced.yaml", MISPLACED);
    const { results } = await checkAdmission(file, PRIVILEGED);
    const r = results[0]!;
    assert.equal(r.prediction.podSecurity.allowed, true);
    assert.equal(r.denied, true);
    assert.equal(r.allowed, "no");
    assert.equal(r.strictDecoding?.state, "rejected");
    if (r.strictDecoding?.state !== "rejected") return;
    assert.equal(
      r.strictDecoding.message,
      'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.template.spec.containers[0].sysctls"',
    );
    assert.deepEqual(
      r.strictDecoding.fields.map((f) => [f.source?.file, f.source?.line]),
      [[file, 16]],
    );
  });

  for (const f of readdirSync(FIXTURES).filter((x) => x.endsWith(".yaml"))) {
    const expected = readFileSync(join(FIXTURES, f.replace(/\.yaml$/, ".expected")), "utf8");
    if (!/Deployment|StatefulSet|Pod|Job|DaemonSet/.test(expected.split(" ")[0] ?? "")) continue;
    it(`${f}: the upstream report's message`, async () => {
      const { results, rejected } = await checkAdmission(join(FIXTURES, f), PRIVILEGED);
      // a pod spec written under metadata leaves no pod spec to predict for: rejected alone
      const r = results[0] ?? rejected[0]!;
      assert.ok(results.every((x) => x.denied));
      assert.equal(r.strictDecoding?.state === "rejected" && r.strictDecoding.message, expected);
    });
  }

  it("a correct manifest carries no strict-decoding result", async () => {
    const file = write(
      "ok.yaml",
      MISPLACED.replace("          sysctls:", "          env:").replace(
        "- name: net.ipv4.ip_forward\n              value",
        "- name: X\n              value",
      ),
    );
    const { results } = await checkAdmission(file, PRIVILEGED);
    assert.equal(results[0]!.strictDecoding, undefined);
    assert.equal(results[0]!.denied, false);
  });

  it("the command prints the message first, with file:line, and exits 1", async () => {
    const file = write("cli.yaml", MISPLACED);
    const { run } = await import("../cli/commands/admission-check.ts");
    const io = memoryIo();
    const code = await run([file], { level: "privileged", version: "latest" }, io);
    assert.equal(code, 1);
    const lines = io.stdout().split("\n");
    assert.match(lines[0]!, /^DENIED Deployment vpn\/vpn-openvpn/);
    assert.match(
      lines[1]!,
      /strict decoding error: unknown field "spec\.template\.spec\.containers\[0\]\.sysctls"/,
    );
    assert.equal(
      lines[2]!.trim(),
      `${file}:16: unknown field "spec.template.spec.containers[0].sysctls"`,
    );
    const jio = memoryIo();
    await run([file], { level: "privileged", version: "latest", output: "json" }, jio);
    const doc = JSON.parse(jio.stdout());
    assert.equal(doc.results[0].allowed, "no");
    assert.equal(doc.results[0].strictDecoding.fields[0].source.line, 16);
  });
});

describe("admission check: a kubelet that refuses its config admits nothing", () => {
  const POD =
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x}]\n";
  it("every pod is denied, citing the refused item's line; no 'kubelet sysctls: ok'", async () => {
    const kc = write(
      "kubelet.yaml",
      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nallowedUnsafeSysctls:\n  - net.ipv4.*\n  - vm.swappiness\n",
    );
    const pod = write("pod.yaml", POD);
    const { results, diagnostics } = await checkAdmission(pod, {
      ...PRIVILEGED,
      kubeletConfigFile: kc,
    });
    assert.equal(results[0]!.denied, true);
    assert.deepEqual(
      results[0]!.kubeletRefusal?.map((x) => [x.source.line, x.source.text]),
      [[5, "vm.swappiness"]],
    );
    assert.equal(diagnostics.find((d) => d.code === "KUBELET_SYSCTL_PATTERN")?.source?.line, 5);
    const { run } = await import("../cli/commands/admission-check.ts");
    const io = memoryIo();
    assert.equal(await run([pod], { level: "privileged", kubeletConfig: kc }, io), 1);
    assert.match(io.stdout(), /kubelet: refuses to start with its config/);
    assert.doesNotMatch(io.stdout(), /kubelet sysctls: ok/);
  });

  it("an accepted config leaves the pod admitted", async () => {
    const kc = write(
      "kubelet-ok.yaml",
      "kind: KubeletConfiguration\nallowedUnsafeSysctls: [net.ipv4.*]\n",
    );
    const { results } = await checkAdmission(write("pod2.yaml", POD), {
      ...PRIVILEGED,
      kubeletConfigFile: kc,
    });
    assert.equal(results[0]!.kubeletRefusal, undefined);
    assert.equal(results[0]!.denied, false);
  });
});
