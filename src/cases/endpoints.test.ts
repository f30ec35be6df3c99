import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readKubeObjects } from "../evidence/kube-objects.ts";
import { formatIp } from "../net/cidr.ts";
import {
  checkFromEndpoint,
  closestNames,
  type FromEndpoint,
  parseDestination,
  parseFrom,
  UnknownEndpointError,
} from "./endpoints.ts";

describe("parseDestination", () => {
  it("reads an address with and without a port, IPv4 and IPv6", () => {
    const a = parseDestination("10.20.30.40:5432");
    assert.ok(!("error" in a));
    assert.equal(formatIp(a.ip), "10.20.30.40");
    assert.equal(a.port, 5432);
    const b = parseDestination("[fd00::1]:443");
    assert.ok(!("error" in b) && b.port === 443 && formatIp(b.ip) === "fd00::1");
    const c = parseDestination("fd00::1");
    assert.ok(!("error" in c) && c.port === undefined);
  });
  it("names what was expected on bad input", () => {
    for (const bad of ["10.20.30.400", "10.20.30.40:0", "10.20.30.40:70000", "host:80", ""]) {
      const r = parseDestination(bad);
      assert.ok("error" in r, bad);
      assert.match(r.error, /expected|not 1-65535/);
    }
  });
});

describe("parseFrom", () => {
  it("reads pod/NS/NAME and node/NAME and refuses the rest", () => {
    assert.deepEqual(parseFrom("pod/default/app"), {
      kind: "pod",
      namespace: "default",
      name: "app",
    });
    assert.deepEqual(parseFrom("node/n1"), { kind: "node", name: "n1" });
    assert.ok("error" in parseFrom("pods/default/app"));
    assert.ok("error" in parseFrom("pod/a/b/c"));
  });
});

describe("parseFrom with kubectl's -n", () => {
  it("reads pod/NAME in the -n namespace, else in default, and refuses two namespaces", () => {
    assert.deepEqual(parseFrom("pod/app", "shop"), { kind: "pod", namespace: "shop", name: "app" });
    assert.deepEqual(parseFrom("pod/app"), { kind: "pod", namespace: "default", name: "app" });
    assert.deepEqual(parseFrom("pod/shop/app", "shop"), {
      kind: "pod",
      namespace: "shop",
      name: "app",
    });
    const both = parseFrom("pod/shop/app", "other");
    assert.ok("error" in both);
    assert.match(both.error, /"shop".*-n says "other"/);
  });
});

const objects = readKubeObjects(
  [
    "apiVersion: v1",
    "kind: List",
    "items:",
    "- {apiVersion: v1, kind: Pod, metadata: {name: billing-default, namespace: default}}",
    "- {apiVersion: v1, kind: Pod, metadata: {name: billing-worker, namespace: jobs}}",
    "- {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: default}}",
    "- {apiVersion: v1, kind: Node, metadata: {name: gke-lab-default-0}}",
    "- {apiVersion: v1, kind: Namespace, metadata: {name: empty}}",
    "",
  ].join("\n"),
  "cluster/objects.yaml",
).value;

function check(from: FromEndpoint, extra: { nodes?: string[]; pods?: string[] } = {}) {
  return checkFromEndpoint(from, { objects, ...extra });
}

describe("checkFromEndpoint", () => {
  it("accepts the pods and nodes the snapshot holds, as objects or folders", () => {
    assert.equal(objects.length, 5);
    assert.equal(check({ kind: "pod", namespace: "default", name: "billing-default" }), undefined);
    assert.equal(check({ kind: "node", name: "gke-lab-default-0" }), undefined);
    assert.equal(check({ kind: "node", name: "n9" }, { nodes: ["n9"] }), undefined);
    assert.equal(
      check({ kind: "pod", namespace: "vpn", name: "ovpn" }, { pods: ["vpn/ovpn"] }),
      undefined,
    );
  });
  it("names the closest pods for a typo, same namespace first", () => {
    const e = check({ kind: "pod", namespace: "default", name: "billing" });
    assert.ok(e instanceof UnknownEndpointError);
    assert.deepEqual(e.suggestions, ["pod/default/billing-default", "pod/jobs/billing-worker"]);
    assert.match(
      e.message,
      /no such pod in namespace default; did you mean pod\/default\/billing-default/,
    );
  });
  it("says when the namespace is not there, and lists the namespaces", () => {
    const e = check({ kind: "pod", namespace: "defualt", name: "web" });
    assert.ok(e);
    assert.match(e.message, /no namespace defualt .*default, empty, jobs/);
    assert.deepEqual(e.suggestions, ["pod/default/web"]);
  });
  it("names the closest node; no suggestion when nothing is close", () => {
    const e = check({ kind: "node", name: "gke-lab-defualt-0" });
    assert.deepEqual(e?.suggestions, ["node/gke-lab-default-0"]);
    const far = check({ kind: "node", name: "x" });
    assert.ok(far);
    assert.deepEqual(far.suggestions, []);
    assert.doesNotMatch(far.message, /did you mean/);
  });
  it("decides nothing when the snapshot holds no pods or no nodes at all", () => {
    const none = { objects: [] };
    assert.equal(checkFromEndpoint({ kind: "pod", namespace: "a", name: "b" }, none), undefined);
    assert.equal(checkFromEndpoint({ kind: "node", name: "b" }, none), undefined);
  });
});

describe("closestNames", () => {
  it("prefers containment, then few edits, and leaves far names out", () => {
    assert.deepEqual(closestNames("billing", ["web", "billing-default", "bill"]), [
      "bill",
      "billing-default",
    ]);
    assert.deepEqual(closestNames("wbe", ["web", "database"]), ["web"]);
    assert.deepEqual(closestNames("zzz", ["web", "database"]), []);
  });
});
