import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { memoryIo, UsageError } from "../io.ts";
import { run } from "./admission-check.ts";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const PS = join(ROOT, "src", "agents", "pod-security", "fixtures");
const MANIFESTS = join(PS, "manifests");

const made: string[] = [];
/** A folder for one test's files, removed when the tests end. */
const tempDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), "podpath-adm-"));
  made.push(d);
  return d;
};
after(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

describe("admission check", () => {
  it("uses the Namespace's labels and denies the VPN Deployment's pods (exit 1, JSON)", async () => {
    const io = memoryIo();
    const code = await run(
      [join(MANIFESTS, "vpn-namespace-baseline.yaml")],
      { output: "json", version: "latest" },
      io,
    );
    assert.equal(code, 1);
    const out = JSON.parse(io.stdout());
    assert.equal(out.schemaVersion, 1);
    assert.equal(out.question, "admission-check");
    const [dep, web] = out.results;
    assert.equal(dep.object.kind, "Deployment");
    assert.equal(dep.object.line, 11);
    assert.equal(dep.allowed, "no");
    assert.match(dep.policySource, /labels of Namespace vpn/);
    assert.equal(dep.podSecurity.level, "baseline");
    assert.equal(dep.podSecurity.version, "v1.29");
    assert.equal(
      dep.podSecurity.warnings[0],
      'Warning: would violate PodSecurity "baseline:v1.29": non-default capabilities (container "openvpn" must not include "NET_ADMIN" in securityContext.capabilities.add), privileged (container "sysctl" must not set securityContext.privileged=true)',
    );
    assert.equal(web.object.name, "web");
    assert.equal(web.allowed, "yes");
  });

  it("reads a directory of manifests, Namespace labels from one file applying to another", async () => {
    const dir = tempDir();
    writeFileSync(
      join(dir, "ns.yaml"),
      "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: vpn\n  labels:\n    pod-security.kubernetes.io/enforce: baseline\n",
    );
    writeFileSync(
      join(dir, "pod.json"),
      JSON.stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "p", namespace: "vpn" },
        spec: { hostPID: true, containers: [{ name: "c" }] },
      }),
    );
    const io = memoryIo();
    assert.equal(await run([dir], { output: "json" }, io), 1);
    const out = JSON.parse(io.stdout());
    assert.equal(out.results.length, 1);
    assert.equal(
      out.results[0].podSecurity.message,
      'pods "p" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostPID=true)',
    );
    assert.match(out.results[0].policySource, /ns\.yaml:1/);
  });

  it("applies PSA's default (privileged) to a Namespace without labels, restricted to an unknown one", async () => {
    const dir = tempDir();
    const f = join(dir, "m.yaml");
    const pod = (ns: string) =>
      `apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ${ns}}\nspec:\n  containers: [{name: c, securityContext: {privileged: true}}]\n`;
    writeFileSync(
      f,
      `apiVersion: v1\nkind: Namespace\nmetadata: {name: plain}\n---\n${pod("plain")}---\n${pod("elsewhere")}`,
    );
    const io = memoryIo();
    assert.equal(await run([f], { output: "json" }, io), 1);
    const [plain, elsewhere] = JSON.parse(io.stdout()).results;
    assert.equal(plain.allowed, "yes");
    assert.equal(plain.podSecurity.level, "privileged");
    assert.match(plain.policySource, /has no pod-security labels/);
    assert.equal(elsewhere.allowed, "no");
    assert.equal(elsewhere.podSecurity.level, "restricted");
  });

  it("lets --level override the labels", async () => {
    const io = memoryIo();
    const code = await run(
      [join(MANIFESTS, "vpn-namespace-baseline.yaml")],
      { level: "privileged", version: "latest" },
      io,
    );
    assert.equal(code, 0);
    assert.match(io.stdout(), /ALLOWED Deployment vpn\/openvpn/);
  });

  it("predicts SysctlForbidden from a kubelet config and passes with an allowlist", async () => {
    const dir = tempDir();
    const deny = join(dir, "deny.yaml");
    const allow = join(dir, "allow.yaml");
    writeFileSync(deny, "kind: KubeletConfiguration\nallowedUnsafeSysctls: []\n");
    writeFileSync(
      allow,
      "kind: KubeletConfiguration\nallowedUnsafeSysctls: [net.ipv4.ip_forward]\n",
    );
    const pod = join(PS, "openvpn", "openvpn-pod-sysctl-variant.yaml");
    const io = memoryIo();
    assert.equal(await run([pod], { level: "privileged", kubeletConfig: deny }, io), 1);
    assert.match(
      io.stdout(),
      /kubelet sysctls: SysctlForbidden: .*Pod was rejected: forbidden sysctl: "net.ipv4.ip_forward" not allowlisted/,
    );
    const io2 = memoryIo();
    assert.equal(await run([pod], { level: "privileged", kubeletConfig: allow }, io2), 0);
  });

  it("keeps reading after a broken document and reports its line on stderr", async () => {
    const io = memoryIo();
    const code = await run([join(MANIFESTS, "broken.yaml")], { level: "restricted" }, io);
    assert.equal(code, 1);
    assert.match(io.stderr(), /broken\.yaml:1[0-9]: /);
    assert.match(io.stdout(), /DENIED Pod ok/);
  });

  it("is a usage error for a missing file, a bad version, or a manifest without pods", async () => {
    await assert.rejects(
      run(["/nonexistent/m.yaml"], {}, memoryIo()),
      (e: unknown) => e instanceof UsageError && /no such file/.test(e.message),
    );
    await assert.rejects(
      run([join(MANIFESTS, "broken.yaml")], { version: "1.29" }, memoryIo()),
      UsageError,
    );
    const dir = tempDir();
    const cm = join(dir, "cm.yaml");
    writeFileSync(cm, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n");
    await assert.rejects(run([cm], {}, memoryIo()), /no Pod or pod controller found/);
  });

  it("exits 2 from the real CLI on unreadable input, without a stack trace", () => {
    const r = spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        join(ROOT, "src", "cli", "main.ts"),
        "admission",
        "check",
        "/nonexistent.yaml",
      ],
      {
        encoding: "utf8",
        cwd: ROOT,
      },
    );
    assert.equal(r.status, 2);
    assert.match(r.stderr, /cannot read manifest \/nonexistent\.yaml/);
    assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/);
  });
});
