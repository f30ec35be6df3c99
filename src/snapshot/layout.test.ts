import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { classifyPath } from "./layout.ts";

describe("classifyPath", () => {
  it("reads node and pod artifacts with or without .txt", () => {
    assert.deepEqual(classifyPath("nodes/gke-a-1/iptables-save.txt"), {
      kind: "node",
      node: "gke-a-1",
      artifact: "iptables-save",
    });
    assert.deepEqual(classifyPath("pods/vpn/openvpn-0/sysctl"), {
      kind: "pod",
      namespace: "vpn",
      pod: "openvpn-0",
      artifact: "sysctl",
    });
  });
  it("pairs captures with their metadata by name", () => {
    assert.deepEqual(classifyPath("captures/node.pcapng"), {
      kind: "capture",
      name: "node",
      format: "pcapng",
    });
    assert.deepEqual(classifyPath("captures/node.yaml"), { kind: "capture-meta", name: "node" });
    assert.deepEqual(classifyPath("captures/pasted.txt"), {
      kind: "capture",
      name: "pasted",
      format: "text",
    });
  });
  it("treats cluster YAML and JSON in any subfolder as objects", () => {
    assert.equal(classifyPath("cluster/kube-system/cm.yaml").kind, "cluster");
    assert.deepEqual(classifyPath("cluster/all.json"), { kind: "cluster", format: "json" });
  });
  it("takes Helm values beside a pod or elsewhere outside cluster/ as chart values", () => {
    assert.deepEqual(classifyPath("pods/vpn/openvpn-0/helm-values.yaml"), {
      kind: "chart-values",
      namespace: "vpn",
      pod: "openvpn-0",
    });
    assert.deepEqual(classifyPath("pods/vpn/wg-0/wg-show.txt"), {
      kind: "vpn-config",
      namespace: "vpn",
      pod: "wg-0",
    });
    assert.deepEqual(classifyPath("helm/values-prod.yml"), { kind: "chart-values" });
    // a place in the layout comes first
    assert.equal(classifyPath("cluster/values.yaml").kind, "cluster");
    assert.equal(classifyPath("remote/values.yaml").kind, "remote");
    assert.equal(classifyPath("pods/vpn/openvpn-0/notes.yaml").kind, "unknown");
  });
  it("leaves files outside the layout as unknown and notes as ignored", () => {
    assert.equal(classifyPath("notes.md").kind, "unknown");
    assert.equal(classifyPath("nodes/n1/dmesg.txt").kind, "unknown");
    assert.equal(classifyPath("README.md").kind, "ignored");
  });
});
