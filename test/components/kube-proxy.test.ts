/**
 * Component test: the kube-proxy that scripts/build-components.sh builds from the Go module proxy
 * is the release test/cluster/go.mod pins, and it starts (kube-proxy-live.test.ts runs it against
 * the real API server).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { componentPath, componentSkip } from "./component-guard.ts";

const KUBE_PROXY = componentPath("kube-proxy");
const skip = componentSkip("kube-proxy", { kernel: false });

function pinnedRelease(): string {
  const gomod = readFileSync(new URL("../cluster/go.sum", import.meta.url), "utf8");
  const m = /^k8s\.io\/kubernetes (v\d+\.\d+\.\d+) /m.exec(gomod);
  assert.ok(m, "test/cluster/go.sum names no k8s.io/kubernetes release");
  return m[1]!;
}

describe("kube-proxy built from the Go module proxy", { skip }, () => {
  it("reports the pinned Kubernetes release", () => {
    const r = spawnSync(KUBE_PROXY, ["--version"], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), `Kubernetes ${pinnedRelease()}`);
  });

  it("knows the iptables and nftables proxy modes podpath reads the rules of", () => {
    const r = spawnSync(KUBE_PROXY, ["--help"], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const line = r.stdout.split("\n").find((l) => l.includes("--proxy-mode"));
    assert.ok(line, "no --proxy-mode flag in kube-proxy --help");
    const help = r.stdout.slice(r.stdout.indexOf("--proxy-mode"));
    assert.match(help.slice(0, 600), /'iptables'/);
    assert.match(help.slice(0, 600), /'nftables'/);
  });
});
