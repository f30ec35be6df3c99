/**
 * End-to-end: `podpath plan vpn --pod deployment/NAME` (and kubectl's other spellings) plans for
 * that workload's pod, the same plan as naming the pod; an unknown workload is a usage error (exit
 * 2) that says what to collect.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "../..");
const EXAMPLE = "examples/vpn-forwarding-off";
const POD = "vpn/vpn-openvpn-6d9c7b5f4-x2x7k";

function podpath(args: readonly string[]) {
  return spawnSync(process.execPath, ["--import", "tsx", join(ROOT, "src/cli/main.ts"), ...args], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 120_000,
  });
}

describe("plan vpn --pod KIND/NAME", () => {
  const byPod = podpath(["plan", "vpn", EXAMPLE, "--pod", POD, "-o", "json"]);
  it("names the pod when given the pod", () => {
    assert.equal(byPod.status, 0, byPod.stderr);
    assert.equal((JSON.parse(byPod.stdout) as { pod: string }).pod, POD);
  });
  for (const ref of [
    "deployment/vpn-openvpn",
    "deploy/vpn-openvpn",
    "deployment.apps/vpn-openvpn",
  ]) {
    it(`${ref}: the Deployment's pod, the same plan`, () => {
      const r = podpath(["plan", "vpn", EXAMPLE, "--pod", ref, "-n", "vpn", "-o", "json"]);
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), JSON.parse(byPod.stdout));
    });
  }
  it("a workload the snapshot does not hold: exit 2 and the command to collect it", () => {
    const r = podpath(["plan", "vpn", EXAMPLE, "--pod", "statefulset/vpn-openvpn"]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /no StatefulSet vpn-openvpn \(kubectl get statefulset vpn-openvpn/);
  });
});
