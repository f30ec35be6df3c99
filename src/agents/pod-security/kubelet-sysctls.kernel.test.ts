/**
 * Real-kernel check of the sysctl classification the admission predictor relies on: every `net.*`
 * sysctl podpath calls namespaced (the kubelet safe set and the VPN fix `net.ipv4.ip_forward`)
 * really is per network namespace: a value written inside a fresh namespace does not show in the
 * root namespace, and a fresh namespace has its own copy. Root's values are only read.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { kernelSkip } from "../../lab/kernel-guard.ts";
import { createLab, type Lab, type Namespace } from "../../lab/netns.ts";
import { KUBELET_SAFE_SYSCTLS, sysctlNamespace } from "./kubelet-sysctls.ts";

const rootValue = (name: string): string | undefined => {
  try {
    return execFileSync("sysctl", ["-n", name], { encoding: "utf8" }).trim();
  } catch {
    return undefined;
  }
};

describe("kubelet sysctl namespaces on the real kernel", { skip: kernelSkip() }, () => {
  let lab: Lab;
  let ns: Namespace;
  before(async () => {
    lab = await createLab();
    ns = await lab.addNamespace("sysctl");
  });
  after(async () => {
    await lab?.destroy();
  });

  it("net.ipv4.ip_forward is namespaced: setting it in a pod-like namespace leaves the root value", async () => {
    assert.equal(sysctlNamespace("net.ipv4.ip_forward"), "net");
    const root = rootValue("net.ipv4.ip_forward");
    assert.ok(root === "0" || root === "1");
    const want = root === "1" ? "0" : "1";
    const w = await ns.exec(["sysctl", "-w", `net.ipv4.ip_forward=${want}`]);
    assert.equal(w.code, 0, w.stderr);
    const r = await ns.exec(["sysctl", "-n", "net.ipv4.ip_forward"]);
    assert.equal(r.stdout.trim(), want);
    assert.equal(rootValue("net.ipv4.ip_forward"), root);
  });

  it("every net.* sysctl of the kubelet safe set that this kernel has is per network namespace", async () => {
    const tested: string[] = [];
    for (const s of KUBELET_SAFE_SYSCTLS.filter((x) => x.name.startsWith("net."))) {
      assert.equal(sysctlNamespace(s.name), "net", s.name);
      const inside = await ns.exec(["sysctl", "-n", s.name]);
      if (inside.code !== 0) continue; // not on this kernel
      const root = rootValue(s.name);
      // write the namespace's own value back: proves the file is writable in the namespace
      const w = await ns.exec([
        "sysctl",
        "-w",
        `${s.name}=${inside.stdout.trim().replace(/\s+/g, " ")}`,
      ]);
      assert.equal(w.code, 0, `${s.name}: ${w.stderr}`);
      assert.equal(rootValue(s.name), root, s.name);
      tested.push(s.name);
    }
    assert.ok(tested.includes("net.ipv4.ip_local_port_range"));
    assert.ok(tested.length >= 5, tested.join(","));
  });
});
